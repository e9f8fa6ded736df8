"""Replaying an OAuth authorization flow, sans-IO.

A recording of an OAuth-protected server holds, besides the MCP sessions, the exchanges of the
flow: the 401/403 that refused an MCP request (with its `WWW-Authenticate`), the well-known
documents, dynamic client registration, the `/authorize` redirect and the `/token` POST. They are
not part of any MCP session: `AuthFlow.split` takes them out of the frames, and `AuthFlow.answer`
serves them by method and path:

- MCP requests (on an MCP endpoint) are told apart by the token they carry: a live request with
  the token (or no token) a refused request had gets the refusal, any other goes on to the MCP
  replay. Tokens are redacted placeholders, which the replayed `/token` hands out.
- Other requests match a recorded one when their query and form or JSON fields are equal, except
  those fresh on every run (PKCE verifier and challenge, state, nonce, assertions) and the client's
  redirect URI (a loopback port changes between runs). When none does, one that differs only in
  what clients ask differently of the same server (`scope`, RFC 8707's `resource`) answers it,
  reported as adapted.
- Answers name the replayer's origin where the recording named the recorder's, and the
  `/authorize` redirect goes to the live redirect URI with the live state.
- A forward proxy's recording (`tapes record --proxy`) rewrote nothing: its exchanges went to the
  real origins, which only their Host names. The replay makes of them what the reverse proxy
  would have (`ProxyRoutes`): the MCP server's origin (the one JSON-RPC was spoken to) becomes the
  replayer's, and each other origin of the flow (an authorization server) the replayer's under
  `/tapes-as/N`; a live request is routed back to the recorded origin and path it stands for.
- The checks the real authorization server made still hold: the `code_verifier` at `/token` must
  match (S256) the `code_challenge` sent to the `/authorize` that issued the code.

An exchange answered once may be answered again (a client fetches metadata again, retries).

A recording in which the server refused nothing for its credentials and served no OAuth metadata,
and the client presented no credentials either, is of a server that asked for none: a client that
looks for its OAuth metadata where the recorded one did not (mcp-remote does, before it connects)
gets the 404 of a server without any, reported as adapted rather than unmatched.
"""

from __future__ import annotations

import base64
import hashlib
import math
from bisect import bisect_left
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, replace
from functools import cached_property, lru_cache
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from tapes.cassette.frames import Frame, Kind
from tapes.replay.http_rules import replayed_headers
from tapes.replay.index import checked_payload
from tapes.replay.outcomes import Unmatched
from tapes.wire.http import HeaderFields, header
from tapes.wire.jsonrpc import encode, parse
from tapes.wire.oauth import (
    FRESH_FIELDS,
    OriginMap,
    ProxyRoutes,
    body_fields,
    differing_fields,
    encode_document,
    is_discovery_path,
    is_json,
    json_document,
    mentions,
    query_fields,
    registered,
    same_server,
    with_basic_credentials,
)
from tapes.wire.sse import is_event_stream

REFUSALS = (401, 403)
# Not compared either: the client's redirect URI(s), which a replay substitutes, and its secret:
# the one the replay handed out, or one recorded only inside a redacted Basic header.
_NOT_COMPARED = FRESH_FIELDS | {"redirect_uri", "redirect_uris", "client_secret"}
# What clients ask differently of the same server, and the server grants them all the same: the
# scope (one client asks for what the metadata lists, another for none) and the RFC 8707
# resource (optional: not every client sends it). A request that differs from a recorded one in
# these alone is answered as recorded, reported as adapted, when none matches in full.
_NEGOTIABLE = frozenset({"scope", "resource"})


