"""End to end: the official SDK client against `tapes replay` of sessions recorded with
`tapes record` from real servers (server-everything and our SDK notes server)."""

from __future__ import annotations

import functools
import json
import subprocess
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import MCPError

from tapes.cassette.store import load
from tapes.cassette.frames import Kind
from tapes.wire.jsonrpc import MessageType, classify

from tests.support.flows import Observer, connect, everything_flow, notes_flow
from tests.support.paths import NOTES_SERVER, TAPES


def record(path: Path, server: list[str]) -> list[str]:
    return [*TAPES, "record", "-o", str(path), "--", *server]


def replay(path: Path, *flags: str) -> list[str]:
    return [*TAPES, "replay", str(path), *flags]


@pytest.fixture(scope="module")
def everything_session(tmp_path_factory: pytest.TempPathFactory, everything_stdio: list[str]) -> tuple[Path, Any]:
    """A cassette of the everything flow recorded through `tapes record`, and the direct run's result."""
    cassette = tmp_path_factory.mktemp("everything") / "everything.tape"
    direct = anyio.run(everything_flow, everything_stdio)
    recorded = anyio.run(everything_flow, record(cassette, everything_stdio))
    assert recorded == direct
    return cassette, direct


def client_and_server_messages(path: Path) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    frames = load(path).frames
    messages = [(f.from_client, f.message) for f in frames if f.kind is Kind.MESSAGE]
    return [m for c, m in messages if c], [m for c, m in messages if not c]


def test_sdk_client_gets_identical_results_from_the_replay(everything_session: tuple[Path, Any]) -> None:
    cassette, direct = everything_session
    assert anyio.run(everything_flow, replay(cassette)) == direct


def test_replay_restamps_ids_and_progress_tokens_and_keeps_the_cancellation(
    everything_session: tuple[Path, Any], tmp_path: Path
) -> None:
    """The recording probed `server/discover` first; a legacy-mode client skips it, so every live
    request id (and progressToken, which the SDK derives from it) is one lower than recorded.
    The replayed session is itself recorded (tapes record around tapes replay) to see the wire."""
    cassette, direct = everything_session
    wire = tmp_path / "replayed.tape"
    live = anyio.run(functools.partial(everything_flow, record(wire, replay(cassette, "--allow-unmatched")), mode="legacy"))
    assert live == direct

    recorded_requests, _ = client_and_server_messages(cassette)
    live_requests, live_server = client_and_server_messages(wire)
    assert recorded_requests[0]["method"] == "server/discover"
    recorded_ids = {m["id"] for m in recorded_requests if classify(m) is MessageType.REQUEST}
    live_ids = {m["id"]: m for m in live_requests if classify(m) is MessageType.REQUEST}
    assert live_ids.keys() != recorded_ids
    answered = [m["id"] for m in live_server if classify(m) is MessageType.RESULT and m["id"] in live_ids]
    tokens = {
        m["params"]["progressToken"] for m in live_server if m.get("method") == "notifications/progress"
    }
    live_tokens = {r["params"]["_meta"]["progressToken"] for r in live_ids.values() if "_meta" in r.get("params", {})}
    assert tokens and tokens <= live_tokens
    # every live request got its response under its own id, except the call the client cancelled
    [cancel] = [m for m in live_requests if m.get("method") == "notifications/cancelled"]
    cancelled_id = cancel["params"]["requestId"]
    assert sorted(answered) == sorted(i for i in live_ids if i != cancelled_id)
    assert cancelled_id not in answered


@pytest.mark.parametrize("mode", ["auto", "legacy"])
def test_sdk_server_session_replays_in_both_eras(mode: str, tmp_path: Path) -> None:
    """Against our SDK server the client negotiates 2026-07-28 (stateless, input_required
    retries) in auto mode and 2025-11-25 (sampling/roots as server→client requests) in legacy."""
    cassette = tmp_path / "notes.tape"
    flow = functools.partial(notes_flow, mode=mode)
    direct = anyio.run(flow, NOTES_SERVER)
    assert anyio.run(flow, record(cassette, NOTES_SERVER)) == direct
    assert anyio.run(flow, replay(cassette)) == direct
    assert load(cassette).protocol_version == ("2026-07-28" if mode == "auto" else "2025-11-25")


def test_concurrent_requests_replayed_in_the_other_order_get_their_own_responses(tmp_path: Path) -> None:
    cassette = tmp_path / "concurrent.tape"

    async def calls(first: str, server: list[str]) -> dict[str, Any]:
        """Send the two calls concurrently, `first` on the wire first."""
        arguments = {"slow": {"seconds": 0.3}, "add_note": {"title": "t", "text": "x"}}
        results: dict[str, Any] = {}
        sent = anyio.Event()

        async def call(name: str, after: anyio.Event | None) -> None:
            if after is not None:
                await after.wait()
            request = client.call_tool(name, arguments[name])
            if after is None:
                sent.set()
            results[name] = (await request).model_dump(mode="json", exclude={"meta"})

        with anyio.fail_after(30):
            async with connect(server, mode="legacy") as client:
                # listed first: the SDK validates structured results against the listing, and two
                # results arriving together would otherwise each trigger a tools/list of their own
                await client.list_tools()
                async with anyio.create_task_group() as tg:
                    second = "add_note" if first == "slow" else "slow"
                    tg.start_soon(call, first, None)
                    tg.start_soon(call, second, sent)
        return results

    recorded = anyio.run(calls, "slow", record(cassette, NOTES_SERVER))
    client_messages, server_messages = client_and_server_messages(cassette)
    calls_sent = [m for m in client_messages if m.get("method") == "tools/call"]
    assert [m["params"]["name"] for m in calls_sent] == ["slow", "add_note"]
    ids = {m["id"]: m["params"]["name"] for m in calls_sent}
    answered = [ids[m["id"]] for m in server_messages if classify(m) is MessageType.RESULT and m["id"] in ids]
    assert answered == ["add_note", "slow"]  # recorded: first sent, last answered

    replayed = anyio.run(calls, "add_note", replay(cassette))
    assert replayed == recorded and replayed["slow"] != replayed["add_note"]


