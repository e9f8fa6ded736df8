"""How fast `tapes replay --http` serves a session compared with the real server it was recorded from.

One Streamable HTTP session — initialize, notifications/initialized, then N sequential
tools/call of an `echo` tool — is recorded through `tapes record --upstream` from an MCPServer of
the official Python SDK (uvicorn, JSON responses off: SSE streams, as the SDK serves by default).
Then the same client (sequential, one keep-alive connection) drives the same session against the
real server and against `tapes replay --http` of the recording, rounds alternating, in one run.
Prints request rates, their ratio and p50/p99 latency of the tools/call requests. The client is
the standard library's http.client by default, lean enough that the rate is mostly the server's;
`--client httpx` uses the SDK client's HTTP stack, whose own cost (about 0.8 ms per request here)
narrows every ratio.

With --floor, a third server joins the rounds: a starlette app on the same uvicorn setup that
answers each request at once with a one-event SSE stream and the headers the replayer sends, about
the least any starlette server does for this session: its rate is about the most the replayer,
which must stay a starlette app on uvicorn, can reach with this client.

    python bench/replay_throughput.py [--calls 1000] [--rounds 3] [--floor] [--client stdlib|httpx]
"""

from __future__ import annotations

import argparse
import json
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from http.client import HTTPConnection
from pathlib import Path
from urllib.parse import urlsplit

import httpx

ROOT = Path(__file__).resolve().parent.parent
TAPES = [sys.executable, "-m", "tapes"]

SERVE = r"""
import socket, sys, uvicorn
sock = socket.socket(); sock.bind(("127.0.0.1", 0)); sock.listen(128)
sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # as the replayer does: no delayed-ACK stalls
print(f"listening on http://127.0.0.1:{sock.getsockname()[1]}/mcp", file=sys.stderr, flush=True)
uvicorn.Server(uvicorn.Config(app, log_level="warning")).run(sockets=[sock])
"""

SDK_SERVER = r"""
from mcp.server.mcpserver import MCPServer
server = MCPServer(name="bench", version="1.0.0", log_level="WARNING")

@server.tool(description="Answer text at once.")
def echo(text: str) -> str:
    return text

app = server.streamable_http_app()
""" + SERVE

FLOOR_SERVER = r"""
import json
from starlette.applications import Starlette
from starlette.responses import Response
from starlette.routing import Route

HEADERS = {"cache-control": "no-cache, no-transform", "content-type": "text/event-stream",
           "mcp-session-id": "floor", "x-accel-buffering": "no"}

async def answer(request):
    if request.method != "POST":
        return Response()
    message = json.loads(await request.body())
    if "id" not in message:
        return Response(status_code=202)
    data = json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": {}}, separators=(",", ":"))
    return Response(f"event: message\ndata: {data}\n\n", headers=HEADERS)

app = Starlette(routes=[Route("/mcp", answer, methods=["POST", "DELETE"])])
""" + SERVE


def start(argv: list[str], pattern: str) -> tuple[subprocess.Popen[bytes], str]:
    """A server process and the URL it prints on stderr."""
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    assert proc.stderr is not None
    for line in proc.stderr:
        if match := re.search(pattern, line.decode()):
            return proc, match[1]
    raise SystemExit(f"{argv[:4]} exited ({proc.wait()}) without printing its URL")


