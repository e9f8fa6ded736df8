"""The frame model: one observed wire event, with the transport context needed to rebuild it."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from tapes.jsonrpc import encode


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


@dataclass(frozen=True, slots=True)
class Frame:
    """One wire event.

    `message` is the parsed JSON-RPC value of a MESSAGE frame. `data` is bytes exactly as seen:
    the payload of RAW and STDERR frames, and of a MESSAGE frame only when the canonical encoding
    of `message` would not reproduce them. `info` carries kind-specific context (HTTP heads, SSE
    fields, stream-end reason, exit status; `partial` for a stdio line cut off by end of stream).
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
        """The bytes this frame carried (without stdio's line terminator)."""
        if self.data is not None:
            return self.data
        if self.kind is Kind.MESSAGE:
            return encode(self.message)
        return b""

    @property
    def from_client(self) -> bool:
        return self.direction is Direction.CLIENT_TO_SERVER

    @property
    def partial(self) -> bool:
        return bool(self.info and self.info.get("partial"))
