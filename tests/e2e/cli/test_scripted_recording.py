"""`tapes record --script`: sessions recorded without writing a client (the SDK client runs a
YAML script's steps through the normal recorder), then served by `tapes replay` to the SDK client
with nothing unmatched; and `tapes verify --update` accepting a changed server."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import mcp.types as types
import pytest
from mcp import Client, StdioServerParameters

from tapes.cassette.frames import Kind
from tapes.cassette.store import load

from tests.support.paths import ROOT
from tests.support.processes import Process

TAPES = [sys.executable, "-m", "tapes"]
NOTES_SERVER = [sys.executable, str(ROOT / "tests" / "servers" / "notes_server.py")]
CALCULATOR = [sys.executable, str(ROOT / "tests" / "servers" / "poisoned_server.py")]

NOTES_SCRIPT = ROOT / "cassettes" / "example" / "notes-script.yaml"  # the README's example
STEPS_OK = ["ok"] * 6 + ["tool error"]  # its last step calls a tool that does not exist, on purpose

EVERYTHING_SCRIPT = """\
- method: tools/list
- method: tools/call
  params: {name: echo, arguments: {message: "${MESSAGE:-hello}"}}
- method: tools/call
  params: {name: get-sum, arguments: {a: 2, b: 40}}
- method: tools/call
  params: {name: trigger-long-running-operation, arguments: {duration: 0.3, steps: 3}}
- method: tools/call
  params: {name: trigger-sampling-request, arguments: {prompt: "Capital of France?", maxTokens: 32}}
  answers:
    sampling: {role: assistant, content: {type: text, text: Paris}, model: scripted-model}
- method: tools/call
  params: {name: get-roots-list}
  answers:
    roots: [{uri: "file:///work", name: work}]
- method: resources/list
- method: prompts/list
"""


def stdio(argv: list[str]) -> StdioServerParameters:
    return StdioServerParameters(command=argv[0], args=argv[1:], env=dict(os.environ))


def record_script(script: Path, output: Path, *target: str, env: dict[str, str] | None = None) -> list[str]:
    run = subprocess.run([*TAPES, "record", "--script", str(script), "-o", str(output), *target],
                         capture_output=True, text=True, timeout=120, env={**os.environ, **(env or {})})
    assert run.returncode == 0, run.stderr
    return [line for line in run.stderr.splitlines() if line.startswith(("  step", "tapes record:"))]


def client_requests(path: Path) -> list[dict[str, Any]]:
    return [f.message for f in load(path).frames if f.from_client and f.kind is Kind.MESSAGE and "method" in f.message]


def server_answers(path: Path) -> list[Any]:
    """What the client answered the server's requests (or their 2026-07-28 inputResponses)."""
    answers = []
    for request in client_requests(path):
        if "inputResponses" in request.get("params", {}):
            answers += list(request["params"]["inputResponses"].values())
    for frame in load(path).frames:
        if frame.from_client and isinstance(frame.message, dict) and "result" in frame.message:
            answers.append(frame.message["result"])
    return answers


async def sampling(context: Any, params: Any) -> types.CreateMessageResult:
    return types.CreateMessageResult(role="assistant", content=types.TextContent(type="text", text="Paris"),
                                     model="scripted-model")


def dump(value: Any) -> Any:
    return value.model_dump(mode="json", by_alias=True, exclude_none=True, exclude={"meta"})


async def notes_client(target: Any, title: str, roots: list[types.Root]) -> list[Any]:
    """The script's calls, written by hand with the SDK client: what a test suite would do."""

    async def list_roots(context: Any) -> types.ListRootsResult:
        return types.ListRootsResult(roots=roots)

    with anyio.fail_after(60):
        async with Client(target, sampling_callback=sampling, list_roots_callback=list_roots, cache=None) as client:
            return [
                [tool.name for tool in (await client.list_tools()).tools],
                dump(await client.call_tool("add_note", {"title": title, "text": "milk"})),
                dump(await client.call_tool("count", {"n": 3}, progress_callback=ignore_progress)),
                dump(await client.call_tool("ask_model", {"question": "Capital of France?"})),
                dump(await client.call_tool("list_client_roots")),
                dump(await client.read_resource("notes://index")),
                dump(await client.call_tool("no_such_tool")),
            ]


