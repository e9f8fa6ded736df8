"""What `tapes record` costs a stdio session.

N request/response round trips, sequential, to two servers: a minimal Python echo server (the
worst case: the server costs nothing, so the extra process hop is all there is to see) and the
real server-everything answering `ping`; then M round trips of 1 MB messages each way to the
echo server (a request whose params carry 1 MB, answered with them). Each server is driven
directly, through a plain relay that records nothing (the recorder's pumps minus the recording,
in Python: the cost of any pass-through process), through that relay appending each chunk to a
file (the least an inline recorder does), through the relay running `tapes record`'s own per-chunk
loop in C (recorder/_relay.c) told to record nothing, and through `tapes record`, in the same run,
rounds alternating so all see the same machine. Prints throughput ratios against direct and against the plain relay, and
the added p50/p99 latency.

    python bench/stdio_overhead.py [--round-trips 20000] [--big-round-trips 300] [--rounds 3] [--one-core]
"""

from __future__ import annotations

import argparse
import io
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EVERYTHING_JS = ROOT / "tests" / "peers" / "node_modules" / "@modelcontextprotocol" / "server-everything" / "dist" / "index.js"

ECHO_SERVER = r"""
import json, sys
read, write, flush = sys.stdin.buffer.readline, sys.stdout.buffer.write, sys.stdout.buffer.flush
for line in iter(read, b""):
    request = json.loads(line)
    if "id" not in request:
        continue
    write(json.dumps({"jsonrpc": "2.0", "id": request["id"], "result": request.get("params", {})}).encode() + b"\n")
    flush()
"""

# What any pass-through process costs: `tapes record`'s forward path minus the recording, in Python.
# The same pipes widened to 1 MiB, the same reads into one reused 1 MiB buffer, the same three pumps
# (client stdin and server stdout in threads, server stderr in the main thread).
RELAY = r"""
import fcntl, os, subprocess, sys, threading
CHUNK = 1 << 20
server = subprocess.Popen(sys.argv[1:], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, bufsize=0)
for fd in (0, 1, server.stdin.fileno(), server.stdout.fileno()):
    try:
        fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, CHUNK)
    except OSError:
        pass
def pump(source, sink, done):
    buffer = bytearray(CHUNK)
    view, buffers = memoryview(buffer), [buffer]
    while size := os.readv(source, buffers):
        written = os.write(sink, view[:size])
        while written < size:
            written += os.write(sink, view[written:size])
    done()
threading.Thread(target=pump, args=(0, server.stdin.fileno(), server.stdin.close), daemon=True).start()
output = threading.Thread(target=pump, args=(server.stdout.fileno(), 1, lambda: None), daemon=True)
output.start()
pump(server.stderr.fileno(), 2, lambda: None)
code = server.wait()
output.join()
sys.exit(code)
"""

# The plain relay plus the least an inline recorder can do: before forwarding a chunk, append it
# with its record head (time, stream, size) to a file with one write(2). What `tapes record`
# costs beyond this is its own; the rest is the price of recording inline at all.
APPENDING_RELAY = RELAY.replace(
    "def pump(source, sink, done):",
    """import struct, time
head, start = struct.Struct(">BBdBBI").pack, time.monotonic()
capture = os.open(os.environ["TAPES_BENCH_CAPTURE"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND, 0o666)
def pump(source, sink, done, stream=0):""",
).replace(
    "        written = os.write(sink, view[:size])",
    """        chunk, record_head = view[:size], head(0x93, 0xCB, time.monotonic() - start, stream, 0xC6, size)
        if size < 4096:  # as the recorder: a small chunk joins its head, a large one is not copied twice
            os.write(capture, record_head + chunk)
        else:
            os.writev(capture, [record_head, chunk])
        written = os.write(sink, chunk)""",
).replace("lambda: None), daemon=True)", "lambda: None, 1), daemon=True)").replace(
    "pump(server.stderr.fileno(), 2, lambda: None)", "pump(server.stderr.fileno(), 2, lambda: None, 2)"
)

# The plain relay with `tapes record`'s own per-chunk loop (recorder/_relay.c), told to record
# nothing: what the recorder costs without the recording, and so what recording itself costs.
C_RELAY = RELAY.replace(
    """    buffer = bytearray(CHUNK)
    view, buffers = memoryview(buffer), [buffer]
    while size := os.readv(source, buffers):
        written = os.write(sink, view[:size])
        while written < size:
            written += os.write(sink, view[written:size])""",
    """    from recorder._relay import relay
    buffer, unrecorded = bytearray(CHUNK), bytearray([1])
    while (handed_back := relay(source, sink, -1, 0, 0.0, buffer, unrecorded))[0]:  # 0: the source ended
        _, size, written, _ = handed_back
        view = memoryview(buffer)[written:size]
        while view:
            view = view[os.write(sink, view):]""",
)

INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 0,
    "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}},
}


def run(argv: list[str], round_trips: int, pad: str) -> tuple[float, list[float]]:
    """Seconds for all round trips, and each one's latency in microseconds."""
    server = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, bufsize=0)
    assert server.stdin is not None and server.stdout is not None
    out, inp = server.stdin.fileno(), io.BufferedReader(server.stdout, 1 << 20)  # a raw pipe reads lines byte by byte

    def round_trip(message: dict[str, object]) -> None:
        os.write(out, json.dumps(message).encode() + b"\n")
        while b'"id"' not in (line := inp.readline()):  # skip notifications
            if not line:
                raise RuntimeError(f"{argv[0]} closed its stdout")

    round_trip(INITIALIZE)  # start-up stays outside the measurement
    os.write(out, b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
    latencies = []
    start = time.perf_counter()
    for number in range(1, round_trips + 1):
        sent = time.perf_counter()
        round_trip({"jsonrpc": "2.0", "id": number, "method": "ping", **({"params": {"pad": pad}} if pad else {})})
        latencies.append((time.perf_counter() - sent) * 1e6)
    elapsed = time.perf_counter() - start
    server.stdin.close()
    server.wait(timeout=30)
    return elapsed, latencies


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--round-trips", type=int, default=20_000)
    parser.add_argument("--big-round-trips", type=int, default=300, help="Round trips of 1 MB messages.")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--one-core", action="store_true",
                        help="Pin every process to one core: the cost in CPU time alone, without cross-core wake-ups.")
    args = parser.parse_args()
    if args.one_core:
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})  # the processes it starts inherit it
    with tempfile.TemporaryDirectory() as scratch:
        echo_py, relay_py = Path(scratch) / "echo.py", Path(scratch) / "relay.py"
        echo_py.write_text(ECHO_SERVER)
        relay_py.write_text(RELAY)
        appending_py, c_relay_py = Path(scratch) / "appending_relay.py", Path(scratch) / "c_relay.py"
        appending_py.write_text(APPENDING_RELAY)
        c_relay_py.write_text(C_RELAY)
        os.environ["TAPES_BENCH_CAPTURE"] = str(Path(scratch) / "appending_relay.capture")
        echo = [sys.executable, str(echo_py)]
        # name: (command, round trips, padding in each request's params)
        servers = {"python echo": (echo, args.round_trips, "")}
        node = shutil.which("node")
        if node and EVERYTHING_JS.exists():
            servers["server-everything"] = ([node, str(EVERYTHING_JS), "stdio"], args.round_trips, "")
        else:
            print("server-everything not installed (npm install --prefix tests/peers): measuring the echo server only")
        cassette = Path(scratch) / "bench.tape"
        ways = {
            "direct": [],
            "plain relay": [sys.executable, str(relay_py)],
            "relay+append": [sys.executable, str(appending_py)],
            "relay in C": [sys.executable, str(c_relay_py)],
            "tapes record": [sys.executable, "-m", "tapes", "record", "-o", str(cassette), "--"],
        }
        if args.big_round_trips:
            servers["echo, 1 MB msgs"] = (echo, args.big_round_trips, "x" * 1_000_000)
        print(f"stdio overhead: {args.round_trips} sequential ping round trips ({args.big_round_trips} with 1 MB "
              f"messages), {args.rounds} rounds, median rate{', on one core' if args.one_core else ''}")
        print(f"{'server':18} {'via':13} {'round trips/s':>13} {'ratio':>6} {'x relay':>7} {'p50 µs':>8} {'p99 µs':>8}")
        for server_name, (server, round_trips, pad) in servers.items():
            results: dict[str, list[tuple[float, list[float]]]] = {way: [] for way in ways}
            for _ in range(args.rounds):
                for way, prefix in ways.items():
                    results[way].append(run([*prefix, *server], round_trips, pad))
            rates = {way: statistics.median(round_trips / elapsed for elapsed, _ in results[way]) for way in ways}
            for way, rate in rates.items():
                latencies = [value for _, run_latencies in results[way] for value in run_latencies]
                print(
                    f"{server_name:18} {way:13} {rate:13.1f} {rate / rates['direct']:6.2f} "
                    f"{rate / rates['plain relay']:7.2f} {percentile(latencies, 0.5):8.1f} {percentile(latencies, 0.99):8.1f}"
                )
        print(f"last cassette: {cassette.stat().st_size / 1e6:.1f} MB" if cassette.exists() else "")


if __name__ == "__main__":
    main()
