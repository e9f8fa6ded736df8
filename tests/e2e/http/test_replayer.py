"""End-to-end tests of the HTTP replayer: sessions recorded through `tapes record --upstream` from
real servers (the npm server-everything over Streamable HTTP and legacy SSE, and
tests/servers/resumable_server.py with its event store), then served by `replay_server` to the
official SDK client or a plain httpx client."""

from __future__ import annotations

import functools
import re
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import mcp.client.session
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mcp import Client
from mcp.client.sse import sse_client

from tapes.cassette.store import Cassette, save
from tapes.cassette.frames import Kind
from tapes.replay.sessions import split_sessions
from tapes.wire.sse import SSEEvent, SSEParser
from tapes.replay.streams import MALFORMED_EVENT, Faults
from replayer.http import ReplayOptions, replay_server

from tests.support import flows
from tests.support.http_cassettes import calling
from tests.support.http_clients import ACCEPT
from tests.support.http_peers import assert_clean, record_session, start_everything
from tests.support.paths import CASSETTES, TAPES
from tests.support.processes import TIMEOUT, Process

# --- peers and recording -----------------------------------------------------------------------


@pytest.fixture(scope="module")
def everything() -> Iterator[Callable[[str], str]]:
    """URL of server-everything in a mode ("streamableHttp" or "sse"), started on first use."""
    started: dict[str, tuple[Process, str]] = {}

    def url(mode: str) -> str:
        if mode not in started:
            started[mode] = start_everything(mode)
        return started[mode][1]

    yield url
    for server, _ in started.values():
        server.stop()


def sdk_flow(flow: Callable[..., Any], server: str | Callable[[], Any]) -> Any:
    """Run a flow of tests/support/flows.py with the SDK client reaching `server` over HTTP (a Streamable
    HTTP URL, or a factory of the legacy SSE transport)."""

    def connect(argv: Any, *, mode: str = "auto", observer: Any = None, tap: Any = None,
                timeout: float = flows.DEFAULT_TIMEOUT) -> Client:
        return Client(server if isinstance(server, str) else server(), mode=mode, read_timeout_seconds=timeout,
                      sampling_callback=observer.sampling if observer else None,
                      list_roots_callback=observer.list_roots if observer else None, message_handler=tap, cache=None)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(flows, "connect", connect)
        return anyio.run(functools.partial(flow, [], timeout=TIMEOUT))


# --- server-everything: the SDK client sees what it saw live -----------------------------------

ERAS = {
    "http-2025-11-25": ("streamableHttp", "2025-11-25"),
    "http-2025-06-18": ("streamableHttp", "2025-06-18"),
    "sse-2024-11-05": ("sse", "2024-11-05"),
}


@pytest.fixture(scope="module")
def everything_recordings(everything: Callable[[str], str], tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], tuple[Cassette, Any]]:
    made: dict[str, tuple[Cassette, Any]] = {}

    def get(era: str) -> tuple[Cassette, Any]:
        if era not in made:
            mode, version = ERAS[era]
            with pytest.MonkeyPatch.context() as patch:
                patch.setattr(mcp.client.session, "LATEST_HANDSHAKE_VERSION", version)
                drive = (lambda url: sdk_flow(flows.everything_flow, lambda: sse_client(url))) if mode == "sse" else (
                    lambda url: sdk_flow(flows.everything_flow, url))
                made[era] = record_session(tmp_path_factory.mktemp(era) / "session.tape", everything(mode), drive)
        return made[era]

    return get


@pytest.mark.parametrize("era", list(ERAS))
def test_sdk_client_gets_the_live_results_from_the_replay(era: str, everything_recordings: Any) -> None:
    cassette, live = everything_recordings(era)
    assert live["session"]["protocol_version"] == ERAS[era][1]
    with pytest.MonkeyPatch.context() as patch, replay_server(cassette) as server:
        patch.setattr(mcp.client.session, "LATEST_HANDSHAKE_VERSION", ERAS[era][1])
        legacy = era.startswith("sse")
        assert server.url.endswith("/sse" if legacy else "/mcp")
        replayed = sdk_flow(flows.everything_flow, (lambda: sse_client(server.url)) if legacy else server.url)
    assert replayed == live
    assert_clean(server)


@pytest.mark.parametrize("name, era", [("everything-http-2025-11-25.tape", "http-2025-11-25"),
                                       ("everything-sse-2024-11-05.tape", "sse-2024-11-05")])
