"""Stream bookkeeping for the HTTP replayer: per-channel logs of released frames, where a
Last-Event-ID resumes, SSE encoding of released events, and the fault plan."""

from __future__ import annotations

from typing import Any

import pytest

from tapes.replay.outcomes import Action
from tapes.errors import UserError
from tapes.cassette.frames import Direction, Frame, Kind
from tapes.cassette.http_framer import HttpFramer
from tapes.cassette.redact import RedactionRules, Redactor
from tapes.replay.streams import Cursor, FaultPlan, Faults, StreamBook, sse_bytes

S = Direction.SERVER_TO_CLIENT


def action(channel: str, kind: Kind, payload: bytes = b"", **info: Any) -> Action:
    return Action(Frame(0, 0.0, S, channel, kind, None, payload, info or None), payload)


def event(channel: str, event_id: str | None, data: bytes = b"{}") -> Action:
    return action(channel, Kind.SSE_EVENT, data, id=event_id, event=None, retry=None)


def test_released_frames_are_filed_per_channel_head_apart_and_end_last() -> None:
    book = StreamBook()
    book.add([action("http:2", Kind.HTTP_RESPONSE, status=200, headers=[]), event("http:2", "a"),
              event("http:3", "x"), event("http:2", None), action("http:2", Kind.STREAM_END, reason="closed")])
    log = book.log("http:2")
    assert log.head is not None and log.head.frame.info["status"] == 200
    assert [d.event for d in log.body] == [1, 2, None] and log.ended
    assert [d.event for d in book.log("http:3").body] == [1] and not book.log("http:3").ended
    assert book.log("http:9").body == []  # a channel nothing was released for yet


def test_resume_continues_after_the_event_on_the_stream_that_sent_it() -> None:
    book = StreamBook()
    book.add([event("http:2", "a"), event("http:2", "b"), event("http:4", "c"), event("http:2", "d")])
    assert book.resume("b") == Cursor("http:2", 2)
    assert book.resume("c") == Cursor("http:4", 1)
    assert book.resume("unknown") is None
    book.add([event("http:6", "b")])  # a resumed stream re-sent b: b now continues there
    assert book.resume("b") == Cursor("http:6", 1)


def test_a_copy_read_to_its_end_is_forgotten_and_its_event_ids_resume_the_stream_it_copied() -> None:
    """An answer sent again (--repeats allow) is filed on a copy of its exchange: kept while a
    live connection may still resume it, forgotten once one was sent it to its end."""
    book = StreamBook()
    answer = [action("http:8", Kind.HTTP_RESPONSE, status=200, headers=[]), event("http:8", "p"), event("http:8", "r"),
              action("http:8", Kind.STREAM_END, reason="closed")]
    book.add(answer)
    for copy in ("http:8~1", "http:8~2"):
        book.add_copy(copy, of="http:8")
        book.add([Action(a.frame._replace(channel=copy), a.payload) for a in [*answer, event("http:8", "extra")]])
    book.sent_whole("http:8~1")  # a later copy sent p and r again: they go on naming it
    assert book.resume("p") == Cursor("http:8~2", 1) and book.resume("extra") == Cursor("http:8~2", 4)
    book.sent_whole("http:8~2")
    assert book.resume("p") == Cursor("http:8", 1) and book.resume("r") == Cursor("http:8", 2)
    assert book.resume("extra") is None  # sent by the copies alone
    assert set(book._logs) == {"http:8"}
    book.sent_whole("http:8")  # a recorded stream is kept
    assert book.resume("r") == Cursor("http:8", 2)


def test_events_are_encoded_with_their_recorded_fields() -> None:
    priming = action("http:1", Kind.SSE_EVENT, b"", id="1/1", event=None, retry=100)
    assert sse_bytes(priming) == b"id: 1/1\nretry: 100\ndata:\n\n"
    named = action("http:1", Kind.SSE_EVENT, b'{"a":1}', id=None, event="message", retry=None)
    assert sse_bytes(named) == b'event: message\ndata: {"a":1}\n\n'


