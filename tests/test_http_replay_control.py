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


def test_a_legacy_client_gets_its_miss_on_the_sse_stream_not_a_hang() -> None:
    from mcp.client.sse import sse_client

    async def ask_unrecorded(url: str) -> str:
        """A client offering the SDK's newest version: the recorded 2024-11-05 initialize does not match."""
        said = "answered"
        with anyio.fail_after(15):  # a reply left in the POST body would leave the client waiting
            try:
                async with Client(sse_client(url), mode="legacy", cache=None) as client:
                    await client.call_tool("echo", {"message": "never recorded"})
            except* MCPError as raised:  # the SDK raises it out of its task group
                said = str(_first(raised))
        return said

    with replay_server(ROOT / "cassettes" / "everything-sse-2024-11-05.tape") as server:
        message = anyio.run(ask_unrecorded, server.url)
    assert message.startswith("mcp-tapes: no recorded request matches initialize")
    assert "/params/protocolVersion" in message


def _first(error: BaseException) -> BaseException:
    while isinstance(error, BaseExceptionGroup):
        error = error.exceptions[0]
    return error



def test_recorded_timing_applies_over_http() -> None:
    """--timing recorded: the long-running call's progress comes at its recorded pace (0.3 s in
    all), where an instant replay sends it at once."""
    import time

    async def long_call(url: str) -> float:
        observer = Observer()
        async with Client(url, sampling_callback=observer.sampling, list_roots_callback=observer.list_roots,
                          cache=None) as client:
            await client.list_tools()
            await client.call_tool("get-roots-list", {})
            await client.call_tool("echo", {"message": "hello"})
            started = time.monotonic()
            await client.call_tool("trigger-long-running-operation", {"duration": 0.3, "steps": 3},
                                   progress_callback=lambda *_: anyio.sleep(0))
            return time.monotonic() - started

    timed = ReplayOptions(control=ReplayControl.build(timing="recorded"))
    with replay_server(CASSETTE, options=timed) as server:
        assert anyio.run(long_call, server.url) >= 0.25  # three recorded gaps of ~0.1 s
