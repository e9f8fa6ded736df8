"""tapes.replay.oauth: a recorded authorization flow (framed as the HTTP recorder frames it,
secrets redacted) taken out of the MCP frames and served to a live client."""

from __future__ import annotations

import base64
import hashlib
import json
from dataclasses import replace
from urllib.parse import parse_qs, parse_qsl, quote, urlencode, urlsplit

import pytest

from tapes.cassette.frames import Frame, Kind
from tapes.cassette.http_framer import CLOSED, HttpFramer
from tapes.cassette.redact import RedactionRules, Redactor
from tapes.replay.oauth import AuthFlow
from tapes.wire.oauth import PLACEHOLDER_SECRET

RECORDED = "http://127.0.0.1:4000"  # the recorder's origin, as the recorded client saw it
LIVE = "http://127.0.0.1:5000"
JSON = [("Content-Type", "application/json")]
FORM = [("Content-Type", "application/x-www-form-urlencoded")]
CALLBACK = "http://127.0.0.1:9/callback"
VERIFIER = "recorded-verifier-0123456789012345678901234567"


def _challenge(verifier: str) -> str:
    return base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()


INITIALIZE = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}}).encode()


class _Tape:
    """Exchanges framed as the HTTP recorder frames them, each sent to the Host of its origin."""

    def __init__(self) -> None:
        self._framer = HttpFramer(Redactor(RedactionRules.default()))
        self._numbers = iter(range(1, 100))
        self.frames: list[Frame] = []

    def exchange(self, origin: str, method: str, path: str, headers: list[tuple[str, str]], body: bytes, status: int,
                 response_headers: list[tuple[str, str]], response_body: bytes) -> None:
        number = next(self._numbers)
        host = [("Host", urlsplit(origin).netloc)]
        self.frames.extend(self._framer.request(0.0, number, method, path, [*host, *headers], body))
        self.frames.extend(self._framer.response(0.0, number, status, response_headers, response_body))
        self.frames.extend(self._framer.end(0.0, number, CLOSED))


def _recording(server: str = RECORDED, issuer: str = RECORDED, callback: str = CALLBACK, expires_after: int = 0,
               refresh: bool = False) -> list[Frame]:
    """A login to the MCP server at `server` whose authorization server is `issuer`: one origin
    (a reverse proxy's recording), or two, as a forward proxy records them (its metadata then too).
    `expires_after`: that many more requests with the token are taken, then it is refused.
    `refresh`: the client refreshes its token, and the server rotates the refresh token."""
    tape = _Tape()
    refusal = [("WWW-Authenticate", f'Bearer resource_metadata="{server}/.well-known/oauth-protected-resource/mcp"'), *JSON]
    tape.exchange(server, "POST", "/mcp", JSON, INITIALIZE, 401, refusal, b'{"error":"invalid_token"}')
    tape.exchange(server, "GET", "/.well-known/oauth-protected-resource/mcp", [], b"", 200, JSON,
                  json.dumps({"resource": f"{server}/mcp", "authorization_servers": [issuer]}).encode())
    if issuer != server:
        tape.exchange(issuer, "GET", "/.well-known/oauth-authorization-server", [], b"", 200, JSON,
                      json.dumps({"issuer": issuer, "token_endpoint": f"{issuer}/token"}).encode())
    tape.exchange(issuer, "POST", "/register", JSON, json.dumps({"redirect_uris": [callback]}).encode(), 201, JSON,
                  json.dumps({"client_id": "c1", "client_secret": "SECRET", "redirect_uris": [callback]}).encode())
    query = urlencode({"response_type": "code", "client_id": "c1", "redirect_uri": callback, "state": "recorded-state",
                       "code_challenge": _challenge(VERIFIER), "code_challenge_method": "S256",
                       "resource": f"{server}/mcp"})
    tape.exchange(issuer, "GET", f"/authorize?{query}", [], b"", 302,
                  [("Location", f"{callback}{'&' if '?' in callback else '?'}code=CODE&state=recorded-state")], b"")
    token_form = urlencode({"grant_type": "authorization_code", "code": "CODE", "redirect_uri": callback,
                            "client_id": "c1", "client_secret": "SECRET", "code_verifier": VERIFIER,
                            "resource": f"{server}/mcp"}).encode()
    tape.exchange(issuer, "POST", "/token", FORM, token_form, 200, JSON,
                  json.dumps({"access_token": "TOKEN", "token_type": "Bearer", **({"refresh_token": "R1"} if refresh else {})}).encode())
    if refresh:
        tape.exchange(issuer, "POST", "/token", FORM, urlencode({"grant_type": "refresh_token", "refresh_token": "R1",
                                                                 "client_id": "c1", "client_secret": "SECRET"}).encode(),
                      200, JSON, json.dumps({"access_token": "TOKEN2", "token_type": "Bearer", "refresh_token": "R2"}).encode())
    answer = json.dumps({"jsonrpc": "2.0", "id": 1, "result": {"protocolVersion": "2025-11-25"}}).encode()
    tape.exchange(server, "POST", "/mcp", [("Authorization", "Bearer TOKEN"), *JSON], INITIALIZE, 200,
                  [*JSON, ("Mcp-Session-Id", "s1")], answer)
    if expires_after:
        ping = json.dumps({"jsonrpc": "2.0", "id": 2, "method": "ping"}).encode()
        for _ in range(expires_after):
            tape.exchange(server, "POST", "/mcp", [("Authorization", "Bearer TOKEN"), *JSON], ping, 200, JSON,
                          b'{"jsonrpc":"2.0","id":2,"result":{}}')
        tape.exchange(server, "POST", "/mcp", [("Authorization", "Bearer TOKEN"), *JSON], ping, 401,
                      [("WWW-Authenticate", 'Bearer error="invalid_token"'), *JSON], b'{"error":"invalid_token"}')
    return tape.frames


