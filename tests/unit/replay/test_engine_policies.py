"""Replay control in the engine: race policies, repeats policies, named matchers, recorded gaps."""

from __future__ import annotations

import json

import pytest

from tapes.replay.control import ReplayControl
from tapes.replay.engine import Race, Repeats, ReplayEngine
from tapes.replay.outcomes import NO_MATCH
from tapes.errors import UserError
from tapes.replay.matching import matcher_named, register_matcher

from tests.support.messages import note, progress, req, res
from tests.support.recordings import recording, send

# A call the client cancelled after the first progress; the server answered anyway, after the cancel.
RACE = recording(
    ("c", req(1, "tools/call", {"name": "slow"}, token=1)),
    ("s", progress(1, 1)),
    ("c", note("notifications/cancelled", {"requestId": 1})),
    ("s", res(1, "finished anyway")),
    ("c", req(2, "ping")),
    ("s", res(2, {})),
)
CALL = req(10, "tools/call", {"name": "slow"}, token=10)
CANCEL = note("notifications/cancelled", {"requestId": 10})


def test_recorded_race_sends_the_response_after_the_live_cancel() -> None:
    engine = ReplayEngine(RACE)
    assert send(engine, CALL) == [progress(10, 1)]
    assert send(engine, CANCEL) == [res(10, "finished anyway")]


def test_cancel_wins_suppresses_the_response() -> None:
    engine = ReplayEngine(RACE, race=Race.CANCEL_WINS)
    assert send(engine, CALL) == [progress(10, 1)]
    assert send(engine, CANCEL) == []
    assert send(engine, req(11, "ping")) == [res(11, {})]
    assert engine.report.clean


def test_cancel_wins_holds_a_response_recorded_before_the_cancel() -> None:
    frames = recording(
        ("c", req(1, "tools/call", {"name": "quick"}, token=1)),
        ("s", progress(1, 1)),
        ("s", res(1, "done")),
        ("c", note("notifications/cancelled", {"requestId": 1})),
    )
    engine = ReplayEngine(frames, race=Race.CANCEL_WINS)
    assert send(engine, req(5, "tools/call", {"name": "quick"}, token=5)) == [progress(5, 1)]
    assert send(engine, note("notifications/cancelled", {"requestId": 5})) == []
    assert ReplayEngine(frames).receive(json.dumps(req(5, "tools/call", {"name": "quick"}, token=5)).encode()).actions


def test_response_wins_answers_before_the_cancel() -> None:
    engine = ReplayEngine(RACE, race=Race.RESPONSE_WINS)
    assert send(engine, CALL) == [progress(10, 1), res(10, "finished anyway")]
    assert send(engine, CANCEL) == []
    assert engine.report.clean


def test_cancel_wins_honours_an_unrecorded_cancel() -> None:
    frames = recording(
        ("c", req(1, "tools/call", {"name": "ask"})),
        ("s", req(0, "sampling/createMessage", {})),
        ("c", res(0, {})),
        ("s", res(1, "answer")),
    )
    engine = ReplayEngine(frames, race=Race.CANCEL_WINS)
    assert send(engine, req(3, "tools/call", {"name": "ask"})) == [req(0, "sampling/createMessage", {})]
    assert send(engine, note("notifications/cancelled", {"requestId": 3})) == []
    assert send(engine, res(0, {})) == []  # the response is suppressed
    assert engine.report.clean


def test_a_repeat_under_allow_is_answered_without_asking_the_client_again() -> None:
    """The server asked for a sample while answering; a repeat gets the answer again, not the
    question under the id the client answered once (its answer would be a miss)."""
    asking = recording(("c", req(1, "tools/call", {"name": "ask"})), ("s", req(0, "sampling/createMessage", {"messages": []})),
                       ("c", res(0, {"role": "assistant"})), ("s", res(1, "asked")))
    engine = ReplayEngine(asking, repeats=Repeats.ALLOW)
    assert send(engine, req(5, "tools/call", {"name": "ask"})) == [req(0, "sampling/createMessage", {"messages": []})]
    assert send(engine, res(0, {"role": "assistant"})) == [res(5, "asked")]
    assert send(engine, req(6, "tools/call", {"name": "ask"})) == [res(6, "asked")]
    assert engine.report.clean and engine.report.repeated == 1