def stop(proc: subprocess.Popen[bytes]) -> None:
    proc.send_signal(signal.SIGINT)
    try:
        proc.wait(30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


class HttpxClient:
    """httpx, the HTTP stack of the SDK's own client: about 0.8 ms of its own CPU per request here."""

    def __init__(self, url: str) -> None:
        self._http, self._url = httpx.Client(timeout=30), url

    def request(self, method: str, headers: dict[str, str], body: bytes | None = None) -> tuple[int, dict[str, str], str]:
        answer = self._http.request(method, self._url, headers=headers, content=body)
        return answer.status_code, dict(answer.headers), answer.text

    def close(self) -> None:
        self._http.close()


class StdlibClient:
    """http.client of the standard library: a lean keep-alive client, so that the rate measured is
    mostly the server's (a benchmark tool such as wrk would do the same)."""

    def __init__(self, url: str) -> None:
        parts = urlsplit(url)
        self._connection, self._path = HTTPConnection(parts.hostname or "127.0.0.1", parts.port, timeout=30), parts.path

    def request(self, method: str, headers: dict[str, str], body: bytes | None = None) -> tuple[int, dict[str, str], str]:
        self._connection.request(method, self._path, body=body, headers=headers)
        answer = self._connection.getresponse()
        text = answer.read().decode()
        return answer.status, {name.lower(): value for name, value in answer.getheaders()}, text

    def close(self) -> None:
        self._connection.close()


CLIENTS = {"stdlib": StdlibClient, "httpx": HttpxClient}


def session(url: str, calls: int, client_name: str) -> tuple[float, list[float]]:
    """Drive one session; returns the wall time of the tools/call requests and each one's latency."""
    headers = {"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2025-11-25",
               "Content-Type": "application/json"}
    client = CLIENTS[client_name](url)
    try:
        status, answer_headers, _ = client.request("POST", headers, json.dumps({
            "jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
                "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}}}).encode())
        assert status == 200, status
        headers["Mcp-Session-Id"] = answer_headers["mcp-session-id"]
        status, _, _ = client.request("POST", headers, b'{"jsonrpc": "2.0", "method": "notifications/initialized"}')
        assert status == 202, status
        latencies = []
        started = time.perf_counter()
        for number in range(1, calls + 1):
            sent = time.perf_counter()
            status, _, text = client.request("POST", headers, json.dumps({
                "jsonrpc": "2.0", "id": number, "method": "tools/call",
                "params": {"name": "echo", "arguments": {"text": f"call {number}"}}}).encode())
            assert status == 200 and f'"id":{number}' in text.replace(" ", ""), text
            latencies.append(time.perf_counter() - sent)
        elapsed = time.perf_counter() - started
        client.request("DELETE", headers)
    finally:
        client.close()
    return elapsed, latencies


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--floor", action="store_true", help="also serve the session from a canned-answer starlette app")
    parser.add_argument("--client", choices=CLIENTS, default="stdlib", help="the client both servers get (default: stdlib)")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        cassette = Path(tmp) / "bench.tape"
        real, real_url = start([sys.executable, "-c", SDK_SERVER], r"listening on (\S+)")
        try:
            recorder, recorder_url = start(
                [*TAPES, "record", "-o", str(cassette), "--upstream", real_url, "--listen", "127.0.0.1:0"],
                r"tapes: recording (http://\S+)")
            session(recorder_url, args.calls, args.client)
            stop(recorder)
            results: dict[str, list[tuple[float, list[float]]]] = {"real SDK server": [], "tapes replay --http": []}
            if args.floor:
                results["starlette floor"] = []
            for _ in range(args.rounds):
                results["real SDK server"].append(session(real_url, args.calls, args.client))
                # a fresh replayer per round: a cassette's session is served once
                replayer, replay_url = start(
                    [*TAPES, "replay", str(cassette), "--http", "--listen", "127.0.0.1:0"], r"tapes: replaying at (\S+)")
                results["tapes replay --http"].append(session(replay_url, args.calls, args.client))
                stop(replayer)
                if args.floor:
                    floor, floor_url = start([sys.executable, "-c", FLOOR_SERVER], r"listening on (\S+)")
                    results["starlette floor"].append(session(floor_url, args.calls, args.client))
                    stop(floor)
        finally:
            stop(real)

    print(f"{args.calls} sequential tools/call per session, {args.rounds} rounds, best round shown, {args.client} client")
    rates = {}
    for name, rounds in results.items():
        elapsed, latencies = min(rounds, key=lambda r: r[0])
        rates[name] = args.calls / elapsed
        cuts = statistics.quantiles(latencies, n=100)
        print(f"  {name:22} {rates[name]:8.0f} req/s   p50 {cuts[49] * 1000:6.2f} ms   p99 {cuts[98] * 1000:6.2f} ms")
    print(f"  replay / real request rate: {rates['tapes replay --http'] / rates['real SDK server']:.1f}x")
    if args.floor:
        print(f"  floor / real request rate: {rates['starlette floor'] / rates['real SDK server']:.1f}x")


if __name__ == "__main__":
    main()
