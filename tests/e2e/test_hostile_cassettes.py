"""Hostile cassettes that load, served and checked by real processes and peers: a stdio replay
answers a client line by line with nothing on stdout but JSON-RPC, the in-memory replay serves the
SDK client, `tapes verify` plays the recording against the real server, and where a cassette (or a
server command) cannot be served or checked the command, or the pytest plugin's test, ends with one
sentence and no traceback.
(The HTTP replayer's cells are in tests/e2e/http/test_hostile_cassettes.py.)"""

from __future__ import annotations

import dataclasses
import json
import subprocess
from pathlib import Path

import anyio
import pytest
from mcp import Client

from replayer.memory import ReplayTransport
from tapes.cassette.frames import STDIO, Direction, Frame, Kind
from tapes.cassette.store import load, save

from tests.support.hostile_cassettes import hostile_notes
from tests.support.paths import CASSETTES, NOTES_SERVER, TAPES
from tests.support.processes import TIMEOUT

INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
              "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "c", "version": "1"}}}
COUNT = {"jsonrpc": "2.0", "id": 3, "method": "tools/call",
         "params": {"name": "count", "arguments": {"n": 3}, "_meta": {"progressToken": "live"}}}


def tapes(*args: str, stdin: bytes = b"") -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([*TAPES, *args], input=stdin, capture_output=True, timeout=TIMEOUT * 2)


def test_the_stdio_replayer_serves_a_hostile_cassette_line_by_line(tmp_path: Path) -> None:
    save(hostile_notes(), tmp_path / "odd.tape")
    lines = [INITIALIZE, {"jsonrpc": "2.0", "method": "notifications/initialized"},
             {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}, COUNT,
             {"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {"name": "nope"}}]
    run = tapes("replay", str(tmp_path / "odd.tape"), stdin=b"".join(json.dumps(line).encode() + b"\n" for line in lines))
    assert b"Traceback" not in run.stderr and run.returncode == 1  # strict: the last one is a miss
    answers = [json.loads(line) for line in run.stdout.splitlines()]  # nothing but JSON-RPC
    by_id = {answer["id"]: answer for answer in answers if "id" in answer}
    assert by_id[1]["result"]["protocolVersion"] == "2025-11-25" and by_id[2]["result"]["tools"]
    assert by_id[3]["result"]["content"][0]["text"] == "counted to 3"  # its progress, with an odd token, ties nothing
    assert "nearest recorded is tools/call" in by_id[4]["error"]["message"]
    assert {"jsonrpc": "2.0", "method": "notifications/progress", "params": [{"t": [1]}, 1]} in answers


def test_the_in_memory_replay_serves_a_hostile_cassette_to_the_sdk_client() -> None:
    transport = ReplayTransport(hostile_notes())

    async def session() -> tuple[list[str], str]:
        async with Client(transport, mode="legacy", cache=None) as client:  # type: ignore[arg-type]
            tools = await client.list_tools()
            counted = await client.call_tool("count", {"n": 3})
        return [tool.name for tool in tools.tools], counted.content[0].text  # type: ignore[union-attr]

    names, counted = anyio.run(session)
    assert "count" in names and counted == "counted to 3"


def test_verify_plays_a_hostile_cassette_against_the_real_server(tmp_path: Path) -> None:
    save(hostile_notes(), tmp_path / "odd.tape")
    run = tapes("verify", str(tmp_path / "odd.tape"), "--format", "json", "--step-timeout", "1", "--", *NOTES_SERVER)
    assert b"Traceback" not in run.stderr and run.returncode == 1, run.stderr  # the odd frames differ, said as a diff
    assert json.loads(run.stdout)["changes"]


def test_what_cannot_be_served_or_checked_ends_in_one_sentence(tmp_path: Path) -> None:
    recorded = hostile_notes()
    twice = dataclasses.replace(recorded, frames=[*recorded.frames[:2], dataclasses.replace(recorded.frames[2], seq=2),
                                                  *recorded.frames[3:]])
    save(twice, tmp_path / "twice.tape")
    replayed = tapes("replay", str(tmp_path / "twice.tape"), stdin=json.dumps(INITIALIZE).encode() + b"\n")
    assert replayed.returncode == 2 and replayed.stdout == b""
    assert replayed.stderr.decode().splitlines() == [
        f"tapes: error: {tmp_path / 'twice.tape'}: frame 2 comes twice (two frames have that seq): a replay tells frames apart by it"]
    save(recorded, tmp_path / "odd.tape")
    verified = tapes("verify", str(tmp_path / "odd.tape"), "--", str(tmp_path / "no-such-server"))
    assert verified.returncode == 2 and verified.stdout == b""
    assert verified.stderr.decode().splitlines() == [
        f"tapes: error: the server command '{tmp_path / 'no-such-server'}' was not found or is not executable"]


def test_the_plugin_fails_a_test_in_one_sentence_on_an_http_cassette_the_replay_refuses(pytester: pytest.Pytester) -> None:
    recorded = load(CASSETTES / "everything-http-2025-11-25.tape")
    at = next(index for index, frame in enumerate(recorded.frames) if frame.kind is Kind.HTTP_RESPONSE)
    head = recorded.frames[at]
    frames = [*recorded.frames[:at], dataclasses.replace(head, info={**head.info, "status": 0}), *recorded.frames[at + 1 :]]
    (pytester.path / "cassettes").mkdir()
    save(dataclasses.replace(recorded, frames=frames), pytester.path / "cassettes" / "remote.tape")
    pytester.makepyfile(test_remote='''
import pytest

@pytest.mark.tape("cassettes/remote.tape")
def test_remote(tape_url):
    pass
''')
    pytester._monkeypatch.delenv("CI", raising=False)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--tape-record-mode=none")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines([f"*frame {head.seq} is a response head with status 0, which HTTP cannot send",
                                 "ERROR *Failed: *"])  # failed in one sentence, not by an exception
    assert "Traceback" not in result.stdout.str() and "CassetteError" not in result.stdout.str()


def test_a_recorded_exit_no_process_can_have_ends_the_replay_as_a_failure(tmp_path: Path) -> None:
    recorded = load(CASSETTES / "notes-stdio-2025-11-25.tape")
    frames = [frame for frame in recorded.frames if frame.kind is not Kind.EXIT]
    for code, signal in ((2**70, None), (256, None), (None, -300)):
        ended = Frame(frames[-1].seq + 1, frames[-1].t, Direction.SERVER_TO_CLIENT, STDIO, Kind.EXIT,
                      info={"code": code, "signal": signal})
        save(dataclasses.replace(recorded, frames=[*frames, ended]), tmp_path / "exit.jsonl")  # integers wider than 64 bits
        run = tapes("replay", str(tmp_path / "exit.jsonl"), "--allow-unmatched", stdin=json.dumps(INITIALIZE).encode() + b"\n")
        assert run.returncode == 1 and b"Exception" not in run.stderr, (code, signal, run.stderr)