PINGS = recording(("c", req(1, "tools/list")), ("s", res(1, {"tools": ["a"]})),
                  ("c", req(2, "ping")), ("s", res(2, {})))


def test_repeats_in_order_is_a_miss_and_allow_answers_again() -> None:
    call = {"name": "roll"}
    once = recording(("c", req(1, "tools/call", call)), ("s", res(1, "4")))
    strict_count = ReplayEngine(once)
    send(strict_count, req(1, "tools/call", call))
    [error] = send(strict_count, req(2, "tools/call", call))
    assert error["error"]["code"] == NO_MATCH
    # the miss names the identical request already played, not one that differs elsewhere
    assert error["error"]["message"] == (
        "mcp-tapes: no recorded request matches tools/call: it repeats tools/call #1 (frame 1), which was already "
        "played and the recording has no other like it (--repeats allow answers a repeat again)")
    allowing = ReplayEngine(once, repeats=Repeats.ALLOW)
    send(allowing, req(1, "tools/call", call))
    assert send(allowing, req(7, "tools/call", call)) == [res(7, "4")]
    assert allowing.report.clean and allowing.report.repeated == 1
    assert "1 repeated" in allowing.report.lines()[0]
    # a list asked again is answered again by default (see test_engine.py), but not in strict order
    strict = ReplayEngine(PINGS, repeats=Repeats.STRICT)
    send(strict, req(1, "tools/list"))
    assert send(strict, req(2, "tools/list"))[0]["error"]["code"] == NO_MATCH


def test_a_repeat_answered_at_once_keeps_no_live_id_and_the_request_it_repeats_still_takes_its_cancel() -> None:
    """A client may repeat a request all session long (on stdio as over HTTP): the engine keeps
    nothing per repeat it answered in full. The pending request it repeats is still cancelled."""
    engine = ReplayEngine(RACE, repeats=Repeats.ALLOW)
    assert send(engine, CALL) == [progress(10, 1)]
    assert send(engine, req(11, "tools/call", {"name": "slow"}, token=11)) == [progress(11, 1), res(11, "finished anyway")]
    kept = len(engine._by_live_id)
    for live_id in range(12, 112):
        assert send(engine, req(live_id, "tools/call", {"name": "slow"})) == [res(live_id, "finished anyway")]
    assert len(engine._by_live_id) == kept
    # the recorded cancel, taken: the rest of the call's answer goes out, under its own id (a repeat had taken it)
    assert send(engine, CANCEL) == [res(10, "finished anyway")]
    assert engine.report.clean and engine.report.repeated == 101


def test_strict_order_refuses_a_request_out_of_order() -> None:
    engine = ReplayEngine(recording(("c", req(1, "tools/list")), ("s", res(1, {"tools": ["a"]})),
                                    ("c", req(2, "prompts/list")), ("s", res(2, {"prompts": []}))), repeats=Repeats.STRICT)
    [error] = send(engine, req(1, "prompts/list"))
    assert "recorded order" in error["error"]["message"] and "tools/list #1" in error["error"]["message"]
    assert send(engine, req(2, "tools/list")) == [res(2, {"tools": ["a"]})]
    assert send(engine, req(3, "prompts/list")) == [res(3, {"prompts": []})]
    assert send(engine, req(4, "ping")) == [res(4, {})]  # liveness, answered in any order


WEATHER = recording(("c", req(1, "tools/call", {"name": "w", "arguments": {"city": "Paris"}, "_meta": {"x": 1}})),
                    ("s", res(1, "sunny")))


@pytest.mark.parametrize(
    ("matcher", "live_params", "matches"),
    [
        ("default", {"name": "w", "arguments": {"city": "Paris"}}, True),
        ("exact", {"name": "w", "arguments": {"city": "Paris"}}, False),
        ("exact", {"name": "w", "arguments": {"city": "Paris"}, "_meta": {"x": 1}}, True),
        ("method", {"name": "other"}, True),
        ("params-subset", {"name": "w", "arguments": {"city": "Paris", "units": "C"}}, True),
        ("params-subset", {"name": "w", "arguments": {}}, False),
    ],
)
def test_named_matchers(matcher: str, live_params: dict, matches: bool) -> None:
    engine = ReplayEngine(WEATHER, matcher_named(matcher))
    [reply] = send(engine, req(4, "tools/call", live_params))
    assert (reply == res(4, "sunny")) is matches


