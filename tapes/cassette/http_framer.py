"""Turning captured HTTP exchanges into frames (sans-IO: no mitmproxy, no sockets).

The proxy adapter only timestamps what it forwards; the writer thread hands it here: heads get
their secrets redacted (headers, and secret-like query parameters of the path), bodies become
JSON-RPC messages (a batch stays a batch), SSE bodies are parsed incrementally into events, and
each exchange ends with a STREAM_END. Channels, info
fields and reasons follow the HTTP conventions in `tapes.cassette.frames`.

Along the way it indexes the session ids it sees (the `Mcp-Session-Id` response header, the
`sessionId`/`session_id` of a legacy endpoint URL), for the cassette header's labels.
"""

from __future__ import annotations

from typing import Any

from tapes.cassette.frames import Direction, Frame, Kind, http_channel, recorded_time
from tapes.cassette.redact import Redactor
from tapes.wire.coding import StreamDecoder, stream_decoder
from tapes.wire.http import header, legacy_session_id
from tapes.wire.jsonrpc import decode
from tapes.wire.sse import SSEEvent, SSEParser, is_event_stream

CLOSED = "closed"
CLIENT_DISCONNECT = "client_disconnect"
UPSTREAM_ERROR = "upstream_error"

Fields = list[tuple[str, str]]


class HttpFramer:
    """Frames an HTTP recording from captured exchange events, numbering frames in capture order.
    `exchange` is the exchange's number (its channel is "http:N")."""

    def __init__(self, redactor: Redactor) -> None:
        self._redactor = redactor
        self._seq = 0
        self._streams: dict[int, SSEParser] = {}
        self._decoders: dict[int, StreamDecoder] = {}  # SSE streams sent with a Content-Encoding
        self.sessions: list[str] = []  # in order of first appearance

    def request(self, t: float, exchange: int, method: str, path: str, headers: Fields, body: bytes | None) -> list[Frame]:
        """The request head and its body; `body` None: the client stopped sending it, the head alone."""
        info = {"method": method, "path": self._redactor.path(path), "headers": self._redactor.headers(headers)}
        frames = [self._frame(t, Direction.CLIENT_TO_SERVER, exchange, Kind.HTTP_REQUEST, info=info)]
        if body is None:
            return frames
        # A POST is matched on replay by its body: an empty one is kept too (as RAW), so that its
        # replay gets what the server answered it.
        if body or method == "POST":
            frames.append(self._body(t, Direction.CLIENT_TO_SERVER, exchange, body, header(headers, "content-type")))
        return frames

    def response(self, t: float, exchange: int, status: int, headers: Fields, body: bytes | None) -> list[Frame]:
        """The response head, and its body unless it is an SSE stream (`body` None: its
        chunks follow through `chunk`)."""
        self._note_session(header(headers, "mcp-session-id"))
        info = {"status": status, "headers": self._redactor.headers(headers)}
        frames = [self._frame(t, Direction.SERVER_TO_CLIENT, exchange, Kind.HTTP_RESPONSE, info=info)]
        if body is None and is_event_stream(header(headers, "content-type")):
            self._streams[exchange] = SSEParser()
            if (decoder := stream_decoder(header(headers, "content-encoding"))) is not None:
                self._decoders[exchange] = decoder  # its events are read from the decoded bytes
        elif body:
            frames.append(self._body(t, Direction.SERVER_TO_CLIENT, exchange, body, header(headers, "content-type")))
        return frames

    def chunk(self, t: float, exchange: int, data: bytes) -> list[Frame]:
        parser = self._streams.get(exchange)
        if parser is None:  # a streamed body that is not SSE
            return [self._frame(t, Direction.SERVER_TO_CLIENT, exchange, Kind.RAW, data=data)]
        if (decoder := self._decoders.get(exchange)) is not None:
            try:
                data = decoder.decode(data)
            except ValueError:  # not in the coding its head named: from here on kept as it came
                del self._decoders[exchange], self._streams[exchange]
                rest = parser.finish()
                return [self._frame(t, Direction.SERVER_TO_CLIENT, exchange, Kind.RAW, data=raw) for raw in (rest, data) if raw]
        return [self._event(t, exchange, event) for event in parser.feed(data)]

    def end(self, t: float, exchange: int, reason: str, detail: str | None = None) -> list[Frame]:
        """The exchange is over: an unterminated last SSE event is kept as RAW, then the end."""
        frames = []
        parser = self._streams.pop(exchange, None)
        self._decoders.pop(exchange, None)
        if parser is not None and (rest := parser.finish()):
            frames.append(self._frame(t, Direction.SERVER_TO_CLIENT, exchange, Kind.RAW, data=rest))
        info: dict[str, Any] = {"reason": reason}
        if detail:
            info["detail"] = detail
        frames.append(self._frame(t, Direction.SERVER_TO_CLIENT, exchange, Kind.STREAM_END, info=info))
        return frames

    def _event(self, t: float, exchange: int, event: SSEEvent) -> Frame:
        if event.event == "endpoint":  # legacy HTTP+SSE: the POST URL names the session
            self._note_session(legacy_session_id(event.data))
        info: dict[str, Any] = {"id": event.id, "event": event.event, "retry": event.retry}
        if not event.has_data:
            info["data"] = False  # replayed without a data line, which a browser would not dispatch
        message, data = self._decoded(event.data.encode() if event.raw_data is None else event.raw_data)
        return self._frame(t, Direction.SERVER_TO_CLIENT, exchange, Kind.SSE_EVENT, message=message, data=data, info=info)

    def _body(self, t: float, direction: Direction, exchange: int, body: bytes, content_type: str | None) -> Frame:
        message, data = self._decoded(body)
        if message is None:  # not JSON-RPC: an OAuth form or document keeps no secret either
            return self._frame(t, direction, exchange, Kind.RAW, data=self._redactor.body(content_type, body))
        return self._frame(t, direction, exchange, Kind.MESSAGE, message=message, data=data)

    def _decoded(self, payload: bytes) -> tuple[Any, bytes | None]:
        """(message, verbatim bytes) of a payload; a redacted message loses its verbatim copy,
        which still holds the secret."""
        decoded = decode(payload)
        if decoded.message is None:
            return None, decoded.verbatim
        message, changed = self._redactor.message(decoded.message)
        return message, None if changed else decoded.verbatim

    def _note_session(self, session: str | None) -> None:
        if session and session not in self.sessions:
            self.sessions.append(session)

    def _frame(self, t: float, direction: Direction, exchange: int, kind: Kind, **fields: Any) -> Frame:
        self._seq += 1
        return Frame(self._seq, recorded_time(t), direction, http_channel(exchange), kind, **fields)