def _flow() -> tuple[AuthFlow, list[Frame]]:
    return AuthFlow.split(_recording(), RECORDED)


def _form(fields: dict[str, str]) -> tuple[list[tuple[str, str]], bytes]:
    return FORM, urlencode(fields).encode()


def test_the_flow_is_taken_out_of_the_mcp_frames() -> None:
    flow, rest = _flow()
    assert [(e.method, e.path, e.status) for e in flow.exchanges] == [
        ("POST", "/mcp", 401), ("GET", "/.well-known/oauth-protected-resource/mcp", 200), ("POST", "/register", 201),
        ("GET", "/authorize", 302), ("POST", "/token", 200)]
    assert {f.channel for f in rest} == {"http:6"}
    assert b"TOKEN" not in b"".join(e.body + e.request_body for e in flow.exchanges)


def test_an_mcp_request_is_refused_by_its_token() -> None:
    flow, _ = _flow()
    body = json.dumps({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {}}).encode()
    refused = flow.answer("POST", "/mcp", JSON, body, LIVE)
    assert refused is not None and refused.status == 401
    assert dict(refused.headers)["WWW-Authenticate"] == f'Bearer resource_metadata="{LIVE}/.well-known/oauth-protected-resource/mcp"'
    token = json.loads(flow.answer("POST", *_token_request(flow)).body)["access_token"]  # type: ignore[union-attr]
    assert flow.answer("POST", "/mcp", [("Authorization", f"Bearer {token}"), *JSON], body, LIVE) is None
    # the server refused the missing token, whatever the method: another client's first request too
    other = json.dumps({"jsonrpc": "2.0", "id": 0, "method": "server/discover"}).encode()
    assert flow.answer("POST", "/mcp", JSON, other, LIVE).status == 401  # type: ignore[union-attr]


def test_a_token_the_recording_saw_expire_is_refused_only_once_it_was_used_as_often() -> None:
    """The server took the token for the initialize and two pings, then refused it (it expired): a
    live client's token works as often, and only then is refused."""
    flow, _ = AuthFlow.split(_recording(expires_after=2), RECORDED)
    token = json.loads(flow.answer("POST", *_token_request(flow)).body)["access_token"]  # type: ignore[union-attr]
    ping = json.dumps({"jsonrpc": "2.0", "id": 5, "method": "ping"}).encode()
    answers = [flow.answer("POST", "/mcp", [("Authorization", f"Bearer {token}"), *JSON], ping, LIVE) for _ in range(4)]
    assert [answer if answer is None else answer.status for answer in answers] == [None, None, None, 401]


