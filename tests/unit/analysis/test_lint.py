"""`tapes lint`: each rule with a cassette that breaks it and one that does not, and the real
cassettes (clean, or with the findings explained)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tapes.cassette.store import Cassette, Header, load
from tapes.cassette.frames import Direction, Frame, Kind
from tapes.analysis.lint import RULES, lint

from tests.support.messages import note, req, res
from tests.support.paths import CASSETTES
from tests.support.recordings import handshake, stdio_cassette

C, S = Direction.CLIENT_TO_SERVER, Direction.SERVER_TO_CLIENT


class Http:
    """A synthetic HTTP cassette, one exchange at a time (channel http:N per exchange)."""

    def __init__(self) -> None:
        self.frames: list[Frame] = []
        self.exchanges = 0

    def _add(self, direction: Direction, channel: str, kind: Kind, message: Any = None, info: Any = None) -> None:
        self.frames.append(Frame(len(self.frames) + 1, len(self.frames) / 100, direction, channel, kind, message, None, info))

    def exchange(self, method: str, body: Any = None, *, headers: dict[str, str] | None = None, status: int = 200,
                 answer: list[Any] | None = None, event_ids: list[str] | None = None) -> str:
        """A request and its answer: `answer` as SSE events (with `event_ids`) or, with none, one JSON body."""
        self.exchanges += 1
        channel = f"http:{self.exchanges}"
        self._add(C, channel, Kind.HTTP_REQUEST, info={"method": method, "path": "/mcp", "headers": list((headers or {}).items())})
        if body is not None:
            self._add(C, channel, Kind.MESSAGE, body)
        sse = event_ids is not None
        self._add(S, channel, Kind.HTTP_RESPONSE, info={"status": status, "headers": [
            ["Content-Type", "text/event-stream" if sse else "application/json"]]})
        for index, message in enumerate(answer or []):
            if sse:
                self._add(S, channel, Kind.SSE_EVENT, message, info={"id": event_ids[index], "event": None, "retry": None})
            else:
                self._add(S, channel, Kind.MESSAGE, message)
        self._add(S, channel, Kind.STREAM_END, info={"reason": "closed"})
        return channel

    def initialized(self, version: str = "2025-06-18", session: str | None = None) -> Http:
        """A handshake; with `session`, the server names its session and the client carries it after."""
        (client, answer, done) = (message for _, message in handshake(version))
        named = {"Mcp-Session-Id": session} if session else {}
        channel = self.exchange("POST", client, answer=[answer])
        if session:
            response = next(frame for frame in self.frames if frame.channel == channel and frame.kind is Kind.HTTP_RESPONSE)
            response.info["headers"].append(["Mcp-Session-Id", session])
        self.exchange("POST", done, headers={"MCP-Protocol-Version": version, **named}, status=202)
        return self

    def cassette(self) -> Cassette:
        return Cassette(Header(transport="http", server={"url": "http://test/mcp"}), self.frames)


def rules(cassette: Cassette) -> list[tuple[int, str]]:
    return [(finding.seq, finding.rule) for finding in lint(cassette)]


V = {"MCP-Protocol-Version": "2025-06-18"}
LIST = req(2, "tools/list")
LISTED = res(2, {"tools": []})


def test_batch() -> None:
    batch = [req(2, "tools/list"), req(3, "prompts/list")]
    answers = [res(2, {"tools": []}), res(3, {"prompts": []})]
    assert rules(stdio_cassette(*handshake("2025-06-18"), ("c", batch), ("s", answers))) == [(4, "batch"), (5, "batch")]
    assert rules(stdio_cassette(*handshake("2025-03-26"), ("c", batch), ("s", answers))) == []


def test_protocol_version_header() -> None:
    good = Http().initialized()
    good.exchange("POST", LIST, headers=V, answer=[LISTED])
    assert rules(good.cassette()) == []
    missing = Http().initialized()
    missing.exchange("POST", LIST, answer=[LISTED])
    assert rules(missing.cassette()) == [(10, "protocol-version-header")]
    wrong = Http().initialized()
    wrong.exchange("POST", LIST, headers={"MCP-Protocol-Version": "2025-03-26"}, answer=[LISTED])
    assert [f.message for f in lint(wrong.cassette())] == ["MCP-Protocol-Version 2025-03-26 but 2025-06-18 was negotiated"]


def test_get_stream_response() -> None:
    bad = Http().initialized()
    bad.exchange("GET", headers=V, answer=[res(7, {})], event_ids=["e1"])
    assert rules(bad.cassette()) == [(12, "get-stream-response"), (12, "unknown-response-id")]
    resumed = Http().initialized()
    resumed.exchange("POST", LIST, headers=V, answer=[], event_ids=[])
    resumed.exchange("GET", headers={**V, "Last-Event-ID": "e0"}, answer=[LISTED], event_ids=["e1"])
    assert rules(resumed.cassette()) == []


def test_event_id_reuse() -> None:
    reused = Http().initialized()
    reused.exchange("POST", LIST, headers=V, answer=[LISTED], event_ids=["e1"])
    reused.exchange("POST", req(3, "prompts/list"), headers=V, answer=[res(3, {"prompts": []})], event_ids=["e1"])
    assert rules(reused.cassette()) == [(18, "event-id-reuse")]
    unique = Http().initialized()
    unique.exchange("POST", LIST, headers=V, answer=[LISTED], event_ids=["e1"])
    unique.exchange("POST", req(3, "prompts/list"), headers=V, answer=[res(3, {"prompts": []})], event_ids=["e2"])
    assert rules(unique.cassette()) == []


def test_two_sessions_and_their_probes_are_linted_each_on_its_own() -> None:
    """Two clients, one after the other, each probing with server/discover before its initialize:
    their ids, progress tokens and negotiated versions are their own."""
    http = Http()
    for session, version in (("s-1", "2025-06-18"), ("s-2", "2025-11-25")):
        http.exchange("POST", req(1, "server/discover"), headers={"MCP-Protocol-Version": "2026-07-28"}, status=400,
                      answer=[{"jsonrpc": "2.0", "id": 1, "error": {"code": -32000, "message": "not initialized"}}])
        http.initialized(version, session)
        call = req(2, "tools/call", {"name": "count", "arguments": {}, "_meta": {"progressToken": "t"}})
        named = {"MCP-Protocol-Version": version, "Mcp-Session-Id": session}
        http.exchange("POST", call, headers=named, event_ids=[f"{session}-1", f"{session}-2"],
                      answer=[note("notifications/progress", {"progressToken": "t", "progress": 1}), res(2, {"content": []})])
    assert rules(http.cassette()) == []


def test_request_id_reuse() -> None:
    ping = req(2, "ping")
    assert rules(stdio_cassette(*handshake(), ("c", ping), ("s", res(2, {})), ("c", ping), ("s", res(2, {})))) == [
        (6, "request-id-reuse")]
    # ids are counted per side: the server may use the numbers the client uses
    server_ping = req(2, "ping")
    assert rules(stdio_cassette(*handshake(), ("c", ping), ("s", res(2, {})), ("s", server_ping), ("c", res(2, {})))) == []


def test_response_to_notification() -> None:
    answered = Http()
    client, answer, done = (message for _, message in handshake())
    answered.exchange("POST", client, answer=[answer])
    answered.exchange("POST", done, headers=V, answer=[note("notifications/message", {"level": "info", "data": "hi"})])
    assert [f.message for f in lint(answered.cassette())] == ["status 200 to a POST without requests (202 expected)",
                                                               "a JSON-RPC message in answer to notifications"]
    assert rules(Http().initialized().cassette()) == []


def test_unknown_response_id() -> None:
    assert rules(stdio_cassette(*handshake(), ("s", res(99, {})))) == [(4, "unknown-response-id")]
    assert rules(stdio_cassette(*handshake(), ("c", LIST), ("s", LISTED))) == []


def test_notification_with_id() -> None:
    assert rules(stdio_cassette(*handshake()[:2], ("c", {**note("notifications/initialized"), "id": 5}))) == [
        (3, "notification-with-id"), (3, "shape")]
    assert rules(stdio_cassette(*handshake())) == []


MODERN_META = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "1"},
               "io.modelcontextprotocol/clientCapabilities": {}}


def test_routing_headers() -> None:
    call = req(1, "tools/call", {"name": "echo", "arguments": {}, "_meta": MODERN_META})
    answer = res(1, {"content": [], "resultType": "complete"})
    good = Http()
    good.exchange("POST", call, headers={"Mcp-Method": "tools/call", "Mcp-Name": "echo"}, answer=[answer])
    assert rules(good.cassette()) == []
    bad = Http()
    bad.exchange("POST", call, headers={"Mcp-Method": "tools/list"}, answer=[answer])
    assert [f.message for f in lint(bad.cassette())] == ["Mcp-Method 'tools/list' but the body's method is 'tools/call'",
                                                          "no Mcp-Name header but the body's name is 'echo'"]
    bare = Http()  # worded for any method, "initialize" too (it read "for a initialize body")
    bare.exchange("POST", call, headers={"Mcp-Method": "tools/call", "Mcp-Name": "echo"}, answer=[answer])
    bare.exchange("POST", req(2, "initialize", {}), answer=[res(2, {})])
    assert [f.message for f in lint(bare.cassette()) if f.rule == "routing-headers"] == [
        "no Mcp-Method header but the body's method is 'initialize'"]


def test_progress_not_increasing() -> None:
    call = req(2, "tools/call", {"name": "count", "arguments": {}, "_meta": {"progressToken": "t"}})

    def progress(value: float) -> tuple[str, Any]:
        return ("s", note("notifications/progress", {"progressToken": "t", "progress": value}))

    done = ("s", res(2, {"content": []}))
    assert rules(stdio_cassette(*handshake(), ("c", call), progress(1), progress(1), done)) == [(6, "progress-not-increasing")]
    assert rules(stdio_cassette(*handshake(), ("c", call), progress(1), progress(2.5), done)) == []
    # a token is unique among active requests: once its request is answered, another may use it
    again = req(3, "tools/call", {"name": "count", "arguments": {}, "_meta": {"progressToken": "t"}})
    assert rules(stdio_cassette(*handshake(), ("c", call), progress(2), done, ("c", again), progress(1), ("s", res(3, {"content": []})))) == []


def test_progress_tokens_that_are_objects_or_arrays_tie_no_progress() -> None:
    # an unhashable token was a TypeError; no MCP token is one
    odd = [("s", note("notifications/progress", {"progressToken": [1], "progress": value})) for value in (2, 1)]
    assert [rule for _, rule in rules(stdio_cassette(*handshake(), *odd))] == ["shape", "shape"]  # the schema says so


def test_before_initialize() -> None:
    client, answer, done = handshake()
    assert rules(stdio_cassette(client, ("c", LIST), answer, done, ("s", LISTED))) == [(2, "before-initialize")]
    assert rules(stdio_cassette(client, ("c", req(2, "ping")), answer, done, ("s", res(2, {})))) == []
    # before initialize was sent at all, and the initialized notification before its answer
    assert rules(stdio_cassette(("c", LIST), client, answer, done, ("s", LISTED))) == [(1, "before-initialize")]
    assert rules(stdio_cassette(client, done, answer)) == [(2, "before-initialize")]
    # a newer client's server/discover probe comes before initialize by design
    probe = req(5, "server/discover", {"_meta": MODERN_META})
    assert rules(stdio_cassette(("c", probe), ("s", {"jsonrpc": "2.0", "id": 5, "error": {"code": -32601, "message": "no"}}),
                                client, answer, done)) == []


def test_duplicate_response() -> None:
    assert rules(stdio_cassette(*handshake(), ("c", LIST), ("s", LISTED), ("s", LISTED))) == [(6, "duplicate-response")]
    assert [f.message for f in lint(stdio_cassette(*handshake(), ("c", LIST), ("s", LISTED), ("s", LISTED)))] == [
        "response #2 from the server answers a request answered at frame 5"]
    # an id used again asks anew (a request-id-reuse finding, not a duplicate answer)
    assert rules(stdio_cassette(*handshake(), ("c", LIST), ("s", LISTED), ("c", LIST), ("s", LISTED))) == [(6, "request-id-reuse")]


def test_shape_uses_the_sdk_types_of_the_negotiated_version() -> None:
    call = req(2, "tools/call", {"name": "echo", "arguments": {}})
    assert rules(stdio_cassette(*handshake(), ("c", call), ("s", res(2, {"content": "not a list"})))) == [(5, "shape")]
    assert rules(stdio_cassette(*handshake(), ("c", call), ("s", res(2, {"content": []})))) == []
    elicit = req(0, "elicitation/create", {"message": "name?", "requestedSchema": {"type": "object", "properties": {}}})
    assert rules(stdio_cassette(*handshake("2025-06-18"), ("s", elicit), ("c", res(0, {"action": "decline"})))) == []
    old = lint(stdio_cassette(*handshake("2024-11-05"), ("s", elicit), ("c", res(0, {"action": "decline"}))))
    assert [(f.rule, f.message) for f in old] == [("shape", "elicitation/create request: not part of protocol version 2024-11-05"),
                                                  ("shape", "elicitation/create result: not part of protocol version 2024-11-05")]


def test_a_message_too_deep_for_the_sdk_types_is_a_shape_finding() -> None:
    # the SDK writes back what it validated, and pydantic's serializer stops at a depth: a ValueError
    deep: Any = "x"
    for _ in range(300):
        deep = [deep]
    call = req(2, "tools/call", {"name": "echo", "arguments": {}})
    found = lint(stdio_cassette(*handshake(), ("c", call), ("s", res(2, {"content": [], "structuredContent": {"a": deep}}))))
    assert [(f.seq, f.rule) for f in found] == [(5, "shape")]
    assert "the SDK's types cannot check it" in found[0].message


def task(state: str, task_id: str = "t-1") -> dict[str, Any]:
    return {"taskId": task_id, "status": state, "createdAt": "2026-01-01T00:00:00Z",
            "lastUpdatedAt": "2026-01-01T00:00:00Z", "ttl": 60000, "pollInterval": 1000}


def test_task_states() -> None:
    call = req(2, "tools/call", {"name": "research", "arguments": {}, "task": {"ttl": 60000}})
    forward = [("c", call), ("s", res(2, {"task": task("working")})),
               ("c", req(3, "tasks/get", {"taskId": "t-1"})), ("s", res(3, task("input_required"))),
               ("s", note("notifications/tasks/status", task("working"))),
               ("c", req(4, "tasks/get", {"taskId": "t-1"})), ("s", res(4, task("completed")))]
    assert rules(stdio_cassette(*handshake("2025-11-25"), *forward)) == []
    back = forward + [("c", req(5, "tasks/get", {"taskId": "t-1"})), ("s", res(5, task("working")))]
    found = lint(stdio_cassette(*handshake("2025-11-25"), *back))
    assert [(f.seq, f.rule, f.message) for f in found] == [(12, "task-states", 'task "t-1" is "working" after it was completed')]
    # another task's state, or the other side's task with the same id, is not this one's
    other = forward + [("c", req(5, "tasks/get", {"taskId": "t-2"})), ("s", res(5, task("working", "t-2"))),
                       ("s", req(0, "tasks/get", {"taskId": "t-1"})), ("c", res(0, task("working")))]
    assert rules(stdio_cassette(*handshake("2025-11-25"), *other)) == []


@pytest.mark.parametrize("odd", [{"taskId": {"a": 1}, "status": "completed"}, {"taskId": "t-1", "status": {"a": 1}},
                                 {"taskId": "t-1", "status": "\udfff"}])
def test_task_ids_and_states_of_any_json_are_read(odd: dict[str, Any]) -> None:
    # an object was unhashable (TypeError); a lone surrogate (JSON Lines holds one) was a UnicodeEncodeError
    answers = [("s", res(2, {"task": task("completed")})), ("s", note("notifications/tasks/status", odd)),
               ("s", note("notifications/tasks/status", odd))]
    found = lint(stdio_cassette(*handshake("2025-11-25"), ("c", req(2, "tools/call", {"name": "x"})), *answers))
    messages = [f.message for f in found if f.rule == "task-states"]
    assert messages == ([] if isinstance(odd["taskId"], dict) else [f'task "t-1" is {json.dumps(odd["status"], separators=(",", ":"))} after it was completed'] * 2)


def test_bytes_in_a_message_are_checked_as_text() -> None:
    # a msgpack cassette can hold bytes in a message: the SDK types raised UnicodeDecodeError on them
    call = req(2, "tools/call", {"name": "echo", "arguments": {"blob": b"\x98"}})
    assert rules(stdio_cassette(*handshake(), ("c", call), ("s", res(2, {"content": [{"type": "text", "text": b"\x98"}]})))) == []


def test_task_messages_are_shaped_by_the_2025_11_25_schema() -> None:
    call = req(2, "tools/call", {"name": "research", "arguments": {}, "task": {"ttl": 60000}})
    good = [("c", call), ("s", res(2, {"task": task("working")})),
            ("c", req(3, "tasks/get", {"taskId": "t-1"})), ("s", res(3, task("completed"))),
            ("s", note("notifications/tasks/status", task("completed"))),
            ("c", req(4, "tasks/result", {"taskId": "t-1"})), ("s", res(4, {"content": []}))]
    assert rules(stdio_cassette(*handshake("2025-11-25"), *good)) == []
    bad = [("c", call), ("s", res(2, {"content": []})),  # a task-augmented call answered without a task
           ("c", req(3, "tasks/get", {})), ("s", res(3, {"taskId": "t-1", "status": "sleeping"}))]
    assert rules(stdio_cassette(*handshake("2025-11-25"), *bad)) == [(5, "shape"), (6, "shape"), (7, "shape")]
    old = stdio_cassette(*handshake("2025-06-18"), ("c", req(3, "tasks/get", {"taskId": "t-1"})))
    assert [f.message for f in lint(old)] == ["tasks/get request: not part of protocol version 2025-06-18"]


def test_every_rule_is_described_and_tested() -> None:
    tested = {name.removeprefix("test_").replace("_", "-") for name in globals() if name.startswith("test_")}
    assert set(RULES) - {"shape"} <= tested


# Findings in the committed cassettes, each a real one:
# - everything-http: server-everything answers the client's server/discover probe (request id 1)
#   with HTTP 400 and a JSON-RPC error whose id is null; JSON-RPC 2.0 allows null only when the
#   request's id could not be read.
# - example/weather: the canned client (cassettes/example/client.jsonl) is piped in at once, so
#   its initialized notification and requests reach the server before the initialize response.
EXPECTED = {
    "everything-http-2025-11-25": [(4, "unknown-response-id")],
    "example/weather": [(2, "before-initialize"), (3, "before-initialize"), (4, "before-initialize"), (5, "before-initialize")],
}


@pytest.mark.parametrize("name", sorted(path.stem for path in CASSETTES.glob("*.tape")) + ["example/weather"])
def test_real_cassettes_lint_clean_or_with_explained_findings(name: str) -> None:
    assert rules(load(CASSETTES / f"{name}.tape")) == EXPECTED.get(name, [])


def test_an_http_message_with_bytes_is_linted() -> None:
    """Splitting off the authorization flow reads no MCP exchange's bodies (they are not JSON here)."""
    http = Http()
    http.exchange("POST", req(1, "tools/call", {"name": "t", "arguments": {"blob": b"\x00"}}), answer=[res(1, {})])
    assert rules(http.cassette()) == []
