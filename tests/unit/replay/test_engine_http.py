"""The replay engine on HTTP recordings: frames go out on their exchange, after what the client
sent on it; GET streams are opened by the live client; SSE events are re-stamped; sessions split."""

from __future__ import annotations

import json
from typing import Any

from tapes.replay.engine import ReplayEngine
from tapes.cassette.frames import Direction, Kind
from tapes.replay.sessions import split_sessions
from tapes.wire.jsonrpc import encode

from tests.support.messages import note, progress, req, res
from tests.support.recordings import Recording

C, S = Direction.CLIENT_TO_SERVER, Direction.SERVER_TO_CLIENT


def session_recording() -> Recording:
    r = Recording()
    r.post(1, req(1, "initialize", {"protocolVersion": "2025-11-25"}))
    r.head(1, 200, session="s1")
    r.event(1, "1-1", res(1, {"protocolVersion": "2025-11-25"}))
    r.end(1)
    r.post(2, note("notifications/initialized"), session="s1")
    r.head(2, 202, sse=False)
    r.end(2)
    r.get(3, "s1")
    r.head(3, 200)
    r.post(4, req(2, "tools/call", {"name": "ask"}, token=2), session="s1")
    r.head(4, 200)
    r.event(4, "4-1", progress(2, 1))
    r.event(4, "4-2", req(0, "sampling/createMessage", {"messages": []}))
    r.event(3, "3-1", note("notifications/resources/list_changed"))
    r.post(5, res(0, {"role": "assistant"}), session="s1")
    r.head(5, 202, sse=False)
    r.end(5)
    r.event(4, "4-3", res(2, "done"))
    r.end(4)
    return r


def what(actions: list[Any]) -> list[tuple[str, str, Any]]:
    """(channel, kind, message or status) of each released action."""
    out = []
    for action in actions:
        frame = action.frame
        detail = frame.info.get("status") if frame.kind is Kind.HTTP_RESPONSE else (
            json.loads(action.payload) if frame.message is not None else None)
        out.append((frame.channel, frame.kind.value, detail))
    return out


def test_each_exchange_is_answered_on_its_channel_with_restamped_events() -> None:
    engine = ReplayEngine(session_recording().frames)
    assert engine.start() == []
    got = engine.receive(json.dumps(req(7, "initialize", {"protocolVersion": "2025-11-25"})).encode())
    assert got.channel == "http:1"
    assert what(got.actions) == [("http:1", "http_response", 200),
                                 ("http:1", "sse_event", res(7, {"protocolVersion": "2025-11-25"})),
                                 ("http:1", "stream_end", None)]
    got = engine.receive(json.dumps(note("notifications/initialized")).encode())
    assert got.channel == "http:2" and what(got.actions) == [("http:2", "http_response", 202), ("http:2", "stream_end", None)]
    # the tool call is answered on its own stream; the server's sampling request rides it too
    got = engine.receive(json.dumps(req(8, "tools/call", {"name": "ask"}, token="t8")).encode())
    assert got.channel == "http:4"
    assert what(got.actions) == [("http:4", "http_response", 200), ("http:4", "sse_event", progress("t8", 1)),
                                 ("http:4", "sse_event", req(0, "sampling/createMessage", {"messages": []}))]
    got = engine.receive(json.dumps(res(0, {"role": "assistant", "model": "other"})).encode())
    assert got.channel == "http:5"
    assert what(got.actions) == [("http:5", "http_response", 202), ("http:5", "stream_end", None),
                                 ("http:4", "sse_event", res(8, "done")), ("http:4", "stream_end", None)]
    assert engine.report.clean


def test_standalone_get_stream_frames_wait_for_the_live_get() -> None:
    engine = ReplayEngine(session_recording().frames)
    engine.receive(json.dumps(req(1, "initialize", {"protocolVersion": "2025-11-25"})).encode())
    engine.receive(json.dumps(note("notifications/initialized")).encode())
    calls = engine.receive(json.dumps(req(2, "tools/call", {"name": "ask"}, token=2)).encode())
    assert all(action.frame.channel == "http:4" for action in calls.actions)
    opened = engine.open("GET", "/mcp")
    assert opened.channel == "http:3"
    assert what(opened.actions) == [("http:3", "http_response", 200),
                                    ("http:3", "sse_event", note("notifications/resources/list_changed"))]
    assert engine.open("GET", "/mcp").channel is None  # only one GET stream was recorded
    assert engine.open("GET", "/mcp", "4-2").channel is None  # nor any resumption


