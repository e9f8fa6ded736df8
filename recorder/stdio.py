"""Recording a stdio session: be the server command the client launches, run the real server,
and pump bytes both ways.

Each pump reads a chunk, appends it raw and timestamped to the cassette file with one write(2)
(`tapes.cassette.capture`), then forwards it byte for byte. Appending first means the file holds
every byte a peer was given, even if the recorder is killed the next instant (the page cache keeps
it), and a reply, read only after its request was forwarded, always lands after it. Nothing else
happens on the forward path: framing and JSON parsing come at the end, when the recorder rewrites
the capture into frames (through the before-record hook), or when `load` reads the capture a
killed recorder left.
"""

from __future__ import annotations

import array
import ctypes
import dataclasses
import errno
import fcntl
import os
import select
import shutil
import signal
import stat
import subprocess
import sys
import termios
import threading
import time
from collections.abc import Callable
from types import FrameType
from typing import Any

import msgpack

from recorder.process import heeded_stop_signals
from tapes.cassette.capture import CAPTURE_KEY, CHUNK_HEAD_SIZE, END, chunk_head, exit_record
from tapes.cassette.redact import RedactionRules, Redactor
from tapes.cassette.scrub import FrameHook, HookFailed, hook_label, scrubbed
from tapes.cassette.stdio_framer import Stream
from tapes.cassette.store import (
    Cassette,
    CassetteError,
    Header,
    RecordingFile,
    load,
    recording_stopped,
    replace_file,
)
from tapes.errors import UserError
from tapes.interrupts import ctrl_c_dropped

CHUNK = 1 << 20
_LINGER = 0.05  # seconds between looks at a pipe the exited server's descendants may hold
_JOIN_BELOW = 1 << 12  # below this size, copying a chunk next to its record head costs less than writev
_SHORT_WRITE = "a write stopped part way, as on a full disk"
_PR_SET_PDEATHSIG = 1  # prctl(2)


def record_stdio(command: list[str], output: str, before_record: FrameHook | None = None,
                 rules: RedactionRules | None = None) -> int:
    """Run `command` as the server on our stdin/stdout, record the session into the cassette
    `output` (the JSON paths of `rules` redacted, then each frame passed through `before_record`),
    and return the server's exit code (128+N if signal N killed it), or 1 if the server exited 0
    but the cassette could not be written."""
    if shutil.which(command[0]) is None:  # before the cassette file is created
        raise UserError(f"the server command {command[0]!r} was not found or is not executable")
    rules = (rules or RedactionRules.none()).for_messages()
    labels = (*rules.names(), *((hook_label(before_record),) if before_record else ()))
    header = Header(transport="stdio", server={"command": command})
    capture = _Capture(output, header, unapplied=labels)
    with _SignalForwarder() as forwarder:  # until the cassette is finished: a Ctrl-C must not cut it short
        returncode = _run_server(command, capture, forwarder)
        header = dataclasses.replace(header, redaction=labels)
        recorded = not capture.failed and (capture.complete is None or _finish(capture, header, rules, before_record))
    return returncode if recorded else (returncode or 1)


