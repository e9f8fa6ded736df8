"""`tapes record` on stdio driven the way an MCP client drives a server command, and what its
cassette says went over the wire."""

from __future__ import annotations

import json
import os
import select
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tapes.cassette.frames import Direction, Frame, Kind
from tapes.cassette.store import Cassette

from tests.support.paths import TAPES

TIMEOUT = 20.0


class Session:
    """`tapes record` started on pipes, as an MCP client starts a server command."""

    def __init__(self, cassette: Path, server: list[str], preexec_fn: Callable[[], None] | None = None) -> None:
        self.proc = subprocess.Popen(
            [*TAPES, "record", "-o", str(cassette), "--", *server],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            bufsize=0,
            preexec_fn=preexec_fn,
        )
        self.sent = bytearray()
        self.received = bytearray()  # everything read from the recorder's stdout
        self.stderr = bytearray()
        self._unread = bytearray()
        self.reader: threading.Thread | None = None

    def send(self, data: bytes) -> None:
        assert self.proc.stdin is not None
        written = 0
        while written < len(data):
            written += self.proc.stdin.write(data[written:])
        self.sent += data

    def close_stdin(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()

    def read_line(self) -> bytes:
        assert self.proc.stdout is not None
        deadline = time.monotonic() + TIMEOUT
        while b"\n" not in self._unread:
            ready, _, _ = select.select([self.proc.stdout], [], [], max(0.0, deadline - time.monotonic()))
            assert ready, f"no line from the recorder within {TIMEOUT}s"
            chunk = os.read(self.proc.stdout.fileno(), 1 << 16)
            assert chunk, "the recorder closed its stdout"
            self._unread += chunk
            self.received += chunk
        line, _, rest = bytes(self._unread).partition(b"\n")
        self._unread[:] = rest
        return line + b"\n"

    def response(self, request_id: int) -> dict[str, Any]:
        """Read lines until the response to `request_id`."""
        while True:
            message = json.loads(self.read_line())
            if message.get("id") == request_id and "method" not in message:
                return message

    def finish(self) -> int:
        """Read stdout and stderr to their end, then the exit code."""
        deadline = time.monotonic() + TIMEOUT
        pipes = [(self.proc.stdout, self.received), (self.proc.stderr, self.stderr)]
        sinks = {pipe.fileno(): sink for pipe, sink in pipes if pipe is not None and not pipe.closed}
        while sinks:
            ready, _, _ = select.select(list(sinks), [], [], max(0.0, deadline - time.monotonic()))
            assert ready, f"the recorder did not close its output within {TIMEOUT}s"
            for fd in ready:
                chunk = os.read(fd, 1 << 16)
                if chunk:
                    sinks[fd] += chunk
                else:
                    del sinks[fd]
        return self.proc.wait(max(0.0, deadline - time.monotonic()))


def wire(cassette: Cassette, direction: Direction, kinds: tuple[Kind, ...] = (Kind.MESSAGE, Kind.RAW)) -> bytes:
    """The bytes a cassette says went one way (the protocol's by default; (Kind.STDERR,): the server's
    stderr): each line and its newline (none after a line cut off by the end of the stream)."""
    return b"".join(
        frame.payload + (b"" if frame.partial else b"\n")
        for frame in cassette.frames
        if frame.direction is direction and frame.kind in kinds
    )


def of_kind(cassette: Cassette, kind: Kind, direction: Direction | None = None) -> list[Frame]:
    return [f for f in cassette.frames if f.kind is kind and (direction is None or f.direction is direction)]


def flood(session: Session, lines: list[bytes], enough: int) -> threading.Event:
    """Send `lines` to the recorder from one thread while another reads its stdout; the event is
    set once `enough` bytes have come back (or the output ended)."""
    assert session.proc.stdin is not None and session.proc.stdout is not None
    stdin, stdout = session.proc.stdin, session.proc.stdout
    reached = threading.Event()

    def send() -> None:
        try:
            for line in lines:
                stdin.write(line)
                session.sent += line
        except (BrokenPipeError, ValueError):  # the recorder is gone
            pass

    def receive() -> None:
        while chunk := os.read(stdout.fileno(), 1 << 16):
            session.received += chunk
            if len(session.received) >= enough:
                reached.set()
        reached.set()

    threading.Thread(target=send, daemon=True).start()
    session.reader = threading.Thread(target=receive, daemon=True)
    session.reader.start()
    return reached
