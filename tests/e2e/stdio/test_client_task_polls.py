"""The bidirectional form of tasks (2025-11-25), recorded from server-everything's
trigger-sampling-request-async and trigger-elicitation-request-async: the TypeScript SDK client
runs the server's request as a task of its own (done after 2.5 s), the server polls it with
tasks/get and fetches tasks/result. Replayed to the client whose task takes much less and much
more time: the recorded server's polls name the live client's task (a fresh id every run), the
client's status notifications are taken whenever they come, and the client gets the recorded
result with nothing unmatched or unused."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tapes.cassette.store import load

from tests.support.paths import CASSETTES, TAPES
from tests.support.task_peers import run_client_task_client

CASSETTES_BY_TOOL = {"trigger-sampling-request-async": CASSETTES / "everything-sampling-task-stdio-2025-11-25.tape",
                     "trigger-elicitation-request-async": CASSETTES / "everything-elicitation-task-stdio-2025-11-25.tape"}


@pytest.mark.parametrize("tool", list(CASSETTES_BY_TOOL))
@pytest.mark.parametrize("task_ms", [200, 4000], ids=["task-done-sooner", "task-done-later"])
def test_the_recorded_server_polls_the_live_clients_task(tmp_path: Path, tool: str, task_ms: int) -> None:
    cassette = CASSETTES_BY_TOOL[tool]
    [recorded] = [f.message["result"] for f in load(cassette).frames
                  if not f.from_client and f.message and f.message.get("id") == 1 and "result" in f.message]
    report = tmp_path / "report.json"
    live = run_client_task_client(task_ms, tool, [*TAPES, "replay", str(cassette), "--report", str(report)])
    assert live["result"]["content"] == recorded["content"]
    summary = json.loads(report.read_text())
    assert summary["unmatched"] == [] and summary["unused"] == []
