"""Reusable client flows: drive a real MCP server through the official SDK client.

Each flow takes the server as an argv list (run over stdio), performs a fixed script of calls and
returns a plain, JSON-able dict with nothing volatile in it, so the same flow can be run directly
against the real server, through a recorder, and against a replayer, and the three results
compared with `==`.

    result = anyio.run(everything_flow, argv)
    result = anyio.run(functools.partial(notes_flow, argv, mode="legacy"))

The dicts hold what a client would see (tool results, resource contents, ...) and, under
`"observed"`, what the client saw happen that matters to replay checks: the progress values that
reached the progress callback, the server->client requests the callbacks answered, and whether the
cancelled call was cancelled or got a response.

Waits are event-driven and bounded: every flow runs under `anyio.fail_after(timeout)`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
import warnings
from typing import Any

import anyio
import mcp.types as types
from mcp import Client, StdioServerParameters
from mcp.client import ClientRequestContext, IncomingMessage
from mcp.shared.exceptions import MCPDeprecationWarning
from pydantic import BaseModel

__all__ = [
    "DEFAULT_TIMEOUT",
    "EVERYTHING_SAMPLING_PROMPT",
    "NOTES_QUESTION",
    "Observer",
    "SAMPLING_MODEL",
    "ROOTS",
    "Tap",
    "connect",
    "dump",
    "everything_flow",
    "feed_flow",
    "feed_subscribe_flow",
    "sse_polling_flow",
    "notes_flow",
]

DEFAULT_TIMEOUT = 30.0
"""Upper bound for a whole flow, in seconds (a flow normally takes well under 2 s)."""

PROGRESS_GRACE = 5.0
"""How long to wait, after a call returned, for progress callbacks still in flight (the SDK runs
each progress callback in its own task, so the last one can land just after the response)."""

SAMPLING_MODEL = "tapes-test-model"
"""The model name the flows' sampling callback answers with."""

ROOTS = (
    types.Root(uri="file:///workspace/project", name="project"),
    types.Root(uri="file:///workspace/notes", name="notes"),
)
"""The roots the flows' roots callback answers with."""

Tap = Callable[[IncomingMessage], Awaitable[None]]
"""An optional observer of what the session surfaces (server notifications, transport errors);
installed as the SDK client's `message_handler`."""


def dump(value: BaseModel | Sequence[BaseModel]) -> Any:
    """A JSON-able, comparable form of an SDK model (wire aliases, no unset/None fields)."""
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json", by_alias=True, exclude_none=True)
    return [dump(v) for v in value]


def _stable(value: Any) -> Any:
    """Drop `_meta` everywhere: it carries per-connection stamps, not results."""
    if isinstance(value, dict):
        return {k: _stable(v) for k, v in value.items() if k != "_meta"}
    if isinstance(value, list):
        return [_stable(v) for v in value]
    return value


class Observer:
    """Deterministic client callbacks that remember what the server asked for."""

    def __init__(self) -> None:
        self.sampling_requests: list[Any] = []
        self.roots_requests = 0

    async def sampling(
        self, context: ClientRequestContext, params: types.CreateMessageRequestParams
    ) -> types.CreateMessageResult:
        self.sampling_requests.append(_stable(dump(params)))
        last = params.messages[-1].content if params.messages else None
        asked = last.text if isinstance(last, types.TextContent) else "?"
        return types.CreateMessageResult(
            role="assistant",
            content=types.TextContent(type="text", text=f"You asked: {asked}"),
            model=SAMPLING_MODEL,
            stop_reason="endTurn",
        )

    async def list_roots(self, context: ClientRequestContext) -> types.ListRootsResult:
        self.roots_requests += 1
        return types.ListRootsResult(roots=list(ROOTS))


class _Progress:
    """Collects (progress, total) pairs for one call; `done` is set once progress reaches total."""

    def __init__(self) -> None:
        self.seen: list[tuple[float, float | None]] = []
        self.first = anyio.Event()
        self.done = anyio.Event()

    async def __call__(self, progress: float, total: float | None, message: str | None) -> None:
        self.seen.append((progress, total))
        self.first.set()
        if total is not None and progress >= total:
            self.done.set()

    async def settle(self) -> list[list[float | None]]:
        """Wait (bounded) for the final progress callback, then return the values seen."""
        with anyio.move_on_after(PROGRESS_GRACE):
            await self.done.wait()
        return [[p, t] for p, t in self.seen]


