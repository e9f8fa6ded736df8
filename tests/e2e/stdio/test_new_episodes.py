"""The new-episodes hand-over on stdio (`tapes replay --new-episodes -- SERVER`, record mode new_episodes):
the replay answers what the cassette has; at the first miss a real server is started, brought to
the live session's state, and takes over; what it says is spliced into the cassette, so the next
run replays the whole session offline with the answers this run got."""

from __future__ import annotations

import json
import os
import re
import select
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import anyio

from tapes.cassette.store import load
from tapes.wire.jsonrpc import encode

from tests.support.flows import Observer, connect, dump
from tests.support.paths import CASSETTES, NOTES_SERVER, TAPES


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
    cassette.write_bytes((CASSETTES / "example" / "weather.tape").read_bytes())
    lines = [{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                 "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "x", "version": "1"}}},
             {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "nope"}}]
    done = subprocess.run([*TAPES, "replay", str(cassette), "--new-episodes", "--", str(tmp_path / "no-such-server")],
                          input=b"".join(encode(line) + b"\n" for line in lines), capture_output=True, timeout=60)
    answers = [json.loads(line) for line in done.stdout.splitlines()]
    assert [answer["id"] for answer in answers] == [1, 2] and "nearest recorded is tools/call" in str(answers[1]["error"])
    assert b"the real server could not take over" in done.stderr and b"Traceback" not in done.stderr
    assert cassette.read_bytes() == (CASSETTES / "example" / "weather.tape").read_bytes()
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


DYING_SERVER = """
import json, os, sys, time
for line in sys.stdin:
    message = json.loads(line)
    if message.get("method") == "initialize":
        print(json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": {
            "protocolVersion": "2025-06-18", "capabilities": {"tools": {}}, "serverInfo": {"name": "w", "version": "1"}}}),
              flush=True)
    elif message.get("method") == "tools/call":
        if os.environ.get("HANG"):
            time.sleep(60)
        sys.exit(3)  # dies on the request it was handed over for, without an answer
"""


def handed_over(tmp_path: Path, **env: str) -> subprocess.Popen[bytes]:
    """A replay whose client was handed over to DYING_SERVER at its tools/call."""
    cassette = tmp_path / "weather.tape"
    cassette.write_bytes((CASSETTES / "example" / "weather.tape").read_bytes())
    server = tmp_path / "dying.py"
    server.write_text(DYING_SERVER)
    replay = subprocess.Popen([*TAPES, "replay", str(cassette), "--new-episodes", "--", "python", str(server)],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env={**os.environ, **env})
    assert replay.stdin is not None and replay.stdout is not None
    initialize = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "x", "version": "1"}}}
    replay.stdin.write(encode(initialize) + b"\n" + encode({"jsonrpc": "2.0", "method": "notifications/initialized"}) + b"\n")
    replay.stdin.flush()
    assert json.loads(replay.stdout.readline())["id"] == 1
    replay.stdin.write(encode({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "nope"}}) + b"\n")
    replay.stdin.flush()
    return replay


def test_a_real_server_that_dies_after_the_hand_over_ends_the_replay_with_its_exit(tmp_path: Path) -> None:
    """The client sees the real server's end (end of output, its exit code), as it would without
    the replay, instead of waiting for ever on a replay that keeps its stdout open."""
    replay = handed_over(tmp_path)
    assert replay.stdout is not None
    try:
        # the end of the real server's output, with stdin still open
        assert select.select([replay.stdout], [], [], 30)[0] and replay.stdout.read() == b""
        assert replay.wait(timeout=30) == 3
    finally:
        replay.kill()
        stderr = replay.communicate()[1]
    assert b"handing the session over" in stderr and b"Traceback" not in stderr


def test_a_signal_during_a_hand_over_ends_the_replay_with_128_plus_its_number(tmp_path: Path) -> None:
    replay = handed_over(tmp_path, HANG="1")
    try:
        time.sleep(1)  # the real server is past its warm-up, on the handed-over request
        replay.send_signal(signal.SIGTERM)  # passed on to the real server, which would take 60 s
        assert replay.wait(timeout=30) == 128 + signal.SIGTERM
    finally:
        replay.kill()
        stderr = replay.communicate()[1]
    assert b"handing the session over" in stderr and b"Traceback" not in stderr
    # what the real server said is kept, counted as recorded
    assert re.search(rb"played 1 frames, 0 unmatched, 0 unused, [1-9]\d* new frames recorded", stderr), stderr
