"""`tapes verify` over stdio and HTTP: play a recording's client side against a live server,
recording the new session through `tapes record`, so it can be diffed against the old one.

Over HTTP the server sits behind `tapes record --upstream URL --listen 127.0.0.1:0`; each recorded
exchange is a request sent on its own thread, its response (JSON or an SSE stream) read to the end
and reported to the sans-IO `tapes.analysis.verify.HttpClientScript`, which says what goes out next.

The server runs behind `python -m tapes record -o NEW -- COMMAND`: the new session is captured
exactly as a user's recording would be. What to send and when is decided by the sans-IO
`tapes.analysis.verify.ClientScript`; this module only moves lines and keeps the waits bounded.
"""

from __future__ import annotations

import os
import queue
import socket
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx

from recorder.process import TAPES, HttpRecorderProcess
from tapes.analysis.verify import ClientScript, HttpClientScript, HttpRequest
from tapes.cassette.redact import RedactionRules
from tapes.cassette.scrub import hooks_named
from tapes.cassette.store import Cassette, load
from tapes.errors import ERROR_PREFIX, UserError
from tapes.replay.http_rules import check_sendable
from tapes.replay.index import check_replayable
from tapes.wire.http import upstream_url
from tapes.wire.jsonrpc import LineSplitter
from tapes.wire.sse import SSEParser, is_event_stream

STEP_TIMEOUT = 5.0  # seconds to wait for what the next client message depends on
EXIT_TIMEOUT = 15.0  # seconds the server gets to finish after its input closes


class _StepClock:
    """When the wait for what the next step needs ends: `seconds` after the last step, however
    much else (notifications, a server flooding its output) comes in between."""

    def __init__(self, seconds: float) -> None:
        self._seconds = seconds
        self.restart()

    def restart(self) -> None:
        self._deadline = time.monotonic() + self._seconds

    def left(self) -> float:
        return max(0.0, self._deadline - time.monotonic())


def _without_waiting(script: ClientScript, clock: _StepClock, sent: list[Any]) -> list[Any] | None:
    """After `sent` went out: what goes next without waiting for the server (a poll once its
    recorded pause is waited, or the next line once the step timed out), or None to wait for it."""
    if sent:
        clock.restart()
    if script.pause:  # a poll, paced as recorded
        time.sleep(script.pause)
        script.waited()
        return script.ready()
    if not script.finished and not clock.left():
        return script.force()  # what it waited for did not come: the diff will say so
    return None


def _read_lines(stream: object, lines: queue.Queue[bytes | None]) -> None:
    splitter = LineSplitter()
    while chunk := stream.read1(65536):  # type: ignore[attr-defined]
        for line in splitter.feed(chunk):
            lines.put(line)
    lines.put(None)  # the server closed its output


def verify_stdio(recording: Cassette, command: list[str], output: Path, *,
                 step_timeout: float = STEP_TIMEOUT, exit_timeout: float = EXIT_TIMEOUT) -> Cassette:
    """Play `recording`'s client side against `command`, recorded into `output`; the new cassette."""
    check_replayable(recording.frames)  # refused as a replay refuses it, before a server is started
    script = ClientScript(recording.frames)
    output.unlink(missing_ok=True)  # none after the session: the recorder refused, and says why on its stderr
    recorder_errors = tempfile.TemporaryFile()  # its stderr (the server's passes through it): a file never fills up
    try:
        process = subprocess.Popen([*TAPES, "record", "-o", str(output), *_redacted_as(recording, http=False), "--", *command],
                                   stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=recorder_errors,
                                   env={**os.environ, "PYTHONUNBUFFERED": "1"})
    except OSError as error:
        recorder_errors.close()
        raise UserError(f"cannot start the recorder for {command[0]} ({error.strerror})") from None
    assert process.stdin is not None and process.stdout is not None
    lines: queue.Queue[bytes | None] = queue.Queue()
    threading.Thread(target=_read_lines, args=(process.stdout, lines), daemon=True).start()
    server_open = True
    stopped = False  # by a signal (made an exception by the CLI) or Ctrl-C: the server is stopped at once
    clock = _StepClock(step_timeout)
    try:
        outgoing = script.ready()
        while True:
            for payload in outgoing:
                if payload is None:
                    process.stdin.close()
                else:
                    process.stdin.write(payload + b"\n")
                    process.stdin.flush()
            if (following := _without_waiting(script, clock, outgoing)) is not None:
                outgoing = following
                continue
            if script.finished or not server_open:
                break
            try:
                line = lines.get(timeout=clock.left())
            except queue.Empty:
                outgoing = []
                continue
            if line is None:
                server_open = False
                outgoing = []
            else:
                script.receive(line)
                outgoing = script.ready()
    except BrokenPipeError:
        pass  # the server is gone; what it did until then is in the recording
    except BaseException:
        stopped = True
        raise
    finally:
        if not process.stdin.closed:
            try:
                process.stdin.close()
            except BrokenPipeError:
                pass
        try:
            process.wait(timeout=0 if stopped else exit_timeout)
        except subprocess.TimeoutExpired:
            process.terminate()  # passed on to the server
            try:
                process.wait(timeout=exit_timeout)
            except subprocess.TimeoutExpired:  # a server that ignores it: killed with the recorder
                process.kill()
                process.wait()
    with recorder_errors:
        if not output.exists():
            recorder_errors.seek(0)
            raise UserError(_refusal(recorder_errors.read(), f"the recorder for {command[0]} exited with status "
                                                             f"{process.returncode} and wrote no recording"))
    return load(output)