@pytest.mark.parametrize(("matcher", "matches"), [("default", True), ("exact", False)])
def test_empty_params_are_no_params_except_to_the_exact_matcher(matcher: str, matches: bool) -> None:
    # the Python SDK sends tools/list without params, the TypeScript SDK with "params": {}
    engine = ReplayEngine(recording(("c", req(1, "tools/list")), ("s", res(1, {"tools": []}))), matcher_named(matcher))
    [reply] = send(engine, req(7, "tools/list", {}))
    assert (reply == res(7, {"tools": []})) is matches


def test_ignored_paths_and_registered_matchers() -> None:
    engine = ReplayEngine(WEATHER, matcher_named("default", ignore=["/arguments/city"]))
    assert send(engine, req(4, "tools/call", {"name": "w", "arguments": {"city": "Lyon"}})) == [res(4, "sunny")]
    register_matcher("same-tool", lambda recorded, live: recorded["params"]["name"] == live["params"]["name"])
    engine = ReplayEngine(WEATHER, matcher_named("same-tool"))
    assert send(engine, req(4, "tools/call", {"name": "w", "arguments": 3})) == [res(4, "sunny")]
    with pytest.raises(UserError, match="no matcher named 'nope'"):
        matcher_named("nope")


@pytest.mark.parametrize("pointer", ["arguments/city", "", "arguments"])
def test_an_ignored_path_that_is_no_json_pointer_is_one_sentence(pointer: str) -> None:
    """Taken as it is, it would point at the whole params: every call of a method would match."""
    with pytest.raises(UserError, match=f"ignored path {pointer!r} is not a JSON pointer"):
        ReplayControl.build(ignore=[pointer])


@pytest.mark.parametrize("timing", ["nan", "inf", "-inf", "1e-320"])
def test_a_timing_that_is_no_usable_speed_is_one_sentence(timing: str) -> None:
    with pytest.raises(UserError, match="not instant, recorded or a positive speed factor"):
        ReplayControl.build(timing=timing)


def test_actions_carry_the_recorded_gaps() -> None:
    frames = recording(("c", req(1, "tools/call", {"name": "slow"}, token=1)), ("s", progress(1, 1)),
                       ("s", progress(1, 2)), ("s", res(1, "done")))
    # recording() stamps frame i at time i
    actions = ReplayEngine(frames).receive(json.dumps(req(1, "tools/call", {"name": "slow"}, token=1)).encode()).actions
    assert [a.gap for a in actions] == [1.0, 1.0, 1.0]


def test_a_cancel_that_comes_after_the_answer_is_taken_silently() -> None:
    # a client that timed out as the answer came: a server ignores the cancel, and the replay did
    # not (a miss, exit 1), though the recording had no cancel to compare it with
    for race in Race:
        engine = ReplayEngine(recording(("c", req(1, "tools/call", {"name": "fast"})), ("s", res(1, "done"))), race=race)
        assert send(engine, req(10, "tools/call", {"name": "fast"})) == [res(10, "done")]
        assert send(engine, CANCEL) == []
        report = engine.report
        assert report.clean, report.unmatched
        # (cancel-wins honours any cancel, silently, as before)
        assert report.adapted == ([] if race is Race.CANCEL_WINS else [
            "notifications/cancelled for id 10: taken silently, as any server takes it (its request was answered already)"])


def test_a_cancel_of_a_request_still_being_answered_is_a_miss_when_the_recording_has_none() -> None:
    engine = ReplayEngine(recording(("c", req(1, "tools/call", {"name": "slow"})), ("s", req("s1", "roots/list")),
                                    ("c", res("s1", {"roots": []})), ("s", res(1, "done"))))
    assert send(engine, req(10, "tools/call", {"name": "slow"})) == [req("s1", "roots/list")]
    send(engine, CANCEL)
    assert [miss.reason for miss in engine.report.unmatched] == ["the recording has no cancellation of it"]