@dataclass(frozen=True)
class AuthExchange:
    """One recorded exchange of the flow, as the client saw it."""

    channel: str
    method: str
    target: str  # path?query
    request_headers: list[list[str]]
    request_body: bytes
    status: int
    headers: list[list[str]]
    body: bytes
    origin: str | None  # where the recorded client sent it
    # a refusal: how many requests like it (method, path) carrying its token the server took before
    # it refused one (an expired token worked until then)
    taken_before: int = 0

    @property
    def path(self) -> str:
        return self.target.split("?", 1)[0]

    @property
    def rpc_method(self) -> str | None:
        message = parse(self.request_body) if self.request_body else None
        return message.get("method") if isinstance(message, dict) else None

    @property
    def token(self) -> str | None:
        return header(self.request_headers, "authorization")

    @property
    def registration(self) -> bool:
        """A dynamic client registration (RFC 7591): client metadata POSTed as JSON, answered with
        the client_id the server issued."""
        if self.method != "POST" or not 200 <= self.status < 300 or not is_json(header(self.request_headers, "content-type")):
            return False
        answer = json_document(self.body)
        return isinstance(answer, dict) and "client_id" in answer

    @property
    def refusal(self) -> bool:
        return refuses_credentials(self.status, self.headers)


def refuses_credentials(status: Any, headers: Any) -> bool:
    """Whether a response refused a request for its credentials (a 403 for a foreign Origin is not one)."""
    return status in REFUSALS and header(headers, "www-authenticate") is not None


@dataclass(frozen=True)
class AuthAnswer:
    status: int
    headers: list[tuple[str, str]]
    body: bytes


@dataclass
class _Issued:
    """What the live client sent to the /authorize whose recorded code it was handed."""

    code_challenge: str | None
    method: str | None
    redirect_uri: str | None  # which the code's /token must name again (RFC 6749 4.1.3)


def mcp_paths(frames: Sequence[Frame]) -> set[str]:
    """The paths MCP is spoken on: where JSON-RPC was posted or an SSE stream served."""
    heads: dict[str, str] = {}
    paths = set()
    for frame in frames:
        if frame.kind is Kind.HTTP_REQUEST:
            heads[frame.channel] = (frame.info or {}).get("path", "/").split("?", 1)[0]
        elif frame.channel in heads and (
            (frame.from_client and frame.kind is Kind.MESSAGE)
            or (frame.kind is Kind.HTTP_RESPONSE and is_event_stream(header((frame.info or {}).get("headers"), "content-type")))
        ):
            paths.add(heads[frame.channel])
    return paths


def _flow_exchange(frames: list[Frame], mcp: set[str], origin: str | None) -> AuthExchange | None:
    """The exchange as the flow's, or None when it is not one: an MCP exchange (on an MCP path, not
    refused for its credentials), whose messages the sessions replay; or one without both heads."""
    request = next((f for f in frames if f.kind is Kind.HTTP_REQUEST), None)
    response = next((f for f in frames if f.kind is Kind.HTTP_RESPONSE), None)
    if request is None or response is None:
        return None
    info, answer = request.info or {}, response.info or {}
    heads = AuthExchange(request.channel, info.get("method", "GET"), info.get("path", "/"), info.get("headers") or [],
                         b"", answer.get("status", 200), answer.get("headers") or [], b"", origin)
    if heads.path in mcp and not heads.refusal:
        return None
    return replace(heads, request_body=_body(frames, from_client=True), body=_body(frames, from_client=False))


def _body(frames: list[Frame], *, from_client: bool) -> bytes:
    """What one side sent on an exchange; a message without a JSON form is the cassette's damage (CassetteError)."""
    return b"".join(checked_payload(f) for f in frames if f.from_client is from_client and f.kind in (Kind.MESSAGE, Kind.RAW))