def test_committed_cassettes_replay_what_server_everything_answers_live(name: str, era: str, everything_recordings: Any) -> None:
    _, live = everything_recordings(era)
    with pytest.MonkeyPatch.context() as patch, replay_server(CASSETTES / name) as server:
        patch.setattr(mcp.client.session, "LATEST_HANDSHAKE_VERSION", ERAS[era][1])
        legacy = era.startswith("sse")
        replayed = sdk_flow(flows.everything_flow, (lambda: sse_client(server.url)) if legacy else server.url)
    assert replayed == live
    # the committed legacy cassette was recorded without the SDK's server/discover probe: it is
    # answered as that server did (Method not found), no miss
    lines = server.report_lines
    probe = "adapted server/discover id 1: answered Method not found"
    assert [line for line in lines if "played" not in line and probe not in line] == []
    assert any(probe in line for line in lines) == legacy, lines
    assert all(" 0 unused" in line for line in lines if "played" in line), lines


def test_session_rules_origin_missing_and_deleted_sessions(everything_recordings: Any) -> None:
    cassette, live = everything_recordings("http-2025-11-25")
    session = cassette.header.labels["sessions"]
    with replay_server(cassette) as server, httpx.Client(timeout=TIMEOUT) as http:
        ping = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
        evil = http.post(server.url, json=ping, headers={**ACCEPT, "Origin": "http://evil.example"})
        assert evil.status_code == 403
        assert http.post(server.url, json=ping, headers=ACCEPT).status_code == 400  # no Mcp-Session-Id
        assert http.post(server.url, json=ping, headers={**ACCEPT, "Mcp-Session-Id": "nope"}).status_code == 404
        # the SDK client gets the recorded session id, and ends the session with the recorded DELETE
        assert sdk_flow(flows.everything_flow, server.url) == live
        deleted = http.post(server.url, json=ping, headers={**ACCEPT, "Mcp-Session-Id": session})
        assert deleted.status_code == 404
        local = http.post(server.url, json=ping, headers={**ACCEPT, "Origin": server.url.rsplit("/", 1)[0]})
        assert local.status_code == 400  # a local origin passes the Origin check (and then lacks a session)


# --- resumption --------------------------------------------------------------------------------


def poll_and_ticks(url: str) -> list[Any]:
    """poll(3): the server closes the POST stream after the priming event and the client resumes
    with Last-Event-ID (2025-11-25 polling); then ticks(4) on one POST stream."""

    async def run() -> list[Any]:
        seen: list[float] = []

        async def progress(value: float, total: float | None, message: str | None) -> None:
            seen.append(value)

        with anyio.fail_after(TIMEOUT):
            async with Client(url, mode="legacy", read_timeout_seconds=TIMEOUT, cache=None) as client:
                polled = await client.call_tool("poll", {"n": 3}, progress_callback=progress)
                ticked = await client.call_tool("ticks", {"n": 4, "interval": 0.01}, progress_callback=progress)
        return [flows.dump(polled), flows.dump(ticked), seen]

    return anyio.run(run)


@pytest.fixture(scope="module")
def resumable_recording(resumable: str, tmp_path_factory: pytest.TempPathFactory) -> tuple[Cassette, Any]:
    return record_session(tmp_path_factory.mktemp("resumable") / "session.tape", resumable, poll_and_ticks)


def test_recorded_server_close_and_resume_replay_as_such(resumable_recording: tuple[Cassette, Any]) -> None:
    cassette, live = resumable_recording
    resumed = [f for f in cassette.frames if f.kind is Kind.HTTP_REQUEST and any(
        name.lower() == "last-event-id" for name, _ in f.info["headers"])]
    assert len(resumed) == 1  # the recording has the poll stream's close and the client's resume
    with replay_server(cassette) as server:
        assert poll_and_ticks(server.url) == live
    assert_clean(server)
    server_frames = sum(not f.from_client for f in cassette.frames)
    assert server.report_lines[0].startswith(f"played {server_frames} frames")  # the resume stream too


def test_a_dropped_stream_is_resumed_by_the_sdk_client(resumable_recording: tuple[Cassette, Any]) -> None:
    cassette, live = resumable_recording
    faults = Faults(drop_after={calling(cassette, "ticks"): 3})  # priming, progress 1, progress 2: cut
    with replay_server(cassette, options=ReplayOptions(faults=faults)) as server:
        assert poll_and_ticks(server.url) == live
    assert_clean(server)


