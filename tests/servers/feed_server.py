"""A server written with the official Python SDK (`MCPServer`) whose clients follow it through
`subscriptions/listen` (2026-07-28) or, in the eras before, `resources/subscribe`: each post changes
the resource list and updates the latest item, and the server can end every subscription gracefully.
Both eras see the same behaviour, so their recordings compare (`tapes diff`).

    python tests/servers/feed_server.py           (stdio)
    python tests/servers/feed_server.py --http    (Streamable HTTP on a free port of 127.0.0.1)

- `post(title)`      adds an item: publishes a resources list-changed event and an update of `feed://latest`
- `close_feeds()`    ends every open listen stream the graceful way (its result is the last frame),
                     and every resources/subscribe follower (silently: the older eras have no way to tell the client)
- resource `feed://latest`  the title of the newest item

Before 2026-07-28 a session follows the feed once it subscribes to a resource: it then hears the
list changes and the updates of what it subscribed to, as a listen for both would, until it
unsubscribes or close_feeds ends it. Over stdio the server advertises list changes in every era
(over HTTP, before 2026-07-28, the SDK's default initialization options advertise none).
"""

from __future__ import annotations

import sys

import anyio
import mcp.types as types
from mcp.server.connection import Connection
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel.server import NotificationOptions
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.session import ServerSession
from mcp.server.stdio import stdio_server
from mcp.server.subscriptions import ListenHandler

server = MCPServer(name="feed", version="1.0.0", log_level="WARNING")
_items: list[str] = []
# resources/subscribe followers: per connection, a session to notify it on and the URIs it subscribed to
_followers: dict[Connection, tuple[ServerSession, set[str]]] = {}


def _connection(ctx: ServerRequestContext) -> Connection:
    # The SDK makes a ServerSession per request; the connection underneath is what subscribed
    return ctx.session._connection  # noqa: SLF001


async def subscribe(ctx: ServerRequestContext, params: types.SubscribeRequestParams) -> types.EmptyResult:
    _followers.setdefault(_connection(ctx), (ctx.session, set()))[1].add(params.uri)
    return types.EmptyResult()


async def unsubscribe(ctx: ServerRequestContext, params: types.UnsubscribeRequestParams) -> types.EmptyResult:
    _, uris = _followers.get(_connection(ctx), (ctx.session, set()))
    uris.discard(params.uri)
    if not uris:
        _followers.pop(_connection(ctx), None)
    return types.EmptyResult()


# MCPServer has no decorator for the 2025-era subscription requests: they go to its lowlevel server
server._lowlevel_server.add_request_handler("resources/subscribe", types.SubscribeRequestParams, subscribe)  # noqa: SLF001
server._lowlevel_server.add_request_handler("resources/unsubscribe", types.UnsubscribeRequestParams, unsubscribe)  # noqa: SLF001


async def _tell_followers(uri: str) -> None:
    for session, uris in list(_followers.values()):
        await session.send_resource_list_changed()
        if uri in uris:
            await session.send_resource_updated(uri)


@server.tool(description="Add an item: the resource list changes and feed://latest is updated.")
async def post(title: str, ctx: Context) -> str:
    _items.append(title)
    await ctx.notify_resources_changed()
    await ctx.notify_resource_updated("feed://latest")
    await _tell_followers("feed://latest")
    return f"posted {title} ({len(_items)} items)"


@server.tool(description="End every open subscriptions/listen stream gracefully.")
def close_feeds() -> str:
    # MCPServer registers its ListenHandler with the lowlevel server and keeps no other handle on it
    listens = server._lowlevel_server.get_request_handler("subscriptions/listen")  # noqa: SLF001
    assert listens is not None and isinstance(listens.handler, ListenHandler)
    listens.handler.close()
    _followers.clear()
    return "closed"


@server.resource("feed://latest", name="latest", description="The newest item's title", mime_type="text/plain")
def latest() -> str:
    return _items[-1] if _items else ""


async def run_stdio() -> None:
    """MCPServer.run("stdio"), advertising list changes to the older eras too (2026-07-28 derives
    them from subscriptions/listen being served)."""
    lowlevel = server._lowlevel_server  # noqa: SLF001
    changes = NotificationOptions(prompts_changed=True, resources_changed=True, tools_changed=True)
    async with stdio_server() as (read, write):
        await lowlevel.run(read, write, lowlevel.create_initialization_options(changes))


if __name__ == "__main__":
    if sys.argv[1:] == ["--http"]:  # on a free port, announced on stderr
        from serving import serve

        serve(server.streamable_http_app(), "feed server")
    else:
        anyio.run(run_stdio)
