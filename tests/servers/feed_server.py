"""A server written with the official Python SDK (`MCPServer`) whose clients follow it through
`subscriptions/listen` (2026-07-28): each post changes the resource list and updates the latest
item, and the server can end every listen stream gracefully.

    python tests/servers/feed_server.py           (stdio)
    python tests/servers/feed_server.py --http    (Streamable HTTP on a free port of 127.0.0.1)

- `post(title)`      adds an item: publishes a resources list-changed event and an update of `feed://latest`
- `close_feeds()`    ends every open listen stream the graceful way (its result is the last frame)
- resource `feed://latest`  the title of the newest item
"""

from __future__ import annotations

import sys

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.subscriptions import ListenHandler

server = MCPServer(name="feed", version="1.0.0", log_level="WARNING")
_items: list[str] = []


@server.tool(description="Add an item: the resource list changes and feed://latest is updated.")
async def post(title: str, ctx: Context) -> str:
    _items.append(title)
    await ctx.notify_resources_changed()
    await ctx.notify_resource_updated("feed://latest")
    return f"posted {title} ({len(_items)} items)"


@server.tool(description="End every open subscriptions/listen stream gracefully.")
def close_feeds() -> str:
    # MCPServer registers its ListenHandler with the lowlevel server and keeps no other handle on it
    listens = server._lowlevel_server.get_request_handler("subscriptions/listen")  # noqa: SLF001
    assert listens is not None and isinstance(listens.handler, ListenHandler)
    listens.handler.close()
    return "closed"


@server.resource("feed://latest", name="latest", description="The newest item's title", mime_type="text/plain")
def latest() -> str:
    return _items[-1] if _items else ""


if __name__ == "__main__":
    if sys.argv[1:] == ["--http"]:  # on a free port, announced on stderr
        from serving import serve

        serve(server.streamable_http_app(), "feed server")
    else:
        server.run("stdio")
