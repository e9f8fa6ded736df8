"""JSON-RPC 2.0 as MCP puts it on the wire: decoding, classification, canonical encoding,
and newline-delimited framing for stdio.

Nothing here ever drops input: bytes that are not JSON, not UTF-8 or not JSON-RPC are
reported as such and kept by the caller verbatim.
"""

from __future__ import annotations

import base64
import json
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from tapes.wire.eras import NAME_PARAMS
from tapes.wire.http import media_type

PARSE_ERROR = -32700  # JSON-RPC 2.0's error codes for a message that is not JSON, or not a request
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
MAX_DEPTH = 128
"""Deepest nesting of arrays and objects taken from a live client (matching walks messages recursively)."""


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


def request_label(method: Any, request_id: Any) -> str:
    """A request as summaries and errors name it: its method and id (`tools/call id 3`)."""
    return f"{method} id {request_id!r}"


_CANONICAL = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False)  # built once: json.dumps builds one per call


def encode(message: Any) -> bytes:
    """The canonical encoding: compact separators, UTF-8, key order kept (as every MCP SDK sends)."""
    return _CANONICAL.encode(message).encode()


_ESCAPING = json.JSONEncoder(separators=(",", ":"))  # ASCII: a lone surrogate as a \u escape


def wire_form(message: Any) -> bytes:
    """The bytes a recorded message (or a part of one) stands for: its canonical encoding, or when it has none (a
    lone surrogate, which a JSON Lines cassette keeps as the wire had it, as a \\u escape; msgpack's
    bytes, which JSON has no form for) its `plain` JSON in ASCII."""
    try:
        return encode(message)
    except (TypeError, ValueError):  # UnicodeEncodeError is a ValueError
        return _ESCAPING.encode(plain(message)).encode()


def plain(value: Any) -> Any:
    """A loaded JSON value as plain JSON: msgpack's bytes (as a value or a map key) become text
    naming their size and base64 content; everything else is kept."""
    if type(value) is dict:
        return {key if type(key) is str else _bytes_text(key): plain(member) for key, member in value.items()}
    if type(value) is list:
        return [plain(member) for member in value]
    return _bytes_text(value) if type(value) is bytes else value


def _bytes_text(data: Any) -> str:
    return f"<{len(data)} bytes: {base64.b64encode(data).decode('ascii')}>" if type(data) is bytes else str(data)


@dataclass(frozen=True, slots=True)
class Decoded:
    """A wire payload decoded. `message` is None when the bytes are not JSON-RPC; `verbatim` holds
    the original bytes whenever the canonical encoding of `message` would not reproduce them."""

    message: Any
    verbatim: bytes | None


def parse(payload: bytes) -> Any:
    """The JSON-RPC message (or batch) in a wire payload, None when the bytes are not JSON-RPC.
    Looser than `decode`: its members are not checked (`shape_problem`), and `verbatim` is not
    worked out, for readers that only need the message."""
    try:
        message = json.loads(payload)
    except (UnicodeDecodeError, ValueError, RecursionError):
        return None
    return None if classify(message) is MessageType.INVALID else message


def decode(payload: bytes) -> Decoded:
    """A payload as a recording keeps it: a message only when a cassette can hold it as one
    (`shape_problem`), its bytes otherwise."""
    message = parse(payload)
    if message is None or shape_problem(message) is not None:
        return Decoded(None, payload)
    try:
        canonical = encode(message) == payload
    except (ValueError, UnicodeEncodeError):  # lone surrogates, NaN: keep the bytes
        canonical = False
    return Decoded(message, None if canonical else payload)


ID_TYPES = frozenset((str, int, float, type(None)))  # JSON-RPC 2.0: an id is a string, a number or null
PARAMS_TYPES = frozenset((dict, list, type(None)))


def shape_problem(message: Any) -> str | None:
    """What in a message (or batch) that `classify` takes has a type JSON-RPC 2.0 does not allow
    (an id, params, an error's code or message), as "an id that is ..."; None when nothing does."""
    for item in items(message):
        if type(item.get("id")) not in ID_TYPES:
            return "an id that is not a string, a number or null"
        if type(item.get("params")) not in PARAMS_TYPES:
            return "params that are neither an object nor an array"
        error = item.get("error")
        if "result" not in item and "method" not in item and (
            type(error.get("code")) is not int or type(error.get("message")) is not str
        ):
            return "an error without an integer code and a string message"
    return None


def not_mcp_answer(request_body: bytes, status: int, content_type: str | None) -> str | None:
    """What is wrong with a server's answer to a JSON-RPC POST that is neither JSON nor an SSE
    stream (a gateway's HTML error page, say), as "STATUS MEDIA"; None when it is one of them, has
    no body (202), redirects the POST as it is (307, 308: the client posts it there), or the
    request was no JSON-RPC (an authorization flow's form). The media type is looked at first: the
    request body is parsed only for an answer that is not MCP."""
    media = media_type(content_type)
    if media in ("application/json", "text/event-stream") or status in (202, 204, 307, 308) or parse(request_body) is None:
        return None
    return f"{status} {media or 'without Content-Type'}"


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


