"""The TypeScript SDK client that runs a tool as a 2025-11-25 task and polls it on its own clock
(tests/peers/task_client.mjs)."""

from __future__ import annotations

import json
import subprocess
from typing import Any

from tests.support.paths import PEERS

TASK_CLIENT = PEERS / "task_client.mjs"
RESEARCH = ("simulate-research-query", {"topic": "tides"})


def run_task_client(poll_ms: int, server: list[str], tool: str = RESEARCH[0],
                    arguments: dict[str, Any] = RESEARCH[1]) -> dict[str, Any]:
    """The task client against a stdio server command: the statuses it polled (`statuses`) and the
    task's result (`result`)."""
    done = subprocess.run(["node", str(TASK_CLIENT), str(poll_ms), tool, json.dumps(arguments), "--", *server],
                          capture_output=True, check=True, timeout=120)
    return json.loads(done.stdout)
