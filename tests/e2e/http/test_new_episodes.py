"""The new-episodes hand-over over HTTP (`tapes replay --http --new-episodes --upstream URL`): the
replayed session is handed over to the real server's URL at the first miss; what it says is spliced
into the cassette, so the next run replays the whole session offline."""

from __future__ import annotations

import re
import signal
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client, MCPError
from mcp.client.sse import sse_client

from replayer.http import ReplayOptions, replay_server
from tapes.cassette.store import load
from tapes.replay.episodes import NewEpisodes

from tests.support.flows import Observer, dump
from tests.support.http_peers import notes_over_http, record_session
from tests.support.paths import TAPES
from tests.support.processes import Process, free_port


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
        record_session(cassette, upstream, lambda url: flow(url, ["a"]))
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
        record_session(cassette, upstream, lambda url: anyio.run(notes_http_session, url, ["a"], "legacy"))
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
        record_session(cassette, upstream, lambda url: anyio.run(notes_http_session, url, ["a"], "legacy"))
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
