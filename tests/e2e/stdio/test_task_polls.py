"""A task recorded from server-everything over stdio (simulate-research-query, polled every 500 ms
by the TypeScript SDK client) replays to the same client polling faster and slower than the
recording, on the recorded clock: the fast one is answered the reached state again, the slow one
skips the states it never asked for, and both get the recorded result with nothing unmatched or
unused."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.support.paths import CASSETTES, TAPES
from tests.support.task_peers import assert_polled_as_recorded, recorded_polls, run_task_client

CASSETTE = CASSETTES / "everything-tasks-stdio-2025-11-25.tape"


def replay(tmp_path: Path, poll_ms: int, *flags: str) -> tuple[dict[str, Any], dict[str, Any]]:
    report = tmp_path / f"report-{poll_ms}.json"
    live = run_task_client(poll_ms, [*TAPES, "replay", str(CASSETTE), "--report", str(report), *flags])
    return live, json.loads(report.read_text())


@pytest.mark.parametrize("poll_ms", [100, 1500], ids=["faster", "slower"])
def test_a_client_polling_on_its_own_clock_gets_the_recorded_result(tmp_path: Path, poll_ms: int) -> None:
    live, report = replay(tmp_path, poll_ms, "--timing", "recorded")
    assert_polled_as_recorded(live, report, CASSETTE, faster=poll_ms < 500)


def test_without_a_timing_each_poll_plays_the_next_recorded_state(tmp_path: Path) -> None:
    statuses, result = recorded_polls(CASSETTE)
    live, report = replay(tmp_path, 20, "--polls", "exact")
    assert live["statuses"] == statuses and live["result"]["content"] == result["content"]
    assert report["unmatched"] == [] and report["unused"] == [] and report["repeated"] == report["skipped"] == 0
