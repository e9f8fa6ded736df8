"""The interop matrix: a cassette recorded by one client is replayed to every client, over every
transport both have, for server-everything and the SDK notes server; each replaying client must
get exactly what it gets from the live server.

Recording clients: the Python SDK (also in its default mode, which records the notes server at
2026-07-28) and the TypeScript SDK. Replaying clients: those, the Inspector CLIs, mcp-remote (a
stdio host's bridge to HTTP), the Python SDK's 1.x line, fastmcp's client, a strictly
sequential raw HTTP client, and, spot-checked (SPOT_CHECK_RECORDERS, SPOT_CHECK_REPLAYERS), the
AI SDK's client and supergateway (tests/support/interop.py). Each cassette
is recorded once per module and each live result computed once, so a cell costs one replay.
"""

from __future__ import annotations

import json
import signal
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.processes import Process
from tests.support.interop import (
    HTTP,
    PROBING_RECORDER,
    RECORDING_CLIENTS,
    SCENARIOS,
    SERVERS,
    SPOT_CHECK_RECORDERS,
    SPOT_CHECK_REPLAYERS,
    SSE,
    STDIO,
    TAPES,
    TRANSPORTS,
    LiveServers,
    RawClient,
    record,
    replay,
    run_client,
)
from tapes.cassette.frames import Kind
from tapes.cassette.store import load

CELLS = [
    pytest.param(recorder, replayer, transport, server, id=f"{server}-{transport}-{recorder}-to-{replayer}")
    for server in SERVERS
    for transport in (STDIO, HTTP, SSE)
    for recorder in (*RECORDING_CLIENTS, *((PROBING_RECORDER,) if server == "notes" else ()))
    for replayer in TRANSPORTS
    if transport in TRANSPORTS[replayer] and recorder in SPOT_CHECK_REPLAYERS.get(replayer, (recorder,))
]
SPOT_CHECK_CELLS = [
    pytest.param(recorder, replayer, transport, server, id=f"{server}-{transport}-{recorder}-to-{replayer}")
    for recorder, replayers in SPOT_CHECK_RECORDERS.items()
    for server in SERVERS
    for transport in (STDIO, HTTP, SSE)
    for replayer in replayers
    if transport in TRANSPORTS[recorder] and transport in TRANSPORTS[replayer]
]


@pytest.fixture(scope="module")
def live() -> Iterator[LiveServers]:
    servers = LiveServers()
    yield servers
    servers.close()


@pytest.fixture(scope="module")
def baseline(live: LiveServers) -> Callable[[str, str, str], dict[str, Any]]:
    """What a client gets from the live server (computed once per client, transport and server)."""
    seen: dict[tuple[str, str, str], dict[str, Any]] = {}

    def get(client: str, transport: str, server: str) -> dict[str, Any]:
        if (client, transport, server) not in seen:
            seen[(client, transport, server)] = run_client(client, server, transport, live.target(server, transport))
        return seen[(client, transport, server)]

    return get


@pytest.fixture(scope="module")
def cassette(live: LiveServers, baseline: Callable[[str, str, str], dict[str, Any]],
             tmp_path_factory: pytest.TempPathFactory) -> Callable[[str, str, str], Path]:
    """A cassette of a client running the scenario against the live server (recorded once); the
    client must get through the recorder what it gets without it."""
    recorded: dict[tuple[str, str, str], Path] = {}

    def get(client: str, transport: str, server: str) -> Path:
        if (client, transport, server) not in recorded:
            path = tmp_path_factory.mktemp("interop") / f"{server}-{transport}-{client}.tape"
            through_recorder = record(client, server, transport, live, server, path)
            assert through_recorder == baseline(client, transport, server)
            recorded[(client, transport, server)] = path
        return recorded[(client, transport, server)]

    return get


@pytest.mark.parametrize(("recorder", "replayer", "transport", "server"), CELLS + SPOT_CHECK_CELLS)
def test_replay_gives_each_client_what_the_live_server_gives_it(
    recorder: str, replayer: str, transport: str, server: str,
    cassette: Callable[[str, str, str], Path], baseline: Callable[[str, str, str], dict[str, Any]],
) -> None:
    tape = cassette(recorder, transport, server)
    replayed = replay(replayer, server, transport, tape)

    assert replayed.result == baseline(replayer, transport, server)
    if transport == STDIO:
        assert json.loads(replayed.summary)["unmatched"] == []
    else:
        assert replayed.exit_code == 0, replayed.summary


