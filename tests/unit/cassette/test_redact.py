"""tapes.cassette.redact: header and JSON-path redaction with stable placeholders."""

from __future__ import annotations

import pytest

from tapes.cassette.frames import STDIO, Direction, Frame, Kind
from tapes.cassette.redact import VOLATILE, RedactionRuleError, RedactionRules, Redactor


def test_default_rules_redact_credentials_and_keep_protocol_headers() -> None:
    redactor = Redactor(RedactionRules.default())
    headers = redactor.headers(
        [
            ("Authorization", "Bearer X"),
            ("Cookie", "a=1"),
            ("X-Api-Key", "k1"),
            ("x-auth-token", "t1"),
            ("Proxy-Authorization", "Basic Zm9v"),
            ("Mcp-Session-Id", "s1"),
            ("MCP-Protocol-Version", "2025-11-25"),
            ("Last-Event-ID", "e1"),
            ("WWW-Authenticate", 'Bearer realm="mcp"'),
            ("Mcp-Param-Token", "kept? no"),
        ]
    )
    assert headers == [
        ["Authorization", "Bearer <redacted:1>"],  # the scheme is kept, the token hidden
        ["Cookie", "<redacted:2>"],
        ["X-Api-Key", "<redacted:3>"],
        ["x-auth-token", "<redacted:4>"],
        ["Proxy-Authorization", "<redacted:5>"],
        ["Mcp-Session-Id", "s1"],
        ["MCP-Protocol-Version", "2025-11-25"],
        ["Last-Event-ID", "e1"],
        ["WWW-Authenticate", 'Bearer realm="mcp"'],
        ["Mcp-Param-Token", "<redacted:6>"],  # a parameter named like a credential is one
    ]


def test_the_same_secret_gets_the_same_placeholder() -> None:
    redactor = Redactor(RedactionRules.default())
    first = redactor.headers([("Authorization", "Bearer X"), ("Set-Cookie", "id=9")])
    again = redactor.headers([("authorization", "Bearer X"), ("Authorization", "Bearer Y")])
    assert first[0][1] == again[0][1] == "Bearer <redacted:1>"
    assert again[1][1] == "Bearer <redacted:3>"


def test_extra_header_names() -> None:
    redactor = Redactor(RedactionRules.default(extra_headers=["X-Tenant"]))
    assert redactor.headers([("x-tenant", "acme")]) == [["x-tenant", "<redacted:1>"]]


def test_no_redaction_keeps_everything() -> None:
    rules = RedactionRules.none()
    assert not rules.enabled and rules.names() == ()
    assert Redactor(rules).headers([("Authorization", "Bearer X")]) == [["Authorization", "Bearer X"]]


def test_json_paths_with_wildcards_in_messages_and_batches() -> None:
    redactor = Redactor(RedactionRules.default(json_paths=["params.arguments.password", "result.content.*.text"]))
    request = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
               "params": {"name": "login", "arguments": {"user": "ann", "password": "hunter2"}}}
    batch = [request, {"jsonrpc": "2.0", "id": 2, "result": {"content": [{"type": "text", "text": "hunter2"}, {"n": 1}]}}]
    redacted, changed = redactor.message(batch)
    assert changed
    assert redacted[0]["params"]["arguments"] == {"user": "ann", "password": "<redacted:1>"}
    assert redacted[1]["result"]["content"] == [{"type": "text", "text": "<redacted:1>"}, {"n": 1}]
    assert request["params"]["arguments"]["password"] == "hunter2"  # the input is left as it was


def test_a_secret_that_is_no_string_is_redacted_whatever_it_holds() -> None:
    # one holding a lone surrogate (JSON Lines keeps one) or msgpack bytes could not be encoded: a traceback
    redactor = Redactor(RedactionRules.default(json_paths=["params.a", "params.b", "params.c"]))
    message = {"jsonrpc": "2.0", "method": "x", "params": {"a": ["\udfff"], "b": {"k": b"\x00"}, "c": ["\udfff"]}}
    redacted, changed = redactor.message(message)
    assert changed and redacted["params"] == {"a": "<redacted:1>", "b": "<redacted:2>", "c": "<redacted:1>"}


def test_a_message_without_the_paths_is_returned_unchanged() -> None:
    redactor = Redactor(RedactionRules.default(json_paths=["params.token", "params.list.3"]))
    message = {"jsonrpc": "2.0", "method": "x", "params": {"list": [1, 2]}}
    assert redactor.message(message) == (message, False)


def test_non_string_values_are_redacted_too() -> None:
    redactor = Redactor(RedactionRules.default(json_paths=["params.secret"]))
    redacted, _ = redactor.message({"jsonrpc": "2.0", "method": "x", "params": {"secret": {"pin": 1234}}})
    assert redacted["params"]["secret"] == "<redacted:1>"


