"""A cassette too big to read before serving (more than `READ_STEP` frames): `tapes replay --http`
reads it as it serves it, and each SDK client gets what it gets from the cassette read whole."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any
from urllib.parse import urljoin

import httpx
import pytest

from replayer.http import HttpReplayer, ReplayOptions, replay_server
from tapes.cassette.frames import Direction, Frame, Kind
from tapes.cassette.store import Cassette, load, save, stream
from tapes.replay import http_reading
from tapes.replay.control import ReplayControl
from tapes.replay.http_reading import READ_STEP
from tapes.wire.sse import SSEEvent, SSEParser
from tests.support.flows import everything_flow
from tests.support.http_cassettes import REPEATED, write_repeated_session
from tests.support.http_clients import RawSession, run_flow
from tests.support.http_peers import Tapes
from tests.support.paths import CASSETTES
from tests.support.processes import TIMEOUT


def test_a_big_cassette_is_served_as_it_is_read_to_each_client_as_read_whole(tmp_path: Path,
                                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    big = tmp_path / "big.tape"
    assert write_repeated_session(big, READ_STEP * 3 // 2) > READ_STEP
    whole = Tapes("replay", str(REPEATED), "--http", banner="replaying at")
    try:
        expected = run_flow(monkeypatch, everything_flow, whole.url)
    finally:
        assert whole.stop()[0] == 0
    replay = Tapes("replay", str(big), "--http", banner="replaying at")
    try:
        # each client opens the first copy no client played yet, read or still unread
        got = [run_flow(monkeypatch, everything_flow, replay.url) for _ in range(3)]
    finally:
        code, summary = replay.stop()
    assert got == [expected] * 3
    first = f"session {load(REPEATED).header.labels['sessions']}-1 (and 2 more alike)"
    assert f"{first}: played 58 frames, 0 unmatched, 0 unused" in summary, summary
    assert code == 0 and "-4: played 0 frames" in summary  # the copies no client opened fail nothing


def test_damage_past_the_first_step_is_said_once_read_and_what_came_before_it_is_served(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A small cassette with a head HTTP cannot send is refused before serving; a big one is served
    as far as its damage, which is said at the end in its one sentence."""
    big = tmp_path / "big.tape"
    write_repeated_session(big, READ_STEP * 3 // 2)
    cassette = load(big)
    last = cassette.frames[-1]
    damaged = Frame(last.seq + 1, last.t, Direction.SERVER_TO_CLIENT, "http:9999", Kind.HTTP_RESPONSE,
                    info={"status": 999, "headers": []})
    save(Cassette(cassette.header, [*cassette.frames, damaged]), big)
    replay = Tapes("replay", str(big), "--http", banner="replaying at")
    try:
        got = run_flow(monkeypatch, everything_flow, replay.url)
    finally:
        code, summary = replay.stop()
    assert got["echo"] and code == 2, summary
    assert f"frame {damaged.seq} is a response head with status 999, which HTTP cannot send" in summary, summary


def test_an_authorization_flow_found_past_the_first_step_is_said_in_the_summary(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Credentials first sent past the first step read: the flow is replayed as the sessions'
    exchanges, and the summary says so, whether or not a client came (here none did)."""
    monkeypatch.setattr(http_reading, "READ_STEP", 10)
    late = tmp_path / "late-flow.tape"
    write_repeated_session(late, 200)
    cassette = load(late)
    sent = next(f for f in cassette.frames[100:] if f.kind is Kind.HTTP_REQUEST)
    with_credentials = sent._replace(info={**sent.info, "headers": [*sent.info["headers"], ["Authorization", "Bearer t"]]})
    save(Cassette(cassette.header, [with_credentials if f is sent else f for f in cassette.frames]), late)
    replayer = HttpReplayer(stream(late))
    assert not replayer.read_through
    assert (f"adapted the recording's authorization flow begins at frame {sent.seq}, past what was read before serving "
            "began: its exchanges were replayed as the sessions'") in replayer.report_lines()


def test_a_session_served_again_is_let_go_once_its_client_ended_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """A replay that serves a suite again and again keeps what its summary says of each copy it
    served, not the copy's index: once the client ended the session (its DELETE, as recorded), or
    another client got the exchanges outside a session afresh, and nothing of the copy is in
    flight, it is let go. The recorded sessions stay, to be served again."""
    with replay_server(REPEATED) as server:
        got = [run_flow(monkeypatch, everything_flow, server.url) for _ in range(3)]
        replayer = server.replayer
        copies = [session for session in replayer._sessions if session not in replayer._slots]
        ended = [copy for copy in copies if copy.ended is not None and copy._replay is None]
        # two copies of the session, and of the probe outside it, the last of which the next client gets
        assert len(copies) == 4 and ended == [copy for copy in copies if copy is not replayer._sessionless]
        assert all(copy.live_id not in replayer._live for copy in copies)
        assert all(slot.ended is None for slot in replayer._slots)
        lines = server.report_lines
    assert got[1:] == got[:1] * 2
    session = load(REPEATED).header.labels["sessions"]
    assert any(line.startswith(f"session {session} (and 2 more alike): played 58 frames, 0 unmatched") for line in lines), lines


def _echo(raw: RawSession) -> dict[str, Any]:
    return raw.request("tools/call", {"name": "echo", "arguments": {"message": "hello"}})


def _events(response: httpx.Response) -> list[SSEEvent]:
    parser = SSEParser()
    return [event for chunk in response.iter_bytes() for event in parser.feed(chunk)]


def test_a_session_repeating_a_request_keeps_nothing_per_repeat() -> None:
    """Under --repeats allow a client may send the same request all session long: each repeat's
    answer goes out on a copy of the recorded exchange, which is let go once sent whole, and the
    engine keeps no table entry for an answered repeat. What the session keeps is as much after
    400 repeats as after 40."""
    allowing = ReplayOptions(control=ReplayControl.build(repeats="allow"))
    with replay_server(REPEATED, options=allowing) as server, httpx.Client(timeout=TIMEOUT) as http:
        raw = RawSession(http, server.url)
        session = server.replayer._live[raw.session]

        def kept(repeats: int) -> tuple[int, ...]:
            for _ in range(repeats):
                request = _echo(raw)
                [answer] = [event for event in _events(raw.post(request)) if event.data]
                assert json.loads(answer.data) == {"jsonrpc": "2.0", "id": request["id"],
                                                   "result": {"content": [{"type": "text", "text": "Echo: hello"}]}}
            return len(session.book._logs), len(session.book._event_channel), len(session.engine._by_live_id)

        assert kept(40) == kept(360)
        # the events of the answers sent again resume the recorded exchange, which sent them too
        [first, *_] = _events(raw.post(_echo(raw)))
        with http.stream("GET", server.url, headers=raw.headers(**{"Last-Event-ID": first.id})) as resumed:
            assert resumed.status_code == 200
            assert [json.loads(event.data)["id"] for event in _events(resumed)] == [2]  # the first echo's


def test_a_repeat_s_answer_cut_before_its_end_is_resumed_on_its_copy() -> None:
    """A repeat's stream the client left before its end (here held back by a delay fault) is kept
    for its Last-Event-ID, and let go once the resumption sent the rest."""
    control = ReplayControl.build(repeats="allow", faults=["tools/call@echo#2:delay:0.5"])
    with replay_server(REPEATED, options=ReplayOptions(control=control)) as server, httpx.Client(timeout=TIMEOUT) as http:
        raw = RawSession(http, server.url)
        session = server.replayer._live[raw.session]
        raw.post(_echo(raw))
        repeat = _echo(raw)
        with raw.stream(repeat) as response:
            parser, first = SSEParser(), []
            for chunk in response.iter_bytes():
                if first := parser.feed(chunk):
                    break
        assert len(first) == 1 and not first[0].data  # the priming event; the answer was held back
        kept = len(session.book._logs)
        with http.stream("GET", server.url, headers=raw.headers(**{"Last-Event-ID": first[0].id})) as resumed:
            assert resumed.status_code == 200
            assert [json.loads(event.data)["id"] for event in _events(resumed)] == [repeat["id"]]
        assert len(session.book._logs) == kept - 1


def test_a_legacy_sse_session_keeps_nothing_per_answer_its_stream_carried() -> None:
    """A legacy HTTP+SSE session answers every request on its one SSE stream, which no client can
    resume: what the stream sent is let go, so a client asking all session long (here the same
    request again, under --repeats allow) is not kept every answer."""
    recorded = load(CASSETTES / "everything-sse-2024-11-05.tape")
    asked = [json.loads(frame.payload) for frame in recorded.frames if frame.from_client and frame.kind is Kind.MESSAGE]
    initialize, initialized = asked[:2]
    allowing = ReplayOptions(control=ReplayControl.build(repeats="allow"))
    with replay_server(recorded, options=allowing) as server, httpx.Client(timeout=TIMEOUT) as http, \
            http.stream("GET", server.url, headers={"Accept": "text/event-stream"}) as stream:
        chunks, parser, pending = stream.iter_bytes(), SSEParser(), list[SSEEvent]()

        def answer_to(message: dict[str, Any]) -> dict[str, Any]:
            assert http.post(endpoint, json=message).status_code == 202
            while True:
                while not pending:
                    pending.extend(parser.feed(next(chunks)))
                if (event := json.loads(pending.pop(0).data)).get("id") == message["id"]:
                    return event

        while not pending:
            pending.extend(parser.feed(next(chunks)))
        endpoint = urljoin(server.url, pending.pop(0).data)
        assert answer_to(initialize)["result"]["serverInfo"]
        assert http.post(endpoint, json=initialized).status_code == 202
        [session] = server.replayer._live.values()
        log = session.book.log(session.legacy_stream)

        def kept(repeats: int) -> int:
            for number in range(repeats):
                assert answer_to({"jsonrpc": "2.0", "id": f"list-{number}", "method": "tools/list"})["result"]["tools"]
            return len(log.body)

        assert kept(40) == kept(360)