async def ignore_progress(progress: float, total: float | None, message: str | None) -> None:
    pass


def test_notes_server_scripted_recording_replays_to_the_sdk_client(tmp_path: Path) -> None:
    cassette, report = tmp_path / "notes.tape", tmp_path / "report.json"
    lines = record_script(NOTES_SCRIPT, cassette, "--", *NOTES_SERVER, env={"TITLE": "shopping"})
    assert lines[0].startswith("tapes record: connected (")
    assert [line.rsplit(": ", 1)[1] for line in lines[1:-1]] == STEPS_OK
    assert lines[-1] == f"tapes record: wrote {cassette}"

    calls = [(r["method"], r.get("params", {}).get("name")) for r in client_requests(cassette)]
    steps = [call for call in dict.fromkeys(calls) if call[0].startswith(("tools/", "resources/"))]  # retries once
    assert steps == [("tools/list", None), ("tools/call", "add_note"), ("tools/call", "count"),
                          ("tools/call", "ask_model"), ("tools/call", "list_client_roots"),
                          ("resources/read", None), ("tools/call", "no_such_tool")]
    add_note = next(r for r in client_requests(cassette) if r.get("params", {}).get("name") == "add_note")
    assert add_note["params"]["arguments"] == {"title": "shopping", "text": "milk"}  # ${TITLE} and ${TEXT:-milk}
    answers = json.dumps(server_answers(cassette))
    assert "scripted-model" in answers and "file:///work/notes" in answers  # the steps' answers
    assert any(f.message.get("method") == "notifications/progress" for f in load(cassette).frames
               if not f.from_client and isinstance(f.message, dict))

    roots = [types.Root(uri="file:///work/notes", name="notes")]
    live = anyio.run(notes_client, stdio(NOTES_SERVER), "shopping", roots)
    replayed = anyio.run(notes_client, stdio([*TAPES, "replay", str(cassette), "--report", str(report)]),
                         "shopping", roots)
    assert replayed == live
    assert json.loads(report.read_text())["unmatched"] == []


def test_server_everything_scripted_recording_replays_to_the_sdk_client(tmp_path: Path, everything_stdio: list[str]) -> None:
    script, cassette, again, report = (tmp_path / name for name in ("e.yaml", "e.tape", "again.tape", "report.json"))
    script.write_text(EVERYTHING_SCRIPT)
    lines = record_script(script, cassette, "--", *everything_stdio, env={"MESSAGE": "from the environment"})
    assert [line.rsplit(": ", 1)[1] for line in lines[1:-1]] == ["ok"] * 8, lines
    frames = load(cassette).frames
    assert sum(isinstance(f.message, dict) and f.message.get("method") == "notifications/progress" for f in frames) == 3
    assert any(isinstance(f.message, dict) and f.message.get("method") == "sampling/createMessage" for f in frames)
    assert "from the environment" in json.dumps([f.message for f in frames if f.kind is Kind.MESSAGE])

    # the same script's SDK client, now against `tapes replay`: every request matched, same behaviour
    record_script(script, again, "--", *TAPES, "replay", str(cassette), "--report", str(report),
                  env={"MESSAGE": "from the environment"})
    assert json.loads(report.read_text())["unmatched"] == []
    diff = subprocess.run([*TAPES, "diff", str(cassette), str(again)], capture_output=True, text=True, timeout=60)
    assert diff.returncode == 0 and "same behaviour" in diff.stdout, diff.stdout