def test_faults_fire_once_at_their_position() -> None:
    plan = FaultPlan(Faults.from_options(["http:3:2"], ["http:3:1:0.5"], ["http:4:1"], ["s1"]))
    assert plan.delay_before("http:3", 1) == 0.5 and plan.delay_before("http:3", 1) == 0.0
    assert not plan.drop_after("http:3", 1) and plan.drop_after("http:3", 2) and not plan.drop_after("http:3", 2)
    assert plan.malformed_after("http:4", 1) and not plan.malformed_after("http:4", 1)
    assert plan.missing_sessions == frozenset({"s1"})
    assert plan.unfired() == ["--session-404 s1"]
    assert plan.refuses("s1") and not plan.refuses("s2") and plan.unfired() == []


def test_faults_no_delivery_reached_are_reported_as_given() -> None:
    plan = FaultPlan(Faults.from_options(["http:3:2"], ["http:3:1:0.5"], ["http:4:1"]))
    assert plan.unfired() == ["--drop-after http:3:2", "--delay http:3:1:0.5", "--malformed http:4:1"]
    plan.delay_before("http:3", 1)
    assert plan.unfired() == ["--drop-after http:3:2", "--malformed http:4:1"]


@pytest.mark.parametrize("faults, error", [
    (Faults.from_options(["http:7:1"]), "--drop-after http:7:1: the cassette has no exchange http:7 that streamed events "
                                        "(those that did: http:3, http:4)"),
    (Faults.from_options([], ["http:3:3:1"]), "--delay http:3:3: exchange http:3 streamed 2 events"),
    (Faults.from_options([], [], ["http:4:2"]), "--malformed http:4:2: exchange http:4 streamed 1 event"),
    (Faults.from_options([], [], [], ["s9"]), "--session-404 's9': the cassette has no session with that id (its sessions: s1)"),
])
def test_faults_that_could_never_fire_are_refused(faults: Faults, error: str) -> None:
    with pytest.raises(UserError) as refused:
        faults.check({"http:3": 2, "http:4": 1}, ["s1"])
    assert str(refused.value) == error


def test_two_drops_on_one_stream_are_refused() -> None:
    with pytest.raises(UserError, match=r"^--drop-after names http:3 twice \(2 and 5\): a stream is cut once$"):
        Faults.from_options(["http:3:2", "http:3:5"])


@pytest.mark.parametrize("drop, delay", [(["3:2"], []), (["http:3:0"], []), (["http:x:1"], []), ([], ["http:3:1"]),
                                         ([], ["http:3:1:soon"]), ([], ["http:3:1:-1"]), ([], ["http:3:1:nan"]),
                                         ([], ["http:3:1:inf"])])
def test_bad_fault_positions_are_user_errors(drop: list[str], delay: list[str]) -> None:
    with pytest.raises(UserError, match="is not CHANNEL:N"):
        Faults.from_options(drop, delay)


def test_an_event_recorded_without_data_is_replayed_without_a_data_line() -> None:
    framer = HttpFramer(Redactor(RedactionRules.default()))
    framer.response(0.1, 1, 200, [("Content-Type", "text/event-stream")], None)
    frames = framer.chunk(0.2, 1, b"event: ping\n\nretry: 100\n\nid: 1\ndata:\n\n")
    assert [frame.info for frame in frames] == [{"id": None, "event": "ping", "retry": None, "data": False},
                                                {"id": None, "event": None, "retry": 100, "data": False},
                                                {"id": "1", "event": None, "retry": None}]  # as every cassette so far
    replayed = b"".join(sse_bytes(Action(frame, frame.payload)) for frame in frames)
    assert replayed == b"event: ping\n\nretry: 100\n\nid: 1\ndata:\n\n"


def test_an_event_s_data_goes_out_in_the_bytes_recorded_utf_8_or_not() -> None:
    """A server's bytes that are no UTF-8 went out as U+FFFD (three bytes each)."""
    data = b'{"text":"caf\xe9 \xff\xfe ok"}'
    frame = Frame(1, 0.0, Direction.SERVER_TO_CLIENT, "http:1", Kind.SSE_EVENT, None, data, {"id": "1-\udcff"})
    assert sse_bytes(Action(frame, data)) == b"id: 1-\xff\ndata: " + data + b"\n\n"
    lone = frame._replace(info={"id": "1-\ud800"})  # a JSON Lines cassette can hold one; UTF-8 cannot
    assert sse_bytes(Action(lone, data)) == b"id: 1-?\ndata: " + b'{"text":"caf? ?? ok"}' + b"\n\n"