def _host_origins(by_channel: dict[str, list[Frame]]) -> dict[str, str | None]:
    """Each exchange's origin as a forward proxy's recording has it: its Host, with the scheme the
    recording names it with (https when any header or body does, else http); None without a Host."""
    hosts = {channel: _usable_host(header(next(((f.info or {}).get("headers") for f in frames if f.kind is Kind.HTTP_REQUEST),
                                                None), "host"))
             for channel, frames in by_channel.items()}
    named = "\n".join(
        [value for frames in by_channel.values() for f in frames if f.kind is Kind.HTTP_RESPONSE
         for _, value in (f.info or {}).get("headers") or []]
        + [f.payload.decode("utf-8", "replace") for frames in by_channel.values() for f in frames if f.kind is Kind.RAW])
    schemes = {host: "https" if mentions(named, f"https://{host}") else "http" for host in set(hosts.values()) if host}
    return {channel: _origin(schemes[host], host) if host else None for channel, host in hosts.items()}


@lru_cache(maxsize=4096)  # asked per exchange of a recording, about its few hosts
def _usable_host(host: str | None) -> str | None:
    """A Host an origin can be made of; None for one that makes no URL ("[", "x:99999": it came from the wire)."""
    try:
        urlsplit(f"http://{host}").port
    except ValueError:
        return None
    return host


def _origin(scheme: str, host: str) -> str:
    default = {"http": ":80", "https": ":443"}[scheme]
    return f"{scheme}://{host[: -len(default)] if host.endswith(default) else host}"


def _refusals_counted(by_channel: dict[str, list[Frame]], flow: dict[str, AuthExchange]) -> dict[str, AuthExchange]:
    """The flow's refusals with how many requests like each, carrying its token, the server took
    before it (`AuthExchange.taken_before`)."""
    refusals = {channel: exchange for channel, exchange in flow.items() if exchange.refusal}
    if not refusals:
        return {}
    taken: dict[tuple[str, str, str | None], list[int]] = defaultdict(list)  # (method, path, token) -> request seqs
    for channel, frames in by_channel.items():
        if channel not in flow and (request := frames[0]).kind is Kind.HTTP_REQUEST:
            info = request.info or {}
            taken[(info.get("method", "GET"), info.get("path", "/").split("?", 1)[0], header(info.get("headers"), "authorization"))].append(request.seq)
    return {channel: replace(exchange, taken_before=bisect_left(taken.get((exchange.method, exchange.path, exchange.token), []),
                                                                 by_channel[channel][0].seq))
            for channel, exchange in refusals.items()}


def _speaks_mcp(frames: list[Frame]) -> bool:
    return any(frame.from_client and frame.kind is Kind.MESSAGE for frame in frames)


