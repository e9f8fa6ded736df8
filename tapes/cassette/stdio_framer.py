"""Turning captured stdio bytes into frames.

A recorder only timestamps and tags the bytes it forwards; this is where they become frames:
split into lines per stream, decoded, classified, numbered.
"""

from __future__ import annotations

from enum import IntEnum

from tapes.cassette.frames import STDIO, Direction, Frame, Kind
from tapes.wire.jsonrpc import LineSplitter, decode


class Stream(IntEnum):
    CLIENT_STDIN = 0  # what the client wrote to the server's stdin
    SERVER_STDOUT = 1  # what the server wrote to its stdout
    SERVER_STDERR = 2  # what the server wrote to its stderr


class StdioFramer:
    """Frames a stdio session from (time, stream, bytes) captures, numbering frames in arrival order."""

    def __init__(self) -> None:
        self._seq = 0
        self._splitters = {stream: LineSplitter() for stream in Stream}

    def _next_seq(self) -> int:
        self._seq += 1
        return self._seq

    def data(self, t: float, stream: Stream, chunk: bytes) -> list[Frame]:
        return [self._line_frame(t, stream, line, partial=False) for line in self._splitters[stream].feed(chunk)]

    def end(self, t: float, stream: Stream) -> list[Frame]:
        """The stream reached end of file: its unterminated remainder, then the end itself
        (stderr's end is not a protocol event and gets no frame)."""
        frames = self.cut(t, stream)
        if stream is not Stream.SERVER_STDERR:
            direction = Direction.CLIENT_TO_SERVER if stream is Stream.CLIENT_STDIN else Direction.SERVER_TO_CLIENT
            frames.append(Frame(self._next_seq(), t, direction, STDIO, Kind.STREAM_END, info={"reason": "eof"}))
        return frames

    def cut(self, t: float, stream: Stream) -> list[Frame]:
        """The stream's unterminated remainder as a partial line, where it ends or where the recording does."""
        rest = self._splitters[stream].finish()
        return [] if rest is None else [self._line_frame(t, stream, rest, partial=True)]

    def exit(self, t: float, code: int | None, signal: int | None) -> Frame:
        return Frame(
            self._next_seq(), t, Direction.SERVER_TO_CLIENT, STDIO, Kind.EXIT, info={"code": code, "signal": signal}
        )

    def _line_frame(self, t: float, stream: Stream, line: bytes, *, partial: bool) -> Frame:
        info = {"partial": True} if partial else None
        if stream is Stream.SERVER_STDERR:
            return Frame(self._next_seq(), t, Direction.SERVER_TO_CLIENT, STDIO, Kind.STDERR, data=line, info=info)
        direction = Direction.CLIENT_TO_SERVER if stream is Stream.CLIENT_STDIN else Direction.SERVER_TO_CLIENT
        decoded = decode(line)
        if decoded.message is None:
            return Frame(self._next_seq(), t, direction, STDIO, Kind.RAW, data=line, info=info)
        return Frame(self._next_seq(), t, direction, STDIO, Kind.MESSAGE, decoded.message, decoded.verbatim, info)
