"""Re-record the committed cassettes of polled exchanges (2025-11-25) from the real peers, with their
JSON Lines twins beside them. Run from the repository: `python -m tests.support.make_polled_cassettes`.

- everything-tasks-stdio-2025-11-25, everything-tasks-http-2025-11-25: the TypeScript SDK client
  runs server-everything's simulate-research-query as a task (over stdio; over Streamable HTTP
  through `tapes record --upstream`), polling tasks/get every RECORDED_POLL_MS.
- feed-stdio-2026-07-28, feed-http-2026-07-28: the Python SDK client follows tests/servers/feed_server.py
  through subscriptions/listen (tests.support.flows.feed_flow): events, a close by the server, a
  close by the client.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import sys

import anyio

from tapes.cassette.store import Cassette, load, save

from tests.support.flows import feed_flow
from tests.support.http_peers import Recorder, start_everything, start_feed
from tests.support.make_http_cassettes import STABLE_URL, stable_host
from tests.support.paths import CASSETTES, EVERYTHING_JS, FEED_SERVER, ROOT, TAPES
from tests.support.task_peers import run_task_client

RECORDED_POLL_MS = 500
TASKS_STDIO = CASSETTES / "everything-tasks-stdio-2025-11-25.tape"
TASKS_HTTP = CASSETTES / "everything-tasks-http-2025-11-25.tape"
FEED_STDIO = CASSETTES / "feed-stdio-2026-07-28.tape"
FEED_HTTP = CASSETTES / "feed-http-2026-07-28.tape"
FEED_STABLE_URL = "http://127.0.0.1:8000/mcp"


def record_tasks_stdio() -> Path:
    run_task_client(RECORDED_POLL_MS, [*TAPES, "record", "-o", str(TASKS_STDIO), "--", "node", str(EVERYTHING_JS), "stdio"])
    return TASKS_STDIO


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


def record_feed_http() -> Path:
    server, url = start_feed()
    try:
        recorder = Recorder(FEED_HTTP, url)
        anyio.run(feed_flow, recorder.url)
        cassette = recorder.stop()
    finally:
        server.stop()
    save(Cassette(replace(cassette.header, server={"url": FEED_STABLE_URL}),
                  [stable_host(frame, url, FEED_STABLE_URL) for frame in cassette.frames]), FEED_HTTP)
    return FEED_HTTP


def main() -> None:
    for path in [record_tasks_stdio(), record_tasks_http(), record_feed_stdio(), record_feed_http()]:
        cassette = load(path)
        if "command" in cassette.header.server:
            command = [Path(part).name if part == sys.executable else
                       str(Path(part).relative_to(ROOT)) if part.startswith(str(ROOT)) else part
                       for part in cassette.header.server["command"]]
            cassette = Cassette(replace(cassette.header, server={"command": command}), cassette.frames)
        save(cassette, path)
        save(cassette, path.with_suffix(".jsonl"), jsonl=True)
        print(f"{path.relative_to(ROOT)}: {len(cassette.frames)} frames, protocol {cassette.protocol_version}")


if __name__ == "__main__":
    main()