class AuthFlow:
    """The recorded flow's exchanges, served to a live client (see the module's doc)."""

    def __init__(self, exchanges: list[AuthExchange], mcp: set[str], recorded_origin: str | None,
                 servers: Sequence[str] = (), mcp_origins: Sequence[str] = (), credentials: bool = False) -> None:
        self.exchanges = exchanges
        self.credentials = credentials  # the recorded client sent an Authorization header somewhere
        self.mcp_paths = mcp
        self.recorded_origin = recorded_origin
        # the other origins a forward proxy's recording went to, routed as the reverse proxy would have
        self.servers = list(servers)
        self.mcp_origins = list(mcp_origins)  # the origins JSON-RPC was spoken to (a forward proxy's recording)
        self._routing = self._routes(recorded_origin or "")  # live targets back to recorded origins
        self.served: set[int] = set()
        self.misses: list[Unmatched] = []
        self.adapted: list[str] = []  # what was answered as the server answers any client, not as recorded
        self._issued: dict[str, _Issued] = {}
        self._traded: set[str] = set()  # codes traded for tokens since /authorize last handed them out
        self._rotated: set[str] = set()  # refresh tokens the server issued another in place of
        self._redirect_uris: list[Any] | None = None  # what the live client registered, once it has
        self._taken: Counter[tuple[str, str, str | None]] = Counter()  # live MCP requests passed on, by method, path, token

    @classmethod
    def split(cls, frames: Sequence[Frame], recorded_origin: str | None = None) -> tuple[AuthFlow, list[Frame]]:
        """The flow's exchanges, and the frames left for the MCP sessions. `recorded_origin` is the
        origin the recorded client used (the cassette's `origin` label: a reverse proxy's); without
        it, each exchange's origin is taken from its Host, and the MCP server's is the one JSON-RPC
        was spoken to (the first such, when there are several)."""
        by_channel: dict[str, list[Frame]] = {}
        for frame in frames:
            if frame.channel.startswith("http:"):
                by_channel.setdefault(frame.channel, []).append(frame)
        origins: dict[str, str | None] = dict.fromkeys(by_channel, recorded_origin)
        mcp_origins: list[str] = []
        if recorded_origin is None:
            origins = _host_origins(by_channel)
            for channel, exchange_frames in by_channel.items():
                origin = origins[channel]
                if origin is not None and _speaks_mcp(exchange_frames) and not any(
                        same_server(origin, known) for known in mcp_origins):
                    mcp_origins.append(origin)
            recorded_origin = next(iter(mcp_origins), None) or next((o for o in origins.values() if o), None)
            if recorded_origin is not None:  # the MCP server under another case or loopback name is itself
                origins = {channel: recorded_origin if o is not None and same_server(o, recorded_origin) else o
                           for channel, o in origins.items()}
        on_server = {channel for channel, origin in origins.items() if origin in (recorded_origin, None)}
        mcp = mcp_paths([frame for frame in frames if frame.channel in on_server])
        flow_channels: dict[str, AuthExchange] = {}
        for channel, exchange_frames in by_channel.items():
            if (exchange := _flow_exchange(exchange_frames, mcp if channel in on_server else set(), origins[channel])) is not None:
                flow_channels[channel] = exchange
        flow_channels.update(_refusals_counted(by_channel, flow_channels))
        routes = ProxyRoutes(recorded_origin or "", recorded_origin or "")
        for exchange in flow_channels.values():  # the order the recorder would have learned them in
            routes.learn(header(exchange.headers, "content-type"), exchange.body)
        for exchange in flow_channels.values():
            if exchange.origin is not None:
                routes.add(exchange.origin)
        rest = [frame for frame in frames if frame.channel not in flow_channels]
        credentials = any(frame.kind is Kind.HTTP_REQUEST and header((frame.info or {}).get("headers"), "authorization")
                          for frame in frames)
        return cls(list(flow_channels.values()), mcp, recorded_origin, routes.servers, mcp_origins, credentials), rest

    def __bool__(self) -> bool:
        return bool(self.exchanges)

    def _routes(self, live_origin: str) -> ProxyRoutes | None:
        """The recorded origins as the live client is shown them (the recorded one: the replayer's;
        another: the replayer's under its prefix)."""
        return ProxyRoutes(self.recorded_origin, live_origin, self.servers) if self.recorded_origin else None

    def served_as(self, live_origin: str) -> str | None:
        """Where a forward proxy's recording has its origins served: "recorded -> live; ..."
        (None for a reverse proxy's, whose recording has the recorder's origin only)."""
        routes = self._routes(live_origin)
        return routes.described() if routes and self.mcp_origins else None

    def _located(self, target: str) -> tuple[str | None, str]:
        """(recorded origin, target there) a live request target stands for."""
        return (self._routing.route(target) if self._routing else None) or (self.recorded_origin, target)

    def _candidates(self, method: str | None, target: str) -> list[int]:
        """The recorded exchanges a live request to `target` may be (by `method`, or any when None)."""
        if not self.exchanges:  # every request of a replay without a flow asks
            return []
        origin, there = self._located(target)
        path = there.split("?", 1)[0]
        return [i for i, e in enumerate(self.exchanges)
                if (method is None or e.method == method) and e.path == path and e.origin == origin]

    def methods_at(self, path: str) -> set[str]:
        """The methods the flow's recorded requests to `path` used (for a 405's Allow)."""
        return {self.exchanges[i].method for i in self._candidates(None, path)}

    def claims(self, method: str, path: str) -> bool:
        """Whether a live request may be one of the flow's (its body is needed to tell)."""
        return bool(self._candidates(method, path))

    def answer(self, method: str, target: str, headers: HeaderFields, body: bytes, live_origin: str) -> AuthAnswer | None:
        """The answer to a live request that is part of the flow; None for an MCP request the flow
        does not refuse (the MCP replay answers it)."""
        path = target.split("?", 1)[0]
        candidates = self._candidates(method, target)
        if not candidates:
            return None
        origin, there = self._located(target)
        routes = self._routes(live_origin)
        origins = routes.to_client() if routes else OriginMap(())
        on_mcp = origin == self.recorded_origin and there.split("?", 1)[0] in self.mcp_paths
        order = [i for i in candidates if i not in self.served] + [i for i in candidates if i in self.served]
        like = (method, there.split("?", 1)[0], header(headers, "authorization"))  # requests taken like it, for a refusal
        if on_mcp:
            # a refusal of the same JSON-RPC method first, then a 401 of any: the server refused the
            # token itself (a 403 insufficient_scope is about what the token was used for)
            taken = self._taken[like]
            order = ([i for i in order if self._refuses(self.exchanges[i], headers, body, taken, same_method=True)]
                     + [i for i in order if self._refuses(self.exchanges[i], headers, body, taken, same_method=False)])
        differences: list[str] = []
        negotiated: tuple[int, list[str]] | None = None  # the first that differs in _NEGOTIABLE fields alone
        chosen: int | None = None
        for index in order:
            exchange = self.exchanges[index]
            if not on_mcp and exchange.registration and isinstance(live := body_fields(header(headers, "content-type"), body), dict):
                if problem := _metadata_problem(live, header(headers, "content-type")):
                    self.misses.append(Unmatched(f"{method} {path}", problem))
                    return _oauth_error(400, "invalid_client_metadata", problem)
                self.served.add(index)
                return self._registered(exchange, there, origins, live)
            if not on_mcp and (differing := self._differing(exchange, there, headers, body, origins)):
                differences.append(f"{exchange.method} {exchange.path} differs in {', '.join(differing)}")
                if negotiated is None and _NEGOTIABLE.issuperset(differing):
                    negotiated = (index, differing)
                continue
            chosen = index
            break
        negotiable: list[str] = []  # what the live request asks differently, when answered as one that did
        if chosen is None:
            if on_mcp:
                self._taken[like] += 1
                return None
            if negotiated is None:
                why = differences[0] if differences else "no recorded exchange matches"
                self.misses.append(Unmatched(f"{method} {path}", why))
                return _oauth_error(400, "invalid_request", f"tapes: the recording has no such request ({why})")
            chosen, negotiable = negotiated
        exchange = self.exchanges[chosen]
        if not on_mcp and (problem := self._check_redirect_uri(exchange, there)) is not None:
            self.misses.append(Unmatched(f"{method} {path}", problem))
            return _oauth_error(400, "invalid_request", problem)
        fields = {} if on_mcp else body_fields(header(headers, "content-type"), body) or {}
        if not on_mcp and (problem := self._check_grant(fields)) is not None:
            self.misses.append(Unmatched(f"{method} {path}", problem))
            return _oauth_error(400, "invalid_grant", problem)
        if negotiable:
            self.adapted.append(f"{method} {path}: the live client asks with another {' and '.join(negotiable)}; "
                                "answered as the recorded client was")
        self.served.add(chosen)
        if not on_mcp and 200 <= exchange.status < 300:
            if isinstance(code := _traded_code(fields), str):
                self._traded.add(code)
            if _rotates(fields, exchange):
                self._rotated.add(fields["refresh_token"])
        return self._replayed(exchange, there, origins)

    @cached_property
    def _authorizes(self) -> bool:
        """Whether the recording has the /authorize redirect that hands out codes (the live
        client's codes then come from it)."""
        return any("code" in query_fields(header(exchange.headers, "location") or "") for exchange in self.exchanges)

    def unprotected_discovery(self, method: str, path: str) -> str | None:
        """Why a live request for OAuth metadata gets a 404 although the recording has no such
        request (the report's adapted line): the recorded server asked for no authorization and its
        client presented none. None for any other request, or when the recording shows OAuth."""
        if method != "GET" or not is_discovery_path(path) or self.credentials or any(
                exchange.refusal or (is_discovery_path(exchange.path) and 200 <= exchange.status < 300)
                for exchange in self.exchanges):
            return None
        return (f"GET {path}: answered 404, as the recorded server would: it asked for no authorization "
                "and its client presented none")

    def report_lines(self) -> list[str]:
        if not self.exchanges:
            return []
        line = f"authorization flow: served {len(self.served)} of {len(self.exchanges)} recorded exchanges, {len(self.misses)} unmatched"
        return [line, *(f"  unmatched {miss.summary}: {miss.reason}" for miss in self.misses),
                *(f"  adapted {line}" for line in self.adapted)]

    @property
    def clean(self) -> bool:
        return not self.misses

    # --- matching --------------------------------------------------------------------------

    @staticmethod
    def _refuses(exchange: AuthExchange, headers: HeaderFields, body: bytes, taken: int, same_method: bool) -> bool:
        """Whether a refused MCP request matches a live one: the same token (or none), once as many
        requests with it were `taken` as the server took before it refused one (an expired token),
        and with `same_method` the same JSON-RPC method, else a 401."""
        if not exchange.refusal or exchange.token != header(headers, "authorization") or taken < exchange.taken_before:
            return False
        if not same_method:
            return exchange.status == 401
        message = parse(body) if body else None
        live_method = message.get("method") if isinstance(message, dict) else None
        return exchange.rpc_method is None or live_method is None or exchange.rpc_method == live_method

    @staticmethod
    def _differing(exchange: AuthExchange, target: str, headers: HeaderFields, body: bytes, origins: OriginMap) -> list[str]:
        recorded_query = _moved(query_fields(exchange.target), origins)
        differing = differing_fields(recorded_query, query_fields(target), _NOT_COMPARED)
        recorded_type = header(exchange.request_headers, "content-type")
        recorded_body = body_fields(recorded_type, exchange.request_body) if exchange.request_body else {}
        live_body = body_fields(header(headers, "content-type"), body) if body else {}
        if recorded_body is None or live_body is None:  # not a form or JSON object: bytes
            return differing + (["body"] if exchange.request_body != body else [])
        # the client authenticates in the form or with a Basic header, whichever it registered for
        recorded_body = with_basic_credentials(recorded_body, exchange.token)
        live_body = with_basic_credentials(live_body, header(headers, "authorization"))
        ignored = _NOT_COMPARED if "client_id" in recorded_body and "client_id" in live_body else _NOT_COMPARED | {"client_id"}
        return differing + differing_fields(_moved(recorded_body, origins), live_body, ignored)

    def _check_redirect_uri(self, exchange: AuthExchange, target: str) -> str | None:
        """At /authorize: a redirect URI the live client did not register is not redirected to
        (RFC 6749 3.1.2.4), once it has registered some in this replay."""
        if self._redirect_uris is None or "redirect_uri" not in query_fields(exchange.target):
            return None
        uri = query_fields(target).get("redirect_uri")
        if uri is None or uri in self._redirect_uris:
            return None
        return f"the redirect_uri {uri!r} is not among those the client registered"

    def _check_grant(self, fields: dict[str, Any]) -> str | None:
        """At /token (`fields`: the request's form or JSON body): a code is traded once, after the
        replay's /authorize handed it out (when the recording has one), with the redirect_uri that
        /authorize was given; the live code_verifier is checked against the live code_challenge of
        the code's /authorize; a refresh token the server rotated is not taken again."""
        if fields.get("grant_type") == "refresh_token" and fields.get("refresh_token") in self._rotated:
            return "the refresh token was used already, and the server issued another in its place"
        code = _traded_code(fields)
        if isinstance(code, str) and code in self._traded:
            return "the authorization code was traded for tokens already (RFC 6749 4.1.2: a code is used once)"
        issued = self._issued.get(code) if isinstance(code, str) else None
        if code is not None and issued is None and self._authorizes:
            return "the authorization code was not handed out by /authorize"
        if issued is not None and issued.redirect_uri is not None and fields.get("redirect_uri") != issued.redirect_uri:
            return "the redirect_uri is not the one the authorization request named (RFC 6749 4.1.3)"
        verifier = fields.get("code_verifier")
        if issued is None or issued.code_challenge is None:
            return None
        if isinstance(verifier, list):
            return "the token request has more than one code_verifier"
        if not isinstance(verifier, str):
            return "the authorization request had a code_challenge, the token request has no code_verifier"
        if not verifier.isascii():  # RFC 7636 4.1: unreserved characters only (and a lone surrogate has no UTF-8)
            return "the code_verifier holds characters RFC 7636 does not allow in one"
        if (issued.method or "plain") == "S256":
            derived = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
        else:
            derived = verifier
        if derived != issued.code_challenge:
            return "the code_verifier does not match the code_challenge of the authorization request (PKCE)"
        return None

    # --- answering -------------------------------------------------------------------------

    def _replayed(self, exchange: AuthExchange, target: str, origins: OriginMap) -> AuthAnswer:
        headers = []
        for name, value in replayed_headers(exchange.headers):
            lowered = name.lower()
            if lowered in ("www-authenticate", "link"):
                value = origins.text(value)
            elif lowered == "location":
                value = self._redirect(exchange, target, origins.url(value))
            headers.append((name, value))
        return AuthAnswer(exchange.status, headers, origins.body(header(exchange.headers, "content-type"), exchange.body))

    def _registered(self, exchange: AuthExchange, target: str, origins: OriginMap, live: dict[str, Any]) -> AuthAnswer:
        """A registration answered to the live client: the recorded client_id (and secret), with the
        live client's metadata registered, as the server registers any client's (adapted when it
        differs from the recorded client's)."""
        answer = self._replayed(exchange, target, origins)
        recorded = body_fields(header(exchange.request_headers, "content-type"), exchange.request_body) or {}
        if differing := differing_fields(recorded, live, _NOT_COMPARED):
            self.adapted.append(f"{exchange.method} {exchange.path}: registered the live client's metadata, which differs "
                                f"from the recorded client's in {', '.join(differing)}, under the recorded client_id")
        document = json_document(answer.body)
        assert isinstance(document, dict)  # a registration's answer is a JSON object
        if 200 <= exchange.status < 300 and isinstance(uris := live.get("redirect_uris"), list):
            self._redirect_uris = uris
        return replace(answer, body=encode_document(registered(document, live)))

    def _redirect(self, exchange: AuthExchange, target: str, location: str) -> str:
        """The /authorize redirect to the live redirect URI (its own query kept, RFC 6749 3.1.2),
        with the live state, noting the live PKCE challenge for the code it hands out."""
        recorded, live = query_fields(exchange.target), query_fields(target)
        recorded_uri, live_uri = _one(recorded.get("redirect_uri")), _one(live.get("redirect_uri"))
        parts = urlsplit(location)
        pairs = parse_qsl(parts.query, keep_blank_values=True)
        to_client = recorded_uri is not None and live_uri is not None and _without_query(location) == _without_query(recorded_uri)
        if to_client:  # what the server added to the recorded redirect URI, put on the live one's
            assert live_uri is not None and recorded_uri is not None
            parts = urlsplit(live_uri)
            pairs = _added(pairs, parse_qsl(urlsplit(recorded_uri).query, keep_blank_values=True))
        fresh = {name: live.get(name) for name in FRESH_FIELDS if isinstance(recorded.get(name), str)}
        moved = [(name, fresh[name] if name in fresh and value == recorded[name] and isinstance(fresh[name], str) else value)
                 for name, value in pairs]
        if to_client:  # the server gives the client back its state if, and only if, it sent one (RFC 6749 4.1.2)
            state = _one(live.get("state"))
            stateless = [(name, value) for name, value in moved if name != "state"]
            moved = stateless if state is None else moved if ("state", state) in moved else [*stateless, ("state", state)]
        code = dict(moved).get("code")
        if code is not None:
            self._issued[code] = _Issued(_one(live.get("code_challenge")), _one(live.get("code_challenge_method")),
                                         _one(live.get("redirect_uri")))
            self._traded.discard(code)
        if not to_client:
            return urlunsplit(parts._replace(query=urlencode(moved))) if moved != pairs else location
        query = "&".join(filter(None, [parts.query, urlencode(moved)]))
        return urlunsplit(parts._replace(query=query))


