"""An HTTP recording replayed over stdio (or in memory): the JSON-RPC messages of its first
session that the server took (then those of the sessions its client opened the same way after it),
on the stdio channel, and nothing HTTP alone has."""

from __future__ import annotations

import pytest

from tapes.cassette.frames import STDIO, Direction, Frame, Kind
from tapes.cassette.store import Cassette, Header, load
from tapes.errors import UserError
from tapes.replay.control import ReplayControl
from tapes.replay.engine import ReplayEngine
from tapes.replay.session import ReplaySession
from tapes.replay.sessions import messages_over_stdio, served_over_stdio

from tests.support.messages import req, res
from tests.support.paths import CASSETTES
from tests.support.recordings import send

C2S, S2C = Direction.CLIENT_TO_SERVER, Direction.SERVER_TO_CLIENT


def exchange(seq: int, channel: str, status: int, request: dict, answer: dict | None, *, sse_data: bytes | None = None,
             session: str = "s1") -> list[Frame]:
    head = [["Mcp-Session-Id", session]] if session else []
    frames = [Frame(seq, 0.0, C2S, channel, Kind.HTTP_REQUEST, info={"method": "POST", "path": "/mcp", "headers": head}),
              Frame(seq + 1, 0.0, C2S, channel, Kind.MESSAGE, request),
              Frame(seq + 2, 0.0, S2C, channel, Kind.HTTP_RESPONSE, info={"status": status, "headers": head})]
    if answer is not None:
        frames.append(Frame(seq + 3, 0.0, S2C, channel, Kind.SSE_EVENT, answer, sse_data,
                            info={"id": None, "event": None, "retry": None}))
    return frames + [Frame(seq + 4, 0.0, S2C, channel, Kind.STREAM_END, info={"reason": "closed"})]


def test_a_committed_http_cassette_becomes_its_session_on_stdio() -> None:
    cassette = load(CASSETTES / "everything-http-2025-11-25.tape")
    frames, sessions, served = messages_over_stdio(cassette.frames)
    assert sessions == served == 1
    assert {(frame.channel, frame.kind) for frame in frames} == {(STDIO, Kind.MESSAGE)}
    assert [frame.seq for frame in frames] == sorted(frame.seq for frame in frames)
    assert frames[0].from_client and frames[0].message["method"] == "initialize"  # the refused probe before it is left out
    messages = [frame.message for frame in cassette.frames if frame.message is not None]
    assert all(frame.message in messages for frame in frames)


def test_a_refused_request_is_left_out_and_its_retry_kept() -> None:
    call = req(1, "tools/call", {"name": "echo"})
    frames = [*exchange(1, "http:1", 401, call, None), *exchange(10, "http:2", 200, call, res(1, {"ok": True}))]
    served, *_ = messages_over_stdio(frames)
    assert [(frame.seq, frame.message) for frame in served] == [(11, call), (13, res(1, {"ok": True}))]
    engine = ReplayEngine(served)
    assert send(engine, req(7, "tools/call", {"name": "echo"})) == [res(7, {"ok": True})]


def test_verbatim_bytes_are_kept_only_where_they_fit_on_a_line() -> None:
    one_line, two_lines = b'{"jsonrpc":"2.0","id":1,"result":{}}', b'{"jsonrpc":"2.0",\n"id":2,"result":{}}'
    frames = [*exchange(1, "http:1", 200, req(1, "ping"), res(1, {}), sse_data=one_line),
              *exchange(10, "http:2", 200, req(2, "ping"), res(2, {}), sse_data=two_lines)]
    served, *_ = messages_over_stdio(frames)
    assert [frame.data for frame in served if not frame.from_client] == [one_line, None]


def test_only_the_first_session_is_served_and_the_warning_says_how_many_there_were() -> None:
    frames = [*exchange(1, "http:1", 200, req(1, "ping"), res(1, {}), session="a"),
              *exchange(10, "http:2", 200, req(1, "tools/list"), res(1, {"tools": []}), session="b")]
    served = served_over_stdio(Cassette(Header(transport="http", server={"url": "http://x/mcp"}), frames), "two.tape")
    assert served.header.transport == STDIO
    assert [frame.message for frame in served.frames] == [req(1, "ping"), res(1, {})]
    assert served.warnings == ["two.tape was recorded over HTTP: this stdio replay serves the JSON-RPC messages of its "
                               "session (the first of 2), without HTTP's heads and event ids (--http serves it over HTTP)"]


