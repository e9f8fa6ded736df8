"""A cassette serves clients other than the one that recorded it. The committed cassettes were
recorded by one SDK at one protocol version; today's clients ask for another version, declare other
capabilities, and the Python SDK (2.x) and fastmcp first probe with server/discover (2026-07-28).
A replay answers them as the recorded server would have: its handshake with the version it chose,
Method not found to the probe. Each client must get the recorded tools, with nothing unmatched."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client, MCPError, StdioServerParameters

from tapes.cassette.frames import Kind
from tapes.cassette.store import load
from tapes.wire.jsonrpc import items

from tests.support.flows import notes_flow
from tests.support.http_peers import notes_over_http, record_session
from tests.support.interop import HTTP, SSE, STDIO, Replayed, node, replay, run_client, stable, supergateway_serving
from tests.support.paths import CASSETTES, PEERS, SERVERS, TAPES
from tests.support.processes import TIMEOUT, Process

CLIENTS = ("python", "ts", "ts2", "inspector", "inspector2", "python1", "fastmcp", "aisdk")
# the clients that probe with server/discover before they initialize, by default, over these transports
# (fastmcp and the AI SDK know legacy SSE has no 2026-07-28 era, and initialize there at once)
PROBING = {"python": (STDIO, HTTP, SSE), "fastmcp": (STDIO, HTTP), "aisdk": (STDIO, HTTP)}
CASSETTES_BY_TRANSPORT = {
    STDIO: ("everything-stdio-2024-11-05", "everything-stdio-2025-06-18", "everything-stdio-2025-11-25",
            "notes-stdio-2025-06-18", "notes-stdio-2025-11-25"),
    HTTP: ("everything-http-2025-11-25",),
    SSE: ("everything-sse-2024-11-05",),
}
CELLS = [(transport, name, client) for transport, names in CASSETTES_BY_TRANSPORT.items()
         for name in names for client in CLIENTS]


def recorded_tools(path: Path) -> Any:
    """The result of the first tools/list the recorded client made."""
    frames = load(path).frames
    asked = next(item["id"] for f in frames if f.from_client and f.kind is Kind.MESSAGE
                 for item in items(f.message) if item.get("method") == "tools/list")
    return next(item["result"]["tools"] for f in frames if not f.from_client and f.message is not None
                for item in items(f.message) if item.get("id") == asked and "result" in item)


def served_the_recorded_tools(replayed: Replayed, cassette: Path, transport: str) -> list[str]:
    """Checks the client got the recorded tools from a replay that missed nothing; what it adapted."""
    [step] = replayed.result["steps"]
    assert step["result"]["tools"] == stable(recorded_tools(cassette))
    if transport == STDIO:
        report = json.loads(replayed.summary)
        assert report["unmatched"] == [], report
        return report["adapted"]
    assert replayed.exit_code == 0, replayed.summary
    return [line.split("adapted ", 1)[1] for line in replayed.summary.splitlines() if "adapted " in line]


@pytest.mark.parametrize(("transport", "name", "client"), CELLS)
def test_a_client_unlike_the_recorded_one_gets_the_recorded_tools(transport: str, name: str, client: str, tmp_path: Path) -> None:
    cassette = CASSETTES / f"{name}.tape"
    replayed = replay(client, "tools", transport, cassette, probe=True,
                      report=tmp_path / "report.json")

    adapted = served_the_recorded_tools(replayed, cassette, transport)
    # the Python SDK 2.x and fastmcp probe first; a cassette of an initialize era answers it as its server did
    probed = [line for line in adapted if line.startswith("server/discover")]
    assert bool(probed) == (transport in PROBING.get(client, ()) and not _recorded_a_probe(cassette)), adapted


def _recorded_a_probe(path: Path) -> bool:
    """Whether the recorded client probed with server/discover too (the replay then plays its answer)."""
    return any(f.from_client and f.kind is Kind.MESSAGE and item.get("method") == "server/discover"
               for f in load(path).frames for item in items(f.message))


def test_a_client_that_lists_prompts_of_a_tools_only_server_gets_method_not_found(tmp_path: Path) -> None:
    """The example's hand-written server declared tools only; a client that lists every server's
    prompts and resources (as many hosts do on connecting) gets what that server gives, and goes on."""
    report = tmp_path / "report.json"
    server = StdioServerParameters(command=TAPES[0], args=[*TAPES[1:], "replay", str(CASSETTES / "example" / "weather.tape"), "--report", str(report)])

    async def session() -> tuple[list[int], list[str]]:
        codes = []
        with anyio.fail_after(TIMEOUT * 2):
            async with Client(server, mode="legacy", read_timeout_seconds=TIMEOUT) as client:  # type: ignore[arg-type]
                for listing in (client.list_prompts, client.list_resources):
                    with pytest.raises(MCPError) as refused:
                        await listing()
                    codes.append(refused.value.error.code)
                tools = await client.list_tools()
        return codes, [tool.name for tool in tools.tools]

    codes, tools = anyio.run(session)
    assert codes == [-32601, -32601] and tools == ["get_forecast"]
    summary = json.loads(report.read_text())
    assert summary["unmatched"] == []
    assert [line for line in summary["adapted"] if "Method not found" in line] == [
        "prompts/list ×1: answered Method not found (the recorded server did not declare prompts)",
        "resources/list ×1: answered Method not found (the recorded server did not declare resources)",
    ]


@pytest.mark.parametrize("client", ["python", "ts", "ts2", "python1", "fastmcp", "aisdk"])
@pytest.mark.parametrize("name", ["everything-http-2025-11-25", "everything-sse-2024-11-05"])
def test_an_http_cassette_replayed_over_stdio_serves_its_messages(name: str, client: str, tmp_path: Path) -> None:
    """A client that runs the server as a process gets an HTTP recording's session over stdio."""
    cassette = CASSETTES / f"{name}.tape"
    replayed = replay(client, "tools", STDIO, cassette, probe=True, report=tmp_path / "report.json")
    [step] = replayed.result["steps"]
    assert step["result"]["tools"] == stable(recorded_tools(cassette))
    assert json.loads(replayed.summary)["unmatched"] == []


