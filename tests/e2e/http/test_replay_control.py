"""Replay controls reach the HTTP replayer too: the same engine, steered the same way."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from mcp import Client, MCPError

from tapes.cassette.frames import Kind

from replayer.http import ReplayOptions, replay_server
from tapes.replay.control import ReplayControl

from tests.support import flows
from tests.support.flows import Observer
from tests.support.http_cassettes import calling
from tests.support.http_clients import echo_twice
from tests.support.http_peers import assert_clean, record_session
from tests.support.paths import CASSETTES
from tests.support.processes import TIMEOUT

CASSETTE = CASSETTES / "everything-http-2025-11-25.tape"


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
        """A client offering the SDK's newest version (the recorded 2024-11-05 initialize answers it
        anyway), then calling a tool with arguments the recording does not have."""
        said = "answered"
        with anyio.fail_after(15):  # a reply left in the POST body would leave the client waiting
            try:
                async with Client(sse_client(url), mode="legacy", cache=None) as client:
                    await client.call_tool("echo", {"message": "never recorded"})
            except* MCPError as raised:  # the SDK raises it out of its task group
                said = str(_first(raised))
        return said

    with replay_server(CASSETTES / "everything-sse-2024-11-05.tape") as server:
        message = anyio.run(ask_unrecorded, server.url)
    assert message.startswith("mcp-tapes: no recorded request matches tools/call")
    assert '/params/arguments/message: "hello" → "never recorded"' in message


def test_a_stream_the_recorded_client_closed_stays_open_for_a_live_client_that_goes_on(tmp_path: Path) -> None:
    """The recorded client listed tools and left, closing its legacy SSE stream; a live client that
    goes on after that (a call the recording lacks) still reads the stream, as a server keeps it
    open for as long as its client does: it gets the miss's error, not a closed connection."""
    from mcp.client.sse import sse_client

    from tapes.cassette.store import Cassette, load, save

    recorded = load(CASSETTES / "everything-sse-2024-11-05.tape")
    listed = next(f.seq for f in recorded.frames if f.kind is Kind.SSE_EVENT and "tools" in str(f.message)[:20])
    listing = {f.channel for f in recorded.frames if f.kind is Kind.MESSAGE and (f.message or {}).get("method") == "tools/list"}
    kept = [f for f in recorded.frames if f.seq <= listed and f.channel in {"http:1", "http:2", "http:3", *listing}]
    [closed] = [f for f in recorded.frames if f.kind is Kind.STREAM_END and f.channel == "http:1"]
    assert (closed.info or {})["reason"] == "client_disconnect"
    cassette = tmp_path / "listed-tools.tape"
    save(Cassette(recorded.header, [*kept, closed]), cassette)

    async def list_then_call(url: str) -> str:
        said = "answered"
        with anyio.fail_after(15):
            try:
                async with Client(sse_client(url), mode="legacy", cache=None) as client:
                    await client.list_tools()
                    await anyio.sleep(0.5)  # the recorded client was gone by now
                    await client.call_tool("echo", {"message": "never recorded"})
            except* MCPError as raised:
                said = str(_first(raised))
        return said

    with replay_server(cassette) as server:
        message = anyio.run(list_then_call, server.url)
    assert message.startswith("mcp-tapes: no recorded request matches tools/call"), message
    assert any("unmatched tools/call" in line for line in server.report_lines), server.report_lines


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


# --- 2026-07-28: a client cancels by closing the request's response stream ----------------------


def stateless_cancel(url: str, interval: float) -> list[Any]:
    """A stateless 2026-07-28 session: ticks(5) cancelled by the SDK client after its first
    progress (at 2026-07-28 the SDK aborts the POST instead of sending notifications/cancelled),
    then an echo."""

    async def run() -> list[Any]:
        with anyio.fail_after(TIMEOUT):
            async with Client(url, read_timeout_seconds=TIMEOUT, cache=None) as client:
                cancelled = await flows.cancelled_call(client, "ticks", {"n": 5, "interval": interval})
                after = flows.dump(await client.call_tool("echo", {"text": "after"}))
                return [client.protocol_version, cancelled, after]

    return anyio.run(run)


