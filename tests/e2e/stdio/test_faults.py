"""End to end, on stdio: JSON-RPC faults (`tapes replay --fault`) as the official SDK client sees
them. The notes server's session is recorded through `tapes record` by the same client first; the
replay with a fault then answers every step as recorded but the one the fault targets."""

from __future__ import annotations

import json
import re
import subprocess
import time
from pathlib import Path

from mcp.types import CONNECTION_CLOSED, REQUEST_TIMEOUT

from tapes.cassette.store import load
from tests.support.fault_flows import (
    SHORT_READ_TIMEOUT,
    FaultRun,
    Step,
    notes_steps,
    over_stdio,
    overlapping_calls,
)
from tests.support.paths import CASSETTES, NOTES_SERVER, TAPES
from tests.support.processes import TIMEOUT


def replay(cassette: Path, tmp_path: Path, *faults: str, read_timeout: float = TIMEOUT) -> tuple[FaultRun, str]:
    """The steps against `tapes replay` with these faults; what the client saw and the replay's stderr."""
    errlog = tmp_path / "replay.err"
    flags = [flag for fault in faults for flag in ("--fault", fault)]
    run = over_stdio(notes_steps, [*TAPES, "replay", str(cassette), *flags], errlog, read_timeout=read_timeout)
    return run, errlog.read_text()


def clean_summary(stderr: str) -> bool:
    return re.search(r"tapes replay: played \d+ frames, 0 unmatched, 0 unused\n", stderr) is not None


def test_error_takes_the_place_of_the_second_call_of_a_tool(notes_recording: tuple[Path, FaultRun], tmp_path: Path) -> None:
    cassette, live = notes_recording
    run, stderr = replay(cassette, tmp_path, "tools/call@add_note#2:error:-32000:rate limited")
    assert run.steps == {**live.steps, "second_note": Step("error", -32000, "rate limited")}
    assert clean_summary(stderr) and "fault never fired" not in stderr, stderr


def test_delay_holds_the_answer(notes_recording: tuple[Path, FaultRun], tmp_path: Path) -> None:
    cassette, live = notes_recording
    run, stderr = replay(cassette, tmp_path, "resources/read:delay:1")
    assert run.steps == live.steps
    assert run.seconds["index"] >= 1.0 > run.seconds["prompt"], run.seconds
    assert clean_summary(stderr), stderr


def test_hang_leaves_the_client_to_its_read_timeout(notes_recording: tuple[Path, FaultRun], tmp_path: Path) -> None:
    cassette, live = notes_recording
    run, stderr = replay(cassette, tmp_path, "prompts/get@summarize:hang", read_timeout=SHORT_READ_TIMEOUT)
    assert run.steps == {**live.steps, "prompt": Step("error", REQUEST_TIMEOUT, "Request 'prompts/get' timed out")}
    assert run.seconds["prompt"] >= SHORT_READ_TIMEOUT
    # the client cancels the request it gave up on: no miss, the recording has no cancel to match
    assert clean_summary(stderr), stderr


def test_malformed_sends_a_broken_line(notes_recording: tuple[Path, FaultRun], tmp_path: Path) -> None:
    cassette, live = notes_recording
    run, stderr = replay(cassette, tmp_path, "tools/call#2:malformed", read_timeout=SHORT_READ_TIMEOUT)
    [broken] = run.transport_errors
    assert "Invalid JSON" in broken and '{"jsonrpc": "2.0", "id": ' in broken
    # the broken line answers nothing: the call times out, and the session goes on
    assert run.steps == {**live.steps, "second_note": Step("error", REQUEST_TIMEOUT, "Request 'tools/call' timed out")}
    assert clean_summary(stderr), stderr


def test_drop_closes_stdout_and_exits(notes_recording: tuple[Path, FaultRun], tmp_path: Path) -> None:
    cassette, live = notes_recording
    run, stderr = replay(cassette, tmp_path, "resources/read@notes://index:drop")
    closed = Step("error", CONNECTION_CLOSED, "Connection closed")
    assert run.steps == {**live.steps, "index": closed, "prompt": closed}
    # what the client never asked after the drop is unused, as always
    assert re.search(r"played \d+ frames, 0 unmatched, 1 unused\n.*unused prompts/get", stderr), stderr


def test_a_drop_exits_1_with_nothing_after_it_on_stdout() -> None:
    """The README's canned client: the answers before the drop, the malformed tools/list line, then nothing."""
    example = CASSETTES / "example"
    done = subprocess.run([*TAPES, "replay", str(example / "weather.tape"), "--fault", "tools/list:malformed",
                           "--fault", "tools/call#2:drop"], input=(example / "client.jsonl").read_bytes(),
                          capture_output=True, timeout=TIMEOUT)
    lines = done.stdout.splitlines()
    assert done.returncode == 1, done.stderr
    assert lines[1] == b'{"jsonrpc": "2.0", "id": ' and b'"id":3,"result"' in lines[-1] and len(lines) == 4
    assert b"played 5 frames, 0 unmatched, 0 unused" in done.stderr