def _token_request(flow: AuthFlow, prefix: str = "", **changes: str) -> tuple[str, list[tuple[str, str]], bytes, str]:
    """Authorize at the live `prefix` (where the replay shows the authorization server), and the
    /token request that trades the code handed out."""
    live_verifier = "a-live-verifier-that-is-long-enough-000000000000"
    query = urlencode({"response_type": "code", "client_id": "c1", "redirect_uri": CALLBACK, "state": "live-state",
                       "code_challenge": _challenge(live_verifier), "code_challenge_method": "S256",
                       "resource": f"{LIVE}/mcp"})
    redirect = flow.answer("GET", f"{prefix}/authorize?{query}", [], b"", LIVE)
    assert redirect is not None
    code = parse_qs(urlsplit(dict(redirect.headers)["Location"]).query)["code"][0]
    headers, body = _form({"grant_type": "authorization_code", "code": code, "redirect_uri": CALLBACK, "client_id": "c1",
                           "client_secret": "<redacted:1>", "code_verifier": live_verifier, "resource": f"{LIVE}/mcp"} | changes)
    return f"{prefix}/token", headers, body, LIVE


def test_documents_name_the_live_origin() -> None:
    flow, _ = _flow()
    document = flow.answer("GET", "/.well-known/oauth-protected-resource/mcp", [], b"", LIVE)
    assert document is not None and json.loads(document.body) == {"resource": f"{LIVE}/mcp", "authorization_servers": [LIVE]}


def test_authorize_redirects_with_the_live_state_and_redirect_uri() -> None:
    flow, _ = _flow()
    query = urlencode({"response_type": "code", "client_id": "c1", "redirect_uri": "http://127.0.0.1:7777/cb",
                       "state": "live-state", "code_challenge": "x", "code_challenge_method": "S256",
                       "resource": f"{LIVE}/mcp"})
    redirect = flow.answer("GET", f"/authorize?{query}", [], b"", LIVE)
    assert redirect is not None and redirect.status == 302
    location = urlsplit(dict(redirect.headers)["Location"])
    assert (location.netloc, location.path) == ("127.0.0.1:7777", "/cb")
    assert parse_qs(location.query) == {"code": ["<redacted:2>"], "state": ["live-state"]}


def test_token_matches_with_fresh_fields_aside_and_checks_pkce() -> None:
    flow, _ = _flow()
    issued = flow.answer("POST", *_token_request(flow))
    assert issued is not None and issued.status == 200
    assert json.loads(issued.body) == {"access_token": "<redacted:4>", "token_type": "Bearer"}  # 3: the recorded verifier

    wrong_code = flow.answer("POST", *_token_request(flow, code="<redacted:9>"))
    assert wrong_code is not None and wrong_code.status == 400
    assert "differs in code" in json.loads(wrong_code.body)["error_description"]

    wrong_verifier = flow.answer("POST", *_token_request(flow, code_verifier="not-it"))
    assert wrong_verifier is not None and json.loads(wrong_verifier.body)["error"] == "invalid_grant"
    odd = flow.answer("POST", *_token_request(flow, code_verifier="é" * 43))  # a lone surrogate among them was a 500
    assert odd is not None and odd.status == 400
    assert "characters RFC 7636 does not allow" in json.loads(odd.body)["error_description"]

    assert not flow.clean
    assert flow.report_lines()[0] == "authorization flow: served 2 of 5 recorded exchanges, 3 unmatched"


