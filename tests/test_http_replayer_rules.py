"""The HTTP rules the replayer applies (tapes.replay.http_rules), unit by unit and end to end: Origin,
MCP-Protocol-Version, the 2026-07-28 standard headers against the body, replayed response
headers, the legacy endpoint rewrite; a 2025-03-26 batch answered as a batch; a stateless
2026-07-28 recording replayed to the SDK client."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from mcp import Client
from test_engine import req, res
from test_engine_http import Recording

from tapes.replay.outcomes import NO_MATCH
from tapes.wire.http import moved_to_origin
from test_http_replayer import ACCEPT, TIMEOUT, record, resumable  # noqa: F401 (a fixture)

import flows
from replayer.http import replay_server
from tapes.cassette.store import Cassette, Header
from tapes.cassette.frames import Direction, Kind
from tapes.replay.http_rules import (
    HEADER_MISMATCH,
    header_mismatch,
    origin_allowed,
    replayed_headers,
    version_problem,
)

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


def test_a_2025_03_26_batch_is_answered_as_a_batch() -> None:
    r = Recording()
    r.post(1, [req(1, "tools/list"), req(2, "prompts/list")])
    r.add(Direction.SERVER_TO_CLIENT, 1, Kind.HTTP_RESPONSE, status=200, headers=[["Content-Type", "application/json"]])
    r.add(Direction.SERVER_TO_CLIENT, 1, Kind.MESSAGE, [res(1, {"tools": []}), res(2, {"prompts": []})])
    r.end(1)
    cassette = Cassette(Header("http", {"url": "http://up/mcp"}), r.frames)
    with replay_server(cassette) as server, httpx.Client(timeout=TIMEOUT) as http:
        answer = http.post(server.url, json=[req("b", "prompts/list"), req("a", "tools/list")], headers=ACCEPT)
    assert answer.status_code == 200 and answer.headers["content-type"] == "application/json"
    assert answer.json() == [res("a", {"tools": []}), res("b", {"prompts": []})]


def batch_recording(sse: bool) -> Cassette:
    r = Recording()
    r.post(1, [req(1, "tools/list"), req(2, "prompts/list")])
    r.head(1, 200, sse=sse)
    if sse:
        r.event(1, "1-1", res(1, {"tools": []}))
        r.event(1, "1-2", res(2, {"prompts": []}))
    else:
        r.add(Direction.SERVER_TO_CLIENT, 1, Kind.MESSAGE, [res(1, {"tools": []}), res(2, {"prompts": []})])
    r.end(1)
    return Cassette(Header("http", {"url": "http://up/mcp"}), r.frames)


def batch_answer(http: httpx.Client, url: str, batch: list[Any]) -> list[Any]:
    answer = http.post(url, json=batch, headers=ACCEPT)
    assert answer.status_code == 200
    if answer.headers["content-type"].startswith("text/event-stream"):
        return [json.loads(line[5:]) for line in answer.text.splitlines() if line.startswith("data:")]
    return answer.json()


@pytest.mark.parametrize("sse", [False, True], ids=["json", "sse"])
def test_a_batch_that_matches_in_part_gets_its_errors_and_no_answers_to_requests_not_made(sse: bool) -> None:
    with replay_server(batch_recording(sse)) as server, httpx.Client(timeout=TIMEOUT) as http:
        # one recorded request and one the recording does not have: the error comes in the same answer
        mixed = batch_answer(http, server.url, [req("a", "tools/list"), req("x", "resources/list")])
        assert server.report_lines == ["played 3 frames, 1 unmatched, 1 unused",
                                     "unmatched resources/list id 'x': no recorded request matches resources/list; "
                                     "nearest recorded is prompts/list #2 (frame 2), differing at /method: "
                                     '"prompts/list" → "resources/list"',
                                     "unused prompts/list #2 (frame 2)"]
    answer, error = sorted(mixed, key=lambda m: m["id"])
    assert answer == res("a", {"tools": []})
    assert error["id"] == "x" and error["error"]["code"] == NO_MATCH
    assert "nearest recorded is prompts/list" in error["error"]["message"]
    with replay_server(batch_recording(sse)) as server, httpx.Client(timeout=TIMEOUT) as http:
        # fewer requests than recorded: answered at once, without the answer to the one not made
        assert batch_answer(http, server.url, [req("p", "prompts/list")]) == [res("p", {"prompts": []})]


def stateless_flow(url: str) -> Any:
    async def run() -> Any:
        with anyio.fail_after(TIMEOUT):
            async with Client(url, read_timeout_seconds=TIMEOUT, cache=None) as client:
                echoed = await client.call_tool("echo", {"text": "stateless"})
                return [client.protocol_version, flows.dump(echoed)]

    return anyio.run(run)


def test_a_stateless_2026_07_28_session(resumable: str, tmp_path: Path) -> None:  # noqa: F811
    cassette, live = record(tmp_path / "stateless.tape", resumable, stateless_flow)
    assert live[0] == "2026-07-28"
    with replay_server(cassette) as server, httpx.Client(timeout=TIMEOUT) as http:
        assert stateless_flow(server.url) == live
        body = {"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": {"name": "echo", "arguments": {"text": "x"}}}
        modern = {**ACCEPT, "MCP-Protocol-Version": "2026-07-28"}
        mismatch = http.post(server.url, json=body, headers={**modern, "Mcp-Method": "tools/call", "Mcp-Name": "other"})
        assert mismatch.status_code == 400
        assert mismatch.json()["error"]["code"] == HEADER_MISMATCH and mismatch.json()["id"] == 9
        bad_version = http.post(server.url, json=body, headers={**ACCEPT, "MCP-Protocol-Version": "2099-01-01"})
        assert bad_version.status_code == 400
        no_stream = http.get(server.url, headers=modern)
        assert no_stream.status_code == 405 and "POST" in no_stream.headers["allow"]
        assert json.loads(no_stream.content)["error"]["message"].startswith("Method Not Allowed")
