"""tapes.cassette.redact: header and JSON-path redaction with stable placeholders."""

from __future__ import annotations

import pytest

from tapes.cassette.redact import RedactionRuleError, RedactionRules, Redactor


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
        ["Authorization", "<redacted:1>"],
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
    assert first[0][1] == again[0][1] == "<redacted:1>"
    assert again[1][1] == "<redacted:3>"


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