def _redacted_as(recording: Cassette, *, http: bool) -> list[str]:
    """The `tapes record` flags that redact and scrub the live session as `recording` was (the
    live one may replace it, with --update): its JSON paths, its headers (HTTP), its hooks; over
    HTTP a recording with no rules at all was made with --no-redact."""
    labels = recording.header.redaction
    headers, paths = RedactionRules.named(labels)
    flags = [flag for path in paths for flag in ("--redact-path", path)]
    flags += [flag for hook in hooks_named(labels) for flag in ("--before-record", hook)]
    if http:
        flags += [flag for name in headers for flag in ("--redact-header", name)] if labels else ["--no-redact"]
    return flags


def _refusal(stderr: bytes, otherwise: str) -> str:
    """The sentence a `tapes` process that refused to run ended its stderr with, or `otherwise`."""
    said = [line for line in stderr.decode("utf-8", "replace").splitlines() if line.startswith(ERROR_PREFIX)]
    return said[-1].removeprefix(ERROR_PREFIX) if said else otherwise


# --- HTTP ---------------------------------------------------------------------------------------

# what a reader thread reports: ("head", exchange, headers) | ("event", exchange, SSEEvent) |
# ("body", exchange, bytes) | ("end", exchange, None)
_Report = tuple[str, int, Any]


def _check_reachable(url: str) -> None:
    """Fail at once, in one sentence, when nothing listens at `url` (rather than after every step
    of the session has waited its timeout)."""
    parts = upstream_url(url)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        socket.create_connection((parts.hostname or "127.0.0.1", port), timeout=STEP_TIMEOUT).close()
    except OSError as error:
        raise UserError(f"cannot reach {url} ({error.strerror or error})") from None


def _exchange(client: httpx.Client, url: str, request: HttpRequest, reports: queue.Queue[_Report]) -> None:
    """Send one request and report what comes back, all of it (an SSE stream until it ends)."""
    # Header values as the recorder read them, Latin-1 (httpx encodes text as ASCII); one no byte
    # can stand for (a hand-written cassette's) as "?"
    headers = [(name, value.encode("latin-1", "replace")) for name, value in request.headers]
    try:
        with client.stream(request.method, url, headers=headers, content=request.body) as response:
            reports.put(("head", request.exchange, [(k.decode(), v.decode()) for k, v in response.headers.raw]))
            if is_event_stream(response.headers.get("content-type")):
                parser, count = SSEParser(), 0
                for chunk in response.iter_bytes():
                    for event in parser.feed(chunk):
                        reports.put(("event", request.exchange, event))
                        count += 1
                        if request.disconnect_after is not None and count >= request.disconnect_after:
                            return  # the recorded client left this stream here
            else:
                reports.put(("body", request.exchange, response.read()))
    except (httpx.HTTPError, httpx.InvalidURL):
        pass  # a broken exchange (or a recorded path no URL can be made of): the live recording says what happened
    finally:
        reports.put(("end", request.exchange, None))


def verify_http(recording: Cassette, upstream: str, output: Path, *, step_timeout: float = STEP_TIMEOUT) -> Cassette:
    """Play `recording`'s client side (Streamable HTTP, or legacy HTTP+SSE) against the server at
    `upstream`, through `tapes record --upstream`, recorded into `output`; the new cassette."""
    check_replayable(recording.frames)  # refused as a replay refuses it
    check_sendable(recording.frames)
    _check_reachable(upstream)
    script = HttpClientScript(recording.frames)
    recorded_prefix = urlsplit((recording.header.server or {}).get("url", "")).path.rstrip("/")
    recorder = HttpRecorderProcess(output, upstream, _redacted_as(recording, http=True))
    live = urlsplit(recorder.url)
    origin, live_prefix = f"{live.scheme}://{live.netloc}", live.path.rstrip("/")

    def url(path: str) -> str:
        if recorded_prefix and (path == recorded_prefix or path.startswith((recorded_prefix + "/", recorded_prefix + "?"))):
            path = live_prefix + path[len(recorded_prefix):]
        return origin + (path or "/")

    reports: queue.Queue[_Report] = queue.Queue()

    def handle(report: _Report) -> None:
        what, exchange, value = report
        if what == "head":
            script.receive_head(exchange, value)
        elif what == "event":
            script.receive_event(exchange, value.id, value.data, value.event)
        elif what == "body":
            if value:
                script.receive(value)
        else:
            script.receive_end(exchange)

    client = httpx.Client(timeout=httpx.Timeout(step_timeout * 2, read=None), trust_env=False)
    clock = _StepClock(step_timeout)
    try:
        outgoing = script.ready()
        while True:
            for index, request in enumerate(outgoing):
                if index:
                    time.sleep(0.02)  # requests ready together still reach the recorder in recorded order
                threading.Thread(target=_exchange, args=(client, url(request.path), request, reports), daemon=True).start()
            if (following := _without_waiting(script, clock, outgoing)) is not None:
                outgoing = following
                continue
            if script.finished:
                break
            try:
                handle(reports.get(timeout=clock.left()))
            except queue.Empty:
                outgoing = []
                continue
            outgoing = script.ready()
        clock.restart()
        while not script.settled and clock.left():  # what the recording saw after its last request, too
            try:
                handle(reports.get(timeout=clock.left()))
            except queue.Empty:
                break
    finally:
        status = recorder.stop()  # it closes what is still open and completes the cassette
        client.close()
    if status != 0:
        raise UserError(f"the recorder exited with status {status}")
    return load(output)