class RawSession:
    """A 2025-11-25 Streamable HTTP session driven by hand, to cut streams where a test wants."""

    def __init__(self, http: httpx.Client, url: str) -> None:
        self.http, self.url, self.session = http, url, None
        init = self.post({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}})
        self.session = init.headers["mcp-session-id"]
        self.post({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def headers(self, **extra: str) -> dict[str, str]:
        session = {"Mcp-Session-Id": self.session} if self.session else {}
        return {**ACCEPT, "MCP-Protocol-Version": "2025-11-25", **session, **extra}

    def post(self, body: Any) -> httpx.Response:
        response = self.http.post(self.url, json=body, headers=self.headers())
        assert response.status_code in (200, 202), response.text
        return response

    def ticks(self) -> Any:
        return self.http.stream("POST", self.url, headers=self.headers(), json={
            "jsonrpc": "2.0", "id": 2, "method": "tools/call",
            "params": {"name": "ticks", "arguments": {"n": 5, "interval": 0.01}, "_meta": {"progressToken": "t"}}})


def read_events(response: httpx.Response, limit: int | None = None) -> list[SSEEvent]:
    parser, events = SSEParser(), []
    for chunk in response.iter_bytes():
        events += parser.feed(chunk)
        if limit is not None and len(events) >= limit:
            return events[:limit]
    return events


@pytest.fixture(scope="module")
def ticks_recording(resumable: str, tmp_path_factory: pytest.TempPathFactory) -> tuple[Cassette, list[SSEEvent]]:
    def drive(url: str) -> list[SSEEvent]:
        with httpx.Client(timeout=TIMEOUT) as http:
            with RawSession(http, url).ticks() as response:
                return read_events(response)

    return record_session(tmp_path_factory.mktemp("ticks") / "session.tape", resumable, drive)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_resuming_after_event_k_sends_exactly_the_rest_of_that_stream(
    ticks_recording: tuple[Cassette, list[SSEEvent]], data: st.DataObject
) -> None:
    cassette, live = ticks_recording
    assert len(live) == 7  # priming, 5 progress notifications, the result
    k = data.draw(st.integers(1, len(live)), label="k")
    with replay_server(cassette) as server, httpx.Client(timeout=TIMEOUT) as http:
        raw = RawSession(http, server.url)
        with raw.ticks() as response:
            before = read_events(response, limit=k)
        with http.stream("GET", server.url, headers=raw.headers(**{"Last-Event-ID": before[-1].id})) as response:
            assert response.status_code == 200
            after = read_events(response)
    assert before + after == live  # every event once, in order, each with its recorded id
    assert {event.id for event in after} <= {event.id for event in live[k:]}


def test_two_sessions_in_one_cassette_replay_concurrently_apart(resumable: str, tmp_path: Path) -> None:
    async def pair(url: str) -> list[Any]:
        with anyio.fail_after(TIMEOUT):
            async with Client(url, mode="legacy", cache=None) as first, Client(url, mode="legacy", cache=None) as second:
                results: list[Any] = [None, None]

                async def use(index: int, client: Client, text: str) -> None:
                    echoed = await client.call_tool("echo", {"text": text})
                    ticked = await client.call_tool("ticks", {"n": 2 + index, "interval": 0.01})
                    results[index] = [flows.dump(echoed), flows.dump(ticked)]

                async with anyio.create_task_group() as tasks:
                    tasks.start_soon(use, 0, first, "first")
                    tasks.start_soon(use, 1, second, "second")
                return results

    cassette, live = record_session(tmp_path / "two.tape", resumable, lambda url: anyio.run(pair, url))
    assert len([s for s in split_sessions(cassette.frames) if s.session_id]) == 2
    with replay_server(cassette) as server:
        assert anyio.run(pair, server.url) == live
    assert_clean(server)


def test_a_client_of_one_session_goes_on_in_the_recorded_session_of_each_step(everything: Callable[[str], str],
                                                                              tmp_path: Path) -> None:
    """Recorded one session per step (as the Inspector does), replayed to a client that runs the
    steps in one session: the second step plays from the second recorded session, and the roots
    request its server sent on that session's GET stream comes on the live client's GET stream."""
    observer = flows.Observer()

    async def steps(url: str, one_session: bool) -> list[Any]:
        async def client() -> Client:
            return Client(url, mode="legacy", read_timeout_seconds=TIMEOUT, list_roots_callback=observer.list_roots, cache=None)

        with anyio.fail_after(TIMEOUT * 2):
            async with await client() as first:
                echoed = flows.dump(await first.call_tool("echo", {"message": "one"}))
                if one_session:
                    return [echoed, flows.dump(await first.call_tool("get-roots-list", {}))]
            async with await client() as second:
                return [echoed, flows.dump(await second.call_tool("get-roots-list", {}))]

    cassette, live = record_session(tmp_path / "steps.tape", everything("streamableHttp"), lambda url: anyio.run(steps, url, False))
    assert len([s for s in split_sessions(cassette.frames) if s.session_id]) == 2
    asked = observer.roots_requests
    with replay_server(cassette) as server:
        assert anyio.run(steps, server.url, True) == live
    assert observer.roots_requests > asked
    lines = server.report_lines
    assert all(" 0 unmatched" in line for line in lines if re.match(r"session \S+: played ", line)), lines
    assert any(re.match(r"adapted tools/call id \d+: played from recorded session", line) for line in lines), lines


def test_faults_malformed_event_delay_and_session_404(ticks_recording: tuple[Cassette, list[SSEEvent]]) -> None:
    cassette, live = ticks_recording
    channel = calling(cassette, "ticks")
    session = cassette.header.labels["sessions"]
    faults = Faults(malformed_after=frozenset({(channel, 2)}), delays={(channel, 3): 0.3})
    with replay_server(cassette, options=ReplayOptions(faults=faults)) as server, httpx.Client(timeout=TIMEOUT) as http:
        raw = RawSession(http, server.url)
        started = time.monotonic()  # before the request: the delay may be over by the time its head arrives
        with raw.ticks() as response:
            body = response.read()
        assert time.monotonic() - started >= 0.3
        second = live[1].data.encode()
        assert body.index(second) < body.index(MALFORMED_EVENT) < body.index(live[2].data.encode())
    assert not any(line.startswith("fault never fired") for line in server.report_lines), server.report_lines
    faults = Faults(drop_after={channel: 3})  # a stream no live request opens: reported, not silently ignored
    with replay_server(cassette, options=ReplayOptions(faults=faults)) as server, httpx.Client(timeout=TIMEOUT) as http:
        RawSession(http, server.url)
    assert f"fault never fired: --drop-after {channel}:3" in server.report_lines
    assert server.replayer.report().unfired_faults == [f"--drop-after {channel}:3"]
    faults = Faults(missing_sessions=frozenset({session}))
    with replay_server(cassette, options=ReplayOptions(faults=faults)) as server, httpx.Client(timeout=TIMEOUT) as http:
        with pytest.raises(AssertionError, match="session not found"):  # initialize opens it, then 404
            RawSession(http, server.url)


def test_request_body_limit(ticks_recording: tuple[Cassette, list[SSEEvent]]) -> None:
    cassette, _ = ticks_recording
    with replay_server(cassette, options=ReplayOptions(max_body=64)) as server, httpx.Client(timeout=TIMEOUT) as http:
        big = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"padding": "x" * 100}}
        assert http.post(server.url + "?client_secret=s3cr3t", json=big, headers=ACCEPT).status_code == 413
    # a miss in the summary, its secret kept off the terminal
    assert "unmatched POST /mcp?client_secret=%3Chidden%3E: its body is past the 64-byte limit (413)" in server.report_lines
    assert not server.clean


