"""tapes.replay.oauth: a recorded authorization flow (framed as the HTTP recorder frames it,
secrets redacted) taken out of the MCP frames and served to a live client."""

from __future__ import annotations

import base64
import hashlib
import json
from urllib.parse import parse_qs, urlencode, urlsplit

from tapes.cassette.frames import Frame, Kind
from tapes.cassette.http_framer import CLOSED, HttpFramer
from tapes.cassette.redact import RedactionRules, Redactor
from tapes.replay.oauth import AuthFlow

RECORDED = "http://127.0.0.1:4000"  # the recorder's origin, as the recorded client saw it
LIVE = "http://127.0.0.1:5000"
JSON = [("Content-Type", "application/json")]
FORM = [("Content-Type", "application/x-www-form-urlencoded")]
CALLBACK = "http://127.0.0.1:9/callback"
VERIFIER = "recorded-verifier-0123456789012345678901234567"


def _challenge(verifier: str) -> str:
    return base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()


def _recording() -> list[Frame]:
    framer = HttpFramer(Redactor(RedactionRules.default()))
    frames: list[Frame] = []
    exchanges = iter(range(1, 100))

    def exchange(method: str, path: str, headers: list[tuple[str, str]], body: bytes, status: int,
                 response_headers: list[tuple[str, str]], response_body: bytes) -> None:
        number = next(exchanges)
        frames.extend(framer.request(0.0, number, method, path, [("Host", "127.0.0.1:4000"), *headers], body))
        frames.extend(framer.response(0.0, number, status, response_headers, response_body))
        frames.extend(framer.end(0.0, number, CLOSED))

    initialize = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}}).encode()
    refusal = [("WWW-Authenticate", f'Bearer resource_metadata="{RECORDED}/.well-known/oauth-protected-resource/mcp"'), *JSON]
    exchange("POST", "/mcp", JSON, initialize, 401, refusal, b'{"error":"invalid_token"}')
    exchange("GET", "/.well-known/oauth-protected-resource/mcp", [], b"", 200, JSON,
             json.dumps({"resource": f"{RECORDED}/mcp", "authorization_servers": [RECORDED]}).encode())
    exchange("POST", "/register", JSON, json.dumps({"redirect_uris": [CALLBACK]}).encode(), 201, JSON,
             json.dumps({"client_id": "c1", "client_secret": "SECRET", "redirect_uris": [CALLBACK]}).encode())
    query = urlencode({"response_type": "code", "client_id": "c1", "redirect_uri": CALLBACK, "state": "recorded-state",
                       "code_challenge": _challenge(VERIFIER), "code_challenge_method": "S256",
                       "resource": f"{RECORDED}/mcp"})
    exchange("GET", f"/authorize?{query}", [], b"", 302,
             [("Location", f"{CALLBACK}?code=CODE&state=recorded-state")], b"")
    token_form = urlencode({"grant_type": "authorization_code", "code": "CODE", "redirect_uri": CALLBACK,
                            "client_id": "c1", "client_secret": "SECRET", "code_verifier": VERIFIER,
                            "resource": f"{RECORDED}/mcp"}).encode()
    exchange("POST", "/token", FORM, token_form, 200, JSON,
             json.dumps({"access_token": "TOKEN", "token_type": "Bearer"}).encode())
    answer = json.dumps({"jsonrpc": "2.0", "id": 1, "result": {"protocolVersion": "2025-11-25"}}).encode()
    exchange("POST", "/mcp", [("Authorization", "Bearer TOKEN"), *JSON], initialize, 200,
             [*JSON, ("Mcp-Session-Id", "s1")], answer)
    return frames


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


def _token_request(flow: AuthFlow, **changes: str) -> tuple[str, list[tuple[str, str]], bytes, str]:
    live_verifier = "a-live-verifier-that-is-long-enough-000000000000"
    query = urlencode({"response_type": "code", "client_id": "c1", "redirect_uri": CALLBACK, "state": "live-state",
                       "code_challenge": _challenge(live_verifier), "code_challenge_method": "S256",
                       "resource": f"{LIVE}/mcp"})
    redirect = flow.answer("GET", f"/authorize?{query}", [], b"", LIVE)
    assert redirect is not None
    code = parse_qs(urlsplit(dict(redirect.headers)["Location"]).query)["code"][0]
    headers, body = _form({"grant_type": "authorization_code", "code": code, "redirect_uri": CALLBACK, "client_id": "c1",
                           "client_secret": "<redacted:1>", "code_verifier": live_verifier, "resource": f"{LIVE}/mcp"} | changes)
    return "/token", headers, body, LIVE


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

    assert not flow.clean
    assert flow.report_lines()[0] == "authorization flow: served 2 of 5 recorded exchanges, 2 unmatched"


def test_a_request_the_flow_does_not_know_is_left_to_the_mcp_replay() -> None:
    flow, _ = _flow()
    assert flow.answer("GET", "/elsewhere", [], b"", LIVE) is None
    assert not flow.claims("DELETE", "/mcp") and flow.claims("POST", "/token")