def _added(pairs: list[tuple[str, str]], own: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """`pairs` less those of `own`, each taken out once."""
    left = list(own)
    added = []
    for pair in pairs:
        if pair in left:
            left.remove(pair)
        else:
            added.append(pair)
    return added


def _rotates(fields: dict[str, Any], exchange: AuthExchange) -> bool:
    """Whether a refresh grant's recorded answer issued a new refresh token in place of the one
    used (RFC 6749 10.4, rotation): the one used is then spent."""
    used = fields.get("refresh_token")
    if fields.get("grant_type") != "refresh_token" or not isinstance(used, str):
        return False
    answer = json_document(exchange.body)
    issued = answer.get("refresh_token") if isinstance(answer, dict) else None
    return isinstance(issued, str) and issued != used


def _traded_code(fields: dict[str, Any]) -> Any:
    """The authorization code a /token request's fields trade (None for another grant)."""
    return fields.get("code") if fields.get("grant_type") == "authorization_code" else None


def _without_query(url: str) -> str:
    return url.split("#", 1)[0].split("?", 1)[0]


def _one(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _moved(fields: dict[str, Any], origins: OriginMap) -> dict[str, Any]:
    """Recorded field values with the recorded origin moved to the live one (`resource=`)."""
    return {name: origins.text(value) if isinstance(value, str) else value for name, value in fields.items()}


def _metadata_problem(metadata: dict[str, Any], content_type: str | None) -> str | None:
    """What a server refuses in a live client's registration (RFC 7591 2, 3.1): metadata that is no
    JSON object, redirect URIs that are not a list of strings, a number JSON has no form for."""
    if not is_json(content_type):
        return "client metadata are sent as a JSON object (RFC 7591 3.1)"
    if not _finite(metadata):
        return "the client metadata hold a number JSON has no form for (NaN, Infinity)"
    uris = metadata.get("redirect_uris")
    if uris is not None and not (isinstance(uris, list) and all(isinstance(uri, str) for uri in uris)):
        return "redirect_uris is not a list of URI strings"
    return None


def _finite(value: Any) -> bool:
    """Whether every number in a JSON value (no deeper than json_document reads) is finite."""
    if isinstance(value, float):
        return math.isfinite(value)
    members = value.values() if isinstance(value, dict) else value if isinstance(value, list) else ()
    return all(_finite(member) for member in members)


def _oauth_error(status: int, error: str, description: str) -> AuthAnswer:
    """An OAuth error response (RFC 6749 5.2)."""
    body = encode({"error": error, "error_description": description})
    return AuthAnswer(status, [("content-type", "application/json")], body)