def connect(
    server: Sequence[str] | str | Callable[[], Any],
    *,
    mode: str = "auto",
    observer: Observer | None = None,
    tap: Tap | None = None,
    timeout: float = DEFAULT_TIMEOUT,
) -> Client:
    """An SDK `Client` (not entered yet) for `server`: a stdio server's argv, a Streamable HTTP
    URL, or a factory of a transport (e.g. the legacy SSE client).

    The response cache is off, so every call in a flow reaches the wire (and a recording).
    """
    if isinstance(server, str):
        target: Any = server
    elif callable(server):
        target = server()
    else:
        argv = list(server)
        if not argv:
            raise ValueError("argv must name the server command")
        target = StdioServerParameters(command=argv[0], args=argv[1:])
    return Client(
        target,
        mode=mode,
        read_timeout_seconds=timeout,
        sampling_callback=observer.sampling if observer else None,
        list_roots_callback=observer.list_roots if observer else None,
        message_handler=tap,
        cache=None,
    )


async def _call_with_progress(client: Client, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    progress = _Progress()
    result = await client.call_tool(name, arguments, progress_callback=progress)
    return {"result": _stable(dump(result)), "progress": await progress.settle()}


async def cancelled_call(client: Client, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """Call a tool, and cancel the call from the client once its first progress notification arrives.

    Cancelling the scope around `call_tool` makes the SDK write `notifications/cancelled`
    (reason "caller cancelled") for the request before the cancellation propagates. Returns
    {cancelled, result, progress_before_cancel}: `cancelled` is True and `result` None when the
    cancel won; a call answered before the cancel has `cancelled` False and its result.
    """
    progress = _Progress()
    scope = anyio.CancelScope()
    outcome: dict[str, Any] = {"cancelled": False, "result": None}

    async def call() -> None:
        try:
            with scope:
                outcome["result"] = _stable(dump(await client.call_tool(name, arguments, progress_callback=progress)))
            outcome["cancelled"] = scope.cancelled_caught
        finally:
            progress.first.set()  # a call answered before any progress must not leave us waiting

    async with anyio.create_task_group() as tg:
        tg.start_soon(call)
        await progress.first.wait()
        scope.cancel()
    outcome["progress_before_cancel"] = [[p, t] for p, t in progress.seen]
    return outcome


def _session_info(client: Client) -> dict[str, Any]:
    info = client.server_info
    return {
        "protocol_version": client.protocol_version,
        "server": {"name": info.name, "version": info.version} if info else None,
    }


# --------------------------------------------------------------------------- server-everything

EVERYTHING_SAMPLING_PROMPT = "What is the capital of France?"


async def everything_flow(
    argv: Sequence[str], *, mode: str = "auto", tap: Tap | None = None, timeout: float = DEFAULT_TIMEOUT
) -> dict[str, Any]:
    """Drive `@modelcontextprotocol/server-everything` (2026.8.31, stdio) through one fixed script.

    Returns a dict with keys: session (protocol_version, server), tools (sorted names), roots
    (get-roots-list result), echo, long_running ({result, progress}), resource ({uri, contents}),
    sampling (trigger-sampling-request result), cancelled ({cancelled, result, progress_before_cancel}),
    after_cancel (an echo on the same session), observed ({sampling_requests}).
    """
    observer = Observer()
    out: dict[str, Any] = {}
    with anyio.fail_after(timeout):
        async with connect(argv, mode=mode, observer=observer, tap=tap, timeout=timeout) as client:
            out["session"] = _session_info(client)

            tools = await client.list_tools()
            out["tools"] = sorted(tool.name for tool in tools.tools)

            # Early on purpose: server-everything also asks for roots by itself, on a timer 350 ms
            # after `initialized`; asking well before that keeps the wire to one roots/list
            # request, sent on behalf of this call (the timer then finds the roots cached).
            out["roots"] = _stable(dump(await client.call_tool("get-roots-list", {})))

            out["echo"] = _stable(dump(await client.call_tool("echo", {"message": "hello"})))

            out["long_running"] = await _call_with_progress(
                client, "trigger-long-running-operation", {"duration": 0.3, "steps": 3}
            )

            resources = await client.list_resources()
            first = sorted(r.uri for r in resources.resources)[0]
            read = await client.read_resource(first)
            out["resource"] = {"uri": first, "contents": _stable(dump(read.contents))}

            out["sampling"] = _stable(
                dump(
                    await client.call_tool(
                        "trigger-sampling-request", {"prompt": EVERYTHING_SAMPLING_PROMPT, "maxTokens": 32}
                    )
                )
            )

            # 5 steps over 1 s: the first progress after 0.2 s, then the cancel. The server sends
            # no response, but keeps running the operation (it ignores the abort signal): its
            # later progress notifications for the dead token still arrive, and the process only
            # exits, after stdin closes, once the operation is over.
            out["cancelled"] = await cancelled_call(
                client, "trigger-long-running-operation", {"duration": 1, "steps": 5}
            )

            out["after_cancel"] = _stable(dump(await client.call_tool("echo", {"message": "still here"})))

    # How many roots/list requests arrive is left out: with a slow start, server-everything's
    # own 350 ms timer can race get-roots-list and ask a second time.
    out["observed"] = {"sampling_requests": observer.sampling_requests}
    return out


# --------------------------------------------------------------------------- notes_server.py

NOTES_QUESTION = "Which note is the oldest?"


async def notes_flow(
    argv: Sequence[str], *, mode: str = "auto", tap: Tap | None = None, timeout: float = DEFAULT_TIMEOUT
) -> dict[str, Any]:
    """Drive tests/servers/notes_server.py through one fixed script.

    `mode` is the SDK client's connect mode: "auto" (probes `server/discover`; the SDK server
    answers, so the session is 2026-07-28, sampling/roots ride `input_required` results and
    retries) or "legacy" (`initialize`, 2025-11-25, sampling/roots are server->client requests).

    Returns a dict with keys: session, tools (name -> outputSchema or None), notes (two add_note
    results), count ({result, progress}), index (resource contents), prompt, ask_model, roots,
    cancelled ({cancelled, result, progress_before_cancel}), after_cancel (count(1) on the same
    session), observed ({sampling_requests, roots_requests}).
    """
    observer = Observer()
    out: dict[str, Any] = {}
    with anyio.fail_after(timeout):
        async with connect(argv, mode=mode, observer=observer, tap=tap, timeout=timeout) as client:
            out["session"] = _session_info(client)

            tools = await client.list_tools()
            out["tools"] = {tool.name: tool.output_schema for tool in sorted(tools.tools, key=lambda t: t.name)}

            out["notes"] = [
                _stable(dump(await client.call_tool("add_note", {"title": title, "text": text})))
                for title, text in (("groceries", "milk, eggs"), ("ideas", "record every frame"))
            ]

            out["count"] = await _call_with_progress(client, "count", {"n": 3})

            read = await client.read_resource("notes://index")
            out["index"] = _stable(dump(read.contents))

            out["prompt"] = _stable(dump(await client.get_prompt("summarize", {"topic": "tapes"})))

            out["ask_model"] = _stable(dump(await client.call_tool("ask_model", {"question": NOTES_QUESTION})))

            out["roots"] = _stable(dump(await client.call_tool("list_client_roots", {})))

            out["cancelled"] = await cancelled_call(client, "slow", {"seconds": 30})

            out["after_cancel"] = await _call_with_progress(client, "count", {"n": 1})

    out["observed"] = {
        "sampling_requests": observer.sampling_requests,
        "roots_requests": observer.roots_requests,
    }
    return out


FEED_TITLES = ("first", "second")


async def feed_flow(server: Sequence[str] | str, *, leave_early: bool = False, timeout: float = DEFAULT_TIMEOUT) -> dict[str, Any]:
    """Follow tests/servers/feed_server.py through `subscriptions/listen` (2026-07-28).

    A listen for resource changes; after each post, the two events it caused; then the server
    closes the stream (close_feeds) and the subscription ends gracefully. With `leave_early`, the
    client leaves that subscription itself after the first post instead, and close_feeds ends
    nothing it still follows. Then a second listen the client leaves at once, and one more post.

    Returns a dict with keys: honored (the acknowledged filter), events (per post, the events
    received, in order), after_close (events after the close: none), second (the second listen's
    honored filter), posted (the tool results).
    """
    out: dict[str, Any] = {"events": [], "posted": []}
    with anyio.fail_after(timeout):
        async with connect(server, timeout=timeout) as client:
            async with client.listen(resources_list_changed=True, resource_subscriptions=["feed://latest"]) as sub:
                out["honored"] = sub.honored.model_dump(mode="json", exclude_none=True)
                for title in FEED_TITLES[: 1 if leave_early else None]:
                    out["posted"].append(_text(await client.call_tool("post", {"title": title})))
                    out["events"].append([repr(await anext(sub)), repr(await anext(sub))])
                if not leave_early:
                    out["posted"].append(_text(await client.call_tool("close_feeds", {})))
                    out["after_close"] = [repr(event) async for event in sub]  # ends at the server's close
            if leave_early:
                for title in FEED_TITLES[1:]:
                    out["posted"].append(_text(await client.call_tool("post", {"title": title})))
                out["posted"].append(_text(await client.call_tool("close_feeds", {})))
            async with client.listen(tools_list_changed=True) as second:
                out["second"] = second.honored.model_dump(mode="json", exclude_none=True)
            out["posted"].append(_text(await client.call_tool("post", {"title": "third"})))
    return out


async def feed_subscribe_flow(
    server: Sequence[str] | str, *, leave_early: bool = False, timeout: float = DEFAULT_TIMEOUT
) -> dict[str, Any]:
    """feed_flow's script in the era before subscriptions/listen (2025-11-25): the client subscribes
    to `feed://latest` with resources/subscribe and hears the events as session notifications.

    After each post, the two events it caused; then close_feeds ends the subscription on the
    server's side. With `leave_early`, the client unsubscribes after the first post instead.
    feed_flow's second listen (for tool list changes, left at once) has no wire form in this era:
    tool list changes need no subscription. Then one more post, which nobody hears of.

    Returns a dict with keys: session, events (per post, the events received, in order), posted
    (the tool results), unheard (events that arrived after the subscription ended: none).
    """
    out: dict[str, Any] = {"events": [], "posted": []}
    send, received = anyio.create_memory_object_stream[str](16)

    async def tap(message: IncomingMessage) -> None:
        if isinstance(message, types.ResourceListChangedNotification):
            await send.send(message.method)
        elif isinstance(message, types.ResourceUpdatedNotification):
            await send.send(f"{message.method} {message.params.uri}")

    with anyio.fail_after(timeout):
        async with connect(server, mode="legacy", tap=tap, timeout=timeout) as client:
            out["session"] = _session_info(client)
            with warnings.catch_warnings():  # deprecated at 2026-07-28; this flow speaks 2025-11-25
                warnings.simplefilter("ignore", MCPDeprecationWarning)
                await client.subscribe_resource("feed://latest")
            for title in FEED_TITLES[: 1 if leave_early else None]:
                out["posted"].append(_text(await client.call_tool("post", {"title": title})))
                out["events"].append([await received.receive(), await received.receive()])
            if leave_early:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", MCPDeprecationWarning)
                    await client.unsubscribe_resource("feed://latest")
                for title in FEED_TITLES[1:]:
                    out["posted"].append(_text(await client.call_tool("post", {"title": title})))
            out["posted"].append(_text(await client.call_tool("close_feeds", {})))
            out["posted"].append(_text(await client.call_tool("post", {"title": "third"})))
    send.close()
    out["unheard"] = [event async for event in received]
    return out


def _text(result: types.CallToolResult) -> str:
    return "".join(block.text for block in result.content if isinstance(block, types.TextContent))


async def sse_polling_flow(url: str, *, cycles: int = 3, timeout: float = DEFAULT_TIMEOUT) -> dict[str, Any]:
    """tests/servers/resumable_server.py's cycles(n) at 2025-11-25: the server closes the call's SSE
    stream after each progress notification and the client polls back with Last-Event-ID after
    the `retry` interval, `cycles` times. Returns the tool result and the progress values seen."""
    with anyio.fail_after(timeout):
        async with connect(url, mode="legacy", timeout=timeout) as client:
            return await _call_with_progress(client, "cycles", {"n": cycles})
