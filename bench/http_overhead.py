"""What `tapes record --upstream` costs an HTTP session.

N sequential `tools/call` requests, each answered on a short SSE stream (priming event + result),
sent with one keep-alive httpx client directly to a minimal MCP-shaped HTTP server (it answers at
once, so what is measured is the hop, not the server), through `tapes record`, and through
a bare `mitmdump` reverse proxy that records nothing (same connection strategy, streaming
bodies), in the same run, rounds alternating so all see the same machine. Then the SSE
first-event latency: from sending a POST to reading its first event (the priming event).

Prints p50/p99 per request, the latency added over direct, and the recorder against mitmdump.

    python bench/http_overhead.py [--requests 2000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
# Enough Streamable HTTP for the benchmark: initialize answered in JSON with a session id,
# notifications with 202, every other request with an SSE stream: a priming event, then the
# result (for `ticks`, 50 ms later, as a tool that takes time).
SERVER_CODE = r"""
import asyncio, json, re, sys

def chunk(data):
    return b"%x\r\n%s\r\n" % (len(data), data)

async def handle(reader, writer):
    try:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            length = re.search(rb"(?i)content-length: *(\d+)", head)
            request = json.loads(await reader.readexactly(int(length[1]))) if length else {}
            if "id" not in request:
                writer.write(b"HTTP/1.1 202 Accepted\r\nContent-Length: 0\r\n\r\n")
                continue
            result = {"content": [{"type": "text", "text": "hello"}]}
            if request["method"] == "initialize":
                body = json.dumps({"jsonrpc": "2.0", "id": request["id"], "result": {"protocolVersion": "2025-11-25"}}).encode()
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nMcp-Session-Id: s1\r\n"
                             b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
                continue
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
                         + chunk(b"id: s1/1\ndata:\n\n"))
            if request["params"].get("name") == "ticks":
                await writer.drain()
                await asyncio.sleep(0.05)
            message = json.dumps({"jsonrpc": "2.0", "id": request["id"], "result": result}).encode()
            writer.write(chunk(b"id: s1/2\ndata: " + message + b"\n\n") + b"0\r\n\r\n")
    except (asyncio.IncompleteReadError, ConnectionError):
        writer.close()

async def main():
    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    print(f"listening on http://127.0.0.1:{server.sockets[0].getsockname()[1]}/mcp", flush=True)
    await server.serve_forever()