def test_a_client_that_asks_for_another_scope_or_names_no_resource_is_answered_as_the_recorded_one() -> None:
    """The recorded client sent `resource` and no `scope`; another (an SDK that reads the scopes
    from the metadata, or one that does not send RFC 8707's optional resource) is answered as it
    was, reported as adapted. PKCE still holds, and any other difference is still a miss."""
    flow, _ = _flow()
    live_verifier = "another-live-verifier-long-enough-00000000000000"
    query = urlencode({"response_type": "code", "client_id": "c1", "redirect_uri": CALLBACK, "state": "s",
                       "code_challenge": _challenge(live_verifier), "code_challenge_method": "S256", "scope": "mcp:tools"})
    redirect = flow.answer("GET", f"/authorize?{query}", [], b"", LIVE)
    assert redirect is not None and redirect.status == 302
    code = parse_qs(urlsplit(dict(redirect.headers)["Location"]).query)["code"][0]
    form = {"grant_type": "authorization_code", "code": code, "redirect_uri": CALLBACK, "client_id": "c1",
            "client_secret": "<redacted:1>"}
    refused = flow.answer("POST", "/token", *_form(form | {"code_verifier": "not-it"}), LIVE)
    assert refused is not None and json.loads(refused.body)["error"] == "invalid_grant"
    issued = flow.answer("POST", "/token", *_form(form | {"code_verifier": live_verifier}), LIVE)
    assert issued is not None and issued.status == 200
    assert flow.adapted == [
        "GET /authorize: the live client asks with another resource and scope; answered as the recorded client was",
        "POST /token: the live client asks with another resource; answered as the recorded client was",
    ]
    other_client = urlencode({"response_type": "code", "client_id": "c2", "redirect_uri": CALLBACK, "scope": "mcp:tools"})
    missed = flow.answer("GET", f"/authorize?{other_client}", [], b"", LIVE)
    assert missed is not None and missed.status == 400
    assert "differs in client_id, code_challenge_method, resource, scope" in json.loads(missed.body)["error_description"]
    assert len(flow.misses) == 2  # the wrong verifier, the other client


def test_another_client_is_registered_under_the_recorded_client_id() -> None:
    """A real server registers any client's metadata: a live client unlike the recorded one gets
    the recorded client_id and secret, its own metadata registered (adapted, no miss)."""
    flow, _ = _flow()
    metadata = {"redirect_uris": ["http://localhost:7/cb"], "client_name": "another client", "token_endpoint_auth_method": "client_secret_basic"}
    answer = flow.answer("POST", "/register", JSON, json.dumps(metadata).encode(), LIVE)
    assert answer is not None and answer.status == 201
    assert json.loads(answer.body) == {"client_id": "c1", "client_secret": "<redacted:1>", **metadata}
    assert flow.clean and flow.adapted == ["POST /register: registered the live client's metadata, which differs from the "
                                           "recorded client's in client_name, token_endpoint_auth_method, under the recorded client_id"]
    # the same client as recorded is registered as recorded, nothing adapted
    again, _ = _flow()
    recorded = next(e for e in again.exchanges if e.path == "/register")
    same = again.answer("POST", "/register", JSON, recorded.request_body, LIVE)
    assert same is not None and same.body == recorded.body and again.adapted == []


def test_a_client_with_a_secret_registered_where_a_public_one_was_recorded_is_issued_one() -> None:
    """The recorded client was public (the TypeScript SDK's, the Inspector's: no secret issued);
    a client that authenticates with a secret is issued one, as the server would (the Python SDK
    refuses a registration for client_secret_post without it), and /token takes it."""
    flow, _ = _flow()
    register = next(i for i, e in enumerate(flow.exchanges) if e.path == "/register")
    public = json.dumps({"client_id": "c1", "redirect_uris": [CALLBACK], "token_endpoint_auth_method": "none"}).encode()
    flow.exchanges[register] = replace(flow.exchanges[register], body=public)
    metadata = {"redirect_uris": [CALLBACK], "token_endpoint_auth_method": "client_secret_post"}
    answer = json.loads(flow.answer("POST", "/register", JSON, json.dumps(metadata).encode(), LIVE).body)  # type: ignore[union-attr]
    assert answer == {"client_id": "c1", **metadata, "client_secret": PLACEHOLDER_SECRET, "client_secret_expires_at": 0}
    token = flow.answer("POST", *_token_request(flow, client_secret=PLACEHOLDER_SECRET))
    assert token is not None and token.status == 200
    # a public client stays public
    again, _ = _flow()
    again.exchanges[register] = replace(again.exchanges[register], body=public)
    answer = json.loads(again.answer("POST", "/register", JSON, json.dumps({"redirect_uris": [CALLBACK], "token_endpoint_auth_method": "none"}).encode(), LIVE).body)  # type: ignore[union-attr]
    assert "client_secret" not in answer


