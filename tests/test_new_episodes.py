"""The new-episodes hand-over (`tapes replay --new-episodes -- SERVER`, record mode new_episodes):
the replay answers what the cassette has; at the first miss a real server is started, brought to
the live session's state, and takes over; what it says is spliced into the cassette, so the next
run replays the whole session offline with the answers this run got."""

from __future__ import annotations

import json
import subprocess
import re
import signal
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from conftest import ROOT, TAPES
from flows import Observer, connect, dump
from mcp import Client, MCPError
from mcp.client.sse import sse_client
from processes import Process, free_port
from test_http_replayer import record

from replayer.http import ReplayOptions, replay_server
from tapes.cassette.store import Cassette, Header, load
from tapes.replay.episodes import NewEpisodes, WarmUp, episode_frames, splice
from tapes.cassette.frames import STDIO, Direction, Frame, Kind
from tapes.wire.jsonrpc import encode

NOTES_SERVER = [sys.executable, str(Path(__file__).parent / "servers" / "notes_server.py")]


async def notes_session(argv: list[str], titles: list[str]) -> list[Any]:
    """Ask the client's model (a server→client request), add notes, read the index (the server's state)."""
    observer = Observer()
    with anyio.fail_after(60):
        async with connect(argv, observer=observer) as client:
            out = [dump(await client.call_tool("ask_model", {"question": "weather?"}))]
            for title in titles:
                out.append(dump(await client.call_tool("add_note", {"title": title, "text": "x"})))
            out.append(dump(await client.read_resource("notes://index")))
    return out


def run(argv: list[str], titles: list[str]) -> list[Any]:
    return anyio.run(notes_session, argv, titles)


def with_stderr_to(path: Path, argv: list[str]) -> list[str]:
    """argv run with its stderr appended to `path`."""
    return ["sh", "-c", 'exec "$@" 2>>"$0"', str(path), *argv]


def test_a_miss_hands_over_to_the_real_server_and_the_next_replay_has_it_all(tmp_path: Path) -> None:
    cassette = tmp_path / "notes.tape"
    run([*TAPES, "record", "-o", str(cassette), "--", *NOTES_SERVER], ["a"])
    recorded = load(cassette)
    direct = run(NOTES_SERVER, ["a", "b"])  # what the real server answers the longer session

    report = tmp_path / "report.json"
    stderr = tmp_path / "stderr.txt"
    handed_over = run(with_stderr_to(stderr, [*TAPES, "replay", str(cassette), "--report", str(report),
                                              "--new-episodes", "--", *NOTES_SERVER]), ["a", "b"])
    # the index lists both notes: the real server was warmed up with the replayed add_note("a")
    assert handed_over == direct and "b" in str(handed_over[-1]) and "a" in str(handed_over[-1])
    # the warm-up's ask_model retry (2026-07-28) carried the real server's requestState, not the cassette's
    said = stderr.read_text()
    assert "handing the session over" in said and "requestState rejected" not in said
    summary = json.loads(report.read_text())
    assert summary["unmatched"] == [] and summary["recorded"] > 0
    # the recorded index read the episode took the place of is replaced, not unused
    assert summary["unused"] == [] and summary["replaced"] == ["resources/read #6 (frame 11)"], said

    extended = load(cassette)
    assert len(extended.frames) > len(recorded.frames) and not list(tmp_path.glob("*.episode"))
    # offline again: the whole longer session replays, clean, with what the real server said
    strict = tmp_path / "strict.json"
    assert run([*TAPES, "replay", str(cassette), "--report", str(strict)], ["a", "b"]) == direct
    summary = json.loads(strict.read_text())
    # clean, nothing unused: the first session's index read, whose answer predates note b, was
    # replaced by the episode's
    assert summary["unmatched"] == [] and summary["unused"] == []
    lint = subprocess.run([*TAPES, "lint", str(cassette)], capture_output=True, text=True, timeout=60)
    assert lint.returncode == 0, lint.stdout


