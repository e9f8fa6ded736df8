"""Polls in replay (tapes.replay.polls): a live client that polls a task more or less often than the
recorded one gets the state the recording had reached, and the same final outcome, without misses
or unused requests; the exact policy keeps the recorded count."""

from __future__ import annotations

import json
from typing import Any

from tapes.replay.engine import ReplayEngine
from tapes.replay.control import ReplayControl
from tapes.replay.outcomes import NO_MATCH
from tapes.replay.polls import Polls

from tests.support.messages import note, req, res
from tests.support.recordings import Recording, recording, send

TASK = {"taskId": "t-1"}


def status(state: str) -> dict[str, Any]:
    return {"taskId": "t-1", "status": state, "pollInterval": 1000}


def task_session() -> list:
    """tools/call as a task, three polls (working, working, completed), then tasks/result."""
    return recording(
        ("c", req(1, "tools/call", {"name": "research", "task": {"ttl": 60000}})),
        ("s", res(1, {"task": status("working")})),
        ("c", req(2, "tasks/get", TASK)), ("s", res(2, status("working"))),
        ("c", req(3, "tasks/get", TASK)), ("s", res(3, status("working"))),
        ("c", req(4, "tasks/get", TASK)), ("s", res(4, status("completed"))),
        ("c", req(5, "tasks/result", TASK)), ("s", res(5, {"content": [{"type": "text", "text": "report"}]})),
    )


def states(out: list[dict[str, Any]]) -> list[str]:
    return [message["result"]["status"] for message in out]


def test_a_client_polling_more_often_gets_the_last_state_again() -> None:
    engine = ReplayEngine(task_session())
    send(engine, req(10, "tools/call", {"name": "research", "task": {"ttl": 60000}}))
    seen = [send(engine, req(11 + n, "tasks/get", TASK)) for n in range(5)]
    assert [states(out) for out in seen] == [["working"], ["working"], ["completed"], ["completed"], ["completed"]]
    assert [out[0]["id"] for out in seen] == [11, 12, 13, 14, 15]  # repeats go out under the live id
    assert send(engine, req(20, "tasks/result", TASK)) == [res(20, {"content": [{"type": "text", "text": "report"}]})]
    report = engine.report
    assert report.clean and report.unused == [] and report.repeated == 2 and report.skipped == 0


def test_a_client_polling_less_often_skips_the_recorded_polls_it_never_made() -> None:
    engine = ReplayEngine(task_session())
    send(engine, req(10, "tools/call", {"name": "research", "task": {"ttl": 60000}}))
    assert states(send(engine, req(11, "tasks/get", TASK))) == ["working"]
    assert send(engine, req(12, "tasks/result", TASK))[0]["result"]["content"][0]["text"] == "report"
    report = engine.report
    assert report.clean and report.unused == [] and report.skipped == 2 and report.played == 3


def test_a_poll_after_the_result_gets_the_final_state() -> None:
    engine = ReplayEngine(task_session())
    send(engine, req(10, "tools/call", {"name": "research", "task": {"ttl": 60000}}))
    send(engine, req(11, "tasks/result", TASK))
    assert states(send(engine, req(12, "tasks/get", TASK))) == ["completed"]
    assert engine.report.clean and engine.report.skipped == 3 and engine.report.repeated == 1


def test_what_a_skipped_poll_released_still_goes_out() -> None:
    """A status notification tied to no request waits for the poll recorded before it; a client
    that never made that poll still gets it, before the result."""
    frames = recording(
        ("c", req(1, "tasks/get", TASK)), ("s", res(1, status("working"))),
        ("s", note("notifications/tasks/status", status("completed"))),
        ("c", req(2, "tasks/result", TASK)), ("s", res(2, {"content": []})),
    )
    out = send(ReplayEngine(frames), req(7, "tasks/result", TASK))
    assert out == [note("notifications/tasks/status", status("completed")), res(7, {"content": []})]


def test_polls_of_another_task_are_not_skipped() -> None:
    other = {"taskId": "t-2"}
    frames = recording(
        ("c", req(1, "tasks/get", other)), ("s", res(1, {"taskId": "t-2", "status": "completed"})),
        ("c", req(2, "tasks/result", TASK)), ("s", res(2, {"content": []})),
    )
    engine = ReplayEngine(frames)
    send(engine, req(7, "tasks/result", TASK))
    assert engine.report.skipped == 0 and len(engine.report.unused) == 1