def test_recorded_resumption_is_matched_by_its_last_event_id() -> None:
    r = Recording()
    r.post(1, req(1, "tools/call", {"name": "slow"}, token=1), session="s")
    r.head(1, 200)
    r.event(1, "e1", progress(1, 1))
    r.add(S, 1, Kind.STREAM_END, reason="client_disconnect")
    r.get(2, "s", last_event_id="e1")
    r.head(2, 200)
    r.event(2, "e2", res(1, "ok"))
    r.end(2)
    engine = ReplayEngine(r.frames)
    got = engine.receive(json.dumps(req(5, "tools/call", {"name": "slow"})).encode())
    # no progress token live: the progress event is not sent; the recorded cut is
    assert what(got.actions) == [("http:1", "http_response", 200), ("http:1", "stream_end", None)]
    resumed = engine.open("GET", "/mcp", "e1")
    assert resumed.channel == "http:2"
    assert what(resumed.actions) == [("http:2", "http_response", 200), ("http:2", "sse_event", res(5, "ok")),
                                     ("http:2", "stream_end", None)]


def test_an_answer_a_resumed_stream_sends_again_carries_the_live_id() -> None:
    """A server's event store may send an answer again on a resumed GET stream (server-everything
    does): it answers the same live request, under its live id, not the recorded one."""
    r = Recording()
    r.get(1, "s")
    r.head(1, 200)
    r.event(1, "g1", note("notifications/message", {"level": "info", "data": "hi"}))
    r.post(2, req(4, "tools/call", {"name": "toggle"}), session="s")
    r.head(2, 200)
    r.event(2, "p1", res(4, "started"))
    r.end(2)
    r.add(S, 1, Kind.STREAM_END, reason="client_disconnect")
    r.get(3, "s", last_event_id="g1")
    r.head(3, 200)
    r.event(3, "p1", res(4, "started"))
    engine = ReplayEngine(r.frames)
    engine.open("GET", "/mcp")
    got = engine.receive(json.dumps(req(9, "tools/call", {"name": "toggle"})).encode())
    assert ("http:2", "sse_event", res(9, "started")) in what(got.actions)
    resumed = engine.open("GET", "/mcp", "g1")
    assert what(resumed.actions) == [("http:3", "http_response", 200), ("http:3", "sse_event", res(9, "started"))]


def test_sessions_are_split_by_session_id_and_legacy_endpoint() -> None:
    r = session_recording()
    frames = r.frames
    other = Recording()
    other.add(C, 9, Kind.HTTP_REQUEST, method="GET", path="/sse", headers=[])
    other.add(S, 9, Kind.HTTP_RESPONSE, status=200, headers=[])
    other.add(S, 9, Kind.SSE_EVENT, None, data=b"/message?sessionId=abc", id=None, event="endpoint", retry=None)
    other.add(C, 10, Kind.HTTP_REQUEST, method="POST", path="/message?sessionId=abc", headers=[])
    other.add(C, 10, Kind.MESSAGE, req(1, "ping"))
    sessions = split_sessions(frames + other.frames)
    assert [(s.session_id, len(s.frames)) for s in sessions] == [("s1", len(frames)), ("abc", 5)]


def test_a_stream_the_recorded_client_closed_is_held_open_only_if_it_left_a_request_unanswered() -> None:
    r = Recording()
    r.post(1, req(1, "tools/call", {"name": "slow"}), session="s")
    r.head(1, 200)
    r.add(S, 1, Kind.STREAM_END, reason="client_disconnect")  # before the answer: a cancellation
    r.post(2, req(2, "prompts/get", {"name": "p"}), session="s")
    r.head(2, 200)
    r.event(2, "e2", res(2, "ok"))
    r.add(S, 2, Kind.STREAM_END, reason="client_disconnect")  # after it: the client tearing down
    engine = ReplayEngine(r.frames)
    assert engine.held_open("http:1") and not engine.held_open("http:2")


def test_a_posted_request_plays_one_recorded_on_its_path() -> None:
    # the recorded client sent the same call to a wrong path first (a 404), then to the endpoint
    r = Recording()
    call = req(1, "tools/call", {"name": "echo"})
    r.post(1, call, path="/wrong")
    r.head(1, 404, sse=False)
    r.end(1)
    r.post(2, call, path="/mcp?x=1")  # the query is no part of the path
    r.head(2, 200, sse=False)
    r.add(S, 2, Kind.MESSAGE, res(1, "echoed"))
    r.end(2)
    engine = ReplayEngine(r.frames)
    payload = json.dumps(req(5, "tools/call", {"name": "echo"})).encode()
    got = engine.receive(payload, path="/mcp")
    assert got.channel == "http:2" and what(got.actions)[-2:] == [("http:2", "message", res(5, "echoed")), ("http:2", "stream_end", None)]
    # another to a path the recorded one did not go to is a miss naming the path that differed
    [miss] = engine.receive(payload, path="/other").replies
    assert json.loads(miss.payload)["error"]["message"] == (
        "mcp-tapes: no recorded request matches tools/call; nearest recorded is tools/call #1 (frame 2), "
        "differing at its path: '/wrong' → '/other'")
    assert engine.receive(payload, path="/wrong").channel == "http:1"


