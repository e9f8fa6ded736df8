"""Serving a test server's ASGI app with uvicorn on 127.0.0.1 (a free port by default), printing
`<name> listening on http(s)://127.0.0.1:PORT<path>` on stderr once it accepts connections; and the
in-memory event store of the servers that let a client resume a stream."""

from __future__ import annotations

import asyncio
import itertools
import socket
import sys
from typing import Any

import uvicorn
from mcp.server.streamable_http import EventCallback, EventId, EventMessage, EventStore, StreamId
from mcp.types import JSONRPCMessage


def listening_socket(port: int = 0) -> socket.socket:
    """A socket listening on 127.0.0.1 (a free port by default), for a server that must know its
    own address before its app is built."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    sock.listen(128)
    return sock


def serve(app: Any, name: str, port: int = 0, certfile: str | None = None, keyfile: str | None = None,
          path: str = "/mcp", sock: socket.socket | None = None) -> None:
    sock = sock or listening_socket(port)
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on", ssl_certfile=certfile, ssl_keyfile=keyfile))
    scheme = "https" if certfile else "http"

    async def run() -> None:
        task = asyncio.create_task(server.serve(sockets=[sock]))
        while not server.started and not task.done():
            await asyncio.sleep(0.01)
        # one write: two servers of one process print from two threads
        sys.stderr.write(f"{name} listening on {scheme}://127.0.0.1:{sock.getsockname()[1]}{path}\n")
        sys.stderr.flush()
        await task

    asyncio.run(run())


class MemoryEventStore(EventStore):
    """Every event of every stream, in order; replay sends the events of the cursor's stream after it."""

    def __init__(self) -> None:
        self._events: list[tuple[EventId, StreamId, JSONRPCMessage | None]] = []
        self._counter = itertools.count(1)

    async def store_event(self, stream_id: StreamId, message: JSONRPCMessage | None) -> EventId:
        event_id = f"{stream_id}/{next(self._counter)}"
        self._events.append((event_id, stream_id, message))
        return event_id

    async def replay_events_after(self, last_event_id: EventId, send_callback: EventCallback) -> StreamId | None:
        position = next((i for i, (event_id, _, _) in enumerate(self._events) if event_id == last_event_id), None)
        if position is None:
            return None
        stream_id = self._events[position][1]
        for event_id, stream, message in self._events[position + 1 :]:
            if stream == stream_id and message is not None:
                await send_callback(EventMessage(message, event_id))
        return stream_id
