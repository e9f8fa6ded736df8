"""Replay controls reach the HTTP replayer too: the same engine, steered the same way."""

from __future__ import annotations

import anyio
from conftest import ROOT
from flows import Observer
from mcp import Client, MCPError

from replayer.http import ReplayOptions, replay_server
from tapes.control import ReplayControl

CASSETTE = ROOT / "cassettes" / "everything-http-2025-11-25.tape"


async def echo_twice(url: str) -> list[str]:
    observer = Observer()  # the recorded flow's callbacks: initialize declares the same capabilities
    answers = []
    with anyio.fail_after(30):
        async with Client(url, sampling_callback=observer.sampling, list_roots_callback=observer.list_roots,
                          cache=None) as client:
            await client.list_tools()
            for _ in range(2):
                try:
                    answers.append((await client.call_tool("echo", {"message": "hello"})).content[0].text)
                except MCPError as error:
                    answers.append(f"error: {error}")
    return answers


def test_repeats_policy_applies_over_http() -> None:
    with replay_server(CASSETTE) as server:
        in_order = anyio.run(echo_twice, server.url)
    assert in_order[0] == "Echo: hello" and in_order[1].startswith("error: mcp-tapes: no recorded request matches")
    allowing = ReplayOptions(control=ReplayControl.build(repeats="allow"))
    with replay_server(CASSETTE, options=allowing) as server:
        assert anyio.run(echo_twice, server.url) == ["Echo: hello", "Echo: hello"]
