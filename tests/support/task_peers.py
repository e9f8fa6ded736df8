"""The TypeScript SDK clients of 2025-11-25 tasks: one runs a tool as a task and polls it on its own
clock (tests/peers/task_client.mjs), one runs the server's sampling and elicitation requests as
tasks the server polls (tests/peers/client_task_client.mjs)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from tapes.cassette.store import load

from tests.support.paths import PEERS

TASK_CLIENT = PEERS / "task_client.mjs"
CLIENT_TASK_CLIENT = PEERS / "client_task_client.mjs"
RESEARCH = ("simulate-research-query", {"topic": "tides"})


def run_task_client(poll_ms: int, server: list[str], tool: str = RESEARCH[0],
                    arguments: dict[str, Any] = RESEARCH[1]) -> dict[str, Any]:
    """The task client against a stdio server command (or `["--url", URL]`: over Streamable HTTP):
    the statuses it polled (`statuses`) and the task's result (`result`)."""
    target = server if server[:1] == ["--url"] else ["--", *server]
    done = subprocess.run(["node", str(TASK_CLIENT), str(poll_ms), tool, json.dumps(arguments), *target],
                          capture_output=True, check=True, timeout=120)
    return json.loads(done.stdout)


def run_client_task_client(task_ms: int, tool: str, server: list[str]) -> dict[str, Any]:
    """server-everything's `tool` (trigger-sampling-request-async or trigger-elicitation-request-async)
    with a client that runs the server's request as a task done after `task_ms`, against a stdio
    server command: the tool's `result`."""
    done = subprocess.run(["node", str(CLIENT_TASK_CLIENT), str(task_ms), tool, "--", *server],
                          capture_output=True, check=True, timeout=120)
    return json.loads(done.stdout)


def recorded_polls(cassette: Path) -> tuple[list[str], dict[str, Any]]:
    """The statuses the recorded client saw (tools/call's task, then each tasks/get) and the task's result."""
    frames = load(cassette).frames
    methods = {f.message["id"]: f.message["method"] for f in frames
               if f.from_client and isinstance(f.message, dict) and "id" in f.message and "method" in f.message}
    answers = [(methods.get(f.message["id"]), f.message["result"]) for f in frames
               if not f.from_client and isinstance(f.message, dict) and "result" in f.message]
    statuses = [r["task"]["status"] if m == "tools/call" else r["status"] for m, r in answers if m in ("tools/call", "tasks/get")]
    [result] = [r for m, r in answers if m == "tasks/result"]
    return statuses, result


def assert_polled_as_recorded(live: dict[str, Any], report: dict[str, Any], cassette: Path, faster: bool) -> None:
    """The live client got the recorded result with nothing unmatched or unused; polling faster,
    the reached state was repeated; slower, the states it never asked for were skipped."""
    statuses, result = recorded_polls(cassette)
    assert live["result"]["content"] == result["content"]
    assert live["statuses"][-1] == statuses[-1] == "completed"
    assert report["unmatched"] == [] and report["unused"] == []
    if faster:
        assert len(live["statuses"]) > len(statuses) and report["repeated"] == len(live["statuses"]) - len(statuses)
        assert report["skipped"] == 0
    else:
        assert len(live["statuses"]) < len(statuses) and report["skipped"] == len(statuses) - len(live["statuses"])
        assert report["repeated"] == 0
