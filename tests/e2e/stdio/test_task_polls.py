"""A task recorded from server-everything (simulate-research-query, polled every 500 ms by the
TypeScript SDK client) replays to the same client polling faster and slower than the recording,
on the recorded clock: the fast one is answered the reached state again, the slow one skips the
states it never asked for, and both get the recorded result with nothing unmatched or unused."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tapes.cassette.store import load

from tests.support.paths import CASSETTES, TAPES
from tests.support.task_peers import run_task_client

CASSETTE = CASSETTES / "everything-tasks-stdio-2025-11-25.tape"
RECORDED_POLL_MS = 500


def recorded_polls() -> tuple[list[str], dict[str, Any]]:
    """The statuses the recorded client saw (tools/call's task, then each tasks/get) and the task's result."""
    frames = load(CASSETTE).frames
    methods = {f.message["id"]: f.message["method"] for f in frames if f.from_client and f.message and "id" in f.message and "method" in f.message}
    answers = [(methods.get(f.message["id"]), f.message["result"]) for f in frames
               if not f.from_client and f.message and "result" in f.message]
    statuses = [r["task"]["status"] if m == "tools/call" else r["status"] for m, r in answers if m in ("tools/call", "tasks/get")]
    [result] = [r for m, r in answers if m == "tasks/result"]
    return statuses, result


def replay(tmp_path: Path, poll_ms: int, *flags: str) -> tuple[dict[str, Any], dict[str, Any]]:
    report = tmp_path / f"report-{poll_ms}.json"
    live = run_task_client(poll_ms, [*TAPES, "replay", str(CASSETTE), "--report", str(report), *flags])
    return live, json.loads(report.read_text())


@pytest.mark.parametrize("poll_ms", [100, 1500], ids=["faster", "slower"])
def test_a_client_polling_on_its_own_clock_gets_the_recorded_result(tmp_path: Path, poll_ms: int) -> None:
    statuses, result = recorded_polls()
    live, report = replay(tmp_path, poll_ms, "--timing", "recorded")
    assert live["result"]["content"] == result["content"]
    assert live["statuses"][-1] == statuses[-1] == "completed"
    assert report["unmatched"] == [] and report["unused"] == []
    if poll_ms < RECORDED_POLL_MS:  # more polls than recorded: the reached state again
        assert len(live["statuses"]) > len(statuses) and report["repeated"] == len(live["statuses"]) - len(statuses)
        assert report["skipped"] == 0
    else:  # fewer polls: the states in between skipped, not unused
        assert len(live["statuses"]) < len(statuses) and report["skipped"] == len(statuses) - len(live["statuses"])
        assert report["repeated"] == 0


def test_without_a_timing_each_poll_plays_the_next_recorded_state(tmp_path: Path) -> None:
    statuses, result = recorded_polls()
    live, report = replay(tmp_path, 20, "--polls", "exact")
    assert live["statuses"] == statuses and live["result"]["content"] == result["content"]
    assert report["unmatched"] == [] and report["unused"] == [] and report["repeated"] == report["skipped"] == 0
