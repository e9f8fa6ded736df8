"""The client flows of tests/support/flows.py, run directly against their real servers (no recorder).

Each flow runs twice, concurrently on two server processes; the two results must be equal (the
flows are deterministic, which is what lets later tests compare direct, recorded and replayed
runs) and hold the expected content.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import pytest

from tests.support.flows import NOTES_QUESTION, ROOTS, SAMPLING_MODEL, everything_flow, notes_flow
from tests.support.paths import NOTES_SERVER

TEST_TIMEOUT = 60.0


@pytest.fixture(scope="session")
def notes_stdio() -> list[str]:
    """argv of tests/servers/notes_server.py over stdio."""
    return NOTES_SERVER


def run_twice(flow: Callable[[], Awaitable[dict[str, Any]]]) -> tuple[dict[str, Any], dict[str, Any]]:
    """Run `flow` twice at once (two server processes), bounded by TEST_TIMEOUT."""
    results: list[dict[str, Any]] = [{}, {}]

    async def one(i: int) -> None:
        results[i] = await flow()

    async def main() -> None:
        with anyio.fail_after(TEST_TIMEOUT):
            async with anyio.create_task_group() as tg:
                tg.start_soon(one, 0)
                tg.start_soon(one, 1)

    anyio.run(main)
    return results[0], results[1]


def texts(result: dict[str, Any]) -> str:
    return "\n".join(block["text"] for block in result["content"] if block["type"] == "text")


def test_everything_flow_is_deterministic_and_complete(everything_stdio: list[str]) -> None:
    first, second = run_twice(functools.partial(everything_flow, everything_stdio))
    assert first == second
    json.dumps(first)  # plain, JSON-able data

    # server-everything (TS SDK) has no server/discover: the auto probe falls back to initialize.
    assert first["session"] == {
        "protocol_version": "2025-11-25",
        "server": {"name": "mcp-servers/everything", "version": "2.0.0"},
    }
    # The conditional tools are there because the client declared sampling and roots.
    assert {"echo", "trigger-long-running-operation", "trigger-sampling-request", "get-roots-list"} <= set(
        first["tools"]
    )

    assert texts(first["echo"]) == "Echo: hello"

    long_running = first["long_running"]
    assert long_running["progress"] == [[1.0, 3.0], [2.0, 3.0], [3.0, 3.0]]
    assert "Steps: 3" in texts(long_running["result"])

    assert first["resource"]["uri"].startswith("demo://resource/static/")
    (contents,) = first["resource"]["contents"]
    assert contents["uri"] == first["resource"]["uri"] and contents["text"]

    # The sampling request reached our callback, and its answer came back inside the tool result.
    (asked,) = first["observed"]["sampling_requests"]
    assert "What is the capital of France?" in asked["messages"][0]["content"]["text"]
    assert SAMPLING_MODEL in texts(first["sampling"])
    assert "You asked: Resource trigger-sampling-request context: What is the capital of France?" in texts(
        first["sampling"]
    )

    roots_text = texts(first["roots"])
    assert "Current MCP Roots (2 total)" in roots_text
    assert all(str(root.uri) in roots_text for root in ROOTS)

    cancelled = first["cancelled"]
    assert cancelled == {"cancelled": True, "result": None, "progress_before_cancel": [[1.0, 5.0]]}
    assert texts(first["after_cancel"]) == "Echo: still here"


@pytest.mark.parametrize(
    ("mode", "version"),
    [("auto", "2026-07-28"), ("legacy", "2025-11-25")],
    ids=["auto-2026", "legacy-2025"],
)
def test_notes_flow_is_deterministic_and_complete(notes_stdio: list[str], mode: str, version: str) -> None:
    first, second = run_twice(functools.partial(notes_flow, notes_stdio, mode=mode))
    assert first == second
    json.dumps(first)

    assert first["session"] == {"protocol_version": version, "server": {"name": "notes", "version": "1.0.0"}}
    assert set(first["tools"]) == {"add_note", "count", "slow", "ask_model", "list_client_roots"}
    assert first["tools"]["add_note"]["required"] == ["id", "title", "text", "total"]

    groceries, ideas = first["notes"]
    assert groceries["structuredContent"] == {"id": 1, "title": "groceries", "text": "milk, eggs", "total": 1}
    assert ideas["structuredContent"] == {"id": 2, "title": "ideas", "text": "record every frame", "total": 2}

    assert first["count"]["progress"] == [[1.0, 3.0], [2.0, 3.0], [3.0, 3.0]]
    assert first["count"]["result"]["structuredContent"] == {"result": "counted to 3"}

    (index,) = first["index"]
    assert index["uri"] == "notes://index"
    assert json.loads(index["text"]) == {"titles": ["groceries", "ideas"]}

    assert first["prompt"]["messages"][0]["content"]["text"] == "Summarize my notes about tapes."

    # Sampling and roots reached the client's callbacks exactly once, whatever the era's spelling
    # (a server->client request in 2025, an input_required round trip in 2026).
    (asked,) = first["observed"]["sampling_requests"]
    assert asked["messages"][0]["content"]["text"] == NOTES_QUESTION
    assert asked["maxTokens"] == 64
    assert texts(first["ask_model"]) == f"model {SAMPLING_MODEL} says: You asked: {NOTES_QUESTION}"
    assert first["observed"]["roots_requests"] == 1
    assert texts(first["roots"]) == "\n".join(sorted(f"{root.uri} ({root.name})" for root in ROOTS))

    assert first["cancelled"] == {"cancelled": True, "result": None, "progress_before_cancel": [[0.0, 30.0]]}
    assert first["after_cancel"]["progress"] == [[1.0, 1.0]]
    assert texts(first["after_cancel"]["result"]) == "counted to 1"
