"""The HTTP rules the replayer applies (tapes.replay.http_rules), unit by unit: Origin,
MCP-Protocol-Version, the 2026-07-28 standard headers against the body, replayed response
headers, the legacy endpoint rewrite."""

from __future__ import annotations

from typing import Any

import pytest

from tapes.cassette.frames import Direction, Frame, Kind
from tapes.replay.http_rules import (
    batch_problem,
    header_mismatch,
    missing_cors,
    origin_allowed,
    preflight_headers,
    recorded_cors,
    replayed_headers,
    stream_only_paths,
    version_problem,
)
from tapes.cassette.http_framer import CLOSED, HttpFramer
from tapes.cassette.redact import RedactionRules, Redactor
from tapes.wire.http import moved_to_origin

from tests.support.messages import req


MIRRORED = {"execute_sql": {"mcp-param-region": "region"}}


def call(name: str, **arguments: Any) -> dict[str, Any]:
    return req(1, "tools/call", {"name": name, "arguments": arguments})


@pytest.mark.parametrize("origin, allowed", [(None, True), ("http://localhost:3000", True), ("http://127.0.0.1", True),
                                             ("http://[::1]:8080", True), ("http://evil.example", False),
                                             ("null", False), ("http://localhost.evil.example", False)])
def test_origin(origin: str | None, allowed: bool) -> None:
    assert origin_allowed(origin, {"localhost", "127.0.0.1", "::1"}) is allowed


def test_protocol_version() -> None:
    assert version_problem(None) is None and version_problem("2025-06-18") is None
    assert "unsupported MCP-Protocol-Version '2099-01-01'" in (version_problem("2099-01-01") or "")


@pytest.mark.parametrize("headers, message, problem", [
    ([("Mcp-Method", "tools/call"), ("Mcp-Name", "echo")], call("echo"), None),
    ([("mcp-method", "tools/call")], call("echo"), "required Mcp-Name header is missing"),
    ([], call("echo"), "required Mcp-Method header is missing"),
    ([("Mcp-Method", "tools/list")], call("echo"), "Mcp-Method header value 'tools/list' does not match body value 'tools/call'"),
    ([("Mcp-Method", "tools/call"), ("Mcp-Name", "foo")], call("bar"), "Mcp-Name header value 'foo' does not match body value 'bar'"),
    ([("Mcp-Method", "resources/read"), ("Mcp-Name", "file:///a")], req(1, "resources/read", {"uri": "file:///a"}), None),
    ([("Mcp-Method", "notifications/initialized")], {"jsonrpc": "2.0", "method": "notifications/initialized"}, None),
    ([("Mcp-Method", "tools/call"), ("Mcp-Name", "execute_sql"), ("Mcp-Param-Region", "us-west1")],
     call("execute_sql", region="us-west1", query="q"), None),
    ([("Mcp-Method", "tools/call"), ("Mcp-Name", "execute_sql"), ("Mcp-Param-Region", "=?base64?SGVsbG8sIOS4lueVjA==?=")],
     call("execute_sql", region="Hello, 世界"), None),
    ([("Mcp-Method", "tools/call"), ("Mcp-Name", "execute_sql")], call("execute_sql", region="eu"), "mcp-param-region header is missing"),
    ([("Mcp-Method", "tools/call"), ("Mcp-Name", "execute_sql"), ("Mcp-Param-Region", "us")],
     call("execute_sql", region="eu"), "value 'us' does not match body value 'eu'"),
    ([("Mcp-Method", "tools/call"), ("Mcp-Name", "execute_sql")], call("execute_sql", region=None), None),
])
def test_standard_headers_against_the_body(headers: list[tuple[str, str]], message: Any, problem: str | None) -> None:
    found = header_mismatch(headers, message, MIRRORED)
    assert found is None if problem is None else problem in (found or "")


def test_replayed_headers_leave_out_the_recorded_connection() -> None:
    recorded = [["Date", "x"], ["content-type", "text/event-stream"], ["Transfer-Encoding", "chunked"],
                ["mcp-session-id", "s"], ["Content-Length", "9"], ["x-accel-buffering", "no"]]
    assert replayed_headers(recorded) == [("content-type", "text/event-stream"), ("mcp-session-id", "s"),
                                          ("x-accel-buffering", "no")]


