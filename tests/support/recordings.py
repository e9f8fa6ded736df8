"""Recordings built in code: a stdio session from wire lines, an HTTP session frame by frame, a stdio
cassette of parsed messages, and a replay engine driven with dicts."""

from __future__ import annotations

import json
from typing import Any

from tapes.cassette.frames import STDIO, Direction, Frame, Kind
from tapes.cassette.stdio_framer import StdioFramer, Stream
from tapes.cassette.store import Cassette, Header
from tapes.replay.engine import ReplayEngine

from tests.support.messages import note, req, res

C, S = Direction.CLIENT_TO_SERVER, Direction.SERVER_TO_CLIENT


def recording(*exchange: tuple[str, Any]) -> list[Frame]:
    """Frames of a stdio session: ("c", message) from the client, ("s", message) from the server,
    ("c_end", None) for the client closing stdin, ("exit", code) for the server exiting."""
    framer = StdioFramer()
    frames: list[Frame] = []
    for t, (who, value) in enumerate(exchange):
        if who == "c_end":
            frames += framer.end(t, Stream.CLIENT_STDIN)
        elif who == "exit":
            frames.append(framer.exit(t, value, None))
        else:
            stream = Stream.CLIENT_STDIN if who == "c" else Stream.SERVER_STDOUT
            payload = value if isinstance(value, bytes) else json.dumps(value).encode()
            frames += framer.data(t, stream, payload + b"\n")
    return frames


def send(engine: ReplayEngine, message: Any) -> list[Any]:
    """What the engine sends back: its made-up replies, then the recorded frames released."""
    reception = engine.receive(json.dumps(message).encode())
    return [json.loads(out.payload) for out in [*reception.replies, *reception.actions]]


class Recording:
    """Builds an HTTP recording frame by frame, following tapes/cassette/frames.py's conventions."""

    def __init__(self) -> None:
        self.frames: list[Frame] = []

    def add(self, direction: Direction, channel: int, kind: Kind, message: Any = None, **info: Any) -> None:
        data = info.pop("data", None)
        self.frames.append(Frame(len(self.frames) + 1, 0.0, direction, f"http:{channel}", kind, message, data,
                                 info or None))

    def post(self, channel: int, body: Any, session: str | None = None, path: str = "/mcp") -> None:
        headers = [["Content-Type", "application/json"]] + ([["Mcp-Session-Id", session]] if session else [])
        self.add(C, channel, Kind.HTTP_REQUEST, method="POST", path=path, headers=headers)
        self.add(C, channel, Kind.MESSAGE, body)

    def get(self, channel: int, session: str, last_event_id: str | None = None) -> None:
        headers = [["Mcp-Session-Id", session]] + ([["Last-Event-ID", last_event_id]] if last_event_id else [])
        self.add(C, channel, Kind.HTTP_REQUEST, method="GET", path="/mcp", headers=headers)

    def head(self, channel: int, status: int, session: str | None = None, sse: bool = True) -> None:
        headers = [["Content-Type", "text/event-stream" if sse else "application/json"]]
        self.add(S, channel, Kind.HTTP_RESPONSE, status=status, headers=headers + ([["mcp-session-id", session]] if session else []))

    def event(self, channel: int, event_id: str, message: Any) -> None:
        self.add(S, channel, Kind.SSE_EVENT, message, id=event_id, event=None, retry=None)

    def end(self, channel: int) -> None:
        self.add(S, channel, Kind.STREAM_END, reason="closed")


def stdio_cassette(*messages: tuple[str, Any]) -> Cassette:
    """A stdio cassette of ("c", message) / ("s", message) pairs, in that order."""
    frames = [Frame(seq, seq / 100, C if side == "c" else S, STDIO, Kind.MESSAGE, message)
              for seq, (side, message) in enumerate(messages, start=1)]
    return Cassette(Header(transport="stdio", server={"command": ["test"]}), frames)


def handshake(version: str = "2025-06-18", capabilities: Any = None) -> list[tuple[str, Any]]:
    return [("c", req(1, "initialize", {"protocolVersion": version, "capabilities": {},
                                        "clientInfo": {"name": "t", "version": "1"}})),
            ("s", res(1, {"protocolVersion": version, "capabilities": capabilities or {"tools": {}},
                          "serverInfo": {"name": "srv", "version": "1"}})),
            ("c", note("notifications/initialized"))]