def test_a_client_that_authenticates_with_a_basic_header_makes_the_recorded_form_request() -> None:
    """The recorded client sent its id and secret in the /token form; a live one registered for
    client_secret_basic sends them in an Authorization header (form-encoded, then base64)."""
    flow, _ = _flow()
    path, headers, body, live = _token_request(flow)
    fields = dict(parse_qsl(body.decode()))
    del fields["client_id"], fields["client_secret"]
    basic = base64.b64encode(b"c1:%3Credacted%3A1%3E").decode()
    issued = flow.answer("POST", path, [*headers, ("Authorization", f"Basic {basic}")], urlencode(fields).encode(), live)
    assert issued is not None and issued.status == 200 and flow.clean
    other, _ = _flow()
    path, headers, body, live = _token_request(other)
    someone_else = base64.b64encode(b"c2:secret").decode()
    refused = other.answer("POST", path, [*headers, ("Authorization", f"Basic {someone_else}")], urlencode(fields).encode(), live)
    assert refused is not None and refused.status == 400 and "differs in client_id" in json.loads(refused.body)["error_description"]


@pytest.mark.parametrize(("state", "expected"), [("live-state", {"state": ["live-state"]}), (None, {})])
def test_the_redirect_gives_the_client_back_its_state_only_if_it_sent_one(state: str | None, expected: dict) -> None:
    flow, _ = _flow()
    fields = {"response_type": "code", "client_id": "c1", "redirect_uri": CALLBACK, "code_challenge": "x",
              "code_challenge_method": "S256", "resource": f"{LIVE}/mcp"} | ({"state": state} if state else {})
    redirect = flow.answer("GET", f"/authorize?{urlencode(fields)}", [], b"", LIVE)
    assert redirect is not None
    assert parse_qs(urlsplit(dict(redirect.headers)["Location"]).query) == {"code": ["<redacted:2>"], **expected}


def test_a_request_the_flow_does_not_know_is_left_to_the_mcp_replay() -> None:
    flow, _ = _flow()
    assert flow.served_as(LIVE) is None  # a reverse proxy's recording was moved when it was made
    assert flow.answer("GET", "/elsewhere", [], b"", LIVE) is None
    assert not flow.claims("DELETE", "/mcp") and flow.claims("POST", "/token")


# --- a forward proxy's recording: the real origins, named by each exchange's Host ----------------

SERVER, ISSUER = "https://mcp.example", "https://auth.example"


def test_a_forward_proxy_recording_is_routed_as_the_reverse_proxy_would_have() -> None:
    """The origin JSON-RPC was spoken to is the MCP server's (its scheme as the recording names
    it); the authorization server's is shown under /tapes-as/1, its RFC 8414 well-known path too."""
    flow, rest = AuthFlow.split(_recording(SERVER, ISSUER))
    assert (flow.recorded_origin, flow.servers, flow.mcp_origins) == (SERVER, [ISSUER], [SERVER])
    assert flow.served_as(LIVE) == f"{SERVER} -> {LIVE}; {ISSUER} -> {LIVE}/tapes-as/1"
    assert {f.channel for f in rest} == {"http:7"} and len(flow.exchanges) == 6
    refused = flow.answer("POST", "/mcp", JSON, INITIALIZE, LIVE)
    assert refused is not None and refused.status == 401 and LIVE in dict(refused.headers)["WWW-Authenticate"]
    document = flow.answer("GET", "/.well-known/oauth-protected-resource/mcp", [], b"", LIVE)
    assert document is not None
    assert json.loads(document.body) == {"resource": f"{LIVE}/mcp", "authorization_servers": [f"{LIVE}/tapes-as/1"]}
    metadata = flow.answer("GET", "/.well-known/oauth-authorization-server/tapes-as/1", [], b"", LIVE)
    assert metadata is not None
    assert json.loads(metadata.body) == {"issuer": f"{LIVE}/tapes-as/1", "token_endpoint": f"{LIVE}/tapes-as/1/token"}
    # the MCP server's origin never served the authorization server's paths
    assert not flow.claims("POST", "/register") and not flow.claims("GET", "/.well-known/oauth-authorization-server")
    assert flow.claims("POST", "/tapes-as/1/register")
    issued = flow.answer("POST", *_token_request(flow, prefix="/tapes-as/1"))
    assert issued is not None and issued.status == 200, issued
    assert json.loads(issued.body)["access_token"].startswith("<redacted:") and flow.clean