def test_legacy_endpoint_points_at_the_replayer() -> None:
    assert moved_to_origin("/message?sessionId=a", "http://up:1/sse", "http://127.0.0.1:9") == "/message?sessionId=a"
    assert moved_to_origin("http://up:1/messages/?session_id=a", "http://up:1/sse", "http://127.0.0.1:9") == (
        "http://127.0.0.1:9/messages/?session_id=a")
    assert moved_to_origin("http://other/m", "http://up:1/sse", "http://127.0.0.1:9") == "http://other/m"


def response(*headers: tuple[str, str]) -> Frame:
    return Frame(1, 0.0, Direction.SERVER_TO_CLIENT, "http:1", Kind.HTTP_RESPONSE, info={"status": 200, "headers": list(headers)})


def test_a_preflight_is_answered_as_the_recorded_server_allowed_cross_origin_requests() -> None:
    cors = recorded_cors([response(("content-type", "application/json")),
                          response(("Access-Control-Allow-Origin", "*"), ("Access-Control-Expose-Headers", "mcp-session-id"))])
    answer = preflight_headers(cors, "content-type, mcp-session-id")
    assert answer is not None
    assert [(k.lower(), v) for k, v in answer] == [("access-control-allow-origin", "*"),
                                                   ("access-control-expose-headers", "mcp-session-id"),
                                                   ("access-control-allow-methods", "GET, POST, DELETE"),
                                                   ("access-control-allow-headers", "content-type, mcp-session-id")]
    # the recorded server's own answer wins; a server that allowed no cross-origin use gets no preflight
    credentialed = recorded_cors([response(("access-control-allow-origin", "http://localhost:6274"),
                                           ("access-control-allow-methods", "POST"), ("access-control-allow-credentials", "true"))])
    assert preflight_headers(credentialed, None) == [("access-control-allow-origin", "http://localhost:6274"),
                                                     ("access-control-allow-methods", "POST"),
                                                     ("access-control-allow-credentials", "true")]
    assert preflight_headers(recorded_cors([response(("content-type", "text/event-stream"))]), "content-type") is None


def test_an_answer_the_replayer_made_up_gets_the_recorded_cors_headers_it_lacks() -> None:
    cors = [("Access-Control-Allow-Origin", "*"), ("Access-Control-Expose-Headers", "mcp-session-id")]
    assert missing_cors([("content-type", "application/json")], cors) == cors
    assert missing_cors([("access-control-allow-origin", "http://localhost")], cors) == cors[1:]


def test_a_batch_is_refused_at_a_version_without_batches_unless_the_recorded_client_sent_some() -> None:
    batch = [req(1, "tools/list")]
    assert "JSON-RPC batches are not part of protocol version '2025-11-25'" in (batch_problem(batch, "2025-11-25", False) or "")
    assert batch_problem(batch, "2025-03-26", False) is None  # the one revision with batches
    assert batch_problem(batch, None, False) is None  # no version said: judged by what it holds
    assert batch_problem(batch, "2026-07-28", True) is None  # the recorded server took batches: so does its replay
    assert batch_problem(req(1, "tools/list"), "2026-07-28", False) is None


def test_a_legacy_sse_path_never_posted_to_takes_get_only() -> None:
    """A client that tries Streamable HTTP first (mcp-remote's default) posts to the SSE URL and
    falls back to SSE on a 404 or 405; a POST there is what the recording has none of."""
    framer = HttpFramer(Redactor(RedactionRules.default()))
    stream = [("Content-Type", "text/event-stream")]
    frames = [*framer.request(0.0, 1, "GET", "/sse", [], b""),
              *framer.response(0.0, 1, 200, stream, None),
              *framer.chunk(0.0, 1, b"event: endpoint\ndata: /message?sessionId=a\n\n"),
              *framer.request(0.0, 2, "POST", "/message?sessionId=a", [], b"{}"),
              *framer.response(0.0, 2, 202, [], b""),
              *framer.end(0.0, 2, CLOSED)]
    assert stream_only_paths(frames) == {"/sse"}
    # a server that serves both transports at one path took POSTs there
    both = [*frames, *framer.request(0.0, 3, "POST", "/sse", [], b"{}"), *framer.response(0.0, 3, 200, [], b"{}")]
    assert stream_only_paths(both) == set()
    # a Streamable HTTP GET stream announces no endpoint
    streamable = [*framer.request(0.0, 4, "GET", "/mcp", [], b""), *framer.response(0.0, 4, 200, stream, None),
                  *framer.chunk(0.0, 4, b"event: message\ndata: {}\n\n")]
    assert stream_only_paths(streamable) == set()