@dataclass(frozen=True, slots=True)
class Overlong:
    """A line past a BoundedLineSplitter's limit: its bytes were dropped as they came; its size is known."""

    size: int


class BoundedLineSplitter:
    """Newline-delimited framing for untrusted input (a live client): a line longer than `limit`
    is not held, but dropped as it comes and handed on as an Overlong, so a client that never ends
    its line cannot make the reader hold it all."""

    __slots__ = ("_limit", "_pending", "_size", "_dropped")

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._pending: list[bytes] = []
        self._size = 0
        self._dropped: int | None = None  # the size of the overlong line being dropped

    def feed(self, chunk: bytes) -> list[bytes | Overlong]:
        """Complete lines (without their b"\\n") made by this chunk."""
        *ended, tail = chunk.split(b"\n")
        lines: list[bytes | Overlong] = []
        for piece in ended:
            self._take(piece)
            lines.append(self._line())
        self._take(tail)
        return lines

    def finish(self) -> bytes | Overlong | None:
        """The unterminated remainder at end of stream, if any."""
        return self._line() if self._pending or self._dropped is not None else None

    def _take(self, piece: bytes) -> None:
        if self._dropped is not None:
            self._dropped += len(piece)
        elif self._size + len(piece) > self._limit:
            self._dropped = self._size + len(piece)
            self._pending, self._size = [], 0
        elif piece:
            self._pending.append(piece)
            self._size += len(piece)

    def _line(self) -> bytes | Overlong:
        line: bytes | Overlong = Overlong(self._dropped) if self._dropped is not None else b"".join(self._pending)
        self._pending, self._size, self._dropped = [], 0, None
        return line


# --- what a live client sends: read once, at the edge ------------------------------------------


@dataclass(frozen=True, slots=True)
class Refusal:
    """Why a live client's payload, or one item of its batch, cannot be taken: the JSON-RPC error
    that answers it, with the live id when the item had a usable one."""

    code: int  # PARSE_ERROR or INVALID_REQUEST
    reason: str
    id: str | int | None = None

    def reply(self) -> dict[str, Any]:
        title = "Parse error" if self.code == PARSE_ERROR else "Invalid Request"
        return {"jsonrpc": "2.0", "id": self.id, "error": {"code": self.code, "message": f"{title}: {self.reason}"}}


class _NotJson(ValueError):
    """What Python's JSON reader takes but JSON is not."""


def _no_constants(name: str) -> Any:
    raise _NotJson(f"{name} is not JSON")


_DECODER = json.JSONDecoder(parse_constant=_no_constants)
_SURROGATE_ESCAPE = re.compile(rb"\\[uU][dD][89a-fA-F]")


def read_json(payload: bytes) -> tuple[Any, Refusal | None]:
    """The JSON value of a live payload, or why it is not one the replay can take: not UTF-8 JSON
    (NaN and Infinity included), nested deeper than MAX_DEPTH, or holding a lone surrogate that
    could not be written back. Never raises."""
    try:
        value = _DECODER.decode(payload.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError, _NotJson) as error:
        return None, Refusal(PARSE_ERROR, str(error).splitlines()[0] if str(error) else "not JSON")
    except ValueError:  # Python's guard against quadratic integer parsing
        return None, Refusal(PARSE_ERROR, f"a number has more than {sys.get_int_max_str_digits()} digits")
    except RecursionError:
        return None, Refusal(PARSE_ERROR, "nested too deeply to read")
    # Both checks only when the bytes allow the problem: most payloads skip them.
    if payload.count(b"[") + payload.count(b"{") > MAX_DEPTH and deeper_than(value, MAX_DEPTH):
        return None, Refusal(INVALID_REQUEST, f"nested deeper than {MAX_DEPTH} levels")
    if _SURROGATE_ESCAPE.search(payload):
        try:
            encode(value)
        except UnicodeEncodeError:
            return None, Refusal(INVALID_REQUEST, "a string holds a lone UTF-16 surrogate")
    return value, None


def deeper_than(value: Any, limit: int) -> bool:
    """Whether arrays and objects nest in `value` more than `limit` levels (breadth first: no recursion)."""
    level = [value]
    for _ in range(limit):
        level = [child for parent in level for child in (parent.values() if type(parent) is dict else parent)
                 if type(child) is dict or type(child) is list]
        if not level:
            return False
    return True


def usable_id(value: Any) -> bool:
    """Whether a JSON-RPC id (or requestId, progressToken) is one MCP allows: a string or an
    integer, never a boolean."""
    return type(value) is str or type(value) is int