def test_a_forward_proxy_recording_of_one_origin_is_served_at_the_replayer() -> None:
    flow, _ = AuthFlow.split(_recording("http://127.0.0.1:4100", "http://127.0.0.1:4100"))
    assert (flow.recorded_origin, flow.servers) == ("http://127.0.0.1:4100", [])
    document = flow.answer("GET", "/.well-known/oauth-protected-resource/mcp", [], b"", LIVE)
    assert document is not None and json.loads(document.body)["authorization_servers"] == [LIVE]
    issued = flow.answer("POST", *_token_request(flow))
    assert issued is not None and issued.status == 200 and flow.clean


def test_the_server_under_its_name_in_another_case_is_one_origin() -> None:
    """A Host comes as the client wrote it: `LOCALHOST:4100` is the server at `localhost:4100`."""
    flow, _ = AuthFlow.split(_recording("http://localhost:4100", "http://LOCALHOST:4100"))
    assert (flow.recorded_origin, flow.servers) == ("http://localhost:4100", [])
    issued = flow.answer("POST", *_token_request(flow))
    assert issued is not None and issued.status == 200 and flow.clean


def test_json_rpc_spoken_to_several_origins_names_them_all() -> None:
    """A forward proxy saw two MCP servers: the replayer refuses to guess which one to serve."""
    frames = _recording(SERVER, ISSUER)
    other = _Tape()
    other.exchange("http://other.example", "POST", "/mcp", JSON, INITIALIZE, 200, JSON, b'{"jsonrpc":"2.0","id":1,"result":{}}')
    flow, _ = AuthFlow.split(frames + [replace(f, channel="http:99") for f in other.frames])
    assert flow.mcp_origins == [SERVER, "http://other.example"]


def test_a_host_that_makes_no_origin_is_no_origin() -> None:
    """A Host header comes from the wire ("[", a port past 65535): lint and replay read such a recording."""
    framer, frames = HttpFramer(Redactor(RedactionRules.default())), []
    for number, host in enumerate(("[", "x:99999"), 1):
        frames += framer.request(0.0, number, "POST", "/mcp", [("Host", host), *JSON], INITIALIZE)
        frames += framer.response(0.0, number, 200, JSON, b'{"jsonrpc":"2.0","id":1,"result":{}}')
        frames += framer.end(0.0, number, CLOSED)
    flow, rest = AuthFlow.split(frames)
    assert (flow.mcp_origins, rest) == ([], frames)


def _unauthorized_session(*headers: tuple[str, str]) -> list[Frame]:
    tape = _Tape()
    tape.exchange(RECORDED, "POST", "/mcp", [*JSON, *headers], INITIALIZE, 200, JSON, b'{"jsonrpc":"2.0","id":1,"result":{}}')
    return tape.frames


@pytest.mark.parametrize("path", ["/.well-known/oauth-protected-resource/mcp", "/.well-known/oauth-protected-resource",
                                  "/.well-known/oauth-authorization-server", "/.well-known/openid-configuration/mcp",
                                  "/mcp/.well-known/openid-configuration"])
