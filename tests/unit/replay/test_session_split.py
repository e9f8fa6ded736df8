"""An HTTP recording's sessions as its frames come (`SessionSplit`): what any prefix of the
recording gives each session is the start of what the whole recording gives it, so a replay that
serves a big cassette as it reads it plays each session from the same frames."""

from __future__ import annotations

from pathlib import Path

import pytest

from tapes.cassette.frames import Direction, Frame, Kind
from tapes.cassette.store import load
from tapes.replay.sessions import SessionFeed, SessionSplit, split_sessions

CASSETTES = Path(__file__).parents[3] / "cassettes"
HTTP_CASSETTES = sorted(path for path in CASSETTES.glob("*.tape") if load(path).header.transport != "stdio")


@pytest.mark.parametrize("path", HTTP_CASSETTES, ids=lambda path: path.stem)
def test_every_prefix_gives_each_session_the_start_of_its_frames(path: Path) -> None:
    frames = load(path).frames
    whole = {session.session_id: session.frames for session in split_sessions(frames)}
    assert sum(len(session_frames) for session_frames in whole.values()) == len(frames)
    split = SessionSplit()
    for read, frame in enumerate(frames, 1):
        split.add(frame)
        sessions = split.sessions
        assert [s.session_id for s in sessions] == list(whole)[: len(sessions)]
        for session in sessions:
            assert session.frames == whole[session.session_id][: len(session.frames)]
        assert sum(len(session.frames) for session in sessions) <= read
    split.end()
    assert {session.session_id: session.frames for session in split.sessions} == whole


def _frame(seq: int, channel: str, kind: Kind, message: object = None, client: bool = True, **info: object) -> Frame:
    direction = Direction.CLIENT_TO_SERVER if client else Direction.SERVER_TO_CLIENT
    return Frame(seq, seq / 10, direction, channel, kind, message, None, info or None)


def test_an_exchange_is_held_until_its_session_is_known_and_all_after_it_too() -> None:
    """An initialize's exchange learns its session from its response head; a sessionless probe's
    event stream, only at its end; what comes after either waits, so each session keeps recorded order."""
    initialize = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}}
    probe = [_frame(1, "http:1", Kind.HTTP_REQUEST, method="POST", path="/mcp", headers=[]),
             _frame(2, "http:1", Kind.HTTP_RESPONSE, client=False, status=200, headers=[["content-type", "text/event-stream"]])]
    opening = [_frame(3, "http:2", Kind.HTTP_REQUEST, method="POST", path="/mcp", headers=[]),
               _frame(4, "http:2", Kind.MESSAGE, initialize)]
    split = SessionSplit()
    for frame in probe + opening:
        split.add(frame)
    assert split.sessions == []  # the probe's stream may still name a session (a legacy endpoint event)
    split.add(_frame(5, "http:1", Kind.STREAM_END, client=False, reason="closed"))
    assert [(s.session_id, len(s.frames)) for s in split.sessions] == [(None, 2)]  # its end waits behind the opening
    split.add(_frame(6, "http:2", Kind.HTTP_RESPONSE, client=False, status=200, headers=[["mcp-session-id", "s1"]]))
    assert [(s.session_id, len(s.frames)) for s in split.sessions] == [(None, 3), ("s1", 3)]
    assert split.sessions[1].first_request == initialize and split.sessions[1].opening is opening[0]


def test_a_session_feed_reads_on_only_when_it_has_nothing_left() -> None:
    """What the replay engine of a session is fed: the frames filed so far; more of the cassette is
    read only once it has taken them all, and none only once all of it is read."""
    session_frames = [_frame(seq, "http:1", Kind.HTTP_REQUEST, method="GET", path="/mcp", headers=[["mcp-session-id", "s"]])
                      for seq in (1, 2, 3)]
    split = SessionSplit()
    pending = iter(session_frames[1:])
    reads = []

    def read_more() -> bool:
        reads.append(1)
        frame = next(pending, None)
        if frame is None:
            return False
        split.add(frame)
        return True

    split.add(session_frames[0])
    feed = SessionFeed(split.sessions[0], read_more)
    assert feed.waiting == 1 and feed.take(10) == session_frames[:1] and not reads
    assert feed.take(10) == session_frames[1:2] and len(reads) == 1
    assert feed.take(10) == session_frames[2:] and not feed.exhausted
    assert feed.take(10) == [] and feed.exhausted and len(reads) == 3