def test_scripted_recording_over_http_replays_to_the_sdk_client(tmp_path: Path) -> None:
    cassette = tmp_path / "notes.tape"
    server = Process([*NOTES_SERVER, "--http"])
    try:
        upstream = server.wait_for(r"listening on (\S+)")[1]
        lines = record_script(NOTES_SCRIPT, cassette, "--upstream", upstream)
    finally:
        server.stop()
    assert [line.rsplit(": ", 1)[1] for line in lines[1:-1]] == STEPS_OK, lines
    assert load(cassette).header.transport == "http"

    replayer = Process([*TAPES, "replay", str(cassette), "--http", "--listen", "127.0.0.1:0"])
    url = replayer.wait_for(r"tapes: replaying at (\S+)")[1]
    replayed = anyio.run(notes_client, url, "groceries", [types.Root(uri="file:///work/notes", name="notes")])
    replayer.stop(signal.SIGINT)
    assert replayed[1]["structuredContent"]["title"] == "groceries"
    assert "model scripted-model says: Paris" in json.dumps(replayed[3])
    assert re.search(r"played \d+ frames, 0 unmatched, 0 unused", replayer.rest_of_stderr())


def test_verify_update_accepts_the_live_session(tmp_path: Path) -> None:
    script, kept, cassette = tmp_path / "calc.yaml", tmp_path / "calc.jsonl", tmp_path / "linked.tape"
    script.write_text("- method: tools/list\n- method: tools/call\n  params: {name: add, arguments: {a: 2, b: 3}}\n")
    record_script(script, kept, "--", *CALCULATOR)
    subprocess.run([*TAPES, "export", str(kept), "-o", str(kept)], check=True, timeout=60)  # as JSON Lines
    cassette.symlink_to(kept)  # the form is the file's, not the link's name; the link stays a link
    release_2 = ["env", "POISONED=1", *CALCULATOR]

    def verify(*flags: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*TAPES, "verify", str(cassette), *flags, "--", *release_2],
                              capture_output=True, text=True, timeout=120)

    changed = verify()
    assert changed.returncode == 1 and "add" in changed.stdout and "sidenote" in changed.stdout
    updated = verify("--update")
    assert updated.returncode == 0 and f"tapes verify: updated {cassette} to the live session" in updated.stderr
    assert cassette.is_symlink() and cassette.read_bytes().startswith(b"{")  # still JSON Lines
    assert "sidenote" in cassette.read_text(encoding="utf-8")
    again = verify("--update")
    assert again.returncode == 0 and "already matches the live session; left as it is" in again.stderr


@pytest.mark.parametrize(("script", "expected"), [
    ("- method: tools/call\n  params: {arguments: {}}\n", "step 1: tools/call needs params.name"),
    ("- method: sampling/createMessage\n", "step 1: 'sampling/createMessage' is not a method a script can send"),
    ("- method: ping\n  params: {x: ${UNSET_TAPES_VARIABLE}}\n", "${UNSET_TAPES_VARIABLE} is not set in the environment"),
    ("- method: ping\n  answers: {sampling: {role: robot}}\n", "step 1: answers.sampling is not valid"),
    ("{}\n", "holds no steps"),
    (b"\x89PNG\r\n\x1a\n", "bad.yaml: is not YAML or JSON (it is not UTF-8 text)"),
])
def test_a_bad_script_is_one_sentence_before_anything_starts(script: str | bytes, expected: str, tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_bytes(script if isinstance(script, bytes) else script.encode())
    run = subprocess.run([*TAPES, "record", "--script", str(path), "-o", str(tmp_path / "x.tape"), "--", "false"],
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 2 and expected in run.stderr and "Traceback" not in run.stderr, run.stderr
    assert not (tmp_path / "x.tape").exists()


def test_a_server_that_never_connects_is_one_sentence(tmp_path: Path) -> None:
    script = tmp_path / "ping.yaml"
    script.write_text("- method: ping\n")
    run = subprocess.run([*TAPES, "record", "--script", str(script), "-o", str(tmp_path / "x.tape"), "--", "false"],
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 2 and "Traceback" not in run.stderr, run.stderr
    assert run.stderr.strip().splitlines()[-1] == "tapes: error: the SDK client could not connect to the server: Connection closed"
