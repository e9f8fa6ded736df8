"""An MCP server written with the official Python SDK, served over Streamable HTTP with an event
store, so its SSE streams carry event ids, priming events and `retry`, and can be resumed.

    python tests/servers/resumable_server.py [--port N] [--certfile PEM --keyfile PEM]
    (port 0 or absent: a free port; with a certificate and key it serves HTTPS)

It binds 127.0.0.1 and prints one line on stderr once it accepts connections:
`resumable server listening on http(s)://127.0.0.1:PORT/mcp`.

- `ticks(n, interval)`  n progress notifications, `interval` seconds apart, then "ticked n"
- `poll(n)`             one progress notification, then the server closes the POST stream (the
                        2025-11-25 polling pattern: the client comes back with Last-Event-ID),
                        then n - 1 more, then "polled n"
- `cycles(n)`           n times: a progress notification, then the server closes the stream; the
                        client polls back with Last-Event-ID each time (several `retry` cycles)
- `echo(text)`          answers text at once

Event ids are "<stream>/<counter>": readable in a cassette, and the counter makes them unique.
"""

from __future__ import annotations

import argparse
import asyncio

from mcp.server.mcpserver import Context, MCPServer
from serving import MemoryEventStore, serve

RETRY_MS = 100

server = MCPServer(name="resumable", version="1.0.0", log_level="WARNING")


@server.tool(description="Report n progress steps, interval seconds apart.")
async def ticks(n: int, interval: float, ctx: Context) -> str:
    for step in range(1, n + 1):
        await asyncio.sleep(interval)
        await ctx.report_progress(step, n)
    return f"ticked {n}"


@server.tool(description="Report progress, close the stream, and finish after the client polls back.")
async def poll(n: int, ctx: Context) -> str:
    await ctx.report_progress(1, n)
    await ctx.close_sse_stream()
    # Wait until the client is back: the SDK server drops events sent between its replay and the
    # re-registration of the stream (its "replay->live-tail ordering window", mcp 2.3.0).
    await asyncio.sleep(3 * RETRY_MS / 1000)
    for step in range(2, n + 1):
        await ctx.report_progress(step, n)
    return f"polled {n}"


@server.tool(description="n times: report progress and close the stream; the client polls back after each.")
async def cycles(n: int, ctx: Context) -> str:
    for step in range(1, n + 1):
        await ctx.report_progress(step, n)
        await ctx.close_sse_stream()
        await asyncio.sleep(3 * RETRY_MS / 1000)  # until the client is back (see poll)
    return f"cycled {n}"


@server.tool(description="Answer text at once.")
def echo(text: str) -> str:
    return text


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--certfile", help="serve HTTPS with this certificate (chain) PEM")
    parser.add_argument("--keyfile", help="and this private key PEM")
    args = parser.parse_args()
    app = server.streamable_http_app(event_store=MemoryEventStore(), retry_interval=RETRY_MS)
    serve(app, "resumable server", args.port, args.certfile, args.keyfile)


if __name__ == "__main__":
    main()