def refusal(item: Any) -> Refusal | None:
    """Why one live client message (a batch's item) is not well-formed JSON-RPC 2.0 as MCP uses it,
    or None. Checked once, where client messages come in, so that nothing after has to doubt
    their shape: ids, `requestId` and `progressToken` are strings or integers, a method is a
    string, params an object or an array (the name or uri a request is about a string), a
    response has a result or an error object."""
    if not isinstance(item, dict):
        return Refusal(INVALID_REQUEST, "a message must be a JSON object")
    live_id = item.get("id") if usable_id(item.get("id")) else None

    def refused(reason: str) -> Refusal:
        return Refusal(INVALID_REQUEST, reason, live_id)

    if item.get("jsonrpc") != "2.0":
        return refused('"jsonrpc" must be "2.0"')
    if "method" in item:
        if not isinstance(item["method"], str):
            return refused("the method must be a string")
        if "id" in item and live_id is None:
            return refused("a request id must be a string or an integer")
        return _params_refusal(item, refused)
    if "id" not in item:
        return refused("a message needs a method (request, notification) or an id (response)")
    if ("result" in item) == ("error" in item):
        return refused("a response has either a result or an error")
    if "result" in item:
        return None if live_id is not None else refused("a response id must be a string or an integer")
    error = item["error"]
    if not isinstance(error, dict) or type(error.get("code")) is not int or not isinstance(error.get("message"), str):
        return refused("an error must be an object with an integer code and a string message")
    if live_id is None and item["id"] is not None:  # null: the client could not read what it answers
        return refused("a response id must be a string, an integer or null")
    return None


def _params_refusal(item: dict[str, Any], refused: Callable[[str], Refusal]) -> Refusal | None:
    method = item["method"]
    params = item.get("params", {})
    if not isinstance(params, dict | list):
        return refused("params must be an object or an array")
    if method == "notifications/cancelled" and not (isinstance(params, dict) and usable_id(params.get("requestId"))):
        return refused("the requestId of notifications/cancelled must be a string or an integer")
    if method == "notifications/progress" and not (isinstance(params, dict) and usable_id(params.get("progressToken"))):
        return refused("the progressToken of notifications/progress must be a string or an integer")
    named = NAME_PARAMS.get(method)
    if named and isinstance(params, dict) and named in params and not isinstance(params[named], str):
        return refused(f"the {named} of {method} must be a string")
    if isinstance(params, dict) and "_meta" in params:
        meta = params["_meta"]
        if not isinstance(meta, dict):
            return refused("params._meta must be an object")
        if "progressToken" in meta and not usable_id(meta["progressToken"]):
            return refused("a progressToken must be a string or an integer")
    return None


@dataclass(frozen=True, slots=True)
class Incoming:
    """A live client's payload as read at the edge: its well-formed JSON-RPC, a message or a batch
    of them (None when there is none), and a refusal for each part that is not."""

    message: Any
    refusals: list[Refusal]
    batch: bool = False  # it was a batch (a JSON array of at least one item): whatever answers it is one too

    @property
    def json(self) -> bool:
        """Whether the payload was JSON at all (else it may be recorded bytes the client sent)."""
        return not (self.refusals and self.refusals[0].code == PARSE_ERROR)


def read_client(payload: bytes) -> Incoming:
    """What a live client sent, checked once: the well-formed messages, and why the rest is not."""
    value, refused = read_json(payload)
    if refused is not None:
        return Incoming(None, [refused])
    if not isinstance(value, list):
        refused = refusal(value)
        return Incoming(None, [refused]) if refused else Incoming(value, [])
    if not value:
        return Incoming(None, [Refusal(INVALID_REQUEST, "a batch must hold at least one message")])
    checked = [(item, refusal(item)) for item in value]
    good = [item for item, refused in checked if refused is None]
    return Incoming(good or None, [refused for _, refused in checked if refused is not None], batch=True)


def unreadable_live(payload: bytes) -> bool:
    """Whether `read_json` refuses these bytes, which a lenient reader (`decode`) may have taken as
    a message: NaN, a BOM before the JSON, another encoding than UTF-8. Reads them again only when
    they may hold such a thing."""
    if (payload.isascii() and payload[:1] in (b"{", b"[") and b"NaN" not in payload and b"Infinity" not in payload
            and b"\\u" not in payload and payload.count(b"[") + payload.count(b"{") <= MAX_DEPTH):
        return False
    return read_json(payload)[1] is not None


def params_of(message: dict[str, Any]) -> dict[str, Any]:
    """A message's params as an object ({} when absent or an array)."""
    params = message.get("params")
    return params if isinstance(params, dict) else {}


def meta_of(message: dict[str, Any]) -> dict[str, Any]:
    """A message's params._meta as an object ({} when absent or not an object)."""
    meta = params_of(message).get("_meta")
    return meta if isinstance(meta, dict) else {}


def without_meta(params: Any) -> Any:
    """Params with their `_meta` left out (per-request stamps, not what is asked)."""
    return {k: v for k, v in params.items() if k != "_meta"} if isinstance(params, dict) else params


def id_member(members: dict[str, Any], name: str) -> str | int | None:
    """The id (a requestId, progressToken, subscription id) a recorded message names in `members`, None
    when it names none MCP allows (see `usable_id`): a recorded message was never checked as a live
    one is, and what it names is looked up by value."""
    value = members.get(name)
    return value if usable_id(value) else None
