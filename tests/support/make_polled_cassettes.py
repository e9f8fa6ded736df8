"""Re-record the committed cassettes of polled exchanges (2025-11-25) from the real peers, with their
JSON Lines twins beside them. Run from the repository: `python -m tests.support.make_polled_cassettes`.

- everything-tasks-stdio-2025-11-25, everything-tasks-http-2025-11-25: the TypeScript SDK client
  runs server-everything's simulate-research-query as a task (over stdio; over Streamable HTTP
  through `tapes record --upstream`), polling tasks/get every RECORDED_POLL_MS.
- everything-sampling-task-stdio-2025-11-25, everything-elicitation-task-stdio-2025-11-25:
  server-everything's trigger-sampling-request-async and trigger-elicitation-request-async with the
  TypeScript SDK client answering the server's request as a task of its own
  (tests/peers/client_task_client.mjs, done after CLIENT_TASK_MS): the server polls the client.
- feed-stdio-2026-07-28, feed-http-2026-07-28: the Python SDK client follows tests/servers/feed_server.py
  through subscriptions/listen (tests.support.flows.feed_flow): events, a close by the server, a
  close by the client.
- feed-stdio-2025-11-25: the same script and server at 2025-11-25, through resources/subscribe
  (tests.support.flows.feed_subscribe_flow): what `tapes diff` against feed-stdio-2026-07-28 maps.
- resumable-polling-http-2025-11-25: the Python SDK client calls tests/servers/resumable_server.py's
  cycles(3): the server closes the SSE stream three times, the client polls back with Last-Event-ID
  after each `retry` interval (tests.support.flows.sse_polling_flow).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from collections.abc import Awaitable, Callable
from typing import Any

import anyio

from tapes.cassette.store import Cassette, save

from tests.support.flows import feed_flow, feed_subscribe_flow, sse_polling_flow
from tests.support.http_peers import Recorder, start_everything, start_feed, start_resumable
from tests.support.make_cassettes import commit
from tests.support.make_http_cassettes import STABLE_URL, stable_host
from tests.support.paths import CASSETTES, EVERYTHING_JS, FEED_SERVER, TAPES
from tests.support.processes import Process
from tests.support.task_peers import run_client_task_client, run_task_client

RECORDED_POLL_MS = 500
TASKS_STDIO = CASSETTES / "everything-tasks-stdio-2025-11-25.tape"
TASKS_HTTP = CASSETTES / "everything-tasks-http-2025-11-25.tape"
CLIENT_TASKS = {"trigger-sampling-request-async": CASSETTES / "everything-sampling-task-stdio-2025-11-25.tape",
                "trigger-elicitation-request-async": CASSETTES / "everything-elicitation-task-stdio-2025-11-25.tape"}
CLIENT_TASK_MS = 2500
FEED_STDIO = CASSETTES / "feed-stdio-2026-07-28.tape"
FEED_HTTP = CASSETTES / "feed-http-2026-07-28.tape"
FEED_SUBSCRIBE_STDIO = CASSETTES / "feed-stdio-2025-11-25.tape"
SDK_STABLE_URL = "http://127.0.0.1:8000/mcp"  # where the Python SDK serves by default
SSE_POLLING = CASSETTES / "resumable-polling-http-2025-11-25.tape"


def record_tasks_stdio() -> Path:
    run_task_client(RECORDED_POLL_MS, [*TAPES, "record", "-o", str(TASKS_STDIO), "--", "node", str(EVERYTHING_JS), "stdio"])
    return TASKS_STDIO


def record_client_tasks() -> list[Path]:
    for tool, path in CLIENT_TASKS.items():
        run_client_task_client(CLIENT_TASK_MS, tool, [*TAPES, "record", "-o", str(path), "--", "node", str(EVERYTHING_JS), "stdio"])
    return list(CLIENT_TASKS.values())


def record_tasks_http() -> Path:
    server, url = start_everything("streamableHttp")
    try:
        recorder = Recorder(TASKS_HTTP, url)
        run_task_client(RECORDED_POLL_MS, ["--url", recorder.url])
        cassette = recorder.stop()
    finally:
        server.stop()
    stable = STABLE_URL["streamableHttp"]
    save(Cassette(replace(cassette.header, server={"url": stable}),
                  [stable_host(frame, url, stable) for frame in cassette.frames]), TASKS_HTTP)
    return TASKS_HTTP


def record_feed_stdio() -> Path:
    anyio.run(feed_flow, [*TAPES, "record", "-o", str(FEED_STDIO), "--", *FEED_SERVER])
    return FEED_STDIO


def record_feed_subscribe_stdio() -> Path:
    anyio.run(feed_subscribe_flow, [*TAPES, "record", "-o", str(FEED_SUBSCRIBE_STDIO), "--", *FEED_SERVER])
    return FEED_SUBSCRIBE_STDIO


def record_feed_http() -> Path:
    return _record_http(FEED_HTTP, start_feed, feed_flow)


def record_sse_polling() -> Path:
    return _record_http(SSE_POLLING, start_resumable, sse_polling_flow)


def _record_http(path: Path, start: Callable[[], tuple[Process, str]], flow: Callable[[str], Awaitable[Any]]) -> Path:
    """Run `flow` against a Python SDK test server through `tapes record --upstream`; the cassette
    shows the server at a stable address, not this run's free port."""
    server, url = start()
    try:
        recorder = Recorder(path, url)
        anyio.run(flow, recorder.url)
        cassette = recorder.stop()
    finally:
        server.stop()
    save(Cassette(replace(cassette.header, server={"url": SDK_STABLE_URL}),
                  [stable_host(frame, url, SDK_STABLE_URL) for frame in cassette.frames]), path)
    return path


def main() -> None:
    for path in [record_tasks_stdio(), record_tasks_http(), *record_client_tasks(), record_feed_stdio(), record_feed_subscribe_stdio(),
                 record_feed_http(), record_sse_polling()]:
        commit(path)


if __name__ == "__main__":
    main()