def test_a_real_server_that_cannot_start_leaves_the_replay_answering_from_the_cassette(tmp_path: Path) -> None:
    import subprocess

    cassette = tmp_path / "weather.tape"
    cassette.write_bytes((ROOT / "cassettes" / "example" / "weather.tape").read_bytes())
    lines = [{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                 "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "x", "version": "1"}}},
             {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "nope"}}]
    done = subprocess.run([*TAPES, "replay", str(cassette), "--new-episodes", "--", str(tmp_path / "no-such-server")],
                          input=b"".join(encode(line) + b"\n" for line in lines), capture_output=True, timeout=60)
    answers = [json.loads(line) for line in done.stdout.splitlines()]
    assert [answer["id"] for answer in answers] == [1, 2] and "nearest recorded is tools/call" in str(answers[1]["error"])
    assert b"the real server could not take over" in done.stderr and b"Traceback" not in done.stderr
    assert cassette.read_bytes() == (ROOT / "cassettes" / "example" / "weather.tape").read_bytes()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["weather.tape"]


def test_new_episodes_flags_are_checked(tmp_path: Path) -> None:
    import subprocess

    cassette = tmp_path / "x.tape"
    cassette.write_bytes(b"")
    for argv, expected in [
        ([str(cassette), "--new-episodes"], "--new-episodes needs the real server"),
        ([str(cassette), "--", "python", "server.py"], "neither applies without --new-episodes"),
        ([str(cassette), "--http", "--new-episodes", "--", "python"], "--new-episodes needs the real server"),
        ([str(cassette), "--upstream", "http://x/mcp"], "--upstream only applies to an HTTP replay"),
        # the hook also scrubs live messages before matching: a replay without new episodes takes it too
        ([str(cassette), "--before-record", "m:f"], "before-record hook 'm:f': module 'm' cannot be imported"),
    ]:
        done = subprocess.run([*TAPES, "replay", *argv], capture_output=True, text=True, stdin=subprocess.DEVNULL)
        assert done.returncode == 2 and expected in done.stderr and "Traceback" not in done.stderr


# --- over HTTP: the replayed session is handed over to the real server's URL --------------------


@contextmanager
def notes_over_http(stderr: list[str] | None = None, transport: str = "--http") -> Iterator[str]:
    """A fresh notes server (its notes start empty) over Streamable HTTP (or legacy HTTP+SSE:
    `--sse`); its URL. What it wrote on stderr is added to `stderr` once it stopped."""
    server = Process([*NOTES_SERVER, transport])
    try:
        yield server.wait_for(r"listening on (\S+)")[1]
    finally:
        server.stop()
        if stderr is not None:
            stderr.append(server.rest_of_stderr())


async def notes_http_session(url: str, titles: list[str], mode: str) -> list[Any]:  # noqa: C901
    """As `notes_session`, over HTTP: at 2025-11-25 (legacy mode: a session with its id) the
    server asks the client's model on the tool call's SSE stream; at 2026-07-28 it answers
    input_required and the client retries with the server's requestState."""
    observer = Observer()
    changed = anyio.Event()

    async def tap(message: Any) -> None:
        if getattr(message, "method", None) == "notifications/resources/list_changed":
            changed.set()

    with anyio.fail_after(60):
        target = sse_client(url) if mode == "sse" else url
        async with Client(target, mode="legacy" if mode == "sse" else mode, sampling_callback=observer.sampling,
                          message_handler=tap, cache=None) as client:
            out = [client.protocol_version, dump(await client.call_tool("ask_model", {"question": "weather?"}))]
            for title in titles:
                out.append(dump(await client.call_tool("add_note", {"title": title, "text": "x"})))
            out.append(dump(await client.read_resource("notes://index")))
            if mode != "auto":  # a session with a stream for what is tied to no request, where touch's notification goes
                out.append(dump(await client.call_tool("touch", {})))
                with anyio.fail_after(10):
                    await changed.wait()
    return out