def test_rule_names_for_the_cassette_header() -> None:
    names = RedactionRules.default(["X-Tenant"], ["params.arguments.password"]).names()
    assert "header:authorization" in names and "header:x-tenant" in names
    assert "json:params.arguments.password" in names


@pytest.mark.parametrize("path", ["", "a..b", ".a", "a."])
def test_bad_paths_are_refused(path: str) -> None:
    with pytest.raises(RedactionRuleError):
        RedactionRules.default(json_paths=[path])


@pytest.mark.parametrize("name", ["X-Access-Key", "X-Goog-Api-Key", "Authentication", "X-Credentials", "X-Amz-Credential",
                                  "X-Refresh-Token", "Api-Secret", "X-ApiKey", "X-Signature"])
def test_the_wider_secret_like_pattern(name: str) -> None:
    assert Redactor(RedactionRules.default()).headers([(name, "s3cret")]) == [[name, "<redacted:1>"]]


def test_secret_like_query_parameters_in_paths() -> None:
    redactor = Redactor(RedactionRules.default())
    redactor.headers([("Authorization", "Bearer X")])  # placeholders are shared with headers
    path = "/mcp?api_key=k1&sessionId=s1&accessToken=t%201&Signature=sg&key=k1&cursor=c&sig=&flag"
    assert redactor.path(path) == (
        "/mcp?api_key=<redacted:2>&sessionId=s1&accessToken=<redacted:3>&Signature=<redacted:4>&key=<redacted:2>"
        "&cursor=c&sig=&flag"
    )
    assert redactor.path("/mcp") == "/mcp" and redactor.path("/messages/?session_id=abc") == "/messages/?session_id=abc"


def test_upstream_url_userinfo_and_query() -> None:
    redactor = Redactor(RedactionRules.default())
    assert redactor.url("https://ann:hunter2@example.com:8443/mcp?token=t1&v=2") == (
        "https://<redacted:1>@example.com:8443/mcp?token=<redacted:2>&v=2"
    )
    assert redactor.url("http://127.0.0.1:3001/mcp") == "http://127.0.0.1:3001/mcp"
    assert redactor.path("/mcp?token=t1") == "/mcp?token=<redacted:2>"  # the same secret, the same placeholder


def test_no_redaction_keeps_queries_and_userinfo() -> None:
    redactor = Redactor(RedactionRules.none())
    assert redactor.path("/mcp?api_key=k") == "/mcp?api_key=k"
    assert redactor.url("https://a:b@h/mcp?token=t") == "https://a:b@h/mcp?token=t"


def test_query_rules_are_named_in_the_header() -> None:
    names = RedactionRules.default().names()
    assert any(name.startswith("query~secret-like(") for name in names) and "url:userinfo" in names


def test_volatile_headers_get_one_fixed_placeholder_and_are_named_in_the_header() -> None:
    redactor = Redactor(RedactionRules.default())
    fields = [("Date", "Mon, 23 Nov 2026 10:00:00 GMT"), ("X-Request-Id", "7f3a"), ("Content-Type", "application/json")]
    assert redactor.headers(fields) == [["Date", VOLATILE], ["X-Request-Id", VOLATILE],
                                        ["Content-Type", "application/json"]]
    assert redactor.headers([("date", "Mon, 23 Nov 2026 10:00:01 GMT")]) == [["date", VOLATILE]]  # not numbered
    assert any(name.startswith("header~volatile(") and "date" in name for name in RedactionRules.default().names())
    assert Redactor(RedactionRules.none()).headers(fields[:1]) == [["Date", "Mon, 23 Nov 2026 10:00:00 GMT"]]


def test_frames_get_their_messages_json_paths_redacted_and_lose_their_verbatim_bytes() -> None:
    rules = RedactionRules.default(["X-Tenant"], ["params.arguments.token", "params.arguments.token"])
    assert rules.json_paths == (("params", "arguments", "token"),)  # a rule given twice counts once
    stdio = rules.for_messages()
    assert stdio.names() == ("json:params.arguments.token",)  # no headers, queries or URLs on stdio
    request = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"arguments": {"token": "s3cret"}}}
    frames = [
        Frame(1, 0.0, Direction.CLIENT_TO_SERVER, STDIO, Kind.MESSAGE, request, b'{"jsonrpc": "2.0", "token": "s3cret"}'),
        Frame(2, 0.1, Direction.SERVER_TO_CLIENT, STDIO, Kind.STDERR, data=b"log"),
    ]
    redacted = Redactor(stdio).frames(frames)
    assert redacted[0].message["params"]["arguments"]["token"] == "<redacted:1>" and redacted[0].data is None
    assert redacted[1] == frames[1]
    assert request["params"]["arguments"]["token"] == "s3cret"
