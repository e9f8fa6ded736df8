"""Hostile cassettes that load never break what serves or checks them: generated cassettes of both
transports (tests/support/hostile_cassettes.py) go into a replay session as the stdio and
in-memory replayers build it (over the frames, and over them read as it goes), into the pieces the
HTTP replayer builds its sessions and rules from, and into `tapes verify`'s client scripts. Each
ends normally or with a UserError, and the replay's made-up replies are JSON-RPC. Then one test per
shape the sweep found breaking them.

The example count comes from TAPES_FUZZ_EXAMPLES."""

from __future__ import annotations

import json
import os
import re
from functools import partial
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tapes.analysis.verify import ClientScript, HttpClientScript
from tapes.cassette.frames import STDIO, Direction, Frame, Kind
from tapes.cassette.store import Cassette, CassetteError, loads
from tapes.errors import UserError
from tapes.replay.control import ReplayControl
from tapes.replay.engine import Race, Repeats
from tapes.replay.http_rules import check_sendable, param_headers, recorded_cors, recorded_versions
from tapes.replay.oauth import AuthFlow
from tapes.replay.outcomes import NO_MATCH, Action, Reception
from tapes.replay.polls import Polls
from tapes.replay.session import ReplaySession
from tapes.replay.sessions import split_sessions
from tapes.replay.streams import StreamBook, sse_bytes
from tapes.wire.http import header
from tapes.wire.jsonrpc import encode

from tests.support.hostile_cassettes import cassettes, mutated_cassettes, recursion_as_in_the_cli
from tests.support.messages import note, req, res
from tests.support.recordings import Recording

EXAMPLES = int(os.environ.get("TAPES_FUZZ_EXAMPLES", "40"))
C2S, S2C = Direction.CLIENT_TO_SERVER, Direction.SERVER_TO_CLIENT
LIVE = [b'{"jsonrpc":"2.0","id":"live-0","method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{}}}',
        b'{"jsonrpc":"2.0","method":"notifications/initialized"}',
        b'{"jsonrpc":"2.0","id":"live-1","method":"tools/list"}',
        b'{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"live-1"}}',
        b'{"jsonrpc":"2.0","id":"live-2","result":{}}', b"not json"]


def _checked(reception: Reception) -> list[Action]:
    for reply in reception.replies:
        answer = json.loads(reply.payload)
        assert answer["jsonrpc"] == "2.0" and ("error" in answer or "result" in answer)
    return reception.actions


def _served(session: ReplaySession, frames: list[Frame], http: bool) -> list[Action]:
    """A live client that sends what the recorded one did (then a few messages of its own), opens
    what it opened, and ends: what the session released."""
    actions = _checked(session.start())
    for frame in frames:
        if frame.from_client and frame.kind is Kind.MESSAGE:
            actions += _checked(session.receive(frame.shown_payload))
        elif http and frame.kind is Kind.HTTP_REQUEST and frame.info["method"] in ("GET", "DELETE"):
            last_event_id = header(frame.info["headers"], "last-event-id")
            actions += _checked(session.open(frame.info["method"], frame.info["path"], last_event_id))
    for payload in LIVE:
        actions += _checked(session.receive(payload))
    actions += _checked(session.end())
    session.report.lines()
    json.dumps(session.report.as_json())
    return actions


def _replayed(cassette: Cassette, control: ReplayControl) -> None:
    control = control.for_cassette(cassette.header)
    if cassette.header.transport == STDIO:
        _served(ReplaySession(cassette.frames, control), cassette.frames, http=False)
        _served(ReplaySession(iter(cassette.frames), control), cassette.frames, http=False)  # read as it goes
        return
    check_sendable(cassette.frames)
    auth, frames = AuthFlow.split(cassette.frames, cassette.header.labels.get("origin"))
    auth.report_lines()
    recorded_versions(cassette.frames), param_headers(cassette.frames), recorded_cors(frames)
    for recorded in split_sessions(frames):
        book = StreamBook()
        actions = _served(ReplaySession(recorded.frames, control), recorded.frames, http=True)
        book.add(actions)
        for action in actions:
            if action.frame.kind is Kind.SSE_EVENT:
                sse_bytes(action)


