"""The client side of the fault tests: the official SDK client runs four steps against the notes
server (or a replay of it, over any transport) and says, step by step, what it saw: the answer or the
error (code and message), how long the step took from just before its request, and the transport
errors the session surfaced (a line or SSE event that is not JSON-RPC)."""

from __future__ import annotations

import functools
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

import anyio
from mcp import Client, MCPError, StdioServerParameters
from mcp.client import IncomingMessage
from mcp.client.stdio import stdio_client

from tests.support.paths import NOTES_SERVER, TAPES
from tests.support.processes import TIMEOUT

STEPS = ("first_note", "second_note", "index", "prompt")
"""add_note twice (two tools/call of the same tool), resources/read of notes://index, prompts/get of summarize."""

SHORT_READ_TIMEOUT = 1.0
"""The client's read timeout where a fault makes it give up (hang, a malformed answer on stdio)."""


class Step(NamedTuple):
    outcome: str  # "ok" or "error"
    code: int | None  # the JSON-RPC error code
    text: str  # the answer's first text, or the error's message


@dataclass
class FaultRun:
    steps: dict[str, Step] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)  # from just before each step's request to its outcome
    transport_errors: list[str] = field(default_factory=list)


def _text(result: Any) -> str:
    if hasattr(result, "contents"):
        return result.contents[0].text
    if hasattr(result, "messages"):
        return result.messages[0].content.text
    return result.content[0].text


async def notes_steps(server: Any, *, read_timeout: float = TIMEOUT, mode: str = "legacy") -> FaultRun:
    """Run the steps against `server`: a Streamable HTTP URL, or a factory of a transport (the stdio
    or legacy SSE client). `mode` is the SDK's connect mode: "legacy" (initialize, 2025-11-25) or
    "auto" (server/discover, 2026-07-28 with the SDK server). An error ends only its own step; the
    next step is still tried."""
    run = FaultRun()

    async def tap(message: IncomingMessage) -> None:
        if isinstance(message, Exception):
            run.transport_errors.append(str(message))

    steps: dict[str, Callable[[Client], Awaitable[Any]]] = {
        "first_note": lambda client: client.call_tool("add_note", {"title": "groceries", "text": "milk, eggs"}),
        "second_note": lambda client: client.call_tool("add_note", {"title": "ideas", "text": "record every frame"}),
        "index": lambda client: client.read_resource("notes://index"),
        "prompt": lambda client: client.get_prompt("summarize", {"topic": "tapes"}),
    }
    with anyio.fail_after(TIMEOUT):
        target = server if isinstance(server, str) else server()
        async with Client(target, mode=mode, read_timeout_seconds=read_timeout, message_handler=tap,
                          cache=None) as client:
            for name, step in steps.items():
                started = time.monotonic()
                try:
                    run.steps[name] = Step("ok", None, _text(await step(client)))
                except MCPError as error:
                    run.steps[name] = Step("error", error.error.code, error.error.message)
                run.seconds[name] = time.monotonic() - started
    return run


def over_stdio(flow: Callable[..., Awaitable[Any]], argv: list[str], errlog: Path, **options: Any) -> Any:
    """Run a flow of this module with the SDK's stdio client running `argv`, its stderr written to `errlog`."""
    params = StdioServerParameters(command=argv[0], args=argv[1:])
    with errlog.open("w") as stderr:
        return anyio.run(functools.partial(flow, lambda: stdio_client(params, errlog=stderr), **options))


def record_notes_over_stdio(cassette: Path) -> FaultRun:
    """Record the steps against the notes server through `tapes record`; what the client saw (all answered)."""
    live = over_stdio(notes_steps, [*TAPES, "record", "-o", str(cassette), "--", *NOTES_SERVER], cassette.with_suffix(".stderr"))
    assert [step.outcome for step in live.steps.values()] == ["ok"] * len(STEPS), live
    return live


async def overlapping_calls(server: Any) -> dict[str, Any]:
    """`count` (with progress), then, once its first progress came (while its answer may still be
    on the way), `add_note`: each one's result and the seconds it took from its own request."""
    out: dict[str, Any] = {}
    progressed = anyio.Event()

    async def progress(value: float, total: float | None, message: str | None) -> None:
        progressed.set()

    async def timed(name: str, call: Awaitable[Any]) -> None:
        started = time.monotonic()
        out[name] = _text(await call)
        out[f"{name}_seconds"] = time.monotonic() - started

    with anyio.fail_after(TIMEOUT):
        target = server if isinstance(server, str) else server()
        async with Client(target, mode="legacy", cache=None) as client, anyio.create_task_group() as tasks:
            tasks.start_soon(timed, "count", client.call_tool("count", {"n": 2}, progress_callback=progress))
            await progressed.wait()
            await timed("add_note", client.call_tool("add_note", {"title": "meanwhile", "text": "x"}))
    return out