@pytest.mark.parametrize(("transport", "name"), [(STDIO, "notes-stdio-2026-07-28"), (STDIO, "feed-stdio-2026-07-28"),
                                                 (HTTP, "feed-http-2026-07-28")])
@pytest.mark.parametrize("client", CLIENTS)
def test_a_stateless_era_cassette_serves_every_client(transport: str, name: str, client: str, tmp_path: Path) -> None:
    """A 2026-07-28 recording (server/discover, no initialize) serves today's Python SDK, which
    probes first, and clients that speak only initialize: their handshake is answered from the
    recorded server/discover, as a server of both eras answers it."""
    cassette = CASSETTES / f"{name}.tape"
    replayed = replay(client, "tools", transport, cassette, probe=True, report=tmp_path / "report.json")
    adapted = served_the_recorded_tools(replayed, cassette, transport)
    from_discover = [line for line in adapted if line.startswith("initialize") and "from the recorded server/discover" in line]
    assert len(from_discover) == (0 if transport in PROBING.get(client, ()) else 1), adapted


@pytest.mark.parametrize(("name", "transport", "strategy"), [
    ("everything-http-2025-11-25", HTTP, "http-only"),
    ("everything-http-2025-11-25", HTTP, "http-first"),
    ("everything-sse-2024-11-05", SSE, "sse-only"),
    ("everything-sse-2024-11-05", SSE, "http-first"),  # its default: Streamable HTTP, then SSE on a 404 or 405
    ("feed-http-2026-07-28", HTTP, "http-first"),  # stateless: its initialize answered from server/discover
])
def test_mcp_remote_bridges_a_stdio_host_to_an_http_replay(name: str, transport: str, strategy: str) -> None:
    """A host that speaks only stdio reaches `tapes replay --http` through mcp-remote, which looks
    for OAuth metadata and opens sessions of its own before its host's (the replay serves the
    recorded session again to each after the first): the host gets the recorded tools, with
    nothing unmatched."""
    cassette = CASSETTES / f"{name}.tape"
    replayed = replay(f"remote:{strategy}", "tools", transport, cassette)

    [step] = replayed.result["steps"]
    assert step["result"]["tools"] == stable(recorded_tools(cassette))
    assert replayed.exit_code == 0, replayed.summary
    # the recorded server asked for no authorization: mcp-remote's search for its metadata is no miss
    assert "adapted GET /.well-known/oauth-authorization-server: answered 404" in replayed.summary
    # a Streamable HTTP try at a legacy server's SSE path gets the 405 it falls back on
    fell_back = "adapted POST /sse: answered 405 (GET only)" in replayed.summary
    assert fell_back == (transport == SSE and strategy == "http-first"), replayed.summary


@pytest.mark.parametrize(("name", "transport"), [("everything-http-2025-11-25", HTTP), ("everything-sse-2024-11-05", SSE),
                                                 ("feed-http-2026-07-28", HTTP)])
def test_supergateway_bridges_a_stdio_host_to_an_http_replay(name: str, transport: str) -> None:
    """supergateway, another stdio-to-HTTP bridge, opens one session when its host initializes:
    the host gets the recorded tools, with nothing unmatched and no option."""
    cassette = CASSETTES / f"{name}.tape"
    replayed = replay("gateway", "tools", transport, cassette)

    [step] = replayed.result["steps"]
    assert step["result"]["tools"] == stable(recorded_tools(cassette))
    assert replayed.exit_code == 0 and "0 unmatched" in replayed.summary, replayed.summary


