"""A recording read as it is replayed: the engine indexes a prefix, more when a live message
matches nothing indexed yet or the client is idle (`advance`), all of it for what needs the whole
recording, and ends up doing what an engine over the whole recording does."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgpack
import pytest

from tapes.cassette.frames import STDIO, Direction, Frame, Kind
from tapes.cassette.store import Cassette, CassetteError, Header, load, save, stream
from tapes.replay import engine as engine_module
from tapes.replay.control import ReplayControl
from tapes.replay.engine import ReplayEngine
from tapes.replay.outcomes import Action
from tapes.replay.session import ReplaySession

from tests.support.messages import note, progress, req, res
from tests.support.paths import CASSETTES
from tests.support.recordings import recording, send

STDIO_CASSETTES = sorted(path for path in CASSETTES.glob("*.tape") if load(path).header.transport == "stdio")


@pytest.fixture
def step_of_one(monkeypatch: pytest.MonkeyPatch) -> None:
    """Index one frame at a time: every lookup that can extend the index does."""
    monkeypatch.setattr(engine_module, "INDEX_STEP", 1)


class Counted:
    """Frames handed out one by one, counting how many were read."""

    def __init__(self, frames: list[Frame]) -> None:
        self.frames = frames
        self.read = 0

    def __iter__(self) -> Iterator[Frame]:
        for frame in self.frames:
            self.read += 1
            yield frame


def _faithful_replay(engine: ReplayEngine, frames: list[Frame], *, idle: bool) -> tuple[list[tuple[int, bytes]], list[bytes], list[str]]:
    """The recorded client's messages sent again in recorded order (`idle`: one `advance` after
    each); everything sent back, the released frames in recorded order, and the report."""
    actions = list(engine.start())
    replies: list[bytes] = []
    for frame in frames:
        if frame.from_client and frame.kind in (Kind.MESSAGE, Kind.RAW):
            reception = engine.receive(frame.payload)
            actions += reception.actions
            replies += [reply.payload for reply in reception.replies]
            if idle:
                actions += engine.advance().actions
    actions += engine.end()
    return sorted((action.frame.seq, action.payload) for action in actions), replies, engine.report.lines()


@pytest.mark.parametrize("idle", [False, True], ids=["busy client", "idle client"])
@pytest.mark.parametrize("path", STDIO_CASSETTES, ids=[path.stem for path in STDIO_CASSETTES])
def test_a_replay_read_as_it_goes_does_what_the_whole_recording_does(path: Path, idle: bool, step_of_one: None) -> None:
    frames = load(path).frames
    whole = _faithful_replay(ReplayEngine(frames), frames, idle=idle)
    lazy = ReplayEngine(iter(frames))
    assert not lazy.indexed
    assert _faithful_replay(lazy, frames, idle=idle) == whole
    assert whole[0] and lazy.indexed


def _long(calls: int) -> list[Frame]:
    """A recording of `calls` tool calls, each answered before the next."""
    exchange: list[tuple[str, Any]] = []
    for n in range(calls):
        exchange += [("c", req(n, "tools/call", {"name": "t", "arguments": {"n": n}})), ("s", res(n, n))]
    return recording(*exchange)


def test_only_a_prefix_is_read_before_the_first_answer() -> None:
    frames = Counted(_long(3 * engine_module.INDEX_STEP))
    engine = ReplayEngine(frames)
    assert send(engine, req("a", "tools/call", {"name": "t", "arguments": {"n": 0}})) == [res("a", 0)]
    assert frames.read == engine_module.INDEX_STEP
    # a request recorded past the prefix is looked for further on, as far as it takes
    assert send(engine, req("b", "tools/call", {"name": "t", "arguments": {"n": 2 * engine_module.INDEX_STEP}})) == [
        res("b", 2 * engine_module.INDEX_STEP)
    ]
    assert engine_module.INDEX_STEP * 4 <= frames.read < engine_module.INDEX_STEP * 6
    assert not engine.indexed
    assert len(engine.report.unused) == 3 * engine_module.INDEX_STEP - 2  # the report needs all of it
    assert engine.indexed and frames.read == len(frames.frames)


def test_a_later_frame_whose_causes_were_sent_goes_out_when_the_client_is_idle(step_of_one: None) -> None:
    frames = recording(
        ("c", req(1, "tools/call", {"name": "slow"}, token=1)),
        ("s", progress(1, 0.5)),
        ("c", req(2, "ping")),
        ("s", res(2, {})),
        ("s", res(1, "done")),
    )
    engine = ReplayEngine(iter(frames))
    assert send(engine, req("x", "tools/call", {"name": "slow"}, token="t")) == []  # only its request is indexed
    released = [json.loads(action.payload) for _ in frames for action in engine.advance().actions]
    # what the request released, with nothing more from the client; the ping's answer waits for the ping
    assert released == [progress("t", 0.5), res("x", "done")]
    assert engine.indexed
    assert send(engine, req("y", "ping")) == [res("y", {})]


def test_a_client_notification_and_answer_recorded_later_are_found(step_of_one: None) -> None:
    frames = recording(
        ("c", req(1, "tools/call", {"name": "ask"})),
        ("s", req("s1", "sampling/createMessage", {"messages": []})),
        ("s", note("notifications/message", {"level": "info"})),
        ("c", res("s1", {"content": "hi"})),
        ("c", note("notifications/roots/list_changed")),
        ("s", res(1, "asked")),
    )
    engine = ReplayEngine(iter(frames))
    assert send(engine, req(7, "tools/call", {"name": "ask"})) == []  # only its request is indexed
    # the answer is looked for further on: what it passed on the way and released goes out with it
    assert send(engine, res("s1", {"content": "hi"})) == [req("s1", "sampling/createMessage", {"messages": []}),
                                                            note("notifications/message", {"level": "info"})]
    assert send(engine, note("notifications/roots/list_changed")) == []
    assert [json.loads(action.payload) for action in engine.advance().actions] == [res(7, "asked")]
    assert engine.report.clean


def test_a_miss_reads_the_whole_recording_for_its_nearest(step_of_one: None) -> None:
    engine = ReplayEngine(iter(_long(20)))
    reply = send(engine, req(1, "tools/call", {"name": "other"}))[0]
    assert engine.indexed
    assert "nearest recorded is tools/call #0" in reply["error"]["message"]


def _damaged_late(tmp_path: Path) -> Path:
    """A cassette with a damaged frame at its end."""
    frames = _long(3)
    path = tmp_path / "late.tape"
    save(Cassette(Header(transport="stdio", server={"command": ["x"]}), frames), path)
    path.write_bytes(path.read_bytes() + msgpack.packb([len(frames) + 1, 0.5, 0, 0, 99]))  # kind 99 is unknown
    return path


def test_a_damaged_frame_is_reported_when_the_replay_reaches_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(engine_module, "INDEX_STEP", 2)  # the first request and its answer
    path = _damaged_late(tmp_path)
    with pytest.raises(CassetteError) as whole:
        load(path)
    session = ReplaySession(stream(path), ReplayControl())
    session.start()
    answered = session.receive(json.dumps(req("a", "tools/call", {"name": "t", "arguments": {"n": 0}})).encode())
    assert [json.loads(action.payload) for action in answered.actions] == [res("a", 0)]
    with pytest.raises(CassetteError) as reached:
        while not session.indexed:
            session.advance()
    assert str(reached.value) == str(whole.value)


@pytest.mark.parametrize("live_id", [1, "live"], ids=["sent as recorded", "restamped"])
def test_a_server_message_that_is_not_json_is_refused_when_sent(live_id: Any) -> None:
    frames = recording(("c", req(1, "tools/call", {"name": "t"})))
    frames.append(Frame(2, 1.0, Direction.SERVER_TO_CLIENT, STDIO, Kind.MESSAGE, res(1, {"x": b"\x00"})))
    with pytest.raises(CassetteError, match=r"^frame 2 holds a message that is not JSON"):
        ReplayEngine(frames)  # all there: checked before anything is served
    engine = ReplayEngine(iter(frames))
    with pytest.raises(CassetteError, match=r"^frame 2 holds a message that is not JSON"):
        send(engine, req(live_id, "tools/call", {"name": "t"}))


def _cut_after_a_request(*ending: tuple[str, Any]) -> list[Frame]:
    """One call answered, then a second one the recording has no answer to, then `ending`."""
    return recording(("c", req(1, "tools/call", {"name": "t"})), ("s", res(1, "one")),
                     ("c", req(2, "tools/call", {"name": "u"})), *ending)


def _sent_back(engine: ReplayEngine, message: Any) -> list[Any]:
    """The messages the engine sends back for `message`, made up or recorded, with what it releases
    once the client is idle (a recording read as it goes releases a later answer then)."""
    reception = engine.receive(json.dumps(message).encode())
    sent = [*reception.replies, *reception.actions]
    while not engine.indexed:
        reception = engine.advance()
        sent += [*reception.replies, *reception.actions]
    return [json.loads(out.payload) for out in sent if not isinstance(out, Action) or out.frame.message is not None]


@pytest.mark.parametrize("lazy", [False, True], ids=["whole recording", "read as it goes"])
def test_a_request_whose_answer_the_recording_was_cut_before_gets_an_error(lazy: bool, step_of_one: None) -> None:
    frames = _cut_after_a_request()  # no exit: the recorder was stopped, or the file cut there
    engine = ReplayEngine(iter(frames) if lazy else frames)
    assert engine.receive(json.dumps(req("a", "tools/call", {"name": "t"})).encode()).replies == []
    sent = _sent_back(engine, req("b", "tools/call", {"name": "u"}))  # matched; told once the end is read
    assert sent[:-1] == ([res("a", "one")] if lazy else [])  # read as it goes: the answer to "a" comes late
    assert sent[-1]["id"] == "b"
    assert "the recording stops before the answer to tools/call #2 (frame 3)" in sent[-1]["error"]["message"]
    assert engine.report.lines()[:2] == [
        "played 1 frames, 1 unmatched, 0 unused",
        "unmatched tools/call id 'b': the recording stops before the answer to tools/call #2 (frame 3) "
        "(it was cut short: its recorder was stopped, or the cassette truncated)",
    ]


@pytest.mark.parametrize("ending", [
    [("exit", 0)],  # the server exited without answering: the replay does as it did
    [("c", note("notifications/cancelled", {"requestId": 2})), ("c_end", None)],  # the client gave up on it
], ids=["server exited", "client cancelled"])
def test_a_request_left_unanswered_by_a_whole_recording_gets_no_made_up_error(ending: list[tuple[str, Any]]) -> None:
    engine = ReplayEngine(_cut_after_a_request(*ending))
    assert _sent_back(engine, req("a", "tools/call", {"name": "t"})) == [res("a", "one")]
    assert _sent_back(engine, req("b", "tools/call", {"name": "u"})) == []
    assert engine.report.clean