def test_an_initialize_posted_elsewhere_is_answered_and_the_path_named() -> None:
    """A live initialize to another path than the recorded one (the recorded client followed a
    redirect) plays it, as any handshake; the note named no difference at all."""
    r = Recording()
    initialize = req(1, "initialize", {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "c"}})
    r.post(1, initialize, path="/mcp")
    r.head(1, 200, sse=False)
    r.add(S, 1, Kind.MESSAGE, res(1, {"protocolVersion": "2025-11-25"}))
    r.end(1)
    engine = ReplayEngine(r.frames)
    got = engine.receive(encode(initialize), path="/old/mcp")
    assert got.channel == "http:1"
    assert engine.report.adapted == ["initialize id 1: answered as the recorded initialize #1 (frame 2), which differed at "
                                     "its path: '/mcp' → '/old/mcp'"]


def test_a_recorded_message_the_live_reader_refuses_is_matched_by_its_bytes() -> None:
    # a lenient recorder took these as messages; the replay's reader refuses them, as the same
    # bytes from the recording client: they play what the server said, not a made-up error
    r = Recording()
    odd = [{"jsonrpc": "2.0", "id": 3.5, "method": "tools/list"}, {"jsonrpc": "2.0", "id": None, "method": "tools/list"},
           {"jsonrpc": "2.0", "method": "notifications/initialized", "params": None}]
    for channel, message in enumerate(odd, start=1):
        r.post(channel, message)
        r.head(channel, 400, sse=False)
        r.add(S, channel, Kind.MESSAGE, {"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": "Invalid"}})
        r.end(channel)
    engine = ReplayEngine(r.frames)
    for channel, message in enumerate(odd, start=1):
        got = engine.receive(encode(message), path="/mcp")
        assert got.replies == [] and got.channel == f"http:{channel}"
        assert (f"http:{channel}", "http_response", 400) in what(got.actions)
    assert engine.report.clean and engine.report.unused == []


