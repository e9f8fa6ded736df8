"""`tapes verify` against real stdio servers: a fresh recording of server-everything, the SDK notes
server in both eras, and a changed notes server; its user errors."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import anyio
import pytest

from tests.support.flows import everything_flow
from tests.support.paths import ROOT, SERVERS, TAPES

NOTES_SERVER = ["python", "tests/servers/notes_server.py"]  # as the committed cassettes recorded it


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


def test_verify_a_task_polled_to_its_end_against_the_server_that_ran_it(everything_stdio: list[str]) -> None:
    """The live server names its task afresh (its tasks/get and tasks/result went out with the
    recorded id, which it did not know), and a poll goes at the recorded pace (sent at once, the
    last read a task still working): both read as drift of an unchanged server."""
    run = run_tapes("verify", "cassettes/everything-tasks-stdio-2025-11-25.tape", "--", *everything_stdio)
    assert run.returncode == 0, run.stdout
    assert "same behaviour (4 interactions matched)" in run.stdout


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
    server.write_text(CHANGED_SERVER.format(servers=str(SERVERS)))
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


def test_keeping_the_live_recording_in_the_cassette_itself_is_refused(tmp_path: Path) -> None:
    cassette = tmp_path / "notes.tape"
    cassette.write_bytes((ROOT / "cassettes" / "notes-stdio-2025-11-25.tape").read_bytes())
    run = run_tapes("verify", str(cassette), "--keep", str(cassette), "--", "false")
    assert run.returncode == 2
    assert run.stderr == f"tapes: error: --keep {cassette} is the cassette itself: use --update to replace it\n"
    assert cassette.read_bytes() == (ROOT / "cassettes" / "notes-stdio-2025-11-25.tape").read_bytes()


def test_a_server_that_does_not_start_is_an_error_and_update_keeps_the_cassette(tmp_path: Path) -> None:
    cassette = tmp_path / "notes.tape"
    recorded = (ROOT / "cassettes" / "notes-stdio-2025-11-25.tape").read_bytes()
    cassette.write_bytes(recorded)
    run = run_tapes("verify", str(cassette), "--update", "--", "python", "tests/servers/no_such_server.py")
    assert run.returncode == 2 and run.stdout == ""
    assert run.stderr.startswith(f"tapes: error: the live server answered nothing, so nothing was compared ({cassette} is "
                                 "left as it is): it exited with code 2; its stderr: ")
    assert "no_such_server.py" in run.stderr and run.stderr.count("\n") == 1
    assert cassette.read_bytes() == recorded


def test_update_redacts_the_live_session_as_the_cassette_was(tmp_path: Path) -> None:
    """The live session replaces the cassette: recorded with the cassette's rules, or what they
    hid would be written in clear."""
    from tapes.cassette.store import load

    cassette = tmp_path / "notes.tape"
    hidden = run_tapes("redact", "cassettes/notes-stdio-2025-11-25.tape", "--redact-path", "result.content.*.text",
                       "-o", str(cassette))
    assert hidden.returncode == 0, hidden.stderr
    server = tmp_path / "changed_notes_server.py"
    server.write_text(CHANGED_SERVER.format(servers=str(SERVERS)))
    run = run_tapes("verify", str(cassette), "--update", "--", "python", str(server))
    assert "updated" in run.stderr, run.stderr
    updated = load(cassette)
    assert "json:result.content.*.text" in updated.header.redaction
    results = [frame.message["result"] for frame in updated.frames
               if isinstance(frame.message, dict) and isinstance(frame.message.get("result"), dict)]
    texts = [item["text"] for result in results if isinstance(result.get("content"), list)
             for item in result["content"] if isinstance(item, dict) and "text" in item]
    assert texts and all(text.startswith("<redacted:") for text in texts)


def test_a_server_that_ignores_its_end_and_sigterm_is_killed_not_waited_for(tmp_path: Path) -> None:
    """It was a TimeoutExpired traceback, exit 1 ("different"), and the recorder and server left running."""
    import sys
    import time

    from recorder.verify import verify_stdio
    from tapes.cassette.store import load
    from tests.support.paths import SUPPORT

    started = time.monotonic()
    live = verify_stdio(load(ROOT / "cassettes" / "notes-stdio-2025-11-25.tape"),
                        [sys.executable, str(SUPPORT / "recorder_peer.py"), "stubborn"], tmp_path / "live.tape",
                        step_timeout=0.5, exit_timeout=1.0)
    assert time.monotonic() - started < 30
    assert any(frame.from_client for frame in live.frames)  # what was sent, recorded up to the kill
    deadline = time.monotonic() + 5  # the server dies with its recorder, a moment later
    while (left := subprocess.run(["pgrep", "-f", f"{SUPPORT / 'recorder_peer.py'} stubborn"], capture_output=True,
                                  text=True).stdout) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert left == ""


CHATTY_SERVER = """
import json, sys, threading, time
lock = threading.Lock()
def say(message):
    with lock:
        print(json.dumps(message), flush=True)