def _run_server(command: list[str], capture: _Capture, forwarder: _SignalForwarder) -> int:
    try:
        # Its own process group: a terminal's Ctrl-C reaches the server only through us, once.
        server = subprocess.Popen(
            command,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            bufsize=0,
            process_group=0,
            preexec_fn=_dies_with_recorder,
        )
    except OSError as error:
        raise UserError(f"the server command {command[0]!r} could not be started ({error.strerror})") from None
    forwarder.attach(server)
    stdin, stdout, stderr = server.stdin, server.stdout, server.stderr
    assert stdin is not None and stdout is not None and stderr is not None
    for fd in (0, 1, stdin.fileno(), stdout.fileno()):
        _widen(fd)
    # The client's stdin ending closes the server's (the spec's shutdown order); the server's
    # stdout ending closes ours, so the client sees EOF then and not only when we exit.
    # The client's stdin pump is not waited for: a client may keep its end open after the server is gone.
    _start_pump(0, stdin.fileno(), Stream.CLIENT_STDIN, capture, stdin.close)
    output = _start_pump(stdout.fileno(), 1, Stream.SERVER_STDOUT, capture, _close_stdout)
    errors = _start_pump(stderr.fileno(), 2, Stream.SERVER_STDERR, capture, lambda: None)
    returncode = server.wait()
    for pump, pipe, sink in ((output, stdout, 1), (errors, stderr, 2)):
        if _drained(pump, pipe.fileno(), sink):
            pipe.close()  # else its pump still reads it: its number must not be reused under it
    if returncode < 0:
        capture.exit(None, -returncode)
        return 128 - returncode
    capture.exit(returncode, None)
    return returncode


if sys.platform == "linux":
    _LIBC = ctypes.CDLL(None, use_errno=True)  # loaded here: the forked child only calls it

    def _dies_with_recorder() -> None:
        """In the server's process, before it runs: killed when the recorder dies (a SIGKILL, a
        crash), which forwards no signal. In its own process group, a client's kill of ours
        (the SDKs kill the group they started) would otherwise leave it running for ever."""
        _LIBC.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
else:
    _dies_with_recorder = None


def _finish(capture: _Capture, header: Header, rules: RedactionRules, before_record: FrameHook | None) -> bool:
    """Rewrite the capture at its path into frames (in the format its name says), redacted, then
    through the hook; whether that worked. On failure the capture stays as it is (`load` reads it
    too), and the recorder says so. A capture file deleted or replaced meanwhile is put back first."""
    output = capture.output
    try:
        if put_back := capture.file.put_back():
            os.write(2, f"tapes: warning: {put_back}\n".encode(errors="replace"))
    except CassetteError as error:
        _say(str(error))
        return False
    try:
        frames = scrubbed(Redactor(rules).frames(load(output).frames), before_record)
        replace_file(Cassette(header, frames), output)
    except CassetteError as error:
        _say(f"{error}; the cassette keeps the raw capture of the session")
        return False
    except HookFailed as error:
        _say(f"{error}; {output} keeps the raw capture, not scrubbed")
        return False
    return True


def _say(sentence: str) -> None:
    os.write(2, f"tapes: error: {sentence}\n".encode(errors="replace"))


# --- the forward path ------------------------------------------------------------------------


def _start_pump(
    source: int, sink: int, stream: Stream, capture: _Capture, on_eof: Callable[[], None]
) -> threading.Thread:
    thread = threading.Thread(
        target=_pump, args=(source, sink, stream, capture, on_eof), name=f"pump-{stream.name}", daemon=True
    )
    thread.start()
    return thread


def _pump(source: int, sink: int, stream: Stream, capture: _Capture, on_eof: Callable[[], None]) -> None:
    """Append, then forward. Once the client stops reading (our stdout is gone), keep draining and
    recording the server's output so that it never blocks on us; once the server's stdin is gone,
    let go of the client's (see `_release`). `_relay` does the common case; this, the others."""
    # One buffer per pump, reused: a fresh 1 MiB bytes object per read costs more than the read.
    buffer = bytearray(CHUNK)
    view = memoryview(buffer)
    forwarding = True
    while True:
        stage, size, written, error = _relay(
            source, sink if forwarding else -1, capture.fd, stream, capture.start, buffer, capture.stopped
        )
        if stage == _READ:
            if error == errno.EAGAIN:  # a client may hand us a non-blocking descriptor
                select.select([source], [], [])
                continue
            break  # its end; a source that fails to read has ended too
        if stage == _APPEND:
            capture.fail(os.strerror(error) if error else _SHORT_WRITE)
            written = error = 0  # not forwarded yet
        if forwarding and not _forward_rest(sink, view[written:size], error):
            if stream is Stream.CLIENT_STDIN:
                # The server's stdin is gone (it exited, or closed it): the client's next write
                # breaks, as it would writing to the server itself, instead of being read for ever.
                _release(source)
                break
            forwarding = False  # the client stopped reading: the server is drained, never blocked
    capture.append(END + stream, b"")
    on_eof()