@pytest.mark.parametrize("mode", ["legacy", "auto", "sse"], ids=["2025-11-25", "2026-07-28", "sse-2024-11-05"])
def test_an_http_miss_hands_over_to_the_upstream_and_the_next_replay_has_it_all(mode: str, tmp_path: Path) -> None:
    cassette = tmp_path / "notes.tape"

    def flow(url: str, titles: list[str]) -> list[Any]:
        return anyio.run(notes_http_session, url, titles, mode)

    transport = "--sse" if mode == "sse" else "--http"
    with notes_over_http(transport=transport) as upstream:
        record(cassette, upstream, lambda url: flow(url, ["a"]))
    with notes_over_http(transport=transport) as upstream:
        direct = flow(upstream, ["a", "b"])
    assert any('["a", "b"]' in str(answer) for answer in direct)

    warmed: list[str] = []
    with notes_over_http(warmed, transport) as upstream:
        plan = NewEpisodes(upstream, cassette)
        with replay_server(cassette, options=ReplayOptions(new_episodes=plan)) as server:
            assert flow(server.url, ["a", "b"]) == direct  # the real server was warmed up with note a
    handed_over = server.replayer.report()
    assert handed_over.unmatched == [] and handed_over.recorded > 0
    assert "requestState rejected" not in warmed[0]  # a 2026-07-28 retry got the real server's state

    # offline: the longer session replays clean, with what the real server said
    with replay_server(cassette) as server:
        assert flow(server.url, ["a", "b"]) == direct
    assert server.replayer.report().unmatched == []


def test_tapes_replay_http_new_episodes_command(tmp_path: Path) -> None:
    cassette = tmp_path / "notes.tape"
    with notes_over_http() as upstream:
        record(cassette, upstream, lambda url: anyio.run(notes_http_session, url, ["a"], "legacy"))
    before = len(load(cassette).frames)
    with notes_over_http() as upstream:
        replayer = Process([*TAPES, "replay", str(cassette), "--http", "--listen", "127.0.0.1:0",
                            "--new-episodes", "--upstream", upstream])
        url = replayer.wait_for(r"tapes: replaying at (\S+)")[1]
        answers = anyio.run(notes_http_session, url, ["a", "b"], "legacy")
        replayer.stop(signal.SIGINT)
    said = replayer.rest_of_stderr()
    assert replayer.proc.returncode == 0, said
    assert any('["a", "b"]' in str(answer) for answer in answers)
    recorded = re.search(r"played (\d+) frames, 0 unmatched, \d+ unused, (\d+) new frames recorded", said)
    assert recorded, said
    # the episode's frames joined the cassette, and the recorded continuation it replaced left it
    extended = load(cassette).frames
    assert before - int(recorded[1]) < len(extended) - int(recorded[2]) < before, said


def test_an_upstream_that_is_down_leaves_the_http_replay_answering_from_the_cassette(tmp_path: Path) -> None:
    cassette = tmp_path / "notes.tape"
    with notes_over_http() as upstream:
        record(cassette, upstream, lambda url: anyio.run(notes_http_session, url, ["a"], "legacy"))
    recorded = cassette.read_bytes()

    async def add_b(url: str) -> str:
        async with Client(url, mode="legacy", sampling_callback=Observer().sampling, cache=None) as client:
            await client.call_tool("ask_model", {"question": "weather?"})
            await client.call_tool("add_note", {"title": "a", "text": "x"})
            try:
                await client.call_tool("add_note", {"title": "b", "text": "x"})
            except MCPError as error:
                return str(error)
        return "answered"

    nothing_there = f"http://127.0.0.1:{free_port()}/mcp"
    with replay_server(cassette, options=ReplayOptions(new_episodes=NewEpisodes(nothing_there, cassette))) as server:
        assert "nearest recorded is" in anyio.run(add_b, server.url)
    assert cassette.read_bytes() == recorded
    assert [line.split(":")[0] for line in server.report_lines if line.startswith("unmatched")] == ["unmatched tools/call id 5"]


# --- the sans-IO parts -------------------------------------------------------------------------