def test_the_exact_policy_wants_the_recorded_poll_count() -> None:
    engine = ReplayEngine(task_session(), polls=Polls.EXACT)
    send(engine, req(10, "tools/call", {"name": "research", "task": {"ttl": 60000}}))
    for n in range(3):
        send(engine, req(11 + n, "tasks/get", TASK))
    assert send(engine, req(14, "tasks/get", TASK))[0]["error"]["code"] == NO_MATCH
    fewer = ReplayEngine(task_session(), polls=Polls.EXACT)
    send(fewer, req(10, "tools/call", {"name": "research", "task": {"ttl": 60000}}))
    send(fewer, req(11, "tasks/result", TASK))
    assert [line.split(" (")[0] for line in fewer.report.unused] == ["tasks/get #2", "tasks/get #3", "tasks/get #4"]


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_on_the_recorded_clock_a_slow_poller_skips_states_and_a_fast_one_repeats_them() -> None:
    # recorded polls at t=2, 4, 6 (recording() stamps each line with its position)
    clock = Clock()
    slow = ReplayEngine(task_session(), clock=clock)
    send(slow, req(10, "tools/call", {"name": "research", "task": {"ttl": 60000}}))
    assert states(send(slow, req(11, "tasks/get", TASK))) == ["working"]
    clock.now += 5  # past the third recorded poll
    assert states(send(slow, req(12, "tasks/get", TASK))) == ["completed"]
    assert slow.report.skipped == 1 and slow.report.clean

    clock = Clock()
    fast = ReplayEngine(task_session(), clock=clock)
    send(fast, req(10, "tools/call", {"name": "research", "task": {"ttl": 60000}}))
    seen = []
    for _ in range(5):
        seen += states(send(fast, req(11, "tasks/get", TASK)))
        clock.now += 1
    assert seen == ["working", "working", "working", "working", "completed"]
    assert fast.report.repeated == 2 and fast.report.skipped == 0 and fast.report.clean


def test_the_polls_policy_is_built_from_its_name() -> None:
    assert ReplayControl.build(polls="exact").polls is Polls.EXACT
    assert ReplayControl.build().polls is Polls.LATEST


def test_an_sse_stream_polled_back_again_from_the_same_event_is_continued_as_recorded() -> None:
    r = Recording()
    r.post(1, req(2, "tools/call", {"name": "cycles"}, token=2), session="s1")
    r.head(1, 200)
    r.event(1, "2/1", None)  # priming, then the server closes the stream
    r.end(1)
    r.get(2, "s1", last_event_id="2/1")
    r.head(2, 200)
    r.event(2, "2/2", res(2, "cycled"))
    r.end(2)
    engine = ReplayEngine(r.frames)
    engine.receive(json.dumps(req(7, "tools/call", {"name": "cycles"}, token=7)).encode())
    first = engine.open("GET", "/mcp", "2/1")
    again = engine.open("GET", "/mcp", "2/1")  # the live client came back once more than recorded
    assert first.channel == again.channel == "http:2" and again.repeated == len(again.actions) == 3
    assert [json.loads(a.payload) for a in again.actions if a.frame.message is not None] == [res(7, "cycled")]
    assert engine.report.clean and engine.report.repeated == 1
    exact = ReplayEngine(r.frames, polls=Polls.EXACT)
    exact.receive(json.dumps(req(7, "tools/call", {"name": "cycles"}, token=7)).encode())
    exact.open("GET", "/mcp", "2/1")
    assert exact.open("GET", "/mcp", "2/1").channel is None


def test_the_servers_polls_of_a_task_the_client_runs_name_the_live_task() -> None:
    sampling = {"task": {"ttl": 1000}, "messages": []}
    frames = recording(
        ("c", req(1, "tools/call", {"name": "sample-async"})),
        ("s", req(0, "sampling/createMessage", sampling)),
        ("c", res(0, {"task": {"taskId": "recorded-task", "status": "working"}})),
        ("s", req(1, "tasks/get", {"taskId": "recorded-task"})),
        ("c", note("notifications/tasks/status", {"taskId": "recorded-task", "status": "completed"})),
        ("c", res(1, {"taskId": "recorded-task", "status": "completed"})),
        ("s", req(2, "tasks/result", {"taskId": "recorded-task"})),
        ("c", res(2, {"role": "assistant"})),
        ("s", res(1, "sampled")),
    )
    engine = ReplayEngine(frames)
    assert send(engine, req(10, "tools/call", {"name": "sample-async"})) == [req(0, "sampling/createMessage", sampling)]
    assert send(engine, res(0, {"task": {"taskId": "live-task", "status": "working"}})) == [
        req(1, "tasks/get", {"taskId": "live-task"})]
    # the live client's status notifications come on its own clock: one more than recorded is no miss
    for _ in range(2):
        assert send(engine, note("notifications/tasks/status", {"taskId": "live-task", "status": "working"})) == []
    assert send(engine, res(1, {"taskId": "live-task", "status": "working"})) == [req(2, "tasks/result", {"taskId": "live-task"})]
    assert send(engine, res(2, {"role": "assistant"})) == [res(10, "sampled")]
    assert engine.report.clean and engine.report.unused == []
