"""JSON-RPC level faults (tapes.replay.faults) as a ReplaySession applies them: parsing, which live
request a fault takes, and what goes out in place of the recorded answer."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tapes.cassette.frames import STDIO, Direction, Frame, Kind
from tapes.errors import UserError
from tapes.replay.control import ReplayControl
from tapes.replay.faults import MALFORMED, Fault, FaultAction, dry_run
from tapes.replay.session import ReplaySession


def call(request_id: int, tool: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": {"name": tool, "arguments": {}}}


def answer(request_id: int, text: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "result": {"content": [{"type": "text", "text": text}]}}


RECORDING = [
    Frame(1, 0.0, Direction.CLIENT_TO_SERVER, STDIO, Kind.MESSAGE, call(1, "forecast")),
    Frame(2, 0.1, Direction.SERVER_TO_CLIENT, STDIO, Kind.MESSAGE, answer(1, "sunny")),
    Frame(3, 0.2, Direction.CLIENT_TO_SERVER, STDIO, Kind.MESSAGE, call(2, "forecast")),
    Frame(4, 0.3, Direction.SERVER_TO_CLIENT, STDIO, Kind.MESSAGE, answer(2, "rain")),
    Frame(5, 0.4, Direction.CLIENT_TO_SERVER, STDIO, Kind.MESSAGE, call(3, "other")),
    Frame(6, 0.5, Direction.SERVER_TO_CLIENT, STDIO, Kind.MESSAGE, answer(3, "fine")),
]


def session(*faults: str) -> ReplaySession:
    return ReplaySession(RECORDING, ReplayControl.build(faults=faults))


def sent(replay: ReplaySession, message: dict[str, Any]) -> list[tuple[str, bytes, float]]:
    reception = replay.receive(json.dumps(message).encode())
    return [(action.frame.kind.value, action.payload, action.hold) for action in reception.actions]


def test_a_spec_names_method_subject_count_and_action() -> None:
    fault = Fault.parse("tools/call@get_forecast#2:error:-32000:rate limited: try later")
    assert (fault.method, fault.name, fault.nth, fault.action, fault.code, fault.message) == (
        "tools/call", "get_forecast", 2, FaultAction.ERROR, -32000, "rate limited: try later")
    assert Fault.parse("resources/read@notes://index:hang").name == "notes://index"  # a URI keeps its colons
    assert Fault.parse("ping:delay:1.5").seconds == 1.5


@pytest.mark.parametrize("spec", ["tools/call", "tools/call:explode", "tools/call:error:abc:x", "ping:delay:soon",
                                  "ping:hang:now", "ping#0:drop", "ping:delay:nan", "ping:delay:inf",
                                  "ping:delay:1e308"])
def test_a_bad_spec_is_one_sentence(spec: str) -> None:
    with pytest.raises(UserError, match="fault"):
        ReplayControl.build(faults=[spec])


def test_error_replaces_the_nth_matching_answer_under_the_live_id() -> None:
    replay = session("tools/call@forecast#2:error:-32000:rate limited")
    assert json.loads(sent(replay, call(10, "forecast"))[0][1]) == answer(10, "sunny")
    assert json.loads(sent(replay, call(11, "forecast"))[0][1]) == {
        "jsonrpc": "2.0", "id": 11, "error": {"code": -32000, "message": "rate limited"}}
    assert json.loads(sent(replay, call(12, "other"))[0][1]) == answer(12, "fine")
    assert replay.report.unfired_faults == [] and replay.report.clean


def test_delay_holds_the_answer() -> None:
    [(_, payload, hold)] = sent(session("tools/call:delay:2.5"), call(7, "forecast"))
    assert json.loads(payload) == answer(7, "sunny") and hold == 2.5


def test_hang_sends_nothing_and_malformed_sends_broken_json() -> None:
    assert sent(session("tools/call@other:hang"), call(3, "other")) == []
    assert sent(session("tools/call:malformed"), call(3, "forecast")) == [("message", MALFORMED, 0.0)]


def test_drop_on_stdio_closes_stdout_and_exits() -> None:
    assert [kind for kind, _, _ in sent(session("tools/call:drop"), call(1, "forecast"))] == ["stream_end", "exit"]


def test_a_fault_that_never_fired_is_in_the_summary() -> None:
    replay = session("prompts/get:hang", "tools/call#9:drop")
    sent(replay, call(1, "forecast"))
    assert replay.report.unfired_faults == ["prompts/get:hang", "tools/call#9:drop"]
    assert "fault never fired: prompts/get:hang" in replay.report.lines()


def test_a_client_cancelling_the_request_a_fault_holds_is_no_miss() -> None:
    replay = session("tools/call@other:hang")
    assert sent(replay, call(3, "other")) == []
    assert sent(replay, {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 3}}) == []
    assert replay.report.clean and replay.report.unfired_faults == []


def test_nothing_goes_out_after_a_drop() -> None:
    replay = session("tools/call#1:drop")
    sent(replay, call(1, "forecast"))
    assert sent(replay, call(2, "forecast")) == []


def test_a_fault_whose_request_matched_nothing_never_fired() -> None:
    replay = session("tools/call@missing:error:-32000:x")
    reception = replay.receive(json.dumps(call(1, "missing")).encode())
    assert reception.missed and "no recorded request matches" in reception.replies[0].payload.decode()
    assert replay.report.unfired_faults == ["tools/call@missing:error:-32000:x"]


def test_a_dry_run_names_the_recorded_request_each_fault_would_take() -> None:
    hits = dry_run(["tools/call@forecast#2:error:-32000:x", "tools/call@forecast#2:hang", "prompts/get:drop"], RECORDING)
    assert [(hit.spec, hit.request) for hit in hits] == [
        ("tools/call@forecast#2:error:-32000:x", "tools/call #2 (frame 3)"),
        ("tools/call@forecast#2:hang", None),  # an answer takes one fault, the first given, as in a replay
        ("prompts/get:drop", None),
    ]


def test_a_dry_run_counts_each_recorded_session_afresh() -> None:
    def session(channel: int, name: str) -> list[Frame]:
        head = {"method": "POST", "path": "/mcp", "headers": [["Mcp-Session-Id", name]]}
        return [Frame(channel * 10, 0.0, Direction.CLIENT_TO_SERVER, f"http:{channel}", Kind.HTTP_REQUEST, info=head),
                Frame(channel * 10 + 1, 0.0, Direction.CLIENT_TO_SERVER, f"http:{channel}", Kind.MESSAGE, call(channel, "x"))]

    hits = dry_run(["tools/call#1:hang"], [*session(1, "a"), *session(2, "b")])
    assert [(hit.session, hit.request) for hit in hits] == [("a", "tools/call #1 (frame 11)"), ("b", "tools/call #2 (frame 21)")]


def test_a_fault_spent_on_a_request_that_matched_nothing_leaves_the_next_answer_alone() -> None:
    replay = session("tools/call:error:-32000:x")
    replay.receive(json.dumps(call(5, "missing")).encode())  # the first tools/call: no recorded match
    # a client that numbers per connection may use the id again (stdio: a new session on a reused replay)
    assert json.loads(sent(replay, call(5, "forecast"))[0][1]) == answer(5, "sunny")
    assert replay.report.unfired_faults == ["tools/call:error:-32000:x"]
