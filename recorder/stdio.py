"""Recording a stdio session: be the server command the client launches, run the real server,
pump bytes both ways, and leave framing and disk to a writer process beside the forward path.

Three pump threads read a chunk, forward it byte for byte, then capture it as one record on a
pipe to a writer child forked before anything else starts. The child frames the records
(`tapes.cassette.stdio_framer.StdioFramer`) and appends them to the cassette, flushing per batch. Because it
is a separate process, a recorder killed with SIGKILL loses nothing it already put in the pipe.
"""

from __future__ import annotations

import fcntl
import os
import select
import shutil
import signal
import struct
import subprocess
import threading
import time
from collections import deque
from collections.abc import Callable
from types import FrameType
from typing import Any, BinaryIO, NoReturn

from tapes.cassette.frames import Frame
from tapes.cassette.scrub import FrameHook, hook_label, scrubbed
from tapes.cassette.stdio_framer import StdioFramer, Stream
from tapes.cassette.store import CassetteWriter, Header
from tapes.errors import UserError

CHUNK = 1 << 20
PIPE_SIZE = 1 << 20
FORWARDED_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)

# A capture record: time offset since start (s), event code, payload length; then the payload.
RECORD = struct.Struct("<dBI")
# Event codes: a stream's value for its data, END + its value for its end, then EXIT.
END = len(Stream)
EXIT = 2 * len(Stream)
# EXIT payload: code, signal; -1 stands for "none".
EXIT_STATUS = struct.Struct("<ii")


def record_stdio(command: list[str], output: str, before_record: FrameHook | None = None) -> int:
    """Run `command` as the server on our stdin/stdout, record the session into the cassette
    `output` (each frame passed through `before_record` first), and return the server's exit
    code (128+N if signal N killed it)."""
    if shutil.which(command[0]) is None:  # before the cassette file is created
        raise UserError(f"the server command {command[0]!r} was not found or is not executable")
    start = time.monotonic()
    try:
        cassette = open(output, "wb")  # the writer child owns it from the fork on
    except OSError as error:
        raise UserError(f"{output}: cannot be written ({error.strerror})") from None

    # Fork before any thread or server exists: the child must hold none of the server's pipes.
    read_fd, write_fd = os.pipe()
    if hasattr(fcntl, "F_SETPIPE_SZ"):
        try:
            fcntl.fcntl(write_fd, fcntl.F_SETPIPE_SZ, PIPE_SIZE)
        except OSError:
            pass  # a smaller pipe only means the pumps may wait on the writer sooner
    writer_pid = os.fork()
    if writer_pid == 0:
        os.close(write_fd)
        redaction = (hook_label(before_record),) if before_record else ()
        header = Header(transport="stdio", server={"command": command}, redaction=redaction)
        _run_writer(read_fd, cassette, header, before_record)
    os.close(read_fd)
    cassette.close()

    capture = _Capture(write_fd, start)
    with _SignalForwarder() as forwarder:  # until the writer is done: a Ctrl-C must not cut it short
        try:
            return _run_server(command, capture, forwarder)
        finally:
            capture.close()  # the writer sees EOF, writes what is left, and exits
            os.waitpid(writer_pid, 0)


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
        )
    except OSError as error:
        raise UserError(f"the server command {command[0]!r} could not be started ({error.strerror})") from None
    forwarder.attach(server)
    stdin, stdout, stderr = server.stdin, server.stdout, server.stderr
    assert stdin is not None and stdout is not None and stderr is not None
    # The client's stdin ending closes the server's (the spec's shutdown order); the server's
    # stdout ending closes ours, so the client sees EOF then and not only when we exit.
    _start_pump(0, stdin.fileno(), Stream.CLIENT_STDIN, capture, stdin.close)
    outputs = [
        _start_pump(stdout.fileno(), 1, Stream.SERVER_STDOUT, capture, _close_stdout),
        _start_pump(stderr.fileno(), 2, Stream.SERVER_STDERR, capture, lambda: None),
    ]
    returncode = server.wait()
    # The client's stdin pump is not waited for: a client may keep its end open after the server is gone.
    for pump in outputs:
        pump.join()
    stdout.close()
    stderr.close()
    if returncode < 0:
        capture.exit(None, -returncode)
        return 128 - returncode
    capture.exit(returncode, None)
    return returncode


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
    """Forward first, then capture. Once the sink is gone (its reader closed it), keep draining
    and recording the source so the other side never blocks on us."""
    # One buffer per pump, reused: a fresh 1 MiB bytes object per read costs more than the read.
    buffer = bytearray(CHUNK)
    view = memoryview(buffer)
    forwarding = True
    while size := _read_into(source, buffer):
        chunk = view[:size]
        ticket = capture.take(stream, chunk)
        if forwarding:
            try:
                _write_all(sink, chunk)
            except OSError:
                forwarding = False
        capture.written(ticket)  # the buffer is ours again after this
    capture.end(stream)
    on_eof()