def test_unmatched_request_is_an_error_naming_the_nearest_recorded_request(
    everything_session: tuple[Path, Any],
) -> None:
    cassette, _ = everything_session

    async def ask_wrong() -> str:
        with anyio.fail_after(30):
            # the same callbacks as the recorded flow, so initialize declares the same capabilities
            async with connect(replay(cassette, "--allow-unmatched"), observer=Observer()) as client:
                with pytest.raises(MCPError) as raised:
                    await client.call_tool("echo", {"message": "not what was recorded"})
                return str(raised.value)

    message = anyio.run(ask_wrong)
    assert "no recorded request matches tools/call" in message
    assert '/params/arguments/message: "hello" → "not what was recorded"' in message


def run_replay(cassette: Path, client_lines: list[bytes], *flags: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        replay(cassette, *flags), input=b"".join(line + b"\n" for line in client_lines), capture_output=True, timeout=30
    )


def test_replay_exit_code_and_summary_reflect_misses(everything_session: tuple[Path, Any]) -> None:
    cassette, _ = everything_session
    wrong = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"cursor": "x"}}).encode()
    strict = run_replay(cassette, [wrong])
    assert strict.returncode == 1
    [reply] = strict.stdout.splitlines()
    assert json.loads(reply)["error"]["message"].startswith("mcp-tapes: no recorded request matches tools/list")
    assert b"1 unmatched" in strict.stderr and b"Traceback" not in strict.stderr
    relaxed = run_replay(cassette, [wrong], "--allow-unmatched")
    assert relaxed.returncode == 0 and relaxed.stdout == strict.stdout


def test_a_batch_that_matches_nothing_gets_its_errors_as_one_array(everything_session: tuple[Path, Any]) -> None:
    cassette, _ = everything_session
    batch = json.dumps([{"jsonrpc": "2.0", "id": 1, "method": "nope/a"}, {"jsonrpc": "2.0", "id": 2, "method": "nope/b"}, 7])
    done = run_replay(cassette, [batch.encode()], "--allow-unmatched")
    [answer] = done.stdout.splitlines()
    assert [(item["id"], item["error"]["code"]) for item in json.loads(answer)] == [(None, -32600), (1, -32090), (2, -32090)]


def test_the_summary_shows_no_control_character_of_a_live_client_and_stays_short(
        everything_session: tuple[Path, Any]) -> None:
    cassette, _ = everything_session
    forged = "\x1b[31mRED\x1b[0m\nFAKE: tapes replay: played 99 frames, 0 unmatched"
    lines = [json.dumps({"jsonrpc": "2.0", "id": 1, "method": forged}).encode(),
             json.dumps({"jsonrpc": "2.0", "id": 2, "method": "m" * 100_000}).encode()]
    done = run_replay(cassette, lines, "--allow-unmatched")
    said = done.stderr.decode()
    assert "\x1b" not in said and "\nFAKE" not in said  # each shown as its \xNN escape, on the miss's own line
    assert "unmatched \\x1b[31mRED\\x1b[0m\\x0aFAKE: tapes replay: played 99 frames" in said
    assert max(len(line) for line in said.splitlines()) < 2200 and "more characters)" in said
    # the client still gets the whole error, with the method it sent
    assert [json.loads(reply)["id"] for reply in done.stdout.splitlines()] == [1, 2]


def test_replay_writes_only_protocol_messages_on_stdout(everything_session: tuple[Path, Any]) -> None:
    cassette, _ = everything_session
    frames = load(cassette).frames
    # the client's lines up to the server's first stderr line: a loaded recording may have it after
    # the client's first message, and it is replayed after what came before it
    started = next(f.seq for f in frames if f.kind is Kind.STDERR and b"Starting default (STDIO) server..." in f.payload)
    client_lines = [(f.seq, f.payload) for f in frames if f.from_client and f.kind is Kind.MESSAGE]
    sent = [line for seq, line in client_lines if seq < started] or [client_lines[0][1]]
    done = run_replay(cassette, sent, "--allow-unmatched")
    for line in done.stdout.splitlines():
        assert classify(json.loads(line)) is not MessageType.INVALID
    assert b"Starting default (STDIO) server..." in done.stderr  # the recorded server's stderr, replayed


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (None, "no such cassette file"),
        (b"\x00\x01garbage", "is not a cassette (byte 0"),
        (b"{not json}\n", "byte 0 (line 1) is not valid JSON"),
    ],
)
def test_bad_cassette_is_one_sentence_without_traceback(tmp_path: Path, content: bytes | None, expected: str) -> None:
    path = tmp_path / "bad.tape"
    if content is not None:
        path.write_bytes(content)
    done = run_replay(path, [])
    assert done.returncode == 2 and done.stdout == b""
    [line] = done.stderr.decode().splitlines()
    assert line.startswith("tapes: error: ") and expected in line
