"""OAuth on the wire, sans-IO: which fields of a form, a JSON document or a redirect carry a secret
or are fresh on every run, how such bodies are read, and moving the origins a flow names from one
place to another (the upstream's into the recorder's, the recording's into the replayer's).

A recorded authorization flow names origins in what the client reads: protected resource metadata
(`resource`, `authorization_servers`), `WWW-Authenticate` (`resource_metadata=`), authorization
server metadata (issuer, endpoints), the `/authorize` redirect (`iss`); and the client sends them
back in requests (the `resource` indicator). `OriginMap` rewrites them all consistently.
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any
from urllib.parse import parse_qsl, unquote_plus, urlencode, urlsplit, urlunsplit

from tapes.wire.http import media_type
from tapes.wire.jsonrpc import MAX_DEPTH, deeper_than, parse

# Values that are credentials wherever they appear in an OAuth body or redirect (RFC 6749, 7591,
# 7521/7523 assertions, 8693 token exchange, OpenID Connect).
SECRET_FIELDS = frozenset({
    "access_token", "refresh_token", "id_token", "client_secret", "code", "code_verifier",
    "assertion", "client_assertion", "subject_token", "actor_token", "registration_access_token",
    "device_code",
})
# Values a client makes up anew on every run: never compared when a replay matches a request.
FRESH_FIELDS = frozenset({
    "code_verifier", "code_challenge", "state", "nonce", "assertion", "client_assertion", "jti", "iat", "exp",
})

FORM = "application/x-www-form-urlencoded"

# The documents a client reads to learn how a server is protected (RFC 9728, RFC 8414, OpenID
# Connect Discovery), each at /.well-known/NAME, with the resource's or issuer's path inserted
# after it or (OpenID Connect's) appended before it.
DISCOVERY_DOCUMENTS = ("oauth-protected-resource", "oauth-authorization-server", "openid-configuration")


def is_form(content_type: str | None) -> bool:
    return media_type(content_type) == FORM


def is_json(content_type: str | None) -> bool:
    kind = media_type(content_type)
    return kind == "application/json" or kind.endswith("+json")


def form_fields(body: bytes) -> list[tuple[str, str]] | None:
    """The fields of a form-encoded body, in order; None when it is not one. A byte that is not
    ASCII (as `curl -d` sends UTF-8 text) stays in its field, as a surrogate escape if it is no UTF-8."""
    try:
        return parse_qsl(body.decode("utf-8", "surrogateescape"), keep_blank_values=True, strict_parsing=bool(body),
                         errors="surrogateescape")
    except ValueError:
        return None


def json_document(body: bytes) -> Any:
    """The JSON value of a body, or None when it is not JSON, or nested deeper than MAX_DEPTH: no
    authorization document is, and walking one that deep (to redact it) would recurse too deep."""
    try:
        document = json.loads(body)
    except (UnicodeDecodeError, ValueError, RecursionError):
        return None
    if body.count(b"[") + body.count(b"{") > MAX_DEPTH and deeper_than(document, MAX_DEPTH):
        return None
    return document


def encode_document(value: Any) -> bytes:
    text = json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    try:
        return text.encode()
    except UnicodeEncodeError:  # a lone surrogate, which JSON can say and UTF-8 cannot: as its \u escape
        return json.dumps(value, separators=(",", ":")).encode()


def body_fields(content_type: str | None, body: bytes) -> dict[str, Any] | None:
    """A form or JSON object body as {name: value} (a repeated form field: its values as a list);
    None for any other body."""
    if is_form(content_type):
        fields = form_fields(body)
        if fields is None:
            return None
        grouped: dict[str, Any] = {}
        for name, value in fields:
            grouped.setdefault(name, []).append(value)
        return {name: values[0] if len(values) == 1 else values for name, values in grouped.items()}
    if is_json(content_type) or body[:1] == b"{":
        document = json_document(body)
        return document if isinstance(document, dict) else None
    return None


def query_fields(target: str) -> dict[str, Any]:
    """The query of a request target (path?query) as {name: value} (repeated: a list)."""
    grouped: dict[str, Any] = {}
    for name, value in parse_qsl(urlsplit(target).query, keep_blank_values=True):
        grouped.setdefault(name, []).append(value)
    return {name: values[0] if len(values) == 1 else values for name, values in grouped.items()}


def differing_fields(recorded: dict[str, Any], live: dict[str, Any], ignored: Iterable[str] = FRESH_FIELDS) -> list[str]:
    """The names whose values differ between a recorded and a live set of fields, fresh ones aside."""
    skip = set(ignored)
    return sorted(name for name in recorded.keys() | live.keys() if name not in skip and recorded.get(name) != live.get(name))


# What an authorization server issues a client at dynamic registration (RFC 7591 3.2.1); the rest
# of its answer is the client's metadata, which the server registers as the client sent it.
ISSUED_AT_REGISTRATION = frozenset({
    "client_id", "client_secret", "client_id_issued_at", "client_secret_expires_at",
    "registration_access_token", "registration_client_uri",
})


SECRET_METHODS = frozenset({"client_secret_basic", "client_secret_post"})
PLACEHOLDER_SECRET = "mcp-tapes-placeholder-secret"


def registered(recorded_answer: dict[str, Any], live_metadata: dict[str, Any]) -> dict[str, Any]:
    """A registration's answer to another client: what the server issued as recorded, with the
    live client's metadata in place of the recorded client's (what only the recorded answer has,
    a server default, stays)."""
    answer = dict(recorded_answer)
    answer.update((name, value) for name, value in live_metadata.items() if name not in ISSUED_AT_REGISTRATION)
    if answer.get("token_endpoint_auth_method") in SECRET_METHODS and "client_secret" not in answer:
        # the recorded client was public (no secret issued); this one authenticates with one: the
        # server issues it a secret (RFC 7591 3.2.1), any of which the replay's /token takes
        answer.update(client_secret=PLACEHOLDER_SECRET, client_secret_expires_at=0)
    return answer


def with_basic_credentials(fields: dict[str, Any], authorization: str | None) -> dict[str, Any]:
    """A token request's fields with the client credentials of an `Authorization: Basic` header
    among them (RFC 6749 2.3.1: form-encoded, then base64), so a client that authenticates with
    the header and one that sends them in the form make the same request."""
    scheme, _, token = (authorization or "").partition(" ")
    if scheme.lower() != "basic":
        return fields
    try:
        client_id, separator, secret = base64.b64decode(token.strip(), validate=True).decode().partition(":")
    except (ValueError, UnicodeDecodeError):
        return fields
    if not separator:
        return fields
    return {**fields, "client_id": unquote_plus(client_id), "client_secret": unquote_plus(secret)}


# --- secrets ------------------------------------------------------------------------------------


def redact_document(value: Any, hide: Callable[[str], str]) -> tuple[Any, bool]:
    """A JSON document with the values of secret fields (at any depth) replaced by `hide(value)`."""
    if isinstance(value, dict):
        changed = False
        result = {}
        for key, item in value.items():
            if key in SECRET_FIELDS and isinstance(item, str) and item:
                result[key], changed = hide(item), True
            else:
                result[key], inner = redact_document(item, hide)
                changed |= inner
        return result, changed
    if isinstance(value, list):
        redacted = [redact_document(item, hide) for item in value]
        return [item for item, _ in redacted], any(changed for _, changed in redacted)
    return value, False


def redact_pairs(pairs: Sequence[tuple[str, str]], hide: Callable[[str], str]) -> tuple[list[tuple[str, str]], bool]:
    redacted = [(name, hide(value) if name in SECRET_FIELDS and value else value) for name, value in pairs]
    return redacted, redacted != list(pairs)


def redact_body(content_type: str | None, body: bytes, hide: Callable[[str], str]) -> bytes:
    """A form or JSON (non-JSON-RPC) body with its secret fields hidden; any other body as it is."""
    if is_form(content_type):
        fields = form_fields(body)
        if fields:
            redacted, changed = redact_pairs(fields, hide)
            return urlencode(redacted, errors="surrogateescape").encode() if changed else body
        return body
    # JSON whatever its label says (text/plain, text/javascript, none: servers and clients send it so)
    if is_json(content_type) or body.lstrip()[:1] in (b"{", b"["):
        document = json_document(body)
        if isinstance(document, (dict, list)):
            redacted, changed = redact_document(document, hide)
            return encode_document(redacted) if changed else body
    return body


def redact_url(url: str, hide: Callable[[str], str]) -> str:
    """A URL (a redirect's Location, a request target) with the secret fields of its query hidden,
    and of its fragment, where an implicit grant puts the token (RFC 6749 4.2.2)."""
    parts = urlsplit(url)
    changes = {}
    for part in ("query", "fragment"):
        if "=" in (value := getattr(parts, part)):
            redacted, changed = redact_pairs(parse_qsl(value, keep_blank_values=True), hide)
            if changed:
                changes[part] = urlencode(redacted)
    return urlunsplit(parts._replace(**changes)) if changes else url


def redact_credentials(value: str, hide: Callable[[str], str]) -> str:
    """An Authorization-style header value: `Bearer TOKEN` keeps its scheme and hides the token, so a
    token has one placeholder in headers and in the bodies that handed it out."""
    scheme, _, credentials = value.partition(" ")
    if credentials and scheme.lower() in ("bearer", "dpop"):
        return f"{scheme} {hide(credentials.strip())}"
    return hide(value)


# --- origins ------------------------------------------------------------------------------------


def origin_of(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


def _origin_pattern(origin: str) -> str:
    """A regex for an origin (or a base URL: an origin and a path) as it appears in text, with its
    default port written or not, and not followed by more of a host name, port or path segment."""
    parts = urlsplit(origin)
    default = {"http": 80, "https": 443}.get(parts.scheme)
    host = re.escape(f"{parts.scheme}://{parts.hostname if ':' not in (parts.hostname or '') else f'[{parts.hostname}]'}")
    port = parts.port
    if port is None or port == default:
        port_part = f"(?::{default})?" if default else ""
    else:
        port_part = f":{port}"
    path = re.escape(parts.path.rstrip("/"))
    return host + port_part + path + (r"(?![\w.~%-])" if path else r"(?![\w.:-])")


def mentions(text: str, origin: str) -> bool:
    """Whether `text` names `origin` (with its default port written or not)."""
    return re.search(_origin_pattern(origin), text, re.I) is not None


@dataclass(frozen=True)
class OriginMap:
    """Origins to replace, old -> new, applied together (a replacement is never replaced again)."""

    pairs: tuple[tuple[str, str], ...]

    @classmethod
    def of(cls, pairs: Iterable[tuple[str, str]]) -> OriginMap:
        return cls(tuple((old, new) for old, new in pairs if old and new and old != new))

    def __bool__(self) -> bool:
        return bool(self.pairs)

    @property
    def _longest_first(self) -> list[tuple[str, str]]:
        return sorted(self.pairs, key=lambda pair: -len(pair[0]))

    def text(self, text: str) -> str:
        """Every occurrence of an old origin in plain text (a JSON document, a header value) replaced
        (a base URL with a path before its bare origin)."""
        if not self.pairs:
            return text
        pairs = self._longest_first
        regex = re.compile("|".join(f"({_origin_pattern(old)})" for old, _ in pairs), re.I)
        return regex.sub(lambda match: pairs[match.lastindex - 1][1], text)  # type: ignore[operator]

    def url(self, url: str) -> str:
        """A URL on an old origin moved to the new one, and the query values that name one too
        (`iss=`, `resource=`, which are percent-encoded in place)."""
        if not self.pairs:
            return url
        moved = self.text(url.split("?", 1)[0]) + (("?" + url.split("?", 1)[1]) if "?" in url else "")
        parts = urlsplit(moved)
        if not parts.query:
            return moved
        pairs = parse_qsl(parts.query, keep_blank_values=True)
        rewritten = [(name, self.text(value)) for name, value in pairs]
        return urlunsplit(parts._replace(query=urlencode(rewritten))) if rewritten != pairs else moved

    def body(self, content_type: str | None, body: bytes) -> bytes:
        """A form body's field values, or a JSON document's text, with the origins replaced; a
        JSON-RPC message is MCP's, not the flow's, and kept as it is."""
        if not self.pairs or parse(body) is not None:
            return body
        if is_form(content_type):
            fields = form_fields(body)
            if fields:
                rewritten = [(name, self.text(value)) for name, value in fields]
                return urlencode(rewritten).encode() if rewritten != fields else body
            return body
        if is_json(content_type):
            try:
                text = body.decode()
            except UnicodeDecodeError:
                return body
            return self.text(text).encode()
        return body

    def reversed(self) -> OriginMap:
        """New -> old; where several olds became one new, the first of them."""
        firsts: dict[str, str] = {}
        for old, new in self.pairs:
            firsts.setdefault(new, old)
        return OriginMap(tuple((new, old) for new, old in firsts.items()))


# --- one proxy in front of several origins --------------------------------------------------------

AS_PREFIX = "/tapes-as/"
LOOPBACK_NAMES = ("localhost", "127.0.0.1", "[::1]")


def loopback_aliases(origin: str) -> list[str]:
    """The other names of a loopback origin (a server on localhost:P names itself 127.0.0.1:P or
    localhost:P in its documents, whichever the user did not type)."""
    parts = urlsplit(origin)
    host = f"[{parts.hostname}]" if ":" in (parts.hostname or "") else parts.hostname
    if host not in LOOPBACK_NAMES:
        return []
    port = f":{parts.port}" if parts.port else ""
    return [f"{parts.scheme}://{name}{port}" for name in LOOPBACK_NAMES if name != host]


@lru_cache(maxsize=4096)  # asked per exchange of a recording, about its few origins
def same_server(origin: str, other: str) -> bool:
    """Whether `origin` is `other` (case aside) or, on loopback, `other` under another of its names."""
    return origin.lower() in (other.lower(), *loopback_aliases(other.lower()))


def is_mcp_answer(method: str, request_type: str | None, request_body: bytes, status: int) -> bool:
    """Whether a response is a success answer to a JSON-RPC POST: MCP's, no part of an authorization
    flow (a flow's documents, forms and redirects answer other requests, its challenges are 401s),
    so a proxy moves no origins in its body and can pass it on as it comes."""
    return (method == "POST" and 200 <= status < 300 and media_type(request_type) == "application/json"
            and parse(request_body) is not None)


class ProxyRoutes:
    """What a reverse proxy in front of an MCP server does with the origins of its flow: the
    upstream's becomes the proxy's, and each authorization server on another origin (learned from
    the protected resource metadata that names it) becomes the proxy's origin with a path prefix
    `/tapes-as/N`, so the client reaches it through the proxy too. Requests under a prefix (or
    with one in a well-known path, RFC 8414's path insertion) are routed to that origin."""

    def __init__(self, upstream: str, proxy: str, servers: Iterable[str] = ()) -> None:
        self.upstream = origin_of(upstream)
        self.proxy = proxy
        self.servers: list[str] = []  # the other origins, in order learned: prefix N is index N-1
        self.named = self.upstream  # the upstream's origin as its documents write it (a loopback alias)
        for origin in servers:
            self.add(origin)

    def add(self, origin: str) -> None:
        """Route another origin through the proxy (under the next prefix), unless it is the
        upstream's (under any of its loopback names) or already routed."""
        if not same_server(origin, self.upstream) and origin not in self.servers:
            self.servers.append(origin)

    def learn(self, content_type: str | None, body: bytes) -> None:
        """Note the authorization servers a protected resource metadata document names, and which
        name of the upstream's origin its documents use (the client's values go back under it)."""
        text = body.decode("utf-8", "replace")
        for name in (self.upstream, *loopback_aliases(self.upstream)):
            if mentions(text, name):
                self.named = name
        document = json_document(body) if is_json(content_type) else None
        listed = document.get("authorization_servers") if isinstance(document, dict) else None
        for url in listed if isinstance(listed, list) else ():
            if isinstance(url, str) and url.startswith(("http://", "https://")):
                self.add(origin_of(url))

    def _moved(self) -> list[tuple[str, str]]:
        return [(self.upstream, self.proxy)] + [
            (origin, f"{self.proxy}{AS_PREFIX}{number}") for number, origin in enumerate(self.servers, 1)]

    def to_client(self) -> OriginMap:
        """Upstream origins (the upstream's under any of its loopback names) -> what the client is shown."""
        return OriginMap.of(self._moved() + [(alias, self.proxy) for alias in loopback_aliases(self.upstream)])

    def to_upstream(self) -> OriginMap:
        return OriginMap.of([(new, self.named if old == self.upstream else old) for old, new in self._moved()])

    def route(self, target: str) -> tuple[str, str] | None:
        """(origin, target there) for a request target under an authorization server's prefix."""
        for number, origin in enumerate(self.servers, 1):
            prefix = f"{AS_PREFIX}{number}"
            if target == prefix or target.startswith((prefix + "/", prefix + "?")):
                rest = target[len(prefix):]
                return origin, rest if rest.startswith("/") else "/" + rest
            if target.startswith("/.well-known/"):
                name, _, inserted = target[len("/.well-known/"):].partition("/")
                if ("/" + inserted).startswith(prefix) and (
                        ("/" + inserted)[len(prefix):][:1] in ("", "/", "?")):
                    rest = ("/" + inserted)[len(prefix):]
                    return origin, f"/.well-known/{name}" + ("" if rest in ("", "/") else rest)
        return None

    def described(self) -> str:
        """The rewriting as the cassette's `rewritten` label notes it (the upstream, not its aliases)."""
        return "; ".join(f"{old} -> {new}" for old, new in self._moved())


def is_discovery_path(path: str) -> bool:
    """Whether `path` is where a client looks for one of the DISCOVERY_DOCUMENTS."""
    for name in DISCOVERY_DOCUMENTS:
        well_known = f"/.well-known/{name}"
        if path == well_known or path.startswith(well_known + "/") or path.endswith(well_known):
            return True
    return False