def _read_into(fd: int, buffer: bytearray) -> int:
    """How many bytes the next read put in `buffer`; 0 at end of stream (a source that fails to
    read has ended too)."""
    while True:
        try:
            return os.readv(fd, [buffer])
        except BlockingIOError:  # a client may hand us a non-blocking descriptor
            select.select([fd], [], [])
        except OSError:
            return 0


def _write_all(fd: int, data: bytes | memoryview) -> None:
    view = memoryview(data)
    while view:
        try:
            view = view[os.write(fd, view) :]
        except BlockingIOError:
            select.select([], [fd], [])


def _close_stdout() -> None:
    """Close our stdout without freeing fd 1 for reuse: /dev/null takes its place."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    os.close(devnull)


class _SignalForwarder:
    """Passes SIGTERM, SIGINT and SIGHUP on to the server; the recorder itself keeps running
    until the server exits. A signal that arrives before the server exists is held for it."""

    def __init__(self) -> None:
        self._server: subprocess.Popen[bytes] | None = None
        self._pending: list[int] = []
        self._previous: dict[int, signal.Handlers | Callable[[int, FrameType | None], Any] | int | None] = {}

    def __enter__(self) -> _SignalForwarder:
        for signum in FORWARDED_SIGNALS:
            self._previous[signum] = signal.signal(signum, self._handle)
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


# --- capture: the recorder's end of the pipe to the writer -----------------------------------


class _Capture:
    """The recorder's end of the pipe to the writer; three pumps write records to it.

    A chunk takes its place in the capture when it is read, before it is forwarded, and is
    written to the pipe after (forward first). Read order is the causal order: a reply is read
    only after the request it answers was forwarded. So a pump that writes records first writes
    every chunk read before its own that is still on its way: the cassette never shows the
    client's next request, or the end of its stdin, ahead of the reply that prompted it. A
    record bigger than PIPE_BUF is not written atomically, hence the lock around every write.
    """

    def __init__(self, fd: int, start: float) -> None:
        self._fd = fd
        self._start = start
        self._lock = threading.Lock()
        self._ticket = 0
        self._unwritten: deque[tuple[int, float, int, bytes | memoryview]] = deque()

    def take(self, stream: Stream, chunk: memoryview) -> int:
        """Note a chunk just read; returns its ticket for `written`. The chunk must stay
        unchanged until `written` returns."""
        with self._lock:
            return self._take(stream, chunk)

    def written(self, ticket: int) -> None:
        """Write the records up to `ticket` (those another pump has not written already)."""
        with self._lock:
            self._write_through(ticket)

    def end(self, stream: Stream) -> None:
        self._put(END + stream, b"")

    def exit(self, code: int | None, signum: int | None) -> None:
        self._put(EXIT, EXIT_STATUS.pack(-1 if code is None else code, -1 if signum is None else signum))

    def close(self) -> None:
        with self._lock:
            self._close()

    def _put(self, event: int, payload: bytes) -> None:
        with self._lock:
            self._write_through(self._take(event, payload))

    def _take(self, event: int, payload: bytes | memoryview) -> int:
        self._ticket += 1
        self._unwritten.append((self._ticket, time.monotonic() - self._start, event, payload))
        return self._ticket

    def _write_through(self, ticket: int) -> None:
        while self._unwritten and self._unwritten[0][0] <= ticket:
            _, t, event, payload = self._unwritten.popleft()
            if self._fd < 0:
                continue
            header = RECORD.pack(t, event, len(payload))
            try:
                written = os.writev(self._fd, [header, payload])
                if written < len(header) + len(payload):
                    _write_all(self._fd, memoryview(b"".join([header, payload]))[written:])
            except OSError:
                # The writer is gone (it said why on stderr); recording stops, forwarding goes on.
                self._close()

    def _close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


# --- the writer child ------------------------------------------------------------------------


def _run_writer(read_fd: int, cassette: BinaryIO, header: Header, before_record: FrameHook | None) -> NoReturn:
    """Frame the capture records from `read_fd` into the cassette until EOF, then exit. Runs in
    the forked child and never returns into the recorder's code."""
    status = 1
    try:
        # Hold neither the client's stdin nor its stdout: when the recorder dies the client
        # must see EOF, not wait for us.
        devnull = os.open(os.devnull, os.O_RDWR)
        os.dup2(devnull, 0)
        os.dup2(devnull, 1)
        os.close(devnull)
        # Our own process group: a signal to the recorder's group (Ctrl-C, a client's kill of
        # the group) must not stop us before the pipe is drained.
        os.setpgid(0, 0)
        writer = CassetteWriter(cassette, header)
        framer = _RecordFramer()
        pending = bytearray()
        buffer = bytearray(CHUNK)
        while size := os.readv(read_fd, [buffer]):
            pending += memoryview(buffer)[:size]
            frames, used = framer.records(pending)
            del pending[:used]
            if frames:
                writer.write(scrubbed(frames, before_record))
        writer.write(scrubbed(framer.finish(bytes(pending)), before_record))
        writer.close()
        status = 0
    except BaseException as error:  # whatever it is, say it and exit: never unwind into the recorder
        os.write(2, f"tapes: error: the cassette writer stopped: {error}\n".encode())
    finally:
        os._exit(status)


