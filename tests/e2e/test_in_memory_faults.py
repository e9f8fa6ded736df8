"""JSON-RPC faults on the in-memory replay (`replayer.memory.ReplayTransport`, the plugin's
`tape_transport`): the official SDK client sees each kind as it does over stdio."""

from __future__ import annotations

import functools
import json
from pathlib import Path

import anyio
import pytest
from mcp.types import CONNECTION_CLOSED, REQUEST_TIMEOUT

from replayer.memory import ReplayTransport
from tapes.cassette.store import load
from tapes.replay.control import ReplayControl
from tests.support.fault_flows import (
    SHORT_READ_TIMEOUT,
    FaultRun,
    Step,
    notes_steps,
    over_stdio,
    overlapping_calls,
)
from tests.support.paths import NOTES_SERVER, TAPES


def replay(recording: tuple[Path, FaultRun], fault: str, tmp_path: Path) -> tuple[FaultRun, dict]:
    cassette, _ = recording
    report = tmp_path / "report.json"
    transport = functools.partial(ReplayTransport, load(cassette), ReplayControl.build(faults=[fault]), report)
    run = anyio.run(functools.partial(notes_steps, transport, read_timeout=SHORT_READ_TIMEOUT))
    return run, json.loads(report.read_text())


TIMED_OUT = {"tools/call": Step("error", REQUEST_TIMEOUT, "Request 'tools/call' timed out"),
             "prompts/get": Step("error", REQUEST_TIMEOUT, "Request 'prompts/get' timed out")}
CLOSED = Step("error", CONNECTION_CLOSED, "Connection closed")


@pytest.mark.parametrize("fault, changed", [
    ("tools/call@add_note#2:error:-32000:rate limited", {"second_note": Step("error", -32000, "rate limited")}),
    ("prompts/get@summarize:hang", {"prompt": TIMED_OUT["prompts/get"]}),
    ("tools/call#2:malformed", {"second_note": TIMED_OUT["tools/call"]}),
    ("resources/read:drop", {"index": CLOSED, "prompt": CLOSED}),
])
def test_each_fault_changes_its_answer_only(notes_recording: tuple[Path, FaultRun], tmp_path: Path, fault: str,
                                            changed: dict[str, Step]) -> None:
    run, report = replay(notes_recording, fault, tmp_path)
    assert run.steps == {**notes_recording[1].steps, **changed}
    assert report["unmatched"] == [] and report["unfired_faults"] == []
    # after a drop the session is over: what the client never got to ask is unused
    assert [unused.split(" #")[0] for unused in report["unused"]] == (["prompts/get"] if fault.endswith(":drop") else [])
    if fault.endswith(":malformed"):
        [error] = run.transport_errors
        assert "Invalid JSON" in error


def test_delay_holds_the_answer(notes_recording: tuple[Path, FaultRun], tmp_path: Path) -> None:
    run, _ = replay(notes_recording, "resources/read:delay:0.5", tmp_path)  # under the 1 s read timeout
    assert run.steps == notes_recording[1].steps
    assert run.seconds["index"] >= 0.5


def test_a_delayed_answer_holds_up_no_other(tmp_path: Path) -> None:
    """While count's answer is held, add_note (sent after count's progress) is answered at once."""
    cassette = tmp_path / "overlapping.tape"
    live = over_stdio(overlapping_calls, [*TAPES, "record", "-o", str(cassette), "--", *NOTES_SERVER], tmp_path / "record.err")
    control = ReplayControl.build(faults=["tools/call@count:delay:1"])
    run = anyio.run(overlapping_calls, functools.partial(ReplayTransport, load(cassette), control))
    assert (run["count"], run["add_note"]) == (live["count"], live["add_note"])
    assert run["count_seconds"] >= 1.0 > run["add_note_seconds"], run
