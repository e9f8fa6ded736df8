"""HTTP replay with more than one live client: sessions matched by content, a used session served
again or refused, repeats under the live request id, every exchange matched by method, path and
query, and the Host a request names. Recorded from the SDK notes server through `tapes record`,
driven by the strictly sequential raw client (tests/support/interop.py)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.http_peers import Tapes
from tests.support.interop import HTTP, LiveServers, RawClient, run_client
from tests.support.paths import CASSETTES
from tapes.cassette.store import load

def add_note(title: str) -> dict[str, Any]:
    return {"method": "tools/call", "name": "add_note", "arguments": {"title": title, "text": f"about {title}"}}


@pytest.fixture(scope="module")
def notes_url() -> Iterator[str]:
    live = LiveServers()
    yield live.url("notes", HTTP)
    live.close()


@pytest.fixture
def recorded(tmp_path: Path, notes_url: str) -> Callable[..., Path]:
    """A cassette of raw clients, one session each, running their steps one after the other."""

    def record(*sessions: tuple[str, list[dict[str, Any]]]) -> Path:
        cassette = tmp_path / "sessions.tape"
        recorder = Tapes("record", "-o", str(cassette), "--upstream", notes_url, banner="recording")
        for name, steps in sessions:
            RawClient(recorder.url, name).run(steps)
        assert recorder.stop()[0] == 0
        return cassette

    return record


def test_sessions_are_matched_by_their_opening_not_claimed_in_arrival_order(recorded: Callable[..., Path]) -> None:
    names = [f"client-{n}" for n in range(4)]
    cassette = recorded(*((name, [add_note(name)]) for name in names))
    replayer = Tapes("replay", str(cassette), "--http", banner="replaying at")
    # the four clients start at once, in the reverse of the recorded order
    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(lambda name: RawClient(replayer.url, name).run([add_note(name)]), reversed(names)))
    code, summary = replayer.stop()
    assert code == 0, summary
    titles = [result["steps"][0]["result"]["structuredContent"]["title"] for result in results]
    assert titles == list(reversed(names))


def test_sessions_opened_alike_serve_their_clients_in_any_order_and_again(recorded: Callable[..., Path]) -> None:
    """Three clients opened alike, then did different things. Live, they come in the reverse order
    and then in the recorded order again: each live session goes on in the recording whose client
    did what it does (C first starts in A's, goes on in B's with its read, and in C's with its
    count, which B's lacks), and the second round plays copies. Nothing is a miss."""
    count = {"method": "tools/call", "name": "count", "arguments": {"n": 2}}
    read = {"method": "resources/read", "uri": "notes://index"}
    sessions = {"A": [{**count, "arguments": {"n": 1}}], "B": [read], "C": [read, count]}
    cassette = recorded(*(("alike", steps) for steps in sessions.values()))
    replayer = Tapes("replay", str(cassette), "--http", banner="replaying at")
    rounds = [{name: RawClient(replayer.url, "alike").run(sessions[name])["steps"] for name in order} for order in ("CBA", "ABC")]
    code, summary = replayer.stop()
    assert code == 0 and " 0 unmatched" in summary and " unmatched " not in summary.replace(" 0 unmatched", ""), summary
    assert rounds[0] == rounds[1]
    results = rounds[0]
    assert [step["result"]["content"][0]["text"] for step in (*results["A"], results["C"][1])] == ["counted to 1", "counted to 2"]
    assert results["B"][0]["result"]["contents"] == results["C"][0]["result"]["contents"]


def test_a_suite_run_again_as_recorded_gets_what_it_got(recorded: Callable[..., Path]) -> None:
    """A and C begin alike, and the server's state made their answers differ (the notes' ids):
    run again in recorded order against the same replay, each client gets a copy of its own
    session, in turn, not the first one's answers until it moves on."""
    read = {"method": "resources/read", "uri": "notes://index"}
    sessions = {"A": [add_note("a")], "B": [add_note("b")], "C": [add_note("a"), read]}
    cassette = recorded(*(("alike", steps) for steps in sessions.values()))
    replayer = Tapes("replay", str(cassette), "--http", banner="replaying at")
    rounds = [{name: RawClient(replayer.url, "alike").run(steps)["steps"] for name, steps in sessions.items()} for _ in range(2)]
    code, summary = replayer.stop()
    assert code == 0, summary
    assert rounds[0] == rounds[1]
    assert rounds[0]["A"][0] != rounds[0]["C"][0]  # the same request, answered otherwise when recorded


def test_clients_that_open_first_then_swap_their_work_leave_no_session_unused(recorded: Callable[..., Path]) -> None:
    """Both clients open before either works, then each does the other's recorded work: each
    moves, the first to a copy of the second's session (the second holds it), the second to the
    first's; when it leaves, the copy is the session's player. Nothing is unused."""
    count = {"method": "tools/call", "name": "count", "arguments": {"n": 1}}
    cassette = recorded(("alike", [add_note("p")]), ("alike", [count]))
    replayer = Tapes("replay", str(cassette), "--http", banner="replaying at")
    first, second = RawClient(replayer.url, "alike"), RawClient(replayer.url, "alike")
    first.open()
    second.open()
    counted, added = first.step(count), second.step(add_note("p"))
    code, summary = replayer.stop()
    assert code == 0 and "unused " not in summary.replace(" 0 unused", ""), summary
    assert counted["content"][0]["text"] == "counted to 1" and added["structuredContent"]["title"] == "p"


def test_a_used_session_is_served_again_from_its_start_or_refused_by_name_under_strict_order(
        recorded: Callable[..., Path]) -> None:
    cassette = recorded(("only", [add_note("once")]))
    session_id = load(cassette).header.labels["sessions"]
    replayer = Tapes("replay", str(cassette), "--http", banner="replaying at")
    # a client opening a session per step (the Inspector CLI) finds the recorded one played
    runs = [RawClient(replayer.url, "only").run([add_note("once")]) for _ in range(3)]
    code, summary = replayer.stop()
    assert code == 0, summary
    assert runs[1:] == runs[:1] * 2
    # three sessions with the same summary share one block of it
    assert f"session {session_id} (and 2 more alike): played " in summary and summary.count(": played ") == 1
    assert summary.count(f"initialize id 1: served recorded session {session_id} again from its start "
                         "(every recorded session opened this way was already played)") == 2, summary

    strict = Tapes("replay", str(cassette), "--http", "--repeats", "strict-order", banner="replaying at")
    assert RawClient(strict.url, "only").run([add_note("once")]) == runs[0]
    with pytest.raises(AssertionError, match=f"already played \\(session {session_id}\\)"):
        RawClient(strict.url, "only").open()
    code, summary = strict.stop()
    assert code == 1
    assert f"unmatched initialize id 1: every recorded session that opens this way was already played (session {session_id})" in summary


def test_repeats_over_http_are_answered_under_the_live_request_id(recorded: Callable[..., Path]) -> None:
    cassette = recorded(("repeater", [add_note("same")]))
    replayer = Tapes("replay", str(cassette), "--http", "--repeats", "allow", banner="replaying at")
    client = RawClient(replayer.url, "repeater")
    client.open()
    sequential = [client.request("tools/call", {"name": "add_note", "arguments": {"title": "same", "text": "about same"}})
                  for _ in range(5)]
    assert [answer["id"] for answer in sequential] == list(range(2, 7))  # initialize was id 1

    def call(request_id: int) -> Any:
        body = {"jsonrpc": "2.0", "id": request_id, "method": "tools/call",
                "params": {"name": "add_note", "arguments": {"title": "same", "text": "about same"}}}
        return client.answer(httpx.post(replayer.url, json=body, headers=client.headers(), timeout=20), request_id)["id"]

    with ThreadPoolExecutor(10) as pool:
        concurrent = list(pool.map(call, range(100, 130)))
    code, summary = replayer.stop()
    assert concurrent == list(range(100, 130))
    assert code == 0 and "34 repeated" in summary, summary


def test_requests_are_matched_by_method_path_and_query(recorded: Callable[..., Path]) -> None:
    cassette = recorded(("paths", [add_note("p")]))
    replayer = Tapes("replay", str(cassette), "--http", banner="replaying at")
    base = replayer.url.removesuffix("/mcp")
    assert httpx.get(f"{base}/elsewhere").status_code == 404
    # the recorded server asked for no authorization: looking for its OAuth metadata is no miss
    assert httpx.get(f"{base}/.well-known/oauth-authorization-server").status_code == 404
    client = RawClient(replayer.url, "paths")
    client.open()
    assert httpx.get(f"{replayer.url}?stream=other", headers=client.headers()).status_code == 404
    code, summary = replayer.stop()
    assert code == 1
    assert "unmatched GET /elsewhere: the recording has no request to that path" in summary
    assert "adapted GET /.well-known/oauth-authorization-server: answered 404" in summary
    assert "unmatched GET /mcp?stream=other: the recording has no GET with that path and query" in summary


def test_the_recorder_forwards_the_clients_host_and_the_replayer_refuses_a_foreign_one(
    notes_url: str, tmp_path: Path, recorded: Callable[..., Path]
) -> None:
    initialize = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
                  "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "h", "version": "1"}}}
    accept = {"Accept": "application/json, text/event-stream"}
    recorder = Tapes("record", "-o", str(tmp_path / "host.tape"), "--upstream", notes_url, banner="recording")
    # the notes server's DNS-rebinding protection sees the client's Host through the recorder
    assert httpx.post(recorder.url, json=initialize, headers={**accept, "Host": "rebound.example"}).status_code == 421
    assert httpx.post(recorder.url, json=initialize, headers=accept).status_code == 200
    assert recorder.stop()[0] == 0

    replayer = Tapes("replay", str(recorded(("host", [add_note("h")]))), "--http", banner="replaying at")
    refused = httpx.post(replayer.url, json=initialize, headers={**accept, "Host": "rebound.example"})
    port = replayer.url.split(":")[2].split("/")[0]
    accepted = httpx.post(replayer.url, json=initialize, headers={**accept, "Host": f"localhost:{port}"})
    replayer.stop()
    assert refused.status_code == 421 and "Host not allowed" in refused.text
    assert accepted.status_code == 200


def test_clients_that_speak_only_initialize_each_get_a_stateless_recording_from_its_start() -> None:
    """A 2026-07-28 recording has no session: a client that opens with initialize (answered from
    the recorded server/discover) starts it over, as a probing client does. The second such client,
    or one after a probing client, was refused the requests the first had played."""
    replayer = Tapes("replay", str(CASSETTES / "feed-http-2026-07-28.tape"), "--http", banner="replaying at")
    post = {"method": "tools/call", "name": "post", "arguments": {"title": "first"}}
    posted = [RawClient(replayer.url, f"client-{n}").run([post])["steps"][0]["result"] for n in range(2)]
    listed = [run_client(client, "tools", HTTP, replayer.url, probe=True)["steps"][0]["result"]["tools"]
              for client in ("ts", "python", "ts")]
    code, summary = replayer.stop()
    assert code == 0, summary
    assert [result["content"][0]["text"] for result in posted] == ["posted first (1 items)"] * 2
    assert [[tool["name"] for tool in tools] for tools in listed] == [["post", "close_feeds"]] * 3
    assert summary.count("served the recorded exchanges outside a session again from their start") == 4, summary