class _RecordFramer:
    """Capture records to frames, remembering which streams have not ended yet."""

    def __init__(self) -> None:
        self._framer = StdioFramer()
        self._open = set(Stream)
        self._t = 0.0
        self._seen = False
        self._exited = False

    def records(self, buffer: bytearray) -> tuple[list[Frame], int]:
        """The frames made by the complete records at the start of `buffer`, and how many bytes they used."""
        frames: list[Frame] = []
        view = memoryview(buffer)
        offset = 0
        try:
            while len(buffer) - offset >= RECORD.size:
                t, event, length = RECORD.unpack_from(view, offset)
                start = offset + RECORD.size
                if len(buffer) - start < length:
                    break
                payload = bytes(view[start : start + length])
                offset = start + length
                self._t, self._seen = t, True
                if event < END:
                    frames += self._framer.data(t, Stream(event), payload)
                elif event < EXIT:
                    frames += self._end(Stream(event - END))
                else:
                    self._exited = True
                    code, signum = EXIT_STATUS.unpack(payload)
                    frames.append(self._framer.exit(t, None if code < 0 else code, None if signum < 0 else signum))
        finally:
            view.release()  # the caller resizes the buffer
        return frames, offset

    def finish(self, rest: bytes) -> list[Frame]:
        """Frames for the end of the capture. Without an exit record the recorder was killed,
        and its pipes closed with it: every stream it saw no end of ended for its reader then,
        and its unterminated last line is kept. `rest` is an incomplete last record, cut off
        by the kill after all of its payload was forwarded: the part that arrived is kept too.
        (After a normal exit only the client's stdin can be open; it did not end on the wire.
        Without any record, no server ran: there is nothing to end.)"""
        if self._exited or not self._seen:
            return []
        frames: list[Frame] = []
        if len(rest) >= RECORD.size:
            t, event, _ = RECORD.unpack_from(rest)
            if event < END:
                frames += self._framer.data(t, Stream(event), rest[RECORD.size :])
        for stream in sorted(self._open):
            frames += self._end(stream)
        return frames

    def _end(self, stream: Stream) -> list[Frame]:
        self._open.discard(stream)
        return self._framer.end(self._t, stream)