def test_a_held_answer_still_goes_out_when_the_client_has_closed_stdin() -> None:
    """A canned client sends everything and closes stdin at once: the recorded server's end comes
    right away, but after the answer the delay holds."""
    example = CASSETTES / "example"
    started = time.monotonic()
    done = subprocess.run([*TAPES, "replay", str(example / "weather.tape"), "--fault", "tools/call#2:delay:1"],
                          input=(example / "client.jsonl").read_bytes(), capture_output=True, timeout=TIMEOUT)
    assert time.monotonic() - started >= 1.0
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.splitlines()[-1])["id"] == 4  # the last answer, held, not lost


def test_a_fault_that_never_fired_is_a_warning_in_the_summary(notes_recording: tuple[Path, FaultRun], tmp_path: Path) -> None:
    cassette, live = notes_recording
    never = ("tools/call@add_note#3:error:-32000:x", "tools/call@count:hang")
    run, stderr = replay(cassette, tmp_path, *never)
    assert run.steps == live.steps
    assert clean_summary(stderr), stderr
    assert [f"tapes replay: fault never fired: {spec}" for spec in never] == re.findall(r"tapes replay: fault never.*", stderr)


def test_a_dry_run_lists_the_recorded_request_each_fault_would_take(notes_recording: tuple[Path, FaultRun]) -> None:
    cassette, _ = notes_recording
    faults = ["tools/call@add_note#2:error:-32000:rate limited", "resources/read@notes://index:drop", "prompts/get@other:hang"]
    done = subprocess.run([*TAPES, "replay", str(cassette), "--dry-run", *(f"--fault={fault}" for fault in faults)],
                          capture_output=True, text=True, timeout=TIMEOUT)
    recorded = [f"{frame.message['method']} #{frame.message['id']} (frame {frame.seq})" for frame in load(cassette).frames
                if frame.from_client and isinstance(frame.message, dict) and {"id", "method"} <= frame.message.keys()]
    calls = [request for request in recorded if request.startswith("tools/call ")]
    [read] = [request for request in recorded if request.startswith("resources/read ")]
    assert done.stdout.splitlines() == [
        f"{faults[0]} -> {calls[1]}",
        f"{faults[1]} -> {read}",
        f"{faults[2]} -> no recorded request: it would never fire",
    ]
    assert done.returncode == 1 and done.stderr == ""  # a fault that would never fire: exit 1, nothing served


def test_a_delayed_answer_holds_up_no_other(tmp_path: Path) -> None:
    """While count's answer is held, add_note (sent after count's progress) is answered at once."""
    cassette = tmp_path / "overlapping.tape"
    live = over_stdio(overlapping_calls, [*TAPES, "record", "-o", str(cassette), "--", *NOTES_SERVER], tmp_path / "record.err")
    run = over_stdio(overlapping_calls, [*TAPES, "replay", str(cassette), "--fault", "tools/call@count:delay:1"],
                    tmp_path / "replay.err")
    assert (run["count"], run["add_note"]) == (live["count"], live["add_note"])
    assert run["count_seconds"] >= 1.0 > run["add_note_seconds"], run


def test_faults_from_tool_tapes_come_before_the_flags(notes_recording: tuple[Path, FaultRun], tmp_path: Path) -> None:
    cassette, _ = notes_recording
    (tmp_path / "pyproject.toml").write_text('[tool.tapes]\nfaults = ["tools/call@add_note#2:error:-32000:from config"]\n')
    done = subprocess.run([*TAPES, "replay", str(cassette), "--dry-run", "--fault", "tools/call@add_note#1:hang"],
                          capture_output=True, text=True, cwd=tmp_path, timeout=TIMEOUT)
    assert done.returncode == 0, done.stderr
    assert [line.split(" -> ")[0] for line in done.stdout.splitlines()] == [
        "tools/call@add_note#2:error:-32000:from config", "tools/call@add_note#1:hang"]
    bad = subprocess.run([*TAPES, "replay", str(cassette), "--fault", "tools/call:explode"], capture_output=True, text=True,
                         timeout=TIMEOUT)
    assert bad.returncode == 2 and bad.stdout == "" and "Traceback" not in bad.stderr
    assert bad.stderr.startswith("tapes: error: fault 'tools/call:explode' is not TARGET:ACTION[:ARGS]"), bad.stderr
