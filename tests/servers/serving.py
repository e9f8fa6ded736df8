"""Serving a test server's ASGI app with uvicorn on 127.0.0.1 (a free port by default), printing
`<name> listening on http(s)://127.0.0.1:PORT<path>` on stderr once it accepts connections."""

from __future__ import annotations

import asyncio
import socket
import sys
from typing import Any

import uvicorn


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
