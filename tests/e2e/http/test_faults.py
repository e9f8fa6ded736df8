"""End to end, over HTTP: JSON-RPC faults (`tapes replay --http --fault`) as the official SDK client
sees them, on Streamable HTTP and on legacy HTTP+SSE. The notes server's session is recorded through
`tapes record --upstream` by the same client first; the replay with a fault then answers every step
as recorded but the one the fault targets."""

from __future__ import annotations

import functools
import re
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp.client.sse import sse_client
from mcp.types import CONNECTION_CLOSED, PARSE_ERROR, REQUEST_TIMEOUT

from tests.support.fault_flows import SHORT_READ_TIMEOUT, FaultRun, Step, notes_steps
from tests.support.http_peers import notes_over_http, record_session
from tests.support.paths import TAPES
from tests.support.processes import TIMEOUT, Process

# the notes server's flag and the SDK client's connect mode: Streamable HTTP at 2025-11-25 and at
# 2026-07-28 (stateless: a client cancels by closing the request's stream), legacy HTTP+SSE
TRANSPORTS = {"streamable": ("--http", "legacy"), "stateless": ("--http", "auto"), "sse": ("--sse", "legacy")}


def client_target(transport: str, url: str) -> Any:
    """What `notes_steps` connects to: the URL (Streamable HTTP) or a factory of the legacy SSE client."""
    return (lambda: sse_client(url)) if transport == "sse" else url


def steps(transport: str, url: str, **options: Any) -> FaultRun:
    return anyio.run(functools.partial(notes_steps, client_target(transport, url), mode=TRANSPORTS[transport][1], **options))


@pytest.fixture(scope="module", params=list(TRANSPORTS))
def recording(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path, FaultRun]]:
    transport = request.param
    cassette = tmp_path_factory.mktemp(transport) / "notes.tape"
    with notes_over_http(transport=TRANSPORTS[transport][0]) as upstream:
        _, live = record_session(cassette, upstream, lambda url: steps(transport, url))
    assert [step.outcome for step in live.steps.values()] == ["ok"] * 4, live
    yield transport, cassette, live


def replay(recording: tuple[str, Path, FaultRun], *faults: str, read_timeout: float = TIMEOUT) -> tuple[FaultRun, str]:
    """The steps against `tapes replay --http` with these faults; what the client saw and the replay's stderr."""
    transport, cassette, _ = recording
    flags = [flag for fault in faults for flag in ("--fault", fault)]
    replayer = Process([*TAPES, "replay", str(cassette), "--http", "--listen", "127.0.0.1:0", *flags])
    try:
        url = replayer.wait_for(r"tapes: replaying at (\S+)")[1]
        run = steps(transport, url, read_timeout=read_timeout)
    finally:
        replayer.stop(signal.SIGINT)
    return run, replayer.rest_of_stderr()


def summary(stderr: str) -> str:
    return re.search(r"tapes replay: played \d+ frames, (.*)", stderr, re.S)[1].strip()


def test_error_takes_the_place_of_the_second_call_of_a_tool(recording: tuple[str, Path, FaultRun]) -> None:
    run, stderr = replay(recording, "tools/call@add_note#2:error:-32000:rate limited")
    assert run.steps == {**recording[2].steps, "second_note": Step("error", -32000, "rate limited")}
    assert summary(stderr) == "0 unmatched, 0 unused" and "fault never fired" not in stderr, stderr


def test_delay_holds_the_answer(recording: tuple[str, Path, FaultRun]) -> None:
    run, stderr = replay(recording, "resources/read:delay:1")
    assert run.steps == recording[2].steps
    assert run.seconds["index"] >= 1.0 > run.seconds["prompt"], run.seconds
    assert summary(stderr) == "0 unmatched, 0 unused", stderr


def test_hang_leaves_the_client_to_its_read_timeout(recording: tuple[str, Path, FaultRun]) -> None:
    run, stderr = replay(recording, "prompts/get@summarize:hang", read_timeout=SHORT_READ_TIMEOUT)
    assert run.steps == {**recording[2].steps, "prompt": Step("error", REQUEST_TIMEOUT, "Request 'prompts/get' timed out")}
    assert run.seconds["prompt"] >= SHORT_READ_TIMEOUT
    # the client cancels the request it gave up on: no miss, the recording has no cancel to match
    assert summary(stderr) == "0 unmatched, 0 unused", stderr



def test_malformed_sends_a_broken_answer(recording: tuple[str, Path, FaultRun]) -> None:
    transport, _, live = recording
    run, stderr = replay(recording, "tools/call#2:malformed", read_timeout=SHORT_READ_TIMEOUT)
    broken = run.steps.pop("second_note")
    assert run.steps == {name: step for name, step in live.steps.items() if name != "second_note"}
    if transport != "sse":
        # the call's own POST answer carried it (an SSE event; at 2026-07-28 a JSON body): the SDK fails the call
        parsed = "JSON response" if transport == "stateless" else "SSE message"
        assert broken.code == PARSE_ERROR and broken.text.startswith(f"Failed to parse {parsed}")
        assert "Invalid JSON" in broken.text and '{"jsonrpc": "2.0", "id": ' in broken.text
    else:  # the session's one SSE stream carried it: the SDK reports it, the call times out
        [error] = run.transport_errors
        assert "Invalid JSON" in error and '{"jsonrpc": "2.0", "id": ' in error
        assert broken == Step("error", REQUEST_TIMEOUT, "Request 'tools/call' timed out")
    assert summary(stderr) == "0 unmatched, 0 unused", stderr


def test_drop_cuts_the_connection(recording: tuple[str, Path, FaultRun]) -> None:
    transport, _, live = recording
    if transport == "stateless":
        # The 2026-07-28 answer is a JSON body: cut after its head, it fails the SDK client (mcp 2.x)
        # as a whole, out of its task group, where an SSE stream's cut fails only the call.
        with pytest.raises(BaseExceptionGroup) as raised:
            replay(recording, "resources/read@notes://index:drop")
        assert any("peer closed connection without sending complete message body" in str(error)
                   for error in leaves(raised.value)), raised.value
        return
    run, stderr = replay(recording, "resources/read@notes://index:drop")
    if transport == "streamable":  # the read's POST stream is cut; the next POST is answered
        assert run.steps == {**live.steps, "index": Step("error", CONNECTION_CLOSED, "SSE stream ended without a response")}
        assert summary(stderr) == "0 unmatched, 0 unused", stderr
    else:  # the session's one SSE stream is cut: the session is over
        closed = Step("error", CONNECTION_CLOSED, "Connection closed")
        assert run.steps == {**live.steps, "index": closed, "prompt": closed}
        assert run.transport_errors == ["peer closed connection without sending complete message body (incomplete chunked read)"]
        assert summary(stderr).startswith("0 unmatched, 1 unused\ntapes replay: unused prompts/get"), stderr


def leaves(error: BaseException) -> list[BaseException]:
    if isinstance(error, BaseExceptionGroup):
        return [leaf for inner in error.exceptions for leaf in leaves(inner)]
    return [error]


def test_a_fault_that_never_fired_is_a_warning_in_the_summary(recording: tuple[str, Path, FaultRun]) -> None:
    run, stderr = replay(recording, "resources/read@notes://other:hang")
    assert run.steps == recording[2].steps
    assert summary(stderr) == "0 unmatched, 0 unused\ntapes replay: fault never fired: resources/read@notes://other:hang", stderr
