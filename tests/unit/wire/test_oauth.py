"""tapes.wire.oauth: secret fields redacted in forms, JSON documents, redirects and bearer headers;
fields compared with fresh ones aside; origins moved consistently and only where they are whole."""

from __future__ import annotations

import json
from urllib.parse import parse_qs, urlsplit

import pytest

from tapes.cassette.redact import RedactionRules, Redactor
from tapes.wire.oauth import (
    FORM,
    OriginMap,
    ProxyRoutes,
    body_fields,
    differing_fields,
    is_mcp_answer,
    query_fields,
    redact_body,
    redact_credentials,
    redact_url,
)


def _hide(value: str) -> str:
    return f"<{len(value)}>"


def test_form_secrets_are_hidden_and_the_rest_kept() -> None:
    body = b"grant_type=authorization_code&code=abc&code_verifier=v3r1f13r&client_id=c1&client_secret=s3cr3t"
    redacted = redact_body(FORM, body, _hide)
    assert parse_qs(redacted.decode()) == {"grant_type": ["authorization_code"], "code": ["<3>"],
                                           "code_verifier": ["<8>"], "client_id": ["c1"], "client_secret": ["<6>"]}


def test_json_secrets_are_hidden_at_any_depth() -> None:
    body = json.dumps({"access_token": "AT", "token_type": "Bearer", "nested": [{"id_token": "IDT"}],
                       "registration_access_token": "RAT", "client_id": "c1"}).encode()
    redacted = json.loads(redact_body("application/json; charset=utf-8", body, _hide))
    assert redacted == {"access_token": "<2>", "token_type": "Bearer", "nested": [{"id_token": "<3>"}],
                        "registration_access_token": "<3>", "client_id": "c1"}


def test_a_json_body_nested_deeper_than_any_document_is_kept_byte_for_byte() -> None:
    # redacting walked it recursively: a RecursionError in `tapes redact` for a raw body 6000 levels deep
    body = b"[" * 6000 + b'{"access_token": "AT"}' + b"]" * 6000
    assert redact_body("application/json", body, _hide) == body
    shallow = b"[" * 100 + b'{"access_token": "AT"}' + b"]" * 100
    assert b'"<2>"' in redact_body("application/json", shallow, _hide)


@pytest.mark.parametrize("content_type", ["text/plain", "text/javascript", None])
def test_json_secrets_are_hidden_whatever_the_body_is_labelled(content_type: str | None) -> None:
    body = b' {"access_token":"AT-secret","token_type":"Bearer"}'
    assert json.loads(redact_body(content_type, body, _hide)) == {"access_token": "<9>", "token_type": "Bearer"}


def test_a_form_with_bytes_that_are_not_ascii_still_hides_its_secrets() -> None:
    for name in (b"\xc3\xa9", b"\xff"):  # UTF-8 text as curl -d sends it, and a byte that is no UTF-8
        redacted = redact_body(FORM, b"client_name=" + name + b"&client_secret=s3cr3t", _hide)
        assert b"s3cr3t" not in redacted and redacted.endswith(b"&client_secret=%3C6%3E")


def test_a_token_in_a_redirects_fragment_is_hidden() -> None:
    url = redact_url("http://127.0.0.1:9/cb#access_token=AT-secret&token_type=Bearer&state=xyz", _hide)
    assert urlsplit(url).fragment == "access_token=%3C9%3E&token_type=Bearer&state=xyz"


def test_a_document_with_a_lone_surrogate_is_written_as_its_escape() -> None:
    body = b'{"client_name":"\\ud800","client_secret":"x"}'
    assert redact_body("application/json", body, _hide) == b'{"client_name":"\\ud800","client_secret":"<1>"}'


def test_other_bodies_are_kept_byte_for_byte() -> None:
    assert redact_body("text/plain", b"code=abc", _hide) == b"code=abc"
    assert redact_body(FORM, b"grant_type=client_credentials", _hide) == b"grant_type=client_credentials"


def test_a_redirect_hides_its_code_and_keeps_its_state() -> None:
    url = redact_url("http://127.0.0.1:9/callback?code=abc&state=xyz", _hide)
    assert parse_qs(urlsplit(url).query) == {"code": ["<3>"], "state": ["xyz"]}
    assert redact_url("http://h/cb", _hide) == "http://h/cb"