def _verified(cassette: Cassette) -> None:
    """A live server that says what the recorded one did, and one that says nothing (each wait given up)."""
    http = cassette.header.transport != STDIO
    for answering in (True, False):
        script = HttpClientScript(cassette.frames) if http else ClientScript(cassette.frames)
        script.ready()
        for frame in cassette.frames if answering else ():
            if http and frame.kind is Kind.HTTP_RESPONSE and frame.channel.startswith("http:"):
                number = frame.channel[len("http:"):]
                if number.isascii() and number.isdigit():
                    assert isinstance(script, HttpClientScript)
                    script.receive_head(int(number), frame.info["headers"])
            elif not frame.from_client and frame.message is not None:
                script.receive(frame.shown_payload)
            script.ready()
        while not script.finished:
            script.force()


# every policy a replay can be steered by (the race, repeated requests, polls), with a timing so
# that polls advance on the recorded clock
_CONTROLS = st.builds(ReplayControl, race=st.sampled_from(Race), repeats=st.sampled_from(Repeats),
                      speed=st.sampled_from([None, 1.0]), polls=st.sampled_from(Polls))


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.one_of(cassettes(), mutated_cassettes()), _CONTROLS)
def test_replay_and_verify_end_normally_on_any_cassette_that_loads(file: tuple[bytes, str], control: ReplayControl) -> None:
    cassette = loads(*file)
    with recursion_as_in_the_cli():
        for serve_or_check in (partial(_replayed, control=control), _verified):
            try:
                serve_or_check(cassette)
            except UserError:
                pass


# --- what the sweep found ------------------------------------------------------------------------


def _stdio(*messages: tuple[Direction, Any], data: dict[int, bytes] | None = None) -> list[Frame]:
    """Frames of a stdio session, each message as given (no JSON round trip: msgpack's bytes stay)."""
    return [Frame(seq, float(seq), direction, STDIO, Kind.MESSAGE, message, (data or {}).get(seq))
            for seq, (direction, message) in enumerate(messages, start=1)]


def _replies(session: ReplaySession, message: Any) -> list[Any]:
    reception = session.receive(encode(message))
    return [json.loads(out.payload) for out in [*reception.replies, *reception.actions]]


def test_tokens_and_request_ids_that_are_objects_or_params_that_are_arrays_tie_nothing() -> None:
    frames = _stdio((C2S, req(1, "tools/call", {"name": "a", "_meta": {"progressToken": {"t": 1}}})),
                    (S2C, note("notifications/progress", {"progressToken": {"t": 1}, "progress": 1})),
                    (S2C, note("notifications/progress", ["t", 1])),
                    (C2S, note("notifications/cancelled", [1])),
                    (C2S, note("notifications/cancelled", {"requestId": [1]})),
                    (S2C, res(1, {"content": []})))
    session = ReplaySession(frames, ReplayControl())
    session.start()
    answered = _replies(session, req(7, "tools/call", {"name": "a"}))
    assert answered[-1] == res(7, {"content": []})


def test_a_miss_is_compared_with_a_recorded_request_holding_msgpack_bytes() -> None:
    recorded = req(1, "tools/call", {"name": "a", "arguments": {b"k": b"\x00", "k": 1}})
    # its bytes as the recorded client wrote them (the message itself has no JSON form)
    frames = _stdio((C2S, recorded), (S2C, res(1, {})), data={1: b'{"k":1}'})
    session = ReplaySession(frames, ReplayControl())
    session.start()
    [error] = _replies(session, req(2, "tools/call", {"name": "a", "arguments": {"k": 2}}))
    assert "nearest recorded is tools/call #1 (frame 1)" in error["error"]["message"]
    assert '/params/arguments/<1 bytes: aw==>: "<1 bytes: AA==>" → (absent)' in error["error"]["message"]


