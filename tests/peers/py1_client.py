"""The official Python SDK's 1.x line (`mcp` 1.30: `ClientSession` over `stdio_client`,
`streamable_http_client` or `sse_client`) running one fixed scenario (tests/peers/scenarios.json)
against an MCP server, printing what it got as one canonical JSON document on stdout.

    python py1_client.py SCENARIO stdio COMMAND [ARGS...]
    python py1_client.py SCENARIO http URL        (Streamable HTTP)
    python py1_client.py SCENARIO sse URL         (legacy HTTP+SSE)

It runs with the interpreter of tests/peers/.venv-mcp1 (made by .ci/run): the project's venv has
the SDK's 2.x line, which cannot live beside 1.x. Every request is awaited before the next, as the
SDK's users do. `_meta` is left out of results (it carries per-connection stamps, not results).
"""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any

import anyio
from mcp import ClientSession, StdioServerParameters
from mcp.client.sse import sse_client
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from pydantic import AnyUrl

TIMEOUT = 30


@asynccontextmanager
async def connected(kind: str, target: list[str]) -> AsyncIterator[ClientSession]:
    if kind == "stdio":
        streams: Any = stdio_client(StdioServerParameters(command=target[0], args=target[1:]))
    elif kind == "http":
        streams = streamable_http_client(target[0])
    else:
        assert kind == "sse", kind
        streams = sse_client(target[0])
    async with streams as (read, write, *_), ClientSession(read, write, timedelta(seconds=TIMEOUT)) as session:
        yield session


def dump(model: Any) -> Any:
    return model.model_dump(mode="json", by_alias=True, exclude_none=True)


async def run(session: ClientSession, step: dict[str, Any]) -> Any:
    method = step["method"]
    if method == "logging/setLevel":
        return dump(await session.set_logging_level(step["level"]))
    if method == "tools/list":
        return dump(await session.list_tools())
    if method == "tools/call":
        progress: list[list[Any]] = []

        async def on_progress(value: float, total: float | None, message: str | None) -> None:
            progress.append([value, total])

        result = dump(await session.call_tool(step["name"], step["arguments"],
                                              progress_callback=on_progress if step.get("progress") else None))
        if step.get("progress"):
            # the last value races the response on the live server, as in tests/support/interop.py's `settled`
            return {"result": result, "progress": [p for p in progress if p[1] is None or p[0] < p[1]]}
        return result
    if method == "resources/list":
        return dump(await session.list_resources())
    if method == "resources/read":
        return dump(await session.read_resource(AnyUrl(step["uri"])))
    if method == "prompts/list":
        return dump(await session.list_prompts())
    if method == "prompts/get":
        return dump(await session.get_prompt(step["name"], step["arguments"]))
    raise ValueError(f"the scenario has a step this client cannot run: {method}")


async def main(scenario: str, kind: str, target: list[str]) -> None:
    steps = json.loads((Path(__file__).parent / "scenarios.json").read_text())[scenario]
    out: dict[str, Any] = {"steps": []}
    with anyio.fail_after(TIMEOUT * 2):
        async with connected(kind, target) as session:
            init = await session.initialize()
            out["session"] = {"server": dump(init.serverInfo), "capabilities": dump(init.capabilities)}
            for step in steps:
                out["steps"].append({"method": step["method"], "result": await run(session, step)})
    print(json.dumps(out))  # made stable (no _meta, keys sorted) by the caller, tests/support/interop.py


if __name__ == "__main__":
    anyio.run(main, sys.argv[1], sys.argv[2], sys.argv[3:])