def test_a_bearer_keeps_its_scheme_other_credentials_are_hidden_whole() -> None:
    assert redact_credentials("Bearer tok", _hide) == "Bearer <3>"
    assert redact_credentials("Basic Zm9vOmJhcg==", _hide) == "<18>"


def test_the_redactor_gives_a_token_one_placeholder_in_bodies_and_headers() -> None:
    redactor = Redactor(RedactionRules.default())
    issued = json.loads(redactor.body("application/json", b'{"access_token":"T1","refresh_token":"R1"}'))
    used = redactor.headers([("Authorization", "Bearer T1"), ("Location", "http://h/cb?code=C1&state=s")])
    assert used[0] == ["Authorization", f"Bearer {issued['access_token']}"]
    assert parse_qs(urlsplit(used[1][1]).query) == {"code": ["<redacted:3>"], "state": ["s"]}
    assert redactor.path("/cb?code=C1") == "/cb?code=<redacted:3>"


def test_no_redaction_keeps_oauth_bodies() -> None:
    redactor = Redactor(RedactionRules.none())
    assert redactor.body("application/json", b'{"access_token":"T1"}') == b'{"access_token":"T1"}'


def test_fields_compare_without_the_fresh_ones() -> None:
    recorded = body_fields(FORM, b"grant_type=authorization_code&code=c&code_verifier=one&state=a")
    live = body_fields(FORM, b"grant_type=authorization_code&code=c&code_verifier=two&state=b")
    assert recorded is not None and live is not None and differing_fields(recorded, live) == []
    assert differing_fields(recorded, live | {"code": "d"}) == ["code"]
    assert query_fields("/authorize?a=1&a=2&b=") == {"a": ["1", "2"], "b": ""}
    assert body_fields("text/plain", b"x") is None


def test_origins_move_in_text_urls_and_forms_and_only_whole() -> None:
    origins = OriginMap.of([("http://127.0.0.1:8000", "http://127.0.0.1:9000")])
    document = '{"resource":"http://127.0.0.1:8000/mcp","other":"http://127.0.0.1:80001/x","far":"http://127.0.0.1:8000.evil"}'
    assert origins.text(document) == document.replace("http://127.0.0.1:8000/mcp", "http://127.0.0.1:9000/mcp")
    moved = origins.url("http://127.0.0.1:8000/cb?iss=http%3A%2F%2F127.0.0.1%3A8000&code=x")
    assert moved.startswith("http://127.0.0.1:9000/cb?") and parse_qs(urlsplit(moved).query)["iss"] == ["http://127.0.0.1:9000"]
    form = origins.reversed().body(FORM, b"resource=http%3A%2F%2F127.0.0.1%3A9000%2Fmcp&code=x")
    assert parse_qs(form.decode())["resource"] == ["http://127.0.0.1:8000/mcp"]


def test_a_default_port_matches_written_or_not_and_json_rpc_is_left_alone() -> None:
    origins = OriginMap.of([("https://auth.example:443", "http://127.0.0.1:9000")])
    assert origins.text('"https://auth.example/token" "https://auth.example:443/x"') == (
        '"http://127.0.0.1:9000/token" "http://127.0.0.1:9000/x"')
    message = b'{"jsonrpc":"2.0","id":1,"result":{"url":"https://auth.example/x"}}'
    assert origins.body("application/json", message) == message
    assert not OriginMap.of([("http://a:1", "http://a:1")])