def test_two_frames_with_one_seq_are_refused_in_one_sentence() -> None:
    frames = _stdio((C2S, req(1, "ping")), (S2C, res(1, {})))
    frames[1] = Frame(1, 1.0, S2C, STDIO, Kind.MESSAGE, res(1, {}))
    with pytest.raises(CassetteError, match="frame 1 comes twice"):
        ReplaySession(frames, ReplayControl()).start()


def test_an_sse_event_name_with_a_lone_surrogate_goes_out_as_utf8() -> None:
    event = Frame(1, 0.0, S2C, "http:1", Kind.SSE_EVENT, res(1, {}), info={"id": "e\ud800", "event": "message", "retry": None})
    assert sse_bytes(Action(event, encode(res(1, {})))).startswith(b"id: e?\nevent: message\ndata: {")


def test_tools_whose_input_schema_is_no_object_mirror_no_headers() -> None:
    listed = res(1, {"tools": [{"name": "a", "inputSchema": ["x"]}, {"name": "b", "inputSchema": {"properties": [1]}},
                               {"name": "c", "inputSchema": {"properties": {"q": {"x-mcp-header": "Q"}}}}]})
    assert param_headers(_stdio((S2C, listed))) == {"c": {"mcp-param-q": "q"}}


@pytest.mark.parametrize(("status", "headers", "named"), [
    (0, [], "status 0"), (600, [], "status 600"), (-1, [], "status -1"),
    (200, [["X-Odd", "\U0001f600"]], "'X-Odd': '\U0001f600'"), (200, [["X-Odd", "\ud800"]], "'X-Odd': '\\ud800'"),
    (200, [["X-Odd", "a\r\nSet-Cookie: x=1"]], "'X-Odd': 'a\\r\\nSet-Cookie: x=1'"), (200, [["X Odd", "v"]], "'X Odd': 'v'"),
])
def test_a_response_head_http_cannot_send_is_refused_before_serving(status: int, headers: list[list[str]], named: str) -> None:
    recording = Recording()
    recording.post(1, req(1, "initialize", {}))
    recording.add(S2C, 1, Kind.HTTP_RESPONSE, status=200, headers=[["Content-Type", "application/json"], ["X-Fine", "é\t;"]])
    check_sendable(recording.frames)  # Latin-1 and a tab are what a recorder writes
    recording.add(S2C, 1, Kind.HTTP_RESPONSE, status=status, headers=headers)
    with pytest.raises(CassetteError, match=f"frame 4 is a response head with .*{re.escape(named)}.*which HTTP cannot send"):
        check_sendable(recording.frames)


@pytest.mark.parametrize("info", [{"id": "1\ndata: {}", "event": None}, {"id": None, "event": "message\r"}])
def test_an_sse_event_whose_id_or_name_would_forge_fields_is_refused_before_serving(info: dict[str, Any]) -> None:
    recording = Recording()
    recording.post(1, req(1, "initialize", {}))
    recording.add(S2C, 1, Kind.HTTP_RESPONSE, status=200, headers=[["Content-Type", "text/event-stream"]])
    recording.add(S2C, 1, Kind.SSE_EVENT, res(1, {}), id="1", event="message", retry=None)
    check_sendable(recording.frames)
    recording.add(S2C, 1, Kind.SSE_EVENT, res(1, {}), retry=None, **info)
    with pytest.raises(CassetteError, match=r"frame 5 is an SSE event with the (id|event) .*, which an event stream cannot carry"):
        check_sendable(recording.frames)


