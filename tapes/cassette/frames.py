"""The frame model: one observed wire event, with the transport context needed to rebuild it.

Channels. On stdio every frame travels on the channel "stdio": client lines (MESSAGE or RAW),
server lines, STDERR lines, a STREAM_END per direction at end of file, and the server's EXIT.

Over HTTP each exchange (one request and its response, including an SSE stream) is a channel
named "http:N", numbered from 1 in the order the requests arrived, and holds, in order:
- C→S HTTP_REQUEST, info {"method", "path" (with query), "headers": [[name, value], ...]}
  (headers as sent, names in their original case, secrets already redacted);
- C→S MESSAGE (a batch stays one frame) or RAW: the request body, when there is one;
- S→C HTTP_RESPONSE, info {"status", "headers": [[name, value], ...]};
- S→C the body: a JSON body is one MESSAGE (or RAW when it is not JSON-RPC); an SSE body is one
  SSE_EVENT per event, info {"id", "event", "retry"} (each None when absent; "data": false when
  the event had no data line, unlike a priming event's empty one), with the JSON-RPC
  message of its data in `message` (`data` holds the data's bytes as sent when they are not
  canonical JSON-RPC, or are not JSON-RPC at all, or not even UTF-8; a priming event has empty data); any other
  body is RAW;
- S→C STREAM_END, info {"reason": "closed" | "client_disconnect" | "upstream_error", "detail"?}.
"""

from __future__ import annotations

import signal
from dataclasses import field, make_dataclass
from enum import StrEnum
from typing import Any, NamedTuple

from tapes.wire.jsonrpc import encode, wire_form


class Direction(StrEnum):
    CLIENT_TO_SERVER = "c2s"
    SERVER_TO_CLIENT = "s2c"


class Kind(StrEnum):
    MESSAGE = "message"  # a JSON-RPC message or batch, parsed
    RAW = "raw"  # wire bytes that are not JSON-RPC, kept verbatim
    STDERR = "stderr"  # a line the server wrote to stderr
    HTTP_REQUEST = "http_request"  # request head: method, path, headers
    HTTP_RESPONSE = "http_response"  # response head: status, headers
    SSE_EVENT = "sse_event"  # id, event, retry, data
    STREAM_END = "stream_end"  # a stream closed cleanly or broke
    EXIT = "exit"  # the server process ended: code, signal


STDIO = "stdio"
STOPPING_SIGNALS = frozenset({signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGKILL})
"""What a client (or its harness) sends a stdio server it is done with: an EXIT by one of them is
the client's doing, not the server's."""
TIME_PLACES = 3  # recorded times are kept in milliseconds


def recorded_time(seconds: float) -> float:
    """A time offset as a recording keeps it: to the millisecond, which is what `--timing recorded`
    needs, and a re-record then does not change every frame in the last digits of its time."""
    return round(seconds, TIME_PLACES)


def http_channel(exchange: int) -> str:
    return f"http:{exchange}"


class Frame(NamedTuple):
    """One wire event.

    `message` is the parsed JSON-RPC value of a MESSAGE frame. `data` is bytes exactly as seen:
    the payload of RAW and STDERR frames, and of a MESSAGE frame only when the canonical encoding
    of `message` would not reproduce them. `info` carries kind-specific context (HTTP heads, SSE
    fields, stream-end reason, exit status; `partial` for a stdio line cut off by the end of its stream or of the recording).

    A named tuple, not a dataclass: a loader builds millions of them, and a tuple is made in C
    (`tuple.__new__`) where a dataclass runs a Python `__init__`. `frame._replace(...)` gives a
    changed copy; `dataclasses.replace` also works (see `_as_dataclass`), as hooks written when
    this was a dataclass call it.
    """

    seq: int
    t: float
    direction: Direction
    channel: str
    kind: Kind
    message: Any = None
    data: bytes | None = None
    info: dict[str, Any] | None = None

    @property
    def payload(self) -> bytes:
        """The bytes this frame carried (without stdio's line terminator). Raises TypeError or
        ValueError for a message that has no JSON form (bytes in it, a lone surrogate), which a
        replay must refuse."""
        if self.data is not None:
            return self.data
        if self.message is not None:  # a MESSAGE frame, or an SSE event carrying one
            return encode(self.message)
        return b""

    @property
    def shown_payload(self) -> bytes:
        """`payload` for what shows or converts a cassette instead of replaying it: a message
        without a JSON form as `wire_form` writes it."""
        if self.data is None and self.message is not None:
            return wire_form(self.message)
        return self.payload

    @property
    def from_client(self) -> bool:
        return self.direction is Direction.CLIENT_TO_SERVER

    @property
    def partial(self) -> bool:
        return bool(self.info and self.info.get("partial"))


def _as_dataclass() -> None:
    """Make `dataclasses.replace`, `fields` and `asdict` take a Frame: before-record hooks (and the
    README's example) call `dataclasses.replace(frame, ...)`. Those functions find a dataclass by
    its `__dataclass_fields__`; a Frame's are those of a dataclass of the same fields, and
    `replace` then calls Frame(**fields), which a named tuple takes."""
    defaults = Frame._field_defaults
    twin = make_dataclass("Frame", [(name, Frame.__annotations__[name], field(default=defaults[name]))
                                    if name in defaults else (name, Frame.__annotations__[name]) for name in Frame._fields])
    Frame.__dataclass_fields__ = twin.__dataclass_fields__  # type: ignore[attr-defined]


_as_dataclass()
