"""The HTTP rules the replayer enforces or rewrites, sans-IO: Origin validation, the
`MCP-Protocol-Version` check, the 2026-07-28 standard request headers (`Mcp-Method`, `Mcp-Name`,
`Mcp-Param-*`) checked against the body, which recorded response headers are replayed, the answer
to a browser's CORS preflight, the legacy (2024-11-05) `endpoint` event pointed at the replayer, and
the 405 at a legacy SSE path that makes a Streamable HTTP client fall back to it.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Iterable
from typing import Any
from urllib.parse import urlsplit

from tapes.cassette.frames import Frame, Kind
from tapes.cassette.store import FrameError
from tapes.wire.eras import BATCH_ERAS, KNOWN_VERSIONS, NAME_PARAMS
from tapes.wire.http import HeaderFields, header
from tapes.wire.jsonrpc import MessageType, classify, encode, items

HEADER_MISMATCH = -32001

LOCAL_HOSTS = frozenset({"localhost", "127.0.0.1", "[::1]", "::1"})

# Not replayed: the connection's own framing and the recorded moment, which the replayer sets anew.
_NOT_REPLAYED = frozenset(
    {"content-length", "transfer-encoding", "connection", "keep-alive", "date", "content-encoding", "server"}
)
_BASE64 = ("=?base64?", "?=")
_CORS = "access-control-"


def origin_allowed(origin: str | None, allowed_hosts: Iterable[str]) -> bool:
    """The spec's DNS-rebinding defence: a request with an Origin must come from a page served by
    an allowed host (any port); no Origin (not a browser) is fine."""
    if origin is None:
        return True
    try:
        parts = urlsplit(origin)
        host = parts.hostname
    except ValueError:
        return False
    if parts.scheme not in ("http", "https") or not host:
        return False
    hosts = {h.strip("[]").lower() for h in allowed_hosts}
    return host.lower() in hosts


def host_allowed(host: str | None, allowed_hosts: Iterable[str]) -> bool:
    """The other half of the DNS-rebinding defence: the Host a request names (any port) must be
    an allowed host; a request without one (HTTP/1.0) is fine."""
    if host is None:
        return True
    try:
        name = urlsplit(f"//{host}").hostname
    except ValueError:
        return False
    return name is not None and name.lower() in {h.strip("[]").lower() for h in allowed_hosts}


def version_problem(version: str | None, accepted: Iterable[str] = KNOWN_VERSIONS) -> str | None:
    """Why an `MCP-Protocol-Version` header is refused (400), or None when it is absent or known."""
    if version is None or version in accepted:
        return None
    return f"Bad Request: unsupported MCP-Protocol-Version {version!r}"


def batch_problem(message: Any, version: str | None, recorded_batches: bool) -> str | None:
    """Why a live batch is refused (400, Invalid Request): the `MCP-Protocol-Version` it came under
    has none (only 2025-03-26 had batches), so answering it would also skip the per-message header
    checks. None for a single message, without a version header, or when the recorded client sent
    batches (its server took them)."""
    if not isinstance(message, list) or version is None or version in BATCH_ERAS or recorded_batches:
        return None
    return f"Invalid Request: JSON-RPC batches are not part of protocol version {version!r}"


def stream_only_paths(frames: Iterable[Frame]) -> set[str]:
    """The paths where a legacy (2024-11-05) HTTP+SSE recording opened its SSE stream (the one that
    announced the `endpoint`) and never posted to. A client that tries Streamable HTTP first
    posts its initialize there, and falls back to the SSE stream on the 4xx a legacy server gives
    (the spec's backwards compatibility; some clients, as mcp-remote, only on a 404 or 405)."""
    return ServerFacts.of(frames).stream_only


def stream_only_refusal(method: str, path: str) -> str:
    """The report's adapted line for a request other than GET at one of the `stream_only_paths`, answered 405."""
    return (f"{method} {path}: answered 405 (GET only), as the recorded legacy HTTP+SSE server would: "
            "it took messages at its endpoint only")


def recorded_versions(frames: Iterable[Frame]) -> set[str]:
    """The protocol versions the recorded client sent in headers (accepted besides the known ones)."""
    return ServerFacts.of(frames).versions


def param_headers(frames: Iterable[Frame]) -> dict[str, dict[str, str]]:
    """Per tool, its `x-mcp-header` parameters as {header name in lower case: argument name}, from
    the recorded tools/list results."""
    return ServerFacts.of(frames).mirrored


def _listed_param_headers(message: Any) -> dict[str, dict[str, str]]:
    """The `x-mcp-header` parameters of the tools a tools/list result (in `message`) lists, by tool."""
    tools: dict[str, dict[str, str]] = {}
    for item in items(message):
        result = item.get("result") if isinstance(item, dict) else None
        listed = result.get("tools") if isinstance(result, dict) else None
        for tool in listed if isinstance(listed, list) else ():
            schema = tool.get("inputSchema") if isinstance(tool, dict) else None
            properties = schema.get("properties") if isinstance(schema, dict) else None
            mirrored = {
                f"mcp-param-{spec['x-mcp-header'].lower()}": argument
                for argument, spec in (properties.items() if isinstance(properties, dict) else ())
                if isinstance(spec, dict) and isinstance(spec.get("x-mcp-header"), str)
            }
            if mirrored and isinstance(tool.get("name"), str):
                tools[tool["name"]] = mirrored
    return tools


def header_mismatch(fields: HeaderFields, message: Any, mirrored: dict[str, dict[str, str]]) -> str | None:
    """2026-07-28: why the standard headers of a POST do not match its body (answer 400 with a
    HeaderMismatch error), or None when they do. Only single requests and notifications carry them."""
    if classify(message) not in (MessageType.REQUEST, MessageType.NOTIFICATION):
        return None
    method = message["method"]
    params = message.get("params") if isinstance(message.get("params"), dict) else {}
    sent = header(fields, "mcp-method")
    if sent is None:
        return "Header mismatch: the required Mcp-Method header is missing"
    if sent != method:
        return f"Header mismatch: Mcp-Method header value {sent!r} does not match body value {method!r}"
    if method in NAME_PARAMS:
        expected = params.get(NAME_PARAMS[method])
        name = header(fields, "mcp-name")
        if name is None:
            return "Header mismatch: the required Mcp-Name header is missing"
        if name != expected:
            return f"Header mismatch: Mcp-Name header value {name!r} does not match body value {expected!r}"
    if method == "tools/call":
        return _param_mismatch(fields, params, mirrored.get(params.get("name"), {}))
    return None


def _param_mismatch(fields: HeaderFields, params: dict[str, Any], mirrored: dict[str, str]) -> str | None:
    arguments = params.get("arguments") if isinstance(params.get("arguments"), dict) else {}
    for name, argument in mirrored.items():
        value = arguments.get(argument)
        sent = header(fields, name)
        if value is None:
            if sent is not None:
                return f"Header mismatch: {name} is sent but argument {argument!r} is absent"
            continue
        if sent is None:
            return f"Header mismatch: the {name} header is missing for argument {argument!r}"
        decoded = _decoded_param(sent)
        if decoded is None:
            return f"Header mismatch: the {name} header has invalid characters or base64"
        if decoded != _param_text(value):
            return f"Header mismatch: {name} header value {decoded!r} does not match body value {value!r}"
    return None


def _decoded_param(value: str) -> str | None:
    if value.startswith(_BASE64[0]) and value.endswith(_BASE64[1]):
        try:
            return base64.b64decode(value[len(_BASE64[0]) : -len(_BASE64[1])], validate=True).decode("utf-8")
        except (binascii.Error, UnicodeDecodeError):
            return None
    if any(not (" " <= ch <= "~" or ch == "\t") for ch in value):
        return None
    return value


def _param_text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def mismatch_reply(message: Any, problem: str) -> bytes:
    """The JSON-RPC error body of a 400 for a header mismatch."""
    request_id = message.get("id") if isinstance(message, dict) else None
    return encode({"jsonrpc": "2.0", "id": request_id, "error": {"code": HEADER_MISMATCH, "message": problem}})


def recorded_cors(frames: Iterable[Frame]) -> list[tuple[str, str]]:
    """The CORS headers (`Access-Control-*`) of the first recorded response that allowed an origin;
    empty when the recorded server allowed no cross-origin requests."""
    return ServerFacts.of(frames).cors


def _cors_allowed(frame: Frame) -> list[tuple[str, str]]:
    allowed = [(k, v) for k, v in (frame.info or {}).get("headers") or () if k.lower().startswith(_CORS)]
    return allowed if header(allowed, "access-control-allow-origin") is not None else []


def preflight_headers(cors: HeaderFields, requested_headers: str | None) -> list[tuple[str, str]] | None:
    """The answer to a browser's CORS preflight (OPTIONS): the recorded allowance, completed with
    the methods of the transport and the headers the page asked for; None when the recorded server
    allowed no cross-origin requests (its replay refuses the preflight too)."""
    answer = [(k, v) for k, v in cors]
    if not answer:
        return None
    if header(answer, "access-control-allow-methods") is None:
        answer.append(("Access-Control-Allow-Methods", "GET, POST, DELETE"))
    if requested_headers and header(answer, "access-control-allow-headers") is None:
        answer.append(("Access-Control-Allow-Headers", requested_headers))
    return answer


def missing_cors(fields: HeaderFields, cors: HeaderFields) -> list[tuple[str, str]]:
    """The recorded CORS headers an answer the replayer made up (an error, a 202) lacks: without
    them a browser page could not read it, where the recorded server's answers were readable."""
    return [(k, v) for k, v in cors if header(fields, k) is None]


_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")  # RFC 9110: what a field name is made of
_FIELD_VALUE = re.compile(r"[\t\x20-\x7e\x80-\xff]*")  # ... and a value: no line break or other control, Latin-1


def check_sendable(frames: Iterable[Frame]) -> None:
    """Raise FrameError, in one sentence, for the first recorded response head HTTP/1.1 cannot
    carry (a status outside 100-599, a header whose name is no token or whose value holds a line
    break or a character beyond Latin-1) or SSE event an event stream cannot (an id or event name
    with a line break, which would forge fields of its own): a recorder writes none. Checked before
    anything is served, so that no client gets a broken answer (as it is read, for a big cassette
    served as it is read)."""
    for frame in frames:
        check_frame_sendable(frame)


def check_frame_sendable(frame: Frame) -> None:
    """`check_sendable` of one frame."""
    if frame.kind is Kind.SSE_EVENT:
        for field in ("id", "event"):
            if any(brk in ((frame.info or {}).get(field) or "") for brk in "\r\n"):
                raise FrameError(f"frame {frame.seq} is an SSE event with the {field} "
                                 f"{frame.info[field][:60]!r}, which an event stream cannot carry")
    if frame.kind is not Kind.HTTP_RESPONSE:
        return
    info = frame.info or {}
    if not 100 <= info["status"] <= 599:
        raise FrameError(f"frame {frame.seq} is a response head with status {info['status']}, which HTTP cannot send")
    for name, value in info["headers"]:
        if not _TOKEN.fullmatch(name) or not _FIELD_VALUE.fullmatch(value):
            raise FrameError(f"frame {frame.seq} is a response head with the header {name[:60]!r}: {value[:60]!r}, "
                             "which HTTP cannot send")


class ServerFacts:
    """What an HTTP recording says of its server as a whole, folded over its frames as they are
    read (`add`): its MCP paths, the protocol versions its client named, whether its client sent
    batches, the headers its tools mirror, its CORS allowance, its stream-only paths. A fact of a
    prefix of the recording is final where it is said so; what only the whole recording tells is
    asked again once it is read (see `HttpReplayer`). `mcp`: whether a frame is MCP traffic (not an
    authorization flow's)."""

    def __init__(self) -> None:
        self.mcp_paths: dict[str, None] = {}  # where the MCP traffic's requests went, in order
        self.other_paths: dict[str, None] = {}  # ... and the other requests (an authorization flow's)
        self.versions: set[str] = set()
        self.batches = False
        self.mirrored: dict[str, dict[str, str]] = {}  # per tool: its x-mcp-header parameters, by the latest tools/list
        self.cors: list[tuple[str, str]] = []  # final once found: the first response that allowed an origin
        self._channel_paths: dict[str, str] = {}
        self._posted: set[str] = set()
        self._streams: set[str] = set()

    @classmethod
    def of(cls, frames: Iterable[Frame]) -> ServerFacts:
        facts = cls()
        for frame in frames:
            facts.add(frame)
        return facts

    @property
    def paths(self) -> list[str]:
        """The MCP endpoints (a recording of nothing but a refused login still has its paths)."""
        return list(self.mcp_paths or self.other_paths)

    @property
    def stream_only(self) -> set[str]:
        """See `stream_only_paths`."""
        return self._streams - self._posted

    def add(self, frame: Frame, mcp: bool = True) -> None:
        kind = frame.kind
        if kind is Kind.HTTP_REQUEST:
            info = frame.info or {}
            path = info.get("path", "/").split("?", 1)[0]
            (self.mcp_paths if mcp else self.other_paths)[path] = None
            if version := header(info["headers"], "mcp-protocol-version"):
                self.versions.add(version)
            if mcp:
                self._channel_paths[frame.channel] = path
                if info.get("method") == "POST":
                    self._posted.add(path)
        elif kind is Kind.MESSAGE or kind is Kind.SSE_EVENT:
            if mcp and kind is Kind.SSE_EVENT and (frame.info or {}).get("event") == "endpoint" \
                    and frame.channel in self._channel_paths:
                self._streams.add(self._channel_paths[frame.channel])
            if frame.message is None:
                return
            if frame.from_client:
                self.batches = self.batches or (kind is Kind.MESSAGE and isinstance(frame.message, list))
            else:
                self.mirrored.update(_listed_param_headers(frame.message))
        elif kind is Kind.HTTP_RESPONSE and mcp and not self.cors:
            self.cors = _cors_allowed(frame)


def replayed_headers(fields: HeaderFields) -> list[tuple[str, str]]:
    """The recorded response headers that matter (content type, session id, cache control, Allow,
    ...), without those of the recorded connection (length, chunking, date, keep-alive)."""
    return [(key, value) for key, value in fields if key.lower() not in _NOT_REPLAYED]