def stateless_asking_recording(retried: bool = True) -> Recording:
    """A 2026-07-28 session over HTTP: server/discover, then a tool that asks for input with an
    input_required result in a JSON answer, and (`retried`) the client's retry on another exchange."""
    meta = {"_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}}
    r = Recording()
    r.post(1, req(1, "server/discover", meta))
    r.head(1, 200, sse=False)
    r.add(S, 1, Kind.MESSAGE, res(1, {"supportedVersions": ["2026-07-28"], "capabilities": {"tools": {}},
                                      "serverInfo": {"name": "asker", "version": "1"}, "resultType": "complete"}))
    r.end(1)
    r.post(2, req(2, "tools/call", {"name": "ask", **meta}))
    r.head(2, 200, sse=False)
    asked = {"q": {"method": "sampling/createMessage", "params": {"messages": [], "maxTokens": 9}}}
    r.add(S, 2, Kind.MESSAGE, res(2, {"resultType": "input_required", "inputRequests": asked, "requestState": "st"}))
    r.end(2)
    if retried:
        r.post(3, req(3, "tools/call", {"name": "ask", "inputResponses": {"q": {"role": "assistant"}}, "requestState": "st", **meta}))
        r.head(3, 200, sse=False)
        r.add(S, 3, Kind.MESSAGE, res(3, {"content": [], "resultType": "complete"}))
        r.end(3)
    return r


def test_input_asked_of_an_initialize_client_over_http_goes_on_the_stream_of_its_request() -> None:
    """A client that opened with initialize gets the input requests on its POST's stream (the JSON
    answer becomes an event stream), then the recorded retry's answer there, and its end."""
    engine = ReplayEngine(stateless_asking_recording().frames)
    engine.start()
    engine.receive(json.dumps(req(0, "initialize", {"protocolVersion": "2025-11-25", "capabilities": {"sampling": {}}})).encode())
    got = engine.receive(json.dumps(req(7, "tools/call", {"name": "ask"})).encode())
    assert got.channel == "http:2"
    [head, asking] = got.actions
    assert ["content-type", "text/event-stream"] in head.frame.info["headers"]
    assert what([asking]) == [("http:2", "sse_event", req("mcp-tapes-input-1", "sampling/createMessage",
                                                          {"messages": [], "maxTokens": 9}))]
    got = engine.receive(json.dumps(res("mcp-tapes-input-1", {"role": "assistant"})).encode())
    assert got.channel is None and got.replies == []  # the POST of the answer is accepted
    assert what(got.actions) == [("http:2", "sse_event", res(7, {"content": []})), ("http:2", "stream_end", None)]
    assert engine.report.unmatched == []


def test_input_asked_over_http_without_a_recorded_retry_ends_the_stream_with_an_error() -> None:
    engine = ReplayEngine(stateless_asking_recording(retried=False).frames)
    engine.start()
    engine.receive(json.dumps(req(0, "initialize", {"protocolVersion": "2025-11-25", "capabilities": {"sampling": {}}})).encode())
    engine.receive(json.dumps(req(7, "tools/call", {"name": "ask"})).encode())
    got = engine.receive(json.dumps(res("mcp-tapes-input-1", {"role": "assistant"})).encode())
    assert got.channel is None and got.replies == []
    [(channel, kind, error), end] = what(got.actions)
    assert (channel, kind, error["id"], end) == ("http:2", "sse_event", 7, ("http:2", "stream_end", None))
    assert "no retry of tools/call" in error["error"]["message"]
    assert [miss.summary for miss in engine.report.unmatched] == ["tools/call id 7"]


def test_an_input_request_answered_otherwise_than_recorded_is_a_miss_and_plays_on() -> None:
    """The recorded client answered the sampling with a result (its retry carries it); an error
    from the live one is a miss, as for any server request, and the recorded retry still plays."""
    engine = ReplayEngine(stateless_asking_recording().frames)
    engine.start()
    engine.receive(json.dumps(req(0, "initialize", {"protocolVersion": "2025-11-25", "capabilities": {"sampling": {}}})).encode())
    engine.receive(json.dumps(req(7, "tools/call", {"name": "ask"})).encode())
    refused = {"jsonrpc": "2.0", "id": "mcp-tapes-input-1", "error": {"code": -1, "message": "no"}}
    got = engine.receive(json.dumps(refused).encode())
    assert what(got.actions)[0] == ("http:2", "sse_event", res(7, {"content": []}))
    [miss] = engine.report.unmatched
    assert miss.summary == "response id 'mcp-tapes-input-1'" and "answered with a result, this one with an error (-1: no)" in miss.reason


def test_an_input_round_the_live_client_has_no_capability_for_goes_on_with_the_recorded_answers() -> None:
    """A client that declared no sampling is not asked for it: the recorded client's answers, in
    the recorded retry, stand in, and the retry's answer ends the stream at once (it hung)."""
    engine = ReplayEngine(stateless_asking_recording().frames)
    engine.start()
    engine.receive(json.dumps(req(0, "initialize", {"protocolVersion": "2025-11-25", "capabilities": {}})).encode())
    got = engine.receive(json.dumps(req(7, "tools/call", {"name": "ask"})).encode())
    assert got.channel == "http:2" and got.replies == []
    assert what(got.actions)[1:] == [("http:2", "sse_event", res(7, {"content": []})), ("http:2", "stream_end", None)]
    assert engine.report.unmatched == []
    assert any(line.startswith("sampling/createMessage for tools/call id 7: not asked, as the live client did not declare "
                               "sampling") for line in engine.report.adapted), engine.report.adapted


def test_an_input_round_asked_again_under_repeats_allow_plays_the_retry_again() -> None:
    from tapes.replay.engine import Repeats

    engine = ReplayEngine(stateless_asking_recording().frames, repeats=Repeats.ALLOW)
    engine.start()
    engine.receive(json.dumps(req(0, "initialize", {"protocolVersion": "2025-11-25", "capabilities": {"sampling": {}}})).encode())
    for live_id in (7, 8):
        engine.receive(json.dumps(req(live_id, "tools/call", {"name": "ask"})).encode())
        asked = [json.loads(a.payload) for a in engine.receive(json.dumps(req(99, "ping")).encode()).actions]
        got = engine.receive(json.dumps(res(f"mcp-tapes-input-{live_id - 6}", {"role": "assistant"})).encode())
        assert ("http:2", "sse_event", res(live_id, {"content": []})) in what(got.actions), (live_id, asked, got)
    assert engine.report.unmatched == []