def test_a_recorded_stream_close_cancel_replays_as_one(resumable: str, tmp_path: Path) -> None:
    cassette, live = record_session(tmp_path / "cancel.tape", resumable, lambda url: stateless_cancel(url, 0.3))
    assert live[0] == "2026-07-28" and live[1]["cancelled"] and live[1]["progress_before_cancel"] == [[1, 5]]
    ticks = calling(cassette, "ticks")
    ends = [f.info["reason"] for f in cassette.frames if f.channel == ticks and f.kind is Kind.STREAM_END]
    assert ends == ["client_disconnect"]
    assert not any(f.from_client and f.kind is Kind.MESSAGE and f.message.get("method") == "notifications/cancelled"
                   for f in cassette.frames)
    with replay_server(cassette) as server:
        # The replayer holds the ticks stream open where the recorded server never finished it,
        # so the client gets its progress, then cancels by closing: the same outcome as live.
        assert stateless_cancel(server.url, 0.3) == live
    assert_clean(server)


@pytest.mark.parametrize("race", ["recorded", "cancel-wins"])
def test_a_stream_close_the_recording_lacks_is_a_cancel(race: str, resumable: str, tmp_path: Path) -> None:
    cassette, _ = record_session(tmp_path / "answered.tape", resumable, lambda url: stateless_call(url))
    # The recorded ticks were answered; at the recorded pace the live client cancels first.
    control = ReplayControl.build(race=race, timing="recorded")
    with replay_server(cassette, options=ReplayOptions(control=control)) as server:
        outcome = stateless_cancel(server.url, 0.3)
    assert outcome[1]["cancelled"] and outcome[1]["progress_before_cancel"] == [[1, 5]]
    unmatched = [line for line in server.report_lines if line.startswith("unmatched")]
    if race == "recorded":
        assert unmatched == ["unmatched closing the stream of tools/call id 2: the recording has no cancellation of it"]
    else:
        assert unmatched == []  # cancel-wins honours any cancel


def stateless_call(url: str) -> None:
    """What `stateless_cancel` does, but the ticks are left to finish."""

    async def run() -> None:
        async with Client(url, read_timeout_seconds=TIMEOUT, cache=None) as client:
            await client.call_tool("ticks", {"n": 5, "interval": 0.3}, progress_callback=lambda *_: anyio.sleep(0))
            await client.call_tool("echo", {"text": "after"})

    anyio.run(run)


@pytest.mark.parametrize("ending", ["a DELETE of its session", "the replay stopping"])
def test_a_stream_paused_by_a_delay_ends_at_once_with_its_session(ending: str) -> None:
    """A stream waiting out a --delay (or a --timing gap) ends when its session is deleted, as the
    recorded server ended it, or when the replay stops: the wait does not hold either up."""
    import threading
    import time

    import httpx

    from tapes.cassette.store import load
    from tapes.replay.streams import Faults
    from tests.support.http_clients import RawSession

    cassette = load(CASSETTE)
    channel = calling(cassette, "trigger-long-running-operation")
    call = next(f.message for f in cassette.frames if f.channel == channel and f.kind is Kind.MESSAGE and f.from_client)
    paused = ReplayOptions(faults=Faults(delays={(channel, 2): 60.0}))
    with replay_server(cassette, options=paused) as server, httpx.Client(timeout=TIMEOUT) as http:
        session = RawSession(http, server.url)
        with session.stream(call) as streaming:
            lines = streaming.iter_lines()
            assert next(lines).startswith("id: ")  # the first event came; the second waits a minute
            started = time.monotonic()
            if ending == "a DELETE of its session":
                assert http.delete(server.url, headers=session.headers()).status_code == 200
            else:
                threading.Thread(target=server.stop).start()
            with contextlib.suppress(httpx.HTTPError):  # the replay stopping may cut the connection
                for _ in lines:
                    pass
            assert time.monotonic() - started < 3


def test_recorded_timing_waits_for_a_slow_answer_s_head_too() -> None:
    """A server that took 1 s to answer at all: under --timing recorded the answer's head (and
    so the whole answer) comes 1 s after the request; only the gaps between events were waited."""
    import time

    from tapes.cassette.store import Cassette, load

    recorded = load(CASSETTE)
    channel = recorded.frames[0].channel  # the server/discover probe, answered with a JSON 400
    slow = Cassette(recorded.header, [f._replace(t=f.t + 1.0) if f.channel == channel and not f.from_client else f
                                      for f in recorded.frames])
    probe = next(f for f in recorded.frames if f.channel == channel and f.kind is Kind.MESSAGE)
    for timing, at_least, at_most in [("recorded", 0.9, 5.0), ("instant", 0.0, 0.5)]:
        with replay_server(slow, options=ReplayOptions(control=ReplayControl.build(timing=timing))) as server:
            started = time.monotonic()
            answer = httpx.post(server.url, content=probe.payload, timeout=10,
                                headers={"Accept": "application/json, text/event-stream", "Content-Type": "application/json"})
            took = time.monotonic() - started
        assert answer.status_code == 400 and at_least <= took <= at_most, (timing, took)