def test_the_ts_client_replays_a_session_whose_recorded_client_opened_its_get_stream_early(
    live: LiveServers, baseline: Callable[[str, str, str], dict[str, Any]], tmp_path: Path
) -> None:
    """HTTP causality is per exchange: the recorded client opened its GET stream before it sent
    `notifications/initialized`; the TypeScript SDK opens it only once that notification got its
    202, so a 202 that waited for the GET would hold both forever."""
    tape = tmp_path / "eager-get.tape"
    recorder = Process([*TAPES, "record", "-o", str(tape), "--upstream", live.url("notes", HTTP), "--listen", "127.0.0.1:0"])
    RawClient(recorder.wait_for(r"tapes: recording (http://\S+)")[1]).run(SCENARIOS["notes"], eager_get=True)
    assert recorder.stop(signal.SIGINT) == 0
    frames = load(tape).frames
    get = next(f.seq for f in frames if f.kind is Kind.HTTP_REQUEST and f.info["method"] == "GET")
    initialized = next(f.channel for f in frames if f.message and f.message.get("method") == "notifications/initialized")
    accepted = next(f.seq for f in frames if f.channel == initialized and f.kind is Kind.HTTP_RESPONSE)
    assert get < accepted

    replayed = replay("ts", "notes", HTTP, tape)
    assert replayed.result == baseline("ts", HTTP, "notes")
    assert replayed.exit_code == 0, replayed.summary



@pytest.mark.parametrize("transport", [HTTP, SSE])
def test_a_session_mcp_remote_recorded_replays_to_it_with_the_default_options(
    transport: str, cassette: Callable[[str, str, str], Path], baseline: Callable[[str, str, str], dict[str, Any]],
) -> None:
    """mcp-remote as the recording client: the cassette holds the sessions it opens before its
    host's, so the replay does not need to serve it again.

    Another client gets the session that did the work, not those opened before it to check the
    connection: over Streamable HTTP their initialize matches its own as well, and over legacy
    SSE mcp-remote's probe streams open sessions as its real one does (another User-Agent tells
    the live client apart)."""
    tape = cassette("remote", transport, "notes")
    replayed = replay("remote", "notes", transport, tape)
    assert replayed.result == baseline("remote", transport, "notes")
    assert replayed.exit_code == 0, replayed.summary
    other = replay("python", "notes", transport, tape)
    assert other.result == baseline("python", transport, "notes")
    assert other.exit_code == 0 and "0 unmatched" in other.summary, other.summary


@pytest.mark.parametrize("client", ["python", "ts"])
def test_a_cassette_the_inspector_recorded_a_session_per_step_replays_to_a_client_of_one_session(
    client: str, live: LiveServers, tmp_path: Path
) -> None:
    """The Inspector CLI runs each step in a session of its own; a client that runs the steps in
    one session, in the recorded order or another, goes on in the recorded session of each step,
    over HTTP and over stdio."""
    tape = tmp_path / "steps.tape"
    through_recorder = record("inspector", "everything-steps", HTTP, live, "everything", tape)
    assert through_recorder == run_client("inspector", "everything-steps", HTTP, live.target("everything", HTTP))
    assert sum(1 for f in load(tape).frames if f.from_client and f.message and f.message.get("method") == "initialize") == 3
    # in the recorded order the first step plays in the session the client opened and each later
    # one moves on; in reverse the first moves on too (its session is then free for the last), at
    # a first request, where arriving in another order would look the same
    for scenario, moves, first_moves in (("everything-steps", 2, 0), ("everything-steps-reversed", 2, 1)):
        replayed = replay(client, scenario, HTTP, tape)
        assert replayed.result == run_client(client, scenario, HTTP, live.target("everything", HTTP))
        assert replayed.exit_code == 0 and "0 unmatched" in replayed.summary, replayed.summary
        assert replayed.summary.count("which its client opened for it") == moves, replayed.summary
        assert replayed.summary.count("at the live session's first request past its opening") == first_moves, replayed.summary
        # over stdio the sessions are served one after the other, each past its opening
        over_stdio = replay(client, scenario, STDIO, tape, report=tmp_path / f"{scenario}.report.json")
        assert over_stdio.result == run_client(client, scenario, STDIO, live.target("everything", STDIO))
        assert json.loads(over_stdio.summary)["unmatched"] == []