def test_a_server_that_asked_for_no_authorization_has_no_oauth_metadata(path: str) -> None:
    """mcp-remote looks for OAuth metadata before it connects, whatever the server: a recording
    without a flow, whose client presented no token, is of a server that answers that with 404."""
    flow, _ = AuthFlow.split(_unauthorized_session())
    assert flow.unprotected_discovery("GET", path) == (
        f"GET {path}: answered 404, as the recorded server would: it asked for no authorization and its client presented none")
    # the recorded client looked for some of it too, and got 404: the replay serves that one as recorded
    probed = _Tape()
    probed.exchange(RECORDED, "GET", "/.well-known/oauth-authorization-server", [], b"", 404, JSON, b"{}")
    flow, _ = AuthFlow.split(_unauthorized_session() + [replace(f, channel="http:99") for f in probed.frames])
    assert flow and flow.unprotected_discovery("GET", path) is not None


def test_oauth_metadata_the_recording_lacks_is_unmatched_where_the_server_may_have_had_some() -> None:
    """A flow, or a client that came with a token of its own: the server speaks OAuth, the replay cannot say what it had."""
    for frames in (_recording(), _unauthorized_session(("Authorization", "Bearer t"))):
        flow, _ = AuthFlow.split(frames)
        assert flow.unprotected_discovery("GET", "/.well-known/openid-configuration") is None
    flow, _ = AuthFlow.split(_unauthorized_session())
    assert flow.unprotected_discovery("POST", "/.well-known/oauth-authorization-server") is None
    assert flow.unprotected_discovery("GET", "/.well-known/other") is None
    assert flow.unprotected_discovery("GET", "/mcp") is None



@pytest.mark.parametrize(("recorded_uri", "live_uri", "expected"), [
    (f"{CALLBACK}?app=1", "http://127.0.0.1:7777/cb?tab=2&tab=3", "http://127.0.0.1:7777/cb?tab=2&tab=3&code=CODE&state=live-state"),
    (CALLBACK, "http://127.0.0.1:7777/cb?tab=2", "http://127.0.0.1:7777/cb?tab=2&code=CODE&state=live-state"),
    (f"{CALLBACK}?app=1", "http://127.0.0.1:7777/cb", "http://127.0.0.1:7777/cb?code=CODE&state=live-state"),
    (CALLBACK, "http://127.0.0.1:7777/cb#top", "http://127.0.0.1:7777/cb?code=CODE&state=live-state#top"),
])
def test_the_redirect_keeps_the_live_redirect_uris_own_query(recorded_uri: str, live_uri: str, expected: str) -> None:
    flow, _ = AuthFlow.split(_recording(callback=recorded_uri), RECORDED)
    fields = {"response_type": "code", "client_id": "c1", "redirect_uri": live_uri, "state": "live-state",
              "code_challenge": "x", "code_challenge_method": "S256", "resource": f"{LIVE}/mcp"}
    redirect = flow.answer("GET", f"/authorize?{urlencode(fields)}", [], b"", LIVE)
    assert redirect is not None
    assert dict(redirect.headers)["Location"].replace(quote("<redacted:2>"), "CODE") == expected


def test_a_code_is_traded_once_until_authorize_hands_it_out_again() -> None:
    flow, _ = _flow()
    request = _token_request(flow)
    assert flow.answer("POST", *request).status == 200  # type: ignore[union-attr]
    again = flow.answer("POST", *request)
    assert again is not None and again.status == 400 and json.loads(again.body)["error"] == "invalid_grant"
    assert flow.answer("POST", *_token_request(flow)).status == 200  # type: ignore[union-attr]


