"""The sans-IO parts of the new-episodes hand-over: the warm-up that brings a real server to the
live session's state, and the splice of the episode into the cassette."""

from __future__ import annotations

from typing import Any

import pytest

from tapes.cassette.frames import STDIO, Direction, Frame, Kind
from tapes.cassette.store import Cassette, Header
from tapes.replay.episodes import WarmUp, episode_frames, splice
from tapes.wire.jsonrpc import encode


def line(message: dict[str, Any]) -> bytes:
    return encode(message)


def test_warm_up_answers_the_real_servers_request_under_its_own_id() -> None:
    warm = WarmUp([line({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "ask"}}),
                   line({"jsonrpc": "2.0", "id": "recorded-7", "result": {"text": "sunny"}})])
    assert warm.lines_to_send() == [line({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "ask"}})]
    assert not warm.done  # the answer waits for the real server's own request
    warm.server_line(line({"jsonrpc": "2.0", "id": 0, "method": "sampling/createMessage", "params": {}}))
    assert warm.lines_to_send() == [line({"jsonrpc": "2.0", "id": 0, "result": {"text": "sunny"}})]
    assert not warm.done  # tools/call 1 is not answered yet
    warm.server_line(line({"jsonrpc": "2.0", "id": 1, "result": {}}))
    assert warm.done and (warm.sent, warm.swallowed) == (2, 2)


def test_warm_up_puts_the_real_servers_request_state_in_a_retry() -> None:
    first = {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "ask"}}
    retry = {"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {"name": "ask", "requestState": "recorded"}}
    replayed = {"jsonrpc": "2.0", "id": 3, "result": {"resultType": "input_required", "requestState": "recorded"}}
    warm = WarmUp([line(first), line(retry)], [line(replayed)])
    assert warm.lines_to_send() == [line(first)]  # the retry waits for the real server's own state
    warm.server_line(line({**replayed, "result": {"resultType": "input_required", "requestState": "real"}}))
    assert warm.lines_to_send() == [line({**retry, "params": {"name": "ask", "requestState": "real"}})]


def frame(seq: int, t: float, client: bool, kind: Kind = Kind.MESSAGE, message: Any = None) -> Frame:
    direction = Direction.CLIENT_TO_SERVER if client else Direction.SERVER_TO_CLIENT
    return Frame(seq, t, direction, STDIO, kind, message, info={"reason": "eof"} if kind is Kind.STREAM_END else None)


def test_splice_of_a_client_that_closed_its_input_before_reading() -> None:
    """It wrote everything and closed stdin, then read: the recorded answer to the replaced
    request came after its end, and stayed (a later run got two answers to one id); the real
    server's answer came after the episode's end, and was left out."""
    old = Cassette(Header("stdio", {}), [
        frame(1, 0.0, True, message={"id": 1}), frame(2, 0.1, True, message={"id": 2}),
        frame(3, 0.2, True, Kind.STREAM_END),
        frame(4, 0.3, False, message={"id": 1}),  # played
        frame(5, 0.4, False, message={"id": 2}),  # the answer to the request the episode replaced
        frame(6, 0.5, False, Kind.EXIT),
    ])
    episode = [frame(1, 10.0, True, message={"id": 2, "new": True}), frame(2, 10.1, True, Kind.STREAM_END),
               frame(3, 10.2, False, message={"id": 2, "new": True}), frame(4, 10.3, False, Kind.EXIT)]
    spliced = splice(old, {1, 4}, episode).frames
    assert [(f.message or {}).get("id", f.kind.value) for f in spliced] == [1, 2, 2, "stream_end", 1, "exit"]
    assert all(f.message.get("new") for f in spliced[1:3])


def test_splice_puts_the_episode_after_what_was_played_in_place_of_the_rest() -> None:
    old = Cassette(Header("stdio", {}), [
        frame(1, 0.0, True, message={"id": 1}), frame(2, 0.1, False, message={"id": 1}),  # played
        frame(3, 0.2, True, message={"id": 2}), frame(4, 0.3, False, message={"id": 2}),  # not played
        frame(5, 0.4, True, Kind.STREAM_END), frame(6, 0.5, False, Kind.EXIT),
    ])
    recording = Cassette(Header("stdio", {}), [
        frame(1, 10.0, True, message={"id": 1}), frame(2, 10.1, False, message={"id": 1}),  # warm-up
        frame(3, 11.0, True, message={"id": 9}), frame(4, 11.5, False, message={"id": 9}),  # the episode
        frame(5, 12.0, True, Kind.STREAM_END), frame(6, 12.1, False, Kind.EXIT),
    ])
    warm = WarmUp([])
    warm.sent, warm.swallowed = 1, 1
    episode = episode_frames(recording, warm)
    assert [f.message for f in episode[:2]] == [{"id": 9}, {"id": 9}]
    spliced = splice(old, {1, 2}, episode).frames
    assert [f.seq for f in spliced] == list(range(1, 7))
    # the unplayed recorded continuation (id 2) is what the episode replaced: it is dropped
    assert [(f.message or {}).get("id", f.kind.value) for f in spliced] == [1, 1, 9, 9, "stream_end", "exit"]
    assert [f.t for f in spliced[:4]] == pytest.approx([0.0, 0.1, 0.1, 0.6])  # the episode follows the played frames
    assert spliced[4].t == pytest.approx(0.9)  # the recorded end keeps its place after the episode
    # frames of sessions the episode does not continue stay, after it
    kept = splice(old, {1, 2}, episode, replaced={1, 2}).frames
    assert [(f.message or {}).get("id", f.kind.value) for f in kept] == [1, 1, 9, 9, 2, 2, "stream_end", "exit"]
