"""`tapes verify` over stdio: play a recording's client side against a live server, recording the
new session through `tapes record`, so it can be diffed against the old one.

The server runs behind `python -m tapes record -o NEW -- COMMAND`: the new session is captured
exactly as a user's recording would be. What to send and when is decided by the sans-IO
`tapes.verify.ClientScript`; this module only moves lines and keeps the waits bounded.
"""

from __future__ import annotations

import os
import queue
import subprocess
import sys
import threading
from pathlib import Path

from tapes.cassette import Cassette, load
from tapes.errors import UserError
from tapes.jsonrpc import LineSplitter
from tapes.verify import ClientScript

STEP_TIMEOUT = 5.0  # seconds to wait for what the next client message depends on
EXIT_TIMEOUT = 15.0  # seconds the server gets to finish after its input closes


def _read_lines(stream: object, lines: queue.Queue[bytes | None]) -> None:
    splitter = LineSplitter()
    while chunk := stream.read1(65536):  # type: ignore[attr-defined]
        for line in splitter.feed(chunk):
            lines.put(line)
    lines.put(None)  # the server closed its output


def verify_stdio(recording: Cassette, command: list[str], output: Path, *,
                 step_timeout: float = STEP_TIMEOUT, exit_timeout: float = EXIT_TIMEOUT) -> Cassette:
    """Play `recording`'s client side against `command`, recorded into `output`; the new cassette."""
    script = ClientScript(recording.frames)
    try:
        process = subprocess.Popen([sys.executable, "-m", "tapes", "record", "-o", str(output), "--", *command],
                                   stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                   env={**os.environ, "PYTHONUNBUFFERED": "1"})
    except OSError as error:
        raise UserError(f"cannot start the recorder for {command[0]} ({error.strerror})") from None
    assert process.stdin is not None and process.stdout is not None
    lines: queue.Queue[bytes | None] = queue.Queue()
    threading.Thread(target=_read_lines, args=(process.stdout, lines), daemon=True).start()
    server_open = True
    try:
        outgoing = script.ready()
        while True:
            for payload in outgoing:
                if payload is None:
                    process.stdin.close()
                else:
                    process.stdin.write(payload + b"\n")
                    process.stdin.flush()
            if script.finished or not server_open:
                break
            try:
                line = lines.get(timeout=step_timeout)
            except queue.Empty:
                outgoing = script.force()  # what it waited for did not come: the diff will say so
                continue
            if line is None:
                server_open = False
                outgoing = []
            else:
                script.receive(line)
                outgoing = script.ready()
    except BrokenPipeError:
        pass  # the server is gone; what it did until then is in the recording
    finally:
        if not process.stdin.closed:
            try:
                process.stdin.close()
            except BrokenPipeError:
                pass
        try:
            process.wait(timeout=exit_timeout)
        except subprocess.TimeoutExpired:
            process.terminate()
            process.wait(timeout=exit_timeout)
    return load(output)