# Where `_relay` stopped: a chunk it could not read, append or forward, or the source's end.
_READ, _APPEND, _FORWARD = 0, 1, 2


def _relay_in_python(source: int, sink: int, capture: int, code: int, start: float, buffer: bytearray,
                     capture_failed: bytearray) -> tuple[int, int, int, int]:
    """`recorder._relay.relay` (recorder/_relay.c, which says what it does) in Python, for a build
    without a C compiler: a chunk costs about 2 µs more here."""
    view, buffers, write, readv, monotonic = memoryview(buffer), [buffer], os.write, os.readv, time.monotonic
    while True:
        try:
            size = readv(source, buffers)
        except OSError as error:
            return _READ, 0, 0, error.errno or 0
        if not size:
            return _READ, 0, 0, 0
        chunk = view[:size]
        if not capture_failed[0]:
            head = chunk_head(monotonic() - start, code, size)
            try:
                # A small chunk joins its head in one buffer (cheaper than writev's list of two);
                # a large one is not copied a second time.
                appended = write(capture, head + chunk) if size < _JOIN_BELOW else os.writev(capture, [head, chunk])
            except OSError as error:
                return _APPEND, size, 0, error.errno or 0
            if appended != CHUNK_HEAD_SIZE + size:
                return _APPEND, size, 0, 0
        if sink < 0:
            continue
        try:
            written = write(sink, chunk)
        except OSError as error:
            return _FORWARD, size, 0, error.errno or 0
        if written != size:
            return _FORWARD, size, written, 0


try:
    from recorder._relay import relay as _relay
except ImportError:  # installed where no C compiler was found
    _relay = _relay_in_python


def _forward_rest(sink: int, rest: memoryview, error: int) -> bool:
    """Write to `sink` what of a chunk the relay did not (it stopped with `error`, 0 if none);
    whether `sink` took it: False once the reader is gone."""
    if error not in (0, errno.EAGAIN):  # EAGAIN: a client may hand us a non-blocking descriptor
        return False
    try:
        _write_all(sink, rest)
    except OSError:
        return False
    return True


def _drained(pump: threading.Thread, source: int, sink: int) -> bool:
    """Wait, once the server has exited, until `pump` has passed on all it wrote to `source`;
    whether the pipe ended. A process the server started may hold the pipe open past its exit
    (a worker, a daemon): then the recorder does not wait for it, only until the pipe is empty
    and the pump is not stuck writing to a slow reader (the cassette has that chunk already)."""
    while True:
        pump.join(_LINGER)
        if not pump.is_alive():
            return True
        if not _unread(source) and select.select([], [sink], [], 0)[1]:
            pump.join(_LINGER)  # the last chunk read may still be on its way
            return not pump.is_alive()


def _release(fd: int) -> None:
    """Let go of the pipe read through `fd`, its number kept (on /dev/null): its writer's next
    write fails with EPIPE."""
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, fd)
    os.close(devnull)


def _unread(fd: int) -> int:
    """Bytes waiting in the pipe `fd`."""
    waiting = array.array("i", [0])
    try:
        fcntl.ioctl(fd, termios.FIONREAD, waiting)
    except OSError:
        return 0
    return waiting[0]


def _write_all(fd: int, data: bytes | memoryview) -> None:
    view = memoryview(data)
    while view:
        try:
            view = view[os.write(fd, view) :]
        except BlockingIOError:
            select.select([], [fd], [])