def test_sessions_opened_alike_are_served_one_after_the_other_past_their_opening() -> None:
    """A client that ran one session per step (the Inspector CLI): a stdio client runs the steps in
    one session, so each later session opened the same way goes on from past its opening."""
    initialize = req(0, "initialize", {"protocolVersion": "2025-11-25", "_meta": {"run": 1}})
    again = req(0, "initialize", {"protocolVersion": "2025-11-25", "_meta": {"run": 2}})  # _meta aside, the same
    other = req(0, "initialize", {"protocolVersion": "2025-06-18"})
    frames = [*exchange(1, "http:1", 200, initialize, res(0, {}), session="a"),
              *exchange(10, "http:2", 200, req(1, "tools/call", {"name": "echo"}), res(1, "echoed"), session="a"),
              *exchange(20, "http:3", 200, again, res(0, {}), session="b"),
              *exchange(30, "http:4", 200, req(1, "resources/read", {"uri": "x"}), res(1, "read"), session="b"),
              *exchange(40, "http:5", 200, other, res(0, {}), session="c"),
              *exchange(50, "http:6", 200, req(1, "prompts/get", {"name": "p"}), res(1, "got"), session="c")]
    served = served_over_stdio(Cassette(Header(transport="http", server={"url": "http://x/mcp"}), frames), "steps.tape")
    assert [frame.seq for frame in served.frames] == [2, 4, 11, 13, 31, 33]  # not b's initialize, nor c (another version)
    assert served.warnings[-1].startswith("steps.tape was recorded over HTTP: this stdio replay serves the JSON-RPC "
                                          "messages of 2 of its 3 sessions, opened alike, one after the other")
    engine = ReplayEngine(served.frames)
    assert send(engine, req(5, "initialize", {"protocolVersion": "2025-11-25"})) == [res(5, {})]
    assert send(engine, req(6, "resources/read", {"uri": "x"})) == [res(6, "read")]
    assert send(engine, req(7, "tools/call", {"name": "echo"})) == [res(7, "echoed")]
    assert engine.report.clean


def test_an_http_cassette_whose_server_took_no_message_is_one_sentence() -> None:
    frames = exchange(1, "http:1", 401, req(1, "ping"), None)
    with pytest.raises(UserError, match="^none.tape was recorded over HTTP and its server took no JSON-RPC message"):
        served_over_stdio(Cassette(Header(transport="http", server={"url": "http://x/mcp"}), frames), "none.tape")


def test_a_stdio_cassette_is_served_as_it_is() -> None:
    cassette = load(CASSETTES / "everything-stdio-2025-11-25.tape")
    assert served_over_stdio(cassette, "it") is cassette


def test_a_request_its_recorded_client_gave_up_on_is_not_taken_for_a_cut_short_recording() -> None:
    """Served over stdio, an HTTP recording has no server exit; its unanswered request (the stream
    ended, the client closing it: a cancellation at 2026-07-28) is left unanswered, as recorded,
    not answered with the error of a recording cut short."""
    frames = [*exchange(1, "http:1", 200, req(1, "initialize", {"protocolVersion": "2026-07-28"}), res(1, {})),
              *exchange(10, "http:2", 200, req(2, "tools/call", {"name": "slow"}), None)]
    cassette = served_over_stdio(Cassette(Header("http", {"url": "http://x/mcp"}), frames), "c.tape")
    engine = ReplaySession(cassette.frames, ReplayControl().for_cassette(cassette.header)).engine
    send(engine, req(1, "initialize", {"protocolVersion": "2026-07-28"}))
    assert send(engine, req(2, "tools/call", {"name": "slow"})) == []
    assert engine.report.clean
    plain = ReplayEngine(cassette.frames)  # without the cassette's header: taken for a cut stdio recording
    send(plain, req(1, "initialize", {"protocolVersion": "2026-07-28"}))
    assert "the recording stops before the answer" in send(plain, req(2, "tools/call", {"name": "slow"}))[0]["error"]["message"]
