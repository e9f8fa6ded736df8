"""Re-record the committed cassettes of polled exchanges (2025-11-25) from the real peers, with their
JSON Lines twins beside them. Run from the repository: `python -m tests.support.make_polled_cassettes`.

- everything-tasks-stdio-2025-11-25, everything-tasks-http-2025-11-25: the TypeScript SDK client
  runs server-everything's simulate-research-query as a task (over stdio; over Streamable HTTP
  through `tapes record --upstream`), polling tasks/get every RECORDED_POLL_MS.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from tapes.cassette.store import Cassette, load, save

from tests.support.http_peers import Recorder, start_everything
from tests.support.make_http_cassettes import STABLE_URL, stable_host
from tests.support.paths import CASSETTES, EVERYTHING_JS, ROOT, TAPES
from tests.support.task_peers import run_task_client

RECORDED_POLL_MS = 500
TASKS_STDIO = CASSETTES / "everything-tasks-stdio-2025-11-25.tape"
TASKS_HTTP = CASSETTES / "everything-tasks-http-2025-11-25.tape"


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


def main() -> None:
    for path in [record_tasks_stdio(), record_tasks_http()]:
        cassette = load(path)
        if "command" in cassette.header.server:
            command = [str(Path(part).relative_to(ROOT)) if part.startswith(str(ROOT)) else part
                       for part in cassette.header.server["command"]]
            cassette = Cassette(replace(cassette.header, server={"command": command}), cassette.frames)
        save(cassette, path)
        save(cassette, path.with_suffix(".jsonl"), jsonl=True)
        print(f"{path.relative_to(ROOT)}: {len(cassette.frames)} frames, protocol {cassette.protocol_version}")


if __name__ == "__main__":
    main()
