"""`tapes verify --upstream`'s sans-IO HTTP client script: exchanges sent with the live session and event ids."""

from __future__ import annotations

from typing import Any

from tapes.cassette.store import Cassette, Header
from tapes.cassette.frames import Direction, Frame, Kind
from tapes.wire.jsonrpc import encode
from tapes.analysis.verify import HttpClientScript, HttpRequest

from tests.support.messages import req, res

C2S, S2C = Direction.CLIENT_TO_SERVER, Direction.SERVER_TO_CLIENT


def http_cassette(*frames: tuple[Direction, int, Kind, Any, dict[str, Any] | None]) -> Cassette:
    return Cassette(Header(transport="http", server={"url": "http://127.0.0.1:1/mcp"}),
                    [Frame(seq, seq / 100, direction, f"http:{exchange}", kind, message, None, info)
                     for seq, (direction, exchange, kind, message, info) in enumerate(frames, start=1)])


def test_the_script_sends_exchanges_with_the_live_session_and_event_ids() -> None:
    initialize = req(1, "initialize", {"protocolVersion": "2025-11-25"})
    script = HttpClientScript(http_cassette(
        (C2S, 1, Kind.HTTP_REQUEST, None, {"method": "POST", "path": "/mcp", "headers": [
            ["Host", "127.0.0.1:1"], ["User-Agent", "x"], ["accept", "application/json, text/event-stream"],
            ["content-type", "application/json"], ["mcp-method", "initialize"]]}),
        (C2S, 1, Kind.MESSAGE, initialize, None),
        (S2C, 1, Kind.HTTP_RESPONSE, None, {"status": 200, "headers": [["mcp-session-id", "recorded-session"]]}),
        (S2C, 1, Kind.SSE_EVENT, None, {"id": "recorded-1", "event": None, "retry": None}),
        (S2C, 1, Kind.SSE_EVENT, res(1, {}), {"id": "recorded-2", "event": None, "retry": None}),
        (S2C, 1, Kind.STREAM_END, None, {"reason": "client_disconnect"}),
        (C2S, 2, Kind.HTTP_REQUEST, None, {"method": "GET", "path": "/mcp", "headers": [
            ["Mcp-Session-Id", "recorded-session"], ["Last-Event-ID", "recorded-2"]]}),
        (S2C, 2, Kind.HTTP_RESPONSE, None, {"status": 200, "headers": []}),
        (S2C, 2, Kind.STREAM_END, None, {"reason": "closed"})).frames)
    assert script.ready() == [HttpRequest(1, "POST", "/mcp", [
        ("accept", "application/json, text/event-stream"), ("content-type", "application/json"),
        ("mcp-method", "initialize")], encode(initialize), 2)]
    assert script.waiting_for == [("event", 1, 2), ("head", 1), ("response", 1)]
    script.receive_head(1, [("mcp-session-id", "live-session")])
    script.receive_event(1, "live-1", "")
    assert script.ready() == []
    script.receive_event(1, "live-2", encode(res(1, {})).decode())
    assert script.ready() == [HttpRequest(2, "GET", "/mcp", [("Mcp-Session-Id", "live-session"),
                                                               ("Last-Event-ID", "live-2")], None, None)]
    assert script.finished and not script.settled  # the resumed stream is still open
    script.receive_head(2, [])
    script.receive_end(2)
    assert script.settled


def test_over_legacy_sse_the_session_is_settled_once_the_last_answer_came_on_the_stream_the_client_left() -> None:
    """A legacy POST is answered 202 at once and its result comes later on the GET stream, which
    the recorded client left once it had it: the POST's end is not the end of the session."""
    echo = req(2, "tools/call", {"name": "echo", "arguments": {"message": "still here"}})
    endpoint = {"id": None, "event": "endpoint", "retry": None}
    frames = http_cassette(
        (C2S, 1, Kind.HTTP_REQUEST, None, {"method": "GET", "path": "/sse", "headers": []}),
        (S2C, 1, Kind.HTTP_RESPONSE, None, {"status": 200, "headers": []}),
        (S2C, 1, Kind.SSE_EVENT, None, endpoint),
        (C2S, 2, Kind.HTTP_REQUEST, None, {"method": "POST", "path": "/message?sessionId=recorded", "headers": []}),
        (C2S, 2, Kind.MESSAGE, echo, None),
        (S2C, 2, Kind.HTTP_RESPONSE, None, {"status": 202, "headers": []}),
        (S2C, 2, Kind.STREAM_END, None, {"reason": "closed"}),
        (S2C, 1, Kind.SSE_EVENT, res(2, {"content": []}), {"id": None, "event": None, "retry": None}),
        (S2C, 1, Kind.STREAM_END, None, {"reason": "client_disconnect"})).frames
    frames[2] = frames[2]._replace(data=b"/message?sessionId=recorded")
    script = HttpClientScript(frames)
    assert [request.exchange for request in script.ready()] == [1]
    script.receive_head(1, [])
    script.receive_event(1, None, "/message?sessionId=live", "endpoint")
    assert [request.path for request in script.ready()] == ["/message?sessionId=live"]
    script.receive_head(2, [])
    script.receive_end(2)
    assert script.finished and not script.settled
    script.receive_event(1, None, encode(res(2, {"content": []})).decode())
    assert script.settled


def test_a_stream_the_server_closed_is_resumed_once_it_ended_live_from_the_newest_live_event_id() -> None:
    """SSE polling: the server closes a request's stream and the client resumes it. Resumed while
    the live stream is still open, the server refuses the resumption; and where the live stream
    has no event id at the recorded place, the recorded id means nothing to the live server."""
    call = req(2, "tools/call", {"name": "cycles", "arguments": {}})
    progress = {"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progressToken": 2, "progress": 1}}
    script = HttpClientScript(http_cassette(
        (C2S, 1, Kind.HTTP_REQUEST, None, {"method": "POST", "path": "/mcp", "headers": []}),
        (C2S, 1, Kind.MESSAGE, call, None),
        (S2C, 1, Kind.HTTP_RESPONSE, None, {"status": 200, "headers": []}),
        (S2C, 1, Kind.SSE_EVENT, None, {"id": "recorded-1", "event": None, "retry": 100}),
        (S2C, 1, Kind.SSE_EVENT, progress, {"id": None, "event": None, "retry": None}),
        (S2C, 1, Kind.SSE_EVENT, None, {"id": "recorded-2", "event": None, "retry": 100}),
        (S2C, 1, Kind.STREAM_END, None, {"reason": "closed"}),
        (C2S, 2, Kind.HTTP_REQUEST, None, {"method": "GET", "path": "/mcp", "headers": [["Last-Event-ID", "recorded-2"]]}),
        (S2C, 2, Kind.HTTP_RESPONSE, None, {"status": 200, "headers": []}),
        (S2C, 2, Kind.SSE_EVENT, res(2, {"content": []}), {"id": "recorded-3", "event": None, "retry": None}),
        (S2C, 2, Kind.STREAM_END, None, {"reason": "closed"})).frames)
    assert [request.exchange for request in script.ready()] == [1]
    script.receive_head(1, [])
    script.receive_event(1, "live-1", "")
    script.receive_event(1, None, encode(progress).decode())
    script.receive_event(1, None, "")  # the live server's event there has no id
    assert script.ready() == [] and script.waiting_for == [("end", 1)]
    script.receive_end(1)
    assert script.ready() == [HttpRequest(2, "GET", "/mcp", [("Last-Event-ID", "live-1")], None, None)]
