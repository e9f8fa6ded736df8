"""JSON-RPC 2.0 as MCP puts it on the wire: decoding, classification, canonical encoding,
and newline-delimited framing for stdio.

Nothing here ever drops input: bytes that are not JSON, not UTF-8 or not JSON-RPC are
reported as such and kept by the caller verbatim.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

PARSE_ERROR = -32700  # JSON-RPC 2.0's error codes for a message that is not JSON, or not a request
INVALID_REQUEST = -32600


class MessageType(StrEnum):
    REQUEST = "request"
    NOTIFICATION = "notification"
    RESULT = "result"
    ERROR = "error"
    BATCH = "batch"
    INVALID = "invalid"


def _classify_single(message: Any) -> MessageType:
    if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
        return MessageType.INVALID
    if "method" in message:
        if not isinstance(message["method"], str):
            return MessageType.INVALID
        return MessageType.REQUEST if "id" in message else MessageType.NOTIFICATION
    if "id" not in message:
        return MessageType.INVALID
    if "result" in message:
        return MessageType.RESULT
    if isinstance(message.get("error"), dict):
        return MessageType.ERROR
    return MessageType.INVALID


def classify(message: Any) -> MessageType:
    """What a parsed JSON value is, as JSON-RPC 2.0 (a batch is a non-empty array of messages)."""
    if isinstance(message, list):
        if message and all(_classify_single(item) is not MessageType.INVALID for item in message):
            return MessageType.BATCH
        return MessageType.INVALID
    return _classify_single(message)


_CANONICAL = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False)  # built once: json.dumps builds one per call


def encode(message: Any) -> bytes:
    """The canonical encoding: compact separators, UTF-8, key order kept (as every MCP SDK sends)."""
    return _CANONICAL.encode(message).encode()


@dataclass(frozen=True, slots=True)
class Decoded:
    """A wire payload decoded. `message` is None when the bytes are not JSON-RPC; `verbatim` holds
    the original bytes whenever the canonical encoding of `message` would not reproduce them."""

    message: Any
    verbatim: bytes | None


def parse(payload: bytes) -> Any:
    """The JSON-RPC message (or batch) in a wire payload, None when the bytes are not JSON-RPC.
    What `decode` says without working out `verbatim`, for readers that only need the message."""
    try:
        message = json.loads(payload)
    except (UnicodeDecodeError, ValueError, RecursionError):
        return None
    return None if classify(message) is MessageType.INVALID else message


def decode(payload: bytes) -> Decoded:
    message = parse(payload)
    if message is None:
        return Decoded(None, payload)
    try:
        canonical = encode(message) == payload
    except (ValueError, UnicodeEncodeError):  # lone surrogates, NaN: keep the bytes
        canonical = False
    return Decoded(message, None if canonical else payload)


def items(message: Any) -> list[dict[str, Any]]:
    """The messages of a single message or a batch."""
    return message if isinstance(message, list) else [message]


class LineSplitter:
    """Newline-delimited framing over partial reads. Lines can be arbitrarily long: the pending
    tail is kept as a list of chunks, so a 20 MB line costs one join, not a quadratic rebuild."""

    __slots__ = ("_pending",)

    def __init__(self) -> None:
        self._pending: list[bytes] = []

    def feed(self, chunk: bytes) -> list[bytes]:
        """Complete lines (without their b"\\n") made by this chunk."""
        lines = chunk.split(b"\n")
        if len(lines) == 1:
            if chunk:
                self._pending.append(chunk)
            return []
        if self._pending:
            self._pending.append(lines[0])
            lines[0] = b"".join(self._pending)
            self._pending = []
        tail = lines.pop()
        if tail:
            self._pending.append(tail)
        return lines

    def finish(self) -> bytes | None:
        """The unterminated remainder at end of stream, if any."""
        if not self._pending:
            return None
        rest = b"".join(self._pending)
        self._pending = []
        return rest