# --- the command -------------------------------------------------------------------------------


def test_tapes_replay_http_command(ticks_recording: tuple[Cassette, list[SSEEvent]], tmp_path: Path) -> None:
    cassette, live = ticks_recording
    path = tmp_path / "ticks.tape"
    save(cassette, path)
    replayer = Process([*TAPES, "replay", str(path), "--http", "--listen", "127.0.0.1:0"])
    url = replayer.wait_for(r"tapes: replaying at (\S+)")[1]
    with httpx.Client(timeout=TIMEOUT) as http:
        with RawSession(http, url).ticks() as response:
            assert read_events(response) == live
    replayer.stop(signal.SIGINT)
    stderr = replayer.rest_of_stderr()
    assert replayer.proc.returncode == 0, stderr
    assert re.search(r"tapes replay: played \d+ frames, 0 unmatched, 0 unused", stderr), stderr


def test_tapes_replay_refuses_http_flags_without_http(tmp_path: Path) -> None:
    done = subprocess.run([*TAPES, "replay", "x.tape", "--drop-after", "http:3:1"], capture_output=True, text=True)
    assert done.returncode == 2 and "tapes: error: --drop-after only applies to an HTTP replay" in done.stderr
    done = subprocess.run([*TAPES, "replay", "x.tape", "--http", "--drop-after", "3"], capture_output=True, text=True)
    assert done.returncode == 2 and "is not CHANNEL:N" in done.stderr
