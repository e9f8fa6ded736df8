"""`tapes verify`: the sans-IO client script, and end-to-end runs against real servers (a fresh
recording of server-everything, the SDK notes server in both eras, and a changed notes server)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import anyio
import pytest
from conftest import ROOT, TAPES
from flows import everything_flow
from test_diff import notification, request, result, stdio_cassette

from tapes.wire.jsonrpc import encode
from tapes.analysis.verify import ClientScript

NOTES_SERVER = ["python", "tests/servers/notes_server.py"]


def sent(payloads: list[bytes | None]) -> list[Any]:
    return [None if payload is None else json.loads(payload) for payload in payloads]


def test_a_request_waits_for_the_response_recorded_before_it() -> None:
    script = ClientScript(stdio_cassette(("c", request(1, "tools/list")), ("s", result(1, {"tools": []})),
                                         ("c", request(2, "tools/call", {"name": "a"}))).frames)
    assert sent(script.ready()) == [request(1, "tools/list")]
    assert script.ready() == [] and script.waiting_for == [("response", 1)]
    script.receive(encode(result(1, {"tools": ["anything"]})))
    assert sent(script.ready()) == [request(2, "tools/call", {"name": "a"})]
    assert script.finished


def test_answers_go_to_the_live_server_request_id() -> None:
    script = ClientScript(stdio_cassette(("c", request(1, "tools/call", {"name": "ask"})),
                                         ("s", request(0, "roots/list")), ("c", result(0, {"roots": []})),
                                         ("s", result(1, {"content": []}))).frames)
    script.ready()
    script.receive(encode(request(41, "roots/list")))
    assert sent(script.ready()) == [result(41, {"roots": []})]


def test_a_retry_carries_the_live_request_state_even_when_captured_before_its_result() -> None:
    retry = request(2, "tools/call", {"name": "ask", "requestState": "recorded", "inputResponses": {"k": {}}})
    script = ClientScript(stdio_cassette(("c", request(1, "tools/call", {"name": "ask"})), ("c", retry),
                                         ("s", result(1, {"resultType": "input_required", "requestState": "recorded",
                                                          "inputRequests": {"k": {"method": "roots/list"}}}))).frames)
    assert len(script.ready()) == 1 and script.waiting_for == [("response", 1)]
    script.receive(encode(result(1, {"resultType": "input_required", "requestState": "live", "inputRequests": {}})))
    assert sent(script.ready())[0]["params"]["requestState"] == "live"


def test_a_cancelled_request_is_not_waited_for_and_force_gives_up_waiting() -> None:
    slow = request(1, "tools/call", {"name": "slow", "_meta": {"progressToken": "t"}})
    progress = notification("notifications/progress", {"progressToken": "t", "progress": 1})
    cancel = notification("notifications/cancelled", {"requestId": 1})
    script = ClientScript(stdio_cassette(("c", slow), ("s", progress), ("c", cancel),
                                         ("s", {**progress, "params": {"progressToken": "t", "progress": 2}}),
                                         ("c", request(2, "ping")), ("s", result(2, {}))).frames)
    assert sent(script.ready()) == [slow]
    assert script.waiting_for == [("progress", "t", 1)]
    script.receive(encode(progress))
    assert sent(script.ready()) == [cancel, request(2, "ping")]  # progress 2 came after the cancel
    assert script.finished

    stuck = ClientScript(stdio_cassette(("c", request(1, "ping")), ("s", result(1, {})), ("c", request(2, "ping"))).frames)
    stuck.ready()
    assert sent(stuck.force()) == [request(2, "ping")]


# --- end to end ----------------------------------------------------------------------------------


def run_tapes(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*TAPES, *args], capture_output=True, text=True, cwd=ROOT, timeout=90)


def test_verify_server_everything_against_its_fresh_recording(tmp_path: Path, everything_stdio: list[str]) -> None:
    recording = tmp_path / "everything.tape"
    anyio.run(everything_flow, [*TAPES, "record", "-o", str(recording), "--", *everything_stdio])
    run = run_tapes("verify", str(recording), "--format", "json", "--keep", str(tmp_path / "live.tape"), "--", *everything_stdio)
    report = json.loads(run.stdout)
    assert run.returncode == 0, report["changes"]
    assert report["same"] and report["matched"] == 10
    assert (tmp_path / "live.tape").exists()


@pytest.mark.parametrize("era", ["2025-11-25", "2026-07-28"])
def test_verify_the_notes_server_in_both_eras(era: str) -> None:
    run = run_tapes("verify", f"cassettes/notes-stdio-{era}.tape", "--", *NOTES_SERVER)
    assert run.returncode == 0, run.stdout
    assert "same behaviour (11 interactions matched)" in run.stdout


CHANGED_SERVER = """
import sys
sys.path.insert(0, {servers!r})
import notes_server

@notes_server.server.tool(description="A tool this release added.")
def extra() -> str:
    return "extra"

notes_server.server.remove_tool("count")

@notes_server.server.tool(description="Count to n, reporting progress at every step.")
async def count(n: int, ctx: notes_server.Context) -> str:
    for step in range(1, n + 1):
        await ctx.report_progress(step, n, f"step {{step}}/{{n}}")
    return f"counted up to {{n}}"

notes_server.server.run("stdio")
"""


def test_verify_reports_what_a_changed_server_does_differently(tmp_path: Path) -> None:
    server = tmp_path / "changed_notes_server.py"
    server.write_text(CHANGED_SERVER.format(servers=str(ROOT / "tests" / "servers")))
    run = run_tapes("verify", "cassettes/notes-stdio-2025-11-25.tape", "--format", "json", "--", "python", str(server))
    assert run.returncode == 1
    report = json.loads(run.stdout)
    changes = {(change["section"], change["kind"], change["subject"]): change for change in report["changes"]}
    assert ("tool", "added", "extra") in changes and changes[("tool", "added", "extra")]["severity"] == "compatible"
    counted = [change for change in report["changes"] if change["subject"] == "tools/call count"]
    assert {(delta["path"], delta["old"], delta["new"]) for change in counted for delta in change["deltas"]} >= {
        ("/outcome/result/content/0/text", "counted to 3", "counted up to 3"),
        ("/outcome/result/content/0/text", "counted to 1", "counted up to 1")}
    assert run_tapes("verify", "cassettes/notes-stdio-2025-11-25.tape", "--fail-on", "breaking", "--",
                     "python", str(server)).returncode == 0


def test_verify_user_errors() -> None:
    no_command = run_tapes("verify", "cassettes/notes-stdio-2025-11-25.tape")
    assert no_command.returncode == 2 and "server command after --" in no_command.stderr
    http = run_tapes("verify", "cassettes/everything-http-2025-11-25.tape", "--", "true")
    assert http.returncode == 2 and "is an HTTP recording; verify it against a server URL with --upstream" in http.stderr