def tick():
    while True:
        time.sleep(0.1)
        say({"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info", "data": "tick"}})
threading.Thread(target=tick, daemon=True).start()
for line in sys.stdin:
    message = json.loads(line)
    if message.get("method") == "initialize":  # and nothing else is ever answered
        say({"jsonrpc": "2.0", "id": message["id"], "result": {"protocolVersion": message["params"]["protocolVersion"],
             "capabilities": {"tools": {}}, "serverInfo": {"name": "chatty", "version": "1"}}})
"""


def test_a_server_that_keeps_talking_but_never_answers_still_ends_each_step(tmp_path: Path) -> None:
    """The step timeout counts from the step, not from the last line: a notification every 0.1 s
    kept a 0.5 s timeout from ever running out, and verify from ever ending."""
    server = tmp_path / "chatty.py"
    server.write_text(CHATTY_SERVER)
    done = subprocess.run([*TAPES, "verify", "cassettes/notes-stdio-2025-11-25.tape", "--step-timeout", "0.5", "--",
                           "python", str(server)], capture_output=True, text=True, timeout=90, cwd=ROOT)
    assert done.returncode == 1 and "tools/call" in done.stdout, done.stderr


def test_a_sigterm_stops_the_recorder_and_the_server_it_started(tmp_path: Path) -> None:
    """Not only verify: its recorder and the server were left running (a child of init), its
    scratch folder behind."""
    import os
    import signal
    import time

    marker = f"{os.getpid()}.{time.monotonic_ns() % 1000}"
    verify = subprocess.Popen([*TAPES, "verify", "cassettes/notes-stdio-2025-11-25.tape", "--", "sleep", marker],
                              cwd=ROOT, stderr=subprocess.PIPE, stdout=subprocess.PIPE, env={**os.environ, "TMPDIR": str(tmp_path)})
    deadline = time.monotonic() + 30
    while not subprocess.run(["pgrep", "-f", f"^sleep {marker}"], capture_output=True).stdout and time.monotonic() < deadline:
        time.sleep(0.1)
    verify.send_signal(signal.SIGTERM)
    assert verify.wait(timeout=30) == 128 + signal.SIGTERM
    assert b"Traceback" not in verify.communicate()[1]
    deadline = time.monotonic() + 10
    while (left := subprocess.run(["pgrep", "-f", f"^sleep {marker}"], capture_output=True).stdout) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert left == b""
    assert not list(tmp_path.glob("tapes-verify-*"))


def test_a_cassette_no_server_could_have_sent_is_refused_before_a_server_starts(tmp_path: Path) -> None:
    """As a replay refuses it: one sentence naming the frame, exit 2 (it read as the same behaviour)."""
    lines = (ROOT / "cassettes" / "example" / "weather.jsonl").read_text().splitlines()
    third = json.loads(lines[3])
    lines[3] = json.dumps({**third, "seq": third["seq"] - 1})  # two frames with one seq
    cassette = tmp_path / "twice.jsonl"
    cassette.write_text("\n".join(lines) + "\n")
    started = tmp_path / "started"
    run = run_tapes("verify", str(cassette), "--", "sh", "-c", f"touch {started}; cat")
    assert run.returncode == 2 and "comes twice" in run.stderr and run.stderr.count("\n") == 1, run.stderr
    assert not started.exists()
