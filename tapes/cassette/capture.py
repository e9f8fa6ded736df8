"""The raw capture a stdio recorder appends while a session runs, and its framing afterwards.

While the session runs, `tapes record` appends each chunk it reads, before forwarding it, to the
cassette file as one msgpack array `[t, code, bytes]` written with one write(2): `code` is the
stream (`Stream`), END + the stream at its end of file, and `[t, EXIT, code, signal]` closes the
capture when the server exits. Framing and JSON parsing happen after: the recorder rewrites the
file into ordinary frames at a clean end, and `load` frames a capture a killed recorder left.
The header of a capture carries CAPTURE_KEY, so a loader knows which layout follows.
"""

from __future__ import annotations

import math
import struct
from typing import Any

from tapes.cassette.frames import Frame, recorded_time
from tapes.cassette.stdio_framer import StdioFramer, Stream

CAPTURE_KEY = "capture"  # header key: {"unapplied": [labels of before-record hooks not applied yet]}
END = len(Stream)
EXIT = 2 * len(Stream)

# fixarray(3), float 64, positive fixint, bin 32: the head of a chunk record, its bytes follow.
_CHUNK_HEAD = struct.Struct(">BBdBBI")
CHUNK_HEAD_SIZE = _CHUNK_HEAD.size


def chunk_head(t: float, code: int, size: int) -> bytes:
    """The msgpack bytes that, followed by `size` payload bytes, make the record `[t, code, payload]`."""
    return _CHUNK_HEAD.pack(0x93, 0xCB, t, code, 0xC6, size)


def exit_record(t: float, code: int | None, signum: int | None) -> list[Any]:
    return [t, EXIT, code, signum]


def first_bytes_of_a_record(byte: int) -> bool:
    """Whether a record of a capture can start with this byte (a cut one included)."""
    return byte in (0x93, 0x94)


class CaptureFramer:
    """Capture records to frames, remembering which streams have not ended yet."""

    def __init__(self) -> None:
        self._framer = StdioFramer()
        self._open = set(Stream)
        self._t = 0.0
        self._seen = False
        self.exited = False

    def record(self, record: Any) -> list[Frame]:
        """The frames one capture record makes. Raises ValueError naming what is wrong with it."""
        if type(record) is not list or len(record) not in (3, 4):
            raise ValueError("it is not a capture record")
        t, code = record[0], record[1]
        if type(t) is not float or not math.isfinite(t) or type(code) is not int or not 0 <= code <= EXIT:
            raise ValueError("its time or stream is not valid")
        # Two pumps append concurrently: keep the times of consecutive frames in order.
        t = self._t = max(recorded_time(t), self._t)
        self._seen = True
        if code == EXIT:
            status = record[2:]
            if len(status) != 2 or any(value is not None and type(value) is not int for value in status):
                raise ValueError("its exit status is not two integers")
            self.exited = True
            return [self._framer.exit(t, *status)]
        if len(record) != 3 or type(record[2]) is not bytes:
            raise ValueError("its payload is not bytes")
        if code < END:
            return self._framer.data(t, Stream(code), record[2])
        return self._end(Stream(code - END))

    def finish(self) -> list[Frame]:
        """Frames for the end of the capture. Without an exit record the recorder was killed, and
        its pipes closed with it: every stream it saw no end of ended for its reader then, and its
        unterminated last line is kept. After a normal exit only the client's stdin can be open: it
        did not end on the wire, but its unterminated last line was forwarded, and is kept too.
        (Without any record, no server ran: there is nothing to end.)"""
        frames: list[Frame] = []
        for stream in sorted(self._open) if self._seen else ():
            frames += self._framer.cut(self._t, stream) if self.exited else self._end(stream)
        return frames

    def _end(self, stream: Stream) -> list[Frame]:
        self._open.discard(stream)
        return self._framer.end(self._t, stream)