def _widen(fd: int) -> None:
    """Let a pipe hold a whole large message: fewer, larger chunks to forward and to append."""
    if hasattr(fcntl, "F_SETPIPE_SZ"):
        try:
            fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, CHUNK)
        except OSError:
            pass  # not a pipe, or above the user's pipe limit: chunks stay smaller, that is all


def _close_stdout() -> None:
    """Close our stdout without freeing fd 1 for reuse: /dev/null takes its place."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    os.close(devnull)


class _SignalForwarder:
    """Passes SIGTERM, SIGINT and SIGHUP (unless under nohup) on to the server; the recorder keeps running
    until the server exits. A signal that arrives before the server exists is held for it."""

    def __init__(self) -> None:
        self._server: subprocess.Popen[bytes] | None = None
        self._pending: list[int] = []
        self._previous: dict[int, signal.Handlers | Callable[[int, FrameType | None], Any] | int | None] = {}

    def __enter__(self) -> _SignalForwarder:
        for signum in heeded_stop_signals():
            self._previous[signum] = signal.signal(signum, self._handle)
        if ctrl_c_dropped():  # while the modules loaded: the server gets it once it exists
            self._pending.append(signal.SIGINT)
        return self

    def __exit__(self, *exc: object) -> None:
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)

    def attach(self, server: subprocess.Popen[bytes]) -> None:
        self._server = server
        while self._pending:
            server.send_signal(self._pending.pop(0))

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if self._server is None:
            self._pending.append(signum)
        else:
            self._server.send_signal(signum)  # a no-op once the server has been reaped


# --- the capture file ------------------------------------------------------------------------


class _Capture:
    """The cassette file while the session runs: a header, then one record per chunk, each
    appended with one write(2) to a file opened O_APPEND, so the pumps' records never mix.

    A cassette that cannot be written (a full disk, an I/O error) stops the recording, not the
    session: the recorder says so on stderr at once, forwards on, and exits non-zero."""

    def __init__(self, output: str, header: Header, unapplied: tuple[str, ...]) -> None:
        self.output = output
        self.start = time.monotonic()
        self._lock = threading.Lock()  # taken only when a write fails
        # Set once the capture failed; a byte the pumps' `_relay` reads as it runs, without the GIL.
        self.stopped = bytearray(1)
        # Whether the capture holds the whole session and can be made into frames; None when
        # the output is no regular file (/dev/null, a FIFO): nothing there to read back.
        self.complete: bool | None = False
        try:
            self.fd = os.open(output, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND | os.O_CLOEXEC, 0o666)
        except OSError as error:
            raise UserError(f"{output}: cannot be written ({error.strerror})") from None
        if not stat.S_ISREG(os.fstat(self.fd).st_mode):
            self.complete = None
        self.file = RecordingFile(output, self.fd)
        record = {**header.record(), CAPTURE_KEY: {"unapplied": list(unapplied)}}
        packed = msgpack.packb(record)
        self._write([packed], len(packed))

    @property
    def failed(self) -> bool:
        return bool(self.stopped[0])

    def append(self, code: int, payload: bytes) -> None:
        if not self.failed:
            self._write([chunk_head(time.monotonic() - self.start, code, len(payload)), payload],
                        CHUNK_HEAD_SIZE + len(payload))

    def exit(self, code: int | None, signum: int | None) -> None:
        """The last record: the server's exit. The capture is complete once it is written."""
        record = msgpack.packb(exit_record(time.monotonic() - self.start, code, signum))
        if not self.failed:
            self._write([record], len(record))
        if self.complete is not None:
            self.complete = not self.failed

    def _write(self, parts: list[bytes], size: int) -> None:
        try:
            written = os.writev(self.fd, parts)
        except OSError as error:
            self.fail(error.strerror or str(error))
            return
        if written != size:
            self.fail(_SHORT_WRITE)

    def fail(self, reason: str) -> None:
        """Stop recording, and say why, once."""
        with self._lock:
            if self.failed:
                return
            self.stopped[0] = 1
        _say(recording_stopped(self.output, reason))