asyncio.run(main())
"""
SERVER = [sys.executable, "-c", SERVER_CODE]
TAPES = [sys.executable, "-m", "tapes"]
HEADERS = {"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2025-11-25"}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextmanager
def process(argv: list[str], ready: str, **options: object) -> Iterator[re.Match[str]]:
    """Run argv until the block ends; wait for a stderr/stdout line matching `ready`."""
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, **options)  # type: ignore[call-overload]
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            if match := re.search(ready, line):
                break
        else:
            raise SystemExit(f"{argv[:4]} exited before it was ready")
        # Keep reading what it prints (mitmdump logs every flow): a full pipe would stall it.
        threading.Thread(target=proc.stdout.read, daemon=True).start()
        yield match
    finally:
        proc.terminate()
        proc.wait(10)


class Session:
    def __init__(self, client: httpx.Client, url: str) -> None:
        self.client, self.url, self.next_id = client, url, 1
        response = self.send("initialize", {"protocolVersion": "2025-11-25", "capabilities": {},
                                            "clientInfo": {"name": "bench", "version": "1"}})
        client.headers["Mcp-Session-Id"] = response.headers["mcp-session-id"]
        client.post(url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=HEADERS)

    def send(self, method: str, params: dict[str, object]) -> httpx.Response:
        self.next_id += 1
        body = {"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params}
        response = self.client.post(self.url, json=body, headers=HEADERS)
        response.raise_for_status()
        return response

    def first_event_latency(self) -> float:
        self.next_id += 1
        body = {"jsonrpc": "2.0", "id": self.next_id, "method": "tools/call",
                "params": {"name": "ticks", "arguments": {"n": 1, "interval": 0.05}}}
        start = time.perf_counter()
        elapsed = None
        with self.client.stream("POST", self.url, json=body, headers=HEADERS) as response:
            for line in response.iter_lines():  # read to the end: the connection is reused
                if line == "" and elapsed is None:  # the end of the first event
                    elapsed = time.perf_counter() - start
        if elapsed is None:
            raise RuntimeError("the stream ended without an event")
        return elapsed


def measure(url: str, requests: int, first_events: int) -> tuple[list[float], list[float]]:
    with httpx.Client(timeout=30) as client:
        session = Session(client, url)
        for _ in range(50):  # warm up: connections, imports, caches
            session.send("tools/call", {"name": "echo", "arguments": {}})
        latencies = []
        for _ in range(requests):
            start = time.perf_counter()
            session.send("tools/call", {"name": "echo", "arguments": {}})
            latencies.append(time.perf_counter() - start)
        return latencies, [session.first_event_latency() for _ in range(first_events)]


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--first-events", type=int, default=30)
    args = parser.parse_args()
    mitmdump = shutil.which("mitmdump", path=os.path.dirname(sys.executable)) or shutil.which("mitmdump")
    if mitmdump is None:
        raise SystemExit("mitmdump is not installed (pip install mitmproxy)")

    results: dict[str, tuple[list[float], list[float]]] = {"direct": ([], []), "tapes record": ([], []), "mitmdump": ([], [])}
    with tempfile.TemporaryDirectory() as tmp, process(SERVER, r"listening on (\S+)") as server:
        upstream = server[1]
        origin = upstream.rsplit("/", 1)[0]
        port = free_port()
        dump = [mitmdump, "--mode", f"reverse:{origin}", "--listen-host", "127.0.0.1", "--listen-port", str(port),
                "--set", "connection_strategy=lazy", "--set", "stream_large_bodies=1", "--set", "flow_detail=0"]
        record = [*TAPES, "record", "-o", os.path.join(tmp, "bench.tape"), "--upstream", upstream,
                  "--listen", "127.0.0.1:0"]
        with process(dump, r"listening at"), process(record, r"recording (\S+)") as recorder:
            urls = {"direct": upstream, "tapes record": recorder[1], "mitmdump": f"http://127.0.0.1:{port}/mcp"}
            for round_number in range(args.rounds):
                for name, url in urls.items():
                    latencies, first = measure(url, args.requests, args.first_events)
                    results[name][0].extend(latencies)
                    results[name][1].extend(first)
                print(f"round {round_number + 1}/{args.rounds} done", file=sys.stderr)

    ms = 1000
    direct_p50, direct_p99 = percentile(results["direct"][0], 0.5), percentile(results["direct"][0], 0.99)
    direct_first = statistics.median(results["direct"][1])
    print(f"{args.requests} sequential tools/call x {args.rounds} rounds (echo over a short SSE stream)")
    print(f"{'path':<14}{'p50 ms':>9}{'p99 ms':>9}{'+p50 ms':>9}{'+p99 ms':>9}{'1st event ms':>14}{'+1st ms':>9}")
    for name, (latencies, first) in results.items():
        p50, p99, first_median = percentile(latencies, 0.5), percentile(latencies, 0.99), statistics.median(first)
        print(f"{name:<14}{p50 * ms:>9.3f}{p99 * ms:>9.3f}{(p50 - direct_p50) * ms:>9.3f}{(p99 - direct_p99) * ms:>9.3f}"
              f"{first_median * ms:>14.3f}{(first_median - direct_first) * ms:>9.3f}")
    recorder_p50, dump_p50 = percentile(results["tapes record"][0], 0.5), percentile(results["mitmdump"][0], 0.5)
    print(f"tapes record / mitmdump p50: {recorder_p50 / dump_p50:.3f}x; "
          f"added p50: {(recorder_p50 - direct_p50) / (dump_p50 - direct_p50):.3f}x mitmdump's")


if __name__ == "__main__":
    main()