def line(message: dict[str, Any]) -> bytes:
    return encode(message)


def test_warm_up_answers_the_real_servers_request_under_its_own_id() -> None:
    warm = WarmUp([line({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "ask"}}),
                   line({"jsonrpc": "2.0", "id": "recorded-7", "result": {"text": "sunny"}})])
    assert warm.lines_to_send() == [line({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "ask"}})]
    assert not warm.done  # the answer waits for the real server's own request
    warm.server_line(line({"jsonrpc": "2.0", "id": 0, "method": "sampling/createMessage", "params": {}}))
    assert warm.lines_to_send() == [line({"jsonrpc": "2.0", "id": 0, "result": {"text": "sunny"}})]
    assert not warm.done  # tools/call 1 is not answered yet
    warm.server_line(line({"jsonrpc": "2.0", "id": 1, "result": {}}))
    assert warm.done and (warm.sent, warm.swallowed) == (2, 2)


def test_warm_up_puts_the_real_servers_request_state_in_a_retry() -> None:
    first = {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "ask"}}
    retry = {"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {"name": "ask", "requestState": "recorded"}}
    replayed = {"jsonrpc": "2.0", "id": 3, "result": {"resultType": "input_required", "requestState": "recorded"}}
    warm = WarmUp([line(first), line(retry)], [line(replayed)])
    assert warm.lines_to_send() == [line(first)]  # the retry waits for the real server's own state
    warm.server_line(line({**replayed, "result": {"resultType": "input_required", "requestState": "real"}}))
    assert warm.lines_to_send() == [line({**retry, "params": {"name": "ask", "requestState": "real"}})]


def frame(seq: int, t: float, client: bool, kind: Kind = Kind.MESSAGE, message: Any = None) -> Frame:
    direction = Direction.CLIENT_TO_SERVER if client else Direction.SERVER_TO_CLIENT
    return Frame(seq, t, direction, STDIO, kind, message, info={"reason": "eof"} if kind is Kind.STREAM_END else None)


def test_splice_puts_the_episode_after_what_was_played_in_place_of_the_rest() -> None:
    old = Cassette(Header("stdio", {}), [
        frame(1, 0.0, True, message={"id": 1}), frame(2, 0.1, False, message={"id": 1}),  # played
        frame(3, 0.2, True, message={"id": 2}), frame(4, 0.3, False, message={"id": 2}),  # not played
        frame(5, 0.4, True, Kind.STREAM_END), frame(6, 0.5, False, Kind.EXIT),
    ])
    recording = Cassette(Header("stdio", {}), [
        frame(1, 10.0, True, message={"id": 1}), frame(2, 10.1, False, message={"id": 1}),  # warm-up
        frame(3, 11.0, True, message={"id": 9}), frame(4, 11.5, False, message={"id": 9}),  # the episode
        frame(5, 12.0, True, Kind.STREAM_END), frame(6, 12.1, False, Kind.EXIT),
    ])
    warm = WarmUp([])
    warm.sent, warm.swallowed = 1, 1
    episode = episode_frames(recording, warm)
    assert [f.message for f in episode[:2]] == [{"id": 9}, {"id": 9}]
    spliced = splice(old, {1, 2}, episode).frames
    assert [f.seq for f in spliced] == list(range(1, 7))
    # the unplayed recorded continuation (id 2) is what the episode replaced: it is dropped
    assert [(f.message or {}).get("id", f.kind.value) for f in spliced] == [1, 1, 9, 9, "stream_end", "exit"]
    assert [f.t for f in spliced[:4]] == pytest.approx([0.0, 0.1, 0.1, 0.6])  # the episode follows the played frames
    assert spliced[4].t == pytest.approx(0.9)  # the recorded end keeps its place after the episode
    # frames of sessions the episode does not continue stay, after it
    kept = splice(old, {1, 2}, episode, replaced={1, 2}).frames
    assert [(f.message or {}).get("id", f.kind.value) for f in kept] == [1, 1, 9, 9, 2, 2, "stream_end", "exit"]
