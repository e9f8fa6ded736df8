"""Sample cassettes that a unit test and its end-to-end twin share: a frame of every kind (the
store), a timeline with a bit of everything (`tapes show`), and a resumed HTTP stream with hostile
strings (`tapes view`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tapes.cassette.frames import STDIO, Direction, Frame, Kind, http_channel
from tapes.cassette.store import Cassette, CassetteWriter, Header

C2S, S2C = Direction.CLIENT_TO_SERVER, Direction.SERVER_TO_CLIENT


EVERY_KIND_HEADER = Header(
    transport="stdio",
    server={"command": ["python", "weather_server.py"]},
    created="2026-01-02T03:04:05.000006+00:00",
    redaction=("headers.authorization",),
    labels={"suite": "weather"},
)


HTTP = "http:1"


EVERY_KIND = [
    Frame(1, 0.0, C2S, STDIO, Kind.MESSAGE, {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}}),
    Frame(
        2,
        0.01,
        S2C,
        STDIO,
        Kind.MESSAGE,
        {"jsonrpc": "2.0", "id": 1, "result": {"protocolVersion": "2025-06-18"}},
        data=b'{"jsonrpc": "2.0", "id": 1, "result": {"protocolVersion": "2025-06-18"}}',
    ),
    Frame(
        3,
        0.02,
        C2S,
        STDIO,
        Kind.MESSAGE,
        [{"jsonrpc": "2.0", "id": 2, "method": "ping"}, {"jsonrpc": "2.0", "method": "notifications/initialized"}],
    ),
    Frame(4, 0.03, S2C, STDIO, Kind.RAW, data=b"\xff\xfe not JSON \x00"),
    Frame(5, 0.04, S2C, STDIO, Kind.STDERR, data="Warnung: Überlast ✓".encode()),
    Frame(6, 0.05, C2S, HTTP, Kind.HTTP_REQUEST, info={"method": "POST", "path": "/mcp", "headers": [["a", "b"]]}),
    Frame(7, 0.06, S2C, HTTP, Kind.HTTP_RESPONSE, info={"status": 200, "headers": [["content-type", "text/plain"]]}),
    Frame(8, 0.07, S2C, HTTP, Kind.SSE_EVENT, data=b"", info={"id": "e1", "event": None, "retry": 500}),
    Frame(9, 0.08, S2C, HTTP, Kind.STREAM_END, info={"reason": "client_disconnect"}),
    Frame(10, 0.09, C2S, STDIO, Kind.RAW, data=b'{"jsonrpc":"2.0","id":3', info={"partial": True}),
    Frame(11, 0.1, C2S, STDIO, Kind.STREAM_END, info={"reason": "eof"}),
    Frame(12, 1.5, S2C, STDIO, Kind.EXIT, info={"code": None, "signal": 15}),
]


CITY = {"city": "Oslo"}


TIMELINE_HEADER = Header(
    transport="stdio",
    server={"command": ["python", "weather server.py", "--units", "metric"]},
    created="2026-01-02T03:04:05.000006+00:00",
    labels={"suite": "[bold]weather[/]"},
)


TIMELINE_FRAMES = [
    Frame(1, 0.0, C2S, STDIO, Kind.MESSAGE, {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {}}),
    Frame(2, 0.012, S2C, STDIO, Kind.MESSAGE, {"jsonrpc": "2.0", "id": 0, "result": {"protocolVersion": "2025-06-18"}}),
    Frame(
        3,
        0.02,
        C2S,
        STDIO,
        Kind.MESSAGE,
        {"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {"name": "get_weather", "arguments": CITY}},
    ),
    Frame(
        4,
        0.5,
        S2C,
        STDIO,
        Kind.MESSAGE,
        {"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progressToken": 4, "progress": 0.5}},
    ),
    Frame(5, 0.75, S2C, STDIO, Kind.MESSAGE, {"jsonrpc": "2.0", "id": 4, "result": {"content": [{"text": "-3 C"}]}}),
    Frame(
        6,
        0.8,
        S2C,
        STDIO,
        Kind.MESSAGE,
        {"jsonrpc": "2.0", "id": "x7", "error": {"code": -32601, "message": "Method not found"}},
    ),
    Frame(
        7,
        0.9,
        C2S,
        STDIO,
        Kind.MESSAGE,
        [
            {"jsonrpc": "2.0", "id": 5, "method": "ping"},
            {"jsonrpc": "2.0", "id": 6, "method": "tools/list"},
            {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 4}},
        ],
    ),
    Frame(8, 1.0, S2C, STDIO, Kind.RAW, data=b"Server ready\xff"),
    Frame(9, 1.1, S2C, STDIO, Kind.STDERR, data=b"INFO \x1b[31mred\x1b[0m listening"),
    Frame(10, 1.2, C2S, "http:1", Kind.HTTP_REQUEST, info={"method": "POST", "path": "/mcp", "headers": []}),
    Frame(11, 1.3, S2C, "http:1", Kind.HTTP_RESPONSE, info={"status": 202, "headers": []}),
    Frame(12, 1.4, S2C, "http:2", Kind.SSE_EVENT, data=b"", info={"id": "ev-9", "event": None, "retry": 500}),
    Frame(13, 1.5, C2S, STDIO, Kind.RAW, data=b'{"jsonrpc":"2.0"', info={"partial": True}),
    Frame(14, 1.6, C2S, STDIO, Kind.STREAM_END, info={"reason": "eof"}),
    Frame(15, 12.25, S2C, STDIO, Kind.EXIT, info={"code": 0, "signal": None}),
]


def write_cassette(path: Path, frames: list[Frame], header: Header = EVERY_KIND_HEADER) -> bytes:
    with CassetteWriter(path, header) as writer:
        writer.write(frames)
    return path.read_bytes()


def resumed_http_cassette() -> Cassette:
    """A POST stream cut by the client after event e2, resumed by a GET with Last-Event-ID: e2
    (tapes/cassette/frames.py's HTTP conventions). Its strings also try to break out of the page."""
    hostile = '</script><img src=x onerror="window.injected=1"><svg onload="window.injected=2">'
    call = {"jsonrpc": "2.0", "id": 7, "method": "tools/call",
            "params": {"name": hostile, "arguments": {}, "_meta": {"progressToken": "p7"}}}

    def progress(n: int) -> dict[str, Any]:
        return {"jsonrpc": "2.0", "method": "notifications/progress",
                "params": {"progressToken": "p7", "progress": n, "total": 3}}

    sse = [["Content-Type", "text/event-stream"], ["Mcp-Session-Id", "s-1"]]
    post, get = http_channel(1), http_channel(2)
    frames = [
        (C2S, post, Kind.HTTP_REQUEST, None, None, {"method": "POST", "path": "/mcp", "headers": [["X-Evil", hostile]]}),
        (C2S, post, Kind.MESSAGE, call, None, None),
        (S2C, post, Kind.HTTP_RESPONSE, None, None, {"status": 200, "headers": sse}),
        (S2C, post, Kind.SSE_EVENT, None, b"", {"id": "e0", "event": None, "retry": 500}),
        (S2C, post, Kind.SSE_EVENT, progress(1), None, {"id": "e1", "event": None, "retry": None}),
        (S2C, post, Kind.SSE_EVENT, progress(2), None, {"id": "e2", "event": None, "retry": None}),
        (S2C, post, Kind.STREAM_END, None, None, {"reason": "client_disconnect"}),
        (C2S, get, Kind.HTTP_REQUEST, None, None,
         {"method": "GET", "path": "/mcp", "headers": [["Last-Event-ID", "e2"], ["Mcp-Session-Id", "s-1"]]}),
        (S2C, get, Kind.HTTP_RESPONSE, None, None, {"status": 200, "headers": sse}),
        (S2C, get, Kind.SSE_EVENT, progress(3), None, {"id": "e3", "event": None, "retry": None}),
        (S2C, get, Kind.SSE_EVENT, {"jsonrpc": "2.0", "id": 7, "result": {"content": [{"type": "text", "text": hostile}]}},
         None, {"id": "e4", "event": None, "retry": None}),
        (S2C, get, Kind.STREAM_END, None, None, {"reason": "closed"}),
    ]
    return Cassette(
        Header(transport="http", server={"url": f"http://127.0.0.1:1/mcp?{hostile}"}, labels={"x": hostile}),
        [Frame(seq, seq * 0.05, *frame) for seq, frame in enumerate(frames, start=1)],
        warnings=[hostile],
    )
