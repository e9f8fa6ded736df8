"""What a replayed test costs compared with the same test against a live server.

A "test" here is what a client test does: connect the official Python SDK client, list the tools,
call one, disconnect. It runs N times in each arm, in one run, and each replay arm is compared with
the live arm it stands in for:
- in-process: an MCPServer of the official SDK in this process (`Client(server)`, the SDK's
  in-memory transport), against the in-memory replay (`ReplayTransport`, the plugin's
  `tape_transport`) of a recording of that same server;
- HTTP: the same server on uvicorn, already running, against the HTTP replay in this process
  (`tapes.replay_server`, the plugin's `tape_url`), started and stopped for every test as the
  plugin does;
- stdio: the same server as a process, against `tapes replay` as the process (`tape_server`).
Prints the median per-test time of each arm and each replay's overhead over its live twin.

    python bench/per_test_overhead.py [--tests 30]
"""

from __future__ import annotations

import argparse
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
from mcp import Client, StdioServerParameters
from mcp.server import MCPServer

import tapes
from replayer.memory import ReplayTransport

TAPES = [sys.executable, "-m", "tapes"]
SERVER_SOURCE = '''
from mcp.server import MCPServer

server = MCPServer("bench")


@server.tool()
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


if __name__ == "__main__":
    server.run()
'''


def in_process_server() -> MCPServer:
    namespace: dict[str, Any] = {}
    exec(compile(SERVER_SOURCE, "<bench server>", "exec"), namespace)  # the same server the recording ran
    return namespace["server"]


async def one_test(target: Any) -> None:
    async with Client(target, mode="legacy", cache=None) as client:
        await client.list_tools()
        result = await client.call_tool("add", {"a": 2, "b": 3})
        assert not result.is_error


def timed(tests: int, run: Callable[[], Awaitable[None]]) -> float:
    """Median seconds per test."""
    times = []
    for _ in range(tests):
        start = time.perf_counter()
        anyio.run(run)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tests", type=int, default=30)
    tests = parser.parse_args().tests
    with tempfile.TemporaryDirectory() as folder:
        script = Path(folder) / "bench_server.py"
        script.write_text(SERVER_SOURCE)
        stdio_tape, http_tape = Path(folder) / "stdio.tape", Path(folder) / "http.tape"
        live_stdio = StdioServerParameters(command=sys.executable, args=[str(script)])
        record = StdioServerParameters(command=TAPES[0], args=[*TAPES[1:], "record", "-o", str(stdio_tape), "--",
                                                              sys.executable, str(script)])
        anyio.run(one_test, record)
        cassette = tapes.load(stdio_tape)
        server = in_process_server()
        replay_stdio = StdioServerParameters(command=TAPES[0], args=[*TAPES[1:], "replay", str(stdio_tape)])
        with _http_server(script) as live_url:
            _record_http(live_url, http_tape)

            async def http_replay_test() -> None:
                with tapes.replay_server(http_tape) as replay:
                    await one_test(replay.url)

            arms = {
                "in-process MCPServer": lambda: one_test(server),
                "in-memory replay (tape_transport)": lambda: one_test(ReplayTransport(cassette)),
                "live HTTP server": lambda: one_test(live_url),
                "HTTP replay, started per test (tape_url)": http_replay_test,
                "live stdio server process": lambda: one_test(live_stdio),
                "stdio replay process (tape_server)": lambda: one_test(replay_stdio),
            }
            for arm in arms.values():  # warm up: imports, first connections
                anyio.run(arm)
            results = {name: timed(tests, arm) for name, arm in arms.items()}
    print(f"per-test time, median of {tests} tests, and each replay's overhead over the live server before it:")
    names = list(results)
    for live, replay in zip(names[::2], names[1::2], strict=True):
        print(f"  {live:42} {results[live] * 1000:7.1f} ms")
        print(f"  {replay:42} {results[replay] * 1000:7.1f} ms   {(results[replay] - results[live]) * 1000:+7.1f} ms")


@contextmanager
def _http_server(script: Path) -> Iterator[str]:
    """The bench server over Streamable HTTP on uvicorn, on a free port, while the block runs."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    runner = (f"import runpy, uvicorn; app = runpy.run_path({str(script)!r})['server'].streamable_http_app(); "
              f"uvicorn.run(app, host='127.0.0.1', port={port}, log_level='warning')")
    server = subprocess.Popen([sys.executable, "-c", runner], stderr=subprocess.DEVNULL)
    try:
        _wait_for_port(port)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        server.terminate()
        server.wait()


def _record_http(url: str, output: Path) -> None:
    """The same session over HTTP, recorded by `tapes record --upstream` in front of the live server."""
    from recorder.process import HttpRecorderProcess

    recorder = HttpRecorderProcess(output, url, [])
    try:
        anyio.run(one_test, recorder.url)
    finally:
        recorder.stop()


def _wait_for_port(port: int) -> None:
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        with socket.socket() as probe:
            if probe.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    raise SystemExit(f"the bench server did not listen on {port}")


if __name__ == "__main__":
    main()