def test_an_authorization_server_on_another_origin_gets_a_prefix_on_the_proxy() -> None:
    routes = ProxyRoutes("http://127.0.0.1:1/mcp", "http://127.0.0.1:2")
    routes.learn("application/json", b'{"resource":"http://127.0.0.1:1/mcp","authorization_servers":["http://127.0.0.1:3/"]}')
    shown = routes.to_client().text('{"issuer":"http://127.0.0.1:3/","token_endpoint":"http://127.0.0.1:3/token",'
                                    '"resource":"http://127.0.0.1:1/mcp"}')
    assert json.loads(shown) == {"issuer": "http://127.0.0.1:2/tapes-as/1/", "token_endpoint": "http://127.0.0.1:2/tapes-as/1/token",
                                 "resource": "http://127.0.0.1:2/mcp"}
    assert routes.to_upstream().text("http://127.0.0.1:2/tapes-as/1/x http://127.0.0.1:2/mcp") == (
        "http://127.0.0.1:3/x http://127.0.0.1:1/mcp")
    assert routes.route("/tapes-as/1/token?x=1") == ("http://127.0.0.1:3", "/token?x=1")
    assert routes.route("/.well-known/oauth-authorization-server/tapes-as/1") == (
        "http://127.0.0.1:3", "/.well-known/oauth-authorization-server")
    assert routes.route("/.well-known/openid-configuration/tapes-as/1/tenant") == (
        "http://127.0.0.1:3", "/.well-known/openid-configuration/tenant")
    assert routes.route("/tapes-as/12/x") is None and routes.route("/mcp") is None
    assert routes.described() == "http://127.0.0.1:1 -> http://127.0.0.1:2; http://127.0.0.1:3 -> http://127.0.0.1:2/tapes-as/1"


def test_a_loopback_upstream_is_moved_under_each_of_its_names() -> None:
    routes = ProxyRoutes("http://127.0.0.1:1/mcp", "http://127.0.0.1:2")
    routes.learn("application/json", b'{"authorization_servers":["http://localhost:1"]}')
    assert routes.servers == []  # the upstream itself, named otherwise
    assert routes.to_client().text("http://localhost:1/mcp http://[::1]:1/x") == "http://127.0.0.1:2/mcp http://127.0.0.1:2/x"
    assert routes.to_upstream().text("http://127.0.0.1:2/mcp") == "http://localhost:1/mcp"  # as its document wrote it
    assert routes.described() == "http://127.0.0.1:1 -> http://127.0.0.1:2"
    assert ProxyRoutes("https://api.example/mcp", "http://127.0.0.1:2").to_client().pairs == (
        ("https://api.example", "http://127.0.0.1:2"),)
    named_otherwise = ProxyRoutes("http://localhost:1/mcp", "http://127.0.0.1:2")
    named_otherwise.learn("application/json", b'{"resource":"http://127.0.0.1:1/mcp"}')
    assert named_otherwise.to_upstream().text("http://127.0.0.1:2/mcp") == "http://127.0.0.1:1/mcp"  # as the server wrote it


def test_routes_given_their_other_origins_route_as_learned_ones() -> None:
    """What a replay of a forward proxy's recording builds: the other origins it went to, given."""
    routes = ProxyRoutes("http://127.0.0.1:1", "http://127.0.0.1:2", ["http://127.0.0.1:3", "http://localhost:1"])
    routes.add("http://127.0.0.1:3")
    assert routes.servers == ["http://127.0.0.1:3"]  # the upstream by another name, and a repeat, are not added
    assert routes.route("/.well-known/oauth-authorization-server/tapes-as/1?x=1") == (
        "http://127.0.0.1:3", "/.well-known/oauth-authorization-server?x=1")
    assert routes.described() == "http://127.0.0.1:1 -> http://127.0.0.1:2; http://127.0.0.1:3 -> http://127.0.0.1:2/tapes-as/1"


PING = b'{"jsonrpc":"2.0","id":1,"method":"ping"}'


@pytest.mark.parametrize(("method", "request_type", "body", "status", "mcp"), [
    ("POST", "application/json", PING, 200, True),
    ("POST", "Application/JSON; charset=utf-8", PING, 202, True),
    ("POST", "application/json", PING, 401, False),  # a challenge: its headers name origins
    ("POST", "application/json", b'{"redirect_uris":["http://127.0.0.1:1/cb"]}', 201, False),  # registration
    ("POST", FORM, b"grant_type=authorization_code&code=x", 200, False),  # a token request
    ("GET", None, b"", 200, False),  # a document, or an event stream
])
def test_a_success_answer_to_a_json_rpc_post_is_mcps(method: str, request_type: str | None, body: bytes, status: int,
                                                     mcp: bool) -> None:
    assert is_mcp_answer(method, request_type, body, status) is mcp
