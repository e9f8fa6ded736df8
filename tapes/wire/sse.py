"""Server-Sent Events (the WHATWG `text/event-stream` format), sans-IO: an incremental parser fed
with arbitrary chunks, and the encoder that writes events back.

The parser keeps what a recording needs, not only what a browser dispatches: an event is every
block of field lines ended by a blank line, so an event with an `id` and no `data` (a cursor
update) and a priming event (`id` + empty `data`) are both events. Comment lines (`: ping`) carry
nothing and are skipped. Field order within an event (`id:` before or after `event:`) does not
matter, lines may end in CRLF, LF or CR, and a chunk may end anywhere, even between CR and LF.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tapes.wire.http import media_type, moved_to_origin

_BOM = "\ufeff".encode()


@dataclass(frozen=True, slots=True)
class SSEEvent:
    """One event as sent. `data` is the data lines joined with "\\n" ("" when the event had none);
    `id`, `event` and `retry` are None when the event did not set them. `has_data`: it had a data
    line (a browser dispatches an event with empty data, not one without). `raw_data`: the data's
    bytes as sent, when they are not UTF-8 (`data` has U+FFFD for what is not), else None."""

    data: str = ""
    id: str | None = None
    event: str | None = None
    retry: int | None = None
    has_data: bool = True
    raw_data: bytes | None = None

    @property
    def is_priming(self) -> bool:
        """An event that only establishes a resumption cursor (2025-11-25: `id` + empty data)."""
        return self.id is not None and self.data == "" and self.event is None


class SSEParser:
    """Turns a byte stream into SSEEvents as they complete.

    Chunks are split into lines incrementally; text is decoded as UTF-8 per line (invalid bytes
    become U+FFFD, as the standard says, and an event keeps its data's bytes as sent too), so a
    multi-byte character cut by a chunk boundary is decoded whole.
    """

    __slots__ = ("_pending", "_cr_pending", "_started", "_lines", "_data", "_raw_data", "_id", "_event", "_retry",
                 "_fields")

    def __init__(self) -> None:
        self._pending = bytearray()  # the unterminated current line
        self._cr_pending = False  # the last chunk ended in CR: a following LF belongs to it
        self._started = False  # the BOM check has been done
        self._reset()

    def _reset(self) -> None:
        self._lines: list[bytes] = []  # the current event's raw lines, kept for `finish`
        self._data: list[str] = []
        self._raw_data: list[bytes] | None = None  # the data lines' bytes, once one is not UTF-8
        self._id: str | None = None
        self._event: str | None = None
        self._retry: int | None = None
        self._fields = False

    def feed(self, chunk: bytes) -> list[SSEEvent]:
        """The events completed by this chunk."""
        events: list[SSEEvent] = []
        if not chunk:
            return events
        if self._cr_pending and chunk[:1] == b"\n":
            chunk = chunk[1:]
        self._cr_pending = False
        start = 0
        size = len(chunk)
        # Next CR and LF positions, each searched again only once passed (a chunk of many LF
        # lines and no CR must not be rescanned to its end for every line).
        cr = lf = -1
        while start < size:
            if cr < start:
                cr = chunk.find(b"\r", start)
                if cr < 0:
                    cr = size
            if lf < start:
                lf = chunk.find(b"\n", start)
                if lf < 0:
                    lf = size
            end = min(cr, lf)
            if end == size:
                self._pending += chunk[start:]
                break
            self._pending += chunk[start:end]
            start = end + 1
            if end == cr:
                if start == size:
                    self._cr_pending = True
                elif lf == start:
                    start += 1
            event = self._line(bytes(self._pending))
            self._pending.clear()
            if event is not None:
                events.append(event)
        return events

    def finish(self) -> bytes:
        """End of stream: the raw lines of an event that was never terminated by a blank line
        (the standard discards it; a recording keeps them), or b"" when the stream ended cleanly."""
        if self._pending:
            self._lines.append(bytes(self._pending))
        rest = b"\n".join(self._lines)
        self._pending.clear()
        self._reset()
        return rest

    def _line(self, raw: bytes) -> SSEEvent | None:
        text = raw  # the line without the stream's BOM; `raw` is kept whole for `finish`
        if not self._started:
            self._started = True
            text = raw.removeprefix(_BOM)
        try:
            line, utf8 = text.decode(), True
        except UnicodeDecodeError:
            line, utf8 = text.decode("utf-8", "replace"), False
        if not line:
            if not self._fields:
                return None
            raw_data = None if self._raw_data is None else b"\n".join(self._raw_data)
            event = SSEEvent("\n".join(self._data), self._id, self._event, self._retry, bool(self._data), raw_data)
            self._reset()
            return event
        if line.startswith(":"):
            return None
        name, colon, value = line.partition(":")
        if colon and value.startswith(" "):
            value = value[1:]
        if name == "data":
            if not utf8 and self._raw_data is None:
                self._raw_data = [data.encode() for data in self._data]
            if self._raw_data is not None:
                self._raw_data.append(value.encode() if utf8 else _value_bytes(text))
            self._data.append(value)
        elif name == "event":
            self._event = value
        elif name == "id":
            if "\0" in value:
                return None
            self._id = value
        elif name == "retry":
            if not value.isascii() or not value.isdigit():
                return None
            self._retry = int(value)
        else:
            return None  # unknown fields are ignored, as the standard says
        self._fields = True
        self._lines.append(raw)
        return None


def _value_bytes(line: bytes) -> bytes:
    """A field line's value as bytes: after the first colon and one space."""
    value = line.partition(b":")[2]
    return value[1:] if value.startswith(b" ") else value


def encode_event(event: SSEEvent, unencodable: str = "replace") -> bytes:
    """The wire form of an event: its `event_text` in UTF-8, the bytes a server sent that are no
    UTF-8 (decoded with "surrogateescape") as they were; any other lone surrogate, which a JSON
    Lines cassette can hold in an id or event name and UTF-8 cannot, by the `unencodable` error
    handler ("?" by default)."""
    text = event_text(event)
    try:
        return text.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        return text.encode("utf-8", unencodable)


def event_text(event: SSEEvent) -> str:
    """An event as an event stream has it: `id`, `event`, `retry`, then one `data:` line per data
    line and a blank line (a priming event: `id:` plus an empty `data:` line)."""
    lines = []
    if event.id is not None:
        lines.append(f"id: {event.id}")
    if event.event is not None:
        lines.append(f"event: {event.event}")
    if event.retry is not None:
        lines.append(f"retry: {event.retry}")
    if event.has_data or event.data:
        lines.extend(f"data: {line}" if line else "data:" for line in event.data.split("\n"))
    return "\n".join(lines) + "\n\n"


def recorded_event(data: str, info: Mapping[str, Any]) -> SSEEvent:
    """An event from a cassette's SSE_EVENT frame: its data and its info {"id", "event", "retry"},
    with "data": false when the event had no data line."""
    return SSEEvent(data, info.get("id"), info.get("event"), info.get("retry"), info.get("data", True))


def is_event_stream(content_type: str | None) -> bool:
    """Whether a Content-Type header names an SSE body (parameters and case ignored)."""
    return media_type(content_type) == "text/event-stream"


class EndpointRewriter:
    """Legacy HTTP+SSE (2024-11-05) behind a reverse proxy: the first event of the `GET /sse`
    stream is `endpoint`, whose data is the URL the client must POST to. A relative URL already
    leads through the proxy; an absolute one on the upstream's origin is pointed at the proxy's.

    `feed` returns the bytes to forward: it holds back only the first event (the client cannot
    use a part of it anyway), then passes everything through untouched.
    """

    __slots__ = ("_upstream", "_proxy", "_held", "_done")
    LIMIT = 64 * 1024  # a first event bigger than this is no endpoint event: stop holding

    def __init__(self, upstream_origin: str, proxy_origin: str) -> None:
        self._upstream = upstream_origin
        self._proxy = proxy_origin
        self._held = bytearray()
        self._done = False

    def feed(self, chunk: bytes) -> bytes:
        if self._done:
            return chunk
        self._held += chunk
        if not chunk:  # end of stream
            return self._release(bytes(self._held))
        parser = SSEParser()
        events = parser.feed(bytes(self._held))
        if not events:
            return self._release(bytes(self._held)) if len(self._held) > self.LIMIT else b""
        held = bytes(self._held)
        first = events[0]
        if first.event == "endpoint" and (moved := moved_to_origin(first.data, self._upstream, self._proxy)) != first.data:
            held = held.replace(first.data.encode(), moved.encode(), 1)
        return self._release(held)

    def _release(self, data: bytes) -> bytes:
        self._done = True
        self._held.clear()
        return data