def test_a_json_response_the_recording_never_saw_end_ends_after_its_body() -> None:
    """A recorder stopped mid-exchange leaves a JSON answer without its end: the replay ends it
    after its body (the live client waited for ever), read at once or as it goes. An event stream
    without an end stays open, as its server kept it."""
    recording = Recording()
    recording.post(1, req(1, "initialize", {}))
    recording.add(S2C, 1, Kind.HTTP_RESPONSE, status=200, headers=[["Content-Type", "application/json"]])
    recording.add(S2C, 1, Kind.MESSAGE, res(1, {}))
    recording.post(2, req(2, "tools/call", {"name": "a"}))
    recording.add(S2C, 2, Kind.HTTP_RESPONSE, status=200, headers=[["Content-Type", "text/event-stream"]])
    for frames in (recording.frames, iter(recording.frames)):
        session = ReplaySession(frames, ReplayControl())
        session.start()
        answered = session.receive(encode(req(1, "initialize", {}))).actions
        assert [(action.frame.kind, action.frame.channel) for action in answered] == [
            (Kind.HTTP_RESPONSE, "http:1"), (Kind.MESSAGE, "http:1"), (Kind.STREAM_END, "http:1")]
        streamed = session.receive(encode(req(2, "tools/call", {"name": "a"}))).actions
        assert [action.frame.kind for action in streamed] == [Kind.HTTP_RESPONSE]


def test_verify_ties_nothing_to_objects_where_ids_and_states_go() -> None:
    frames = _stdio((C2S, req(1, "tools/call", {"name": "a", "_meta": {"progressToken": ["t"]}, "requestState": {}})),
                    (S2C, note("notifications/progress", {"progressToken": {"t": 1}, "progress": 1})),
                    (S2C, res(1, {"requestState": ["s"]})),
                    (C2S, note("notifications/cancelled", {"requestId": {"id": 1}})),
                    (C2S, note("notifications/cancelled", [1])))
    script = ClientScript(frames)
    assert len(script.ready()) == 1 and script.waiting_for == [("response", 1)]
    script.receive(encode(res(1, {})))
    assert len(script.ready()) == 2 and script.finished


def test_verify_sends_a_message_without_a_json_form_as_recorded_or_refuses_it() -> None:
    surrogate = req(1, "tools/call", {"name": "\ud800"})  # as a JSON Lines cassette holds an escape
    script = ClientScript(_stdio((C2S, surrogate), data={1: b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"\\ud800"}}'}))
    assert script.ready() == [b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"\\ud800"}}']
    with pytest.raises(CassetteError, match="frame 1 holds a message that is not JSON"):
        ClientScript(_stdio((C2S, req(1, "tools/call", {"name": b"a"}))))


def test_verify_over_http_skips_exchanges_whose_channel_names_no_number() -> None:
    recording = Recording()
    recording.post(1, req(1, "initialize", {}))
    recording.add(C2S, 1, Kind.HTTP_RESPONSE, status=200, headers=[])
    recording.frames += [Frame(9, 0.0, C2S, "http:²", Kind.HTTP_REQUEST, info={"method": "POST", "path": "/mcp", "headers": []})]
    script = HttpClientScript(recording.frames)
    assert [request.exchange for request in script.ready()] == [1]


def test_a_miss_that_quotes_a_lone_surrogate_of_the_cassette_is_still_json() -> None:
    """A JSON Lines cassette can hold "\\ud800", which UTF-8 cannot: the error naming the nearest
    recorded request quotes it as its escape (encoding it raised, ending the replay). Found by
    the fuzzing above: the recorded batch is played by its bytes, its last request stays a candidate."""
    batch = [{"jsonrpc": "2.0", "method": "initialize", "params": {}},
             {"jsonrpc": "2.0", "method": "initialize", "id": None, "params": ["\ud800"]}]
    frames = [Frame(1, 0.0, C2S, STDIO, Kind.MESSAGE, batch, b"[")]
    session = ReplaySession(frames, ReplayControl())
    session.start()
    session.receive(b"[")
    [reply] = session.receive(LIVE[2]).replies
    assert b"\\ud800" in reply.payload and json.loads(reply.payload)["error"]["code"] == NO_MATCH