@pytest.mark.parametrize(("transport", "stateful"), [(HTTP, True), (HTTP, False), (SSE, False)])
def test_supergateway_serves_a_stdio_replay_over_http(transport: str, stateful: bool, tmp_path: Path) -> None:
    """The other way round, supergateway runs `tapes replay` as a stdio server and serves it over
    HTTP: stateful, one replay per session; stateless, one per request, each initialized by
    supergateway itself (its own id and protocol version) before the request it carries."""
    cassette = CASSETTES / "everything-stdio-2025-11-25.tape"
    report = tmp_path / "report.json"
    with supergateway_serving([*TAPES, "replay", str(cassette), "--report", str(report)], transport, stateful=stateful) as url:
        got = run_client("python", "tools", transport, url)

    [step] = got["steps"]
    assert step["result"]["tools"] == stable(recorded_tools(cassette))
    assert json.loads(report.read_text())["unmatched"] == []  # the last replay's (stateless: the tools/list's)


@pytest.mark.parametrize("transport", [STDIO, HTTP])
def test_input_a_stateless_era_server_asked_for_is_asked_of_an_initialize_client_with_requests(transport: str, tmp_path: Path) -> None:
    """A 2026-07-28 server asks its client for input (sampling, roots) with an input_required
    result; a client that opened with initialize has no such result, and a server of both eras
    sends it requests instead. The replay does the same, then plays the recorded retry. Over
    HTTP the requests go on the stream of the client's POST, which the recorded server answered
    with JSON, and the retry's answer, recorded on another exchange, ends that stream."""
    report = tmp_path / "report.json"
    client = [node(), str(PEERS / "input_client.mjs")]
    if transport == STDIO:
        cassette = CASSETTES / "notes-stdio-2026-07-28.tape"
        done = subprocess.run([*client, *TAPES, "replay", str(cassette), "--report", str(report)],
                              capture_output=True, timeout=TIMEOUT * 2, stdin=subprocess.DEVNULL)
    else:
        cassette = tmp_path / "notes-http-2026-07-28.tape"
        with notes_over_http() as upstream:  # the Python SDK client probes: a 2026-07-28 session
            recorded, _ = record_session(cassette, upstream, lambda url: anyio.run(notes_flow, url))
        assert any(frame.kind is Kind.HTTP_RESPONSE and "application/json" in str(frame.info) for frame in recorded.frames)
        replayer = Process([*TAPES, "replay", str(cassette), "--http", "--listen", "127.0.0.1:0", "--report", str(report)])
        try:
            url = replayer.wait_for(r"tapes: replaying at (http://\S+)")[1]
            done = subprocess.run([*client, url], capture_output=True, timeout=TIMEOUT * 2, stdin=subprocess.DEVNULL)
        finally:
            replayer.stop(signal.SIGINT)
    assert done.returncode == 0, done.stderr.decode(errors="replace")
    results = json.loads(done.stdout)
    assert results == {"ask_model": [{"type": "text", "text": "model tapes-test-model says: You asked: Which note is the oldest?"}],
                       "list_client_roots": [{"type": "text", "text": "file:///workspace/notes (notes)\nfile:///workspace/project (project)"}]}
    summary = json.loads(report.read_text())
    assert summary["unmatched"] == []
    asked = [line for line in summary["adapted"] if "input_required" in line]
    assert [line.split(":")[0] for line in asked] == ["tools/call id 1", "tools/call id 2"], summary["adapted"]
    assert "sent as sampling/createMessage requests" in asked[0] and "sent as roots/list requests" in asked[1]


def test_the_ai_sdk_client_records_its_session_when_the_refusal_of_its_early_get_comes_late(tmp_path: Path) -> None:
    """The AI SDK client opens its GET stream before it initializes; the notes server refuses it
    with a 400 that names a session it dropped. On a loaded machine that 400 can reach the client
    after the initialize answer (late_refusal_server.py makes it certain): the client must still
    record its scenario on the session initialize gave it."""
    server = Process([sys.executable, str(SERVERS / "late_refusal_server.py")])
    try:
        upstream = server.wait_for(r"listening on (http://\S+)")[1]
        recorder = Process([*TAPES, "record", "-o", str(tmp_path / "notes.tape"), "--upstream", upstream,
                            "--listen", "127.0.0.1:0"])
        try:
            got = run_client("aisdk", "notes", HTTP, recorder.wait_for(r"tapes: recording (http://\S+)")[1])
        finally:
            assert recorder.stop(signal.SIGINT) == 0, recorder.rest_of_stderr()
    finally:
        server.stop()
    assert got["session"]["server"]["name"] == "notes"
    assert [step["method"] for step in got["steps"]][:2] == ["tools/list", "tools/call"]