def test_a_code_is_traded_with_the_redirect_uri_its_authorization_request_named() -> None:
    """RFC 6749 4.1.3: the /token request names the redirect_uri the /authorize request did, as
    the real server checks; and a code /authorize never handed out is none."""
    flow, _ = _flow()
    path, headers, body, live = _token_request(flow, redirect_uri="http://127.0.0.1:9/elsewhere")
    other = flow.answer("POST", path, headers, body, live)
    assert other is not None and other.status == 400 and "redirect_uri is not the one" in json.loads(other.body)["error_description"]
    path, headers, body, live = _token_request(flow)
    fields = [(name, value) for name, value in parse_qsl(body.decode()) if name != "redirect_uri"]
    missing = flow.answer("POST", path, headers, urlencode(fields).encode(), live)
    assert missing is not None and missing.status == 400
    assert flow.answer("POST", path, headers, body, live).status == 200  # type: ignore[union-attr]
    fresh, _ = _flow()  # no /authorize yet: the recorded code, guessed from the cassette, is no code
    recorded = next(e for e in fresh.exchanges if e.path == "/token")
    guessed = fresh.answer("POST", "/token", FORM, recorded.request_body, LIVE)
    assert guessed is not None and "not handed out by /authorize" in json.loads(guessed.body)["error_description"]


def test_a_refresh_token_the_server_rotated_is_not_taken_again() -> None:
    flow, _ = AuthFlow.split(_recording(refresh=True), RECORDED)
    tokens = json.loads(flow.answer("POST", *_token_request(flow)).body)  # type: ignore[union-attr]
    refresh = urlencode({"grant_type": "refresh_token", "refresh_token": tokens["refresh_token"], "client_id": "c1",
                         "client_secret": "<redacted:1>"}).encode()
    renewed = flow.answer("POST", "/token", FORM, refresh, LIVE)
    assert renewed is not None and renewed.status == 200 and json.loads(renewed.body)["refresh_token"] != tokens["refresh_token"]
    again = flow.answer("POST", "/token", FORM, refresh, LIVE)
    assert again is not None and again.status == 400 and "used already" in json.loads(again.body)["error_description"]


def test_authorize_does_not_redirect_to_a_uri_the_live_client_did_not_register() -> None:
    flow, _ = _flow()
    registered = {"redirect_uris": ["http://127.0.0.1:7777/cb"]}
    assert flow.answer("POST", "/register", JSON, json.dumps(registered).encode(), LIVE).status == 201  # type: ignore[union-attr]
    fields = {"response_type": "code", "client_id": "c1", "state": "s", "code_challenge": "x",
              "code_challenge_method": "S256", "resource": f"{LIVE}/mcp"}
    elsewhere = flow.answer("GET", f"/authorize?{urlencode(fields | {'redirect_uri': 'http://evil.example/cb'})}", [], b"", LIVE)
    assert elsewhere is not None and elsewhere.status == 400 and "Location" not in dict(elsewhere.headers)
    assert "not among those the client registered" in json.loads(elsewhere.body)["error_description"]
    assert not flow.clean
    there = flow.answer("GET", f"/authorize?{urlencode(fields | {'redirect_uri': 'http://127.0.0.1:7777/cb'})}", [], b"", LIVE)
    assert there is not None and there.status == 302


@pytest.mark.parametrize(("content_type", "body", "problem"), [
    (JSON, b'{"redirect_uris": NaN}', "NaN"),
    (JSON, b'{"redirect_uris": ["http://localhost:7/cb"], "client_name": 1e400}', "NaN, Infinity"),
    (JSON, b'{"redirect_uris": "http://localhost:7/cb"}', "redirect_uris is not a list"),
    (JSON, b'{"redirect_uris": [1, {}]}', "redirect_uris is not a list"),
    (FORM, b"redirect_uris=http%3A%2F%2Flocalhost%3A7%2Fcb", "JSON object"),
])
def test_a_registration_a_server_refuses_is_refused(content_type: list[tuple[str, str]], body: bytes, problem: str) -> None:
    """RFC 7591: client metadata are a JSON object, redirect_uris a list of strings; NaN is no JSON
    (it used to be registered, and echoed back as NaN)."""
    flow, _ = _flow()
    answer = flow.answer("POST", "/register", content_type, body, LIVE)
    assert answer is not None and answer.status == 400
    document = json.loads(answer.body, parse_constant=pytest.fail)  # strict JSON: NaN is none
    assert document["error"] == "invalid_client_metadata" and problem in document["error_description"]
