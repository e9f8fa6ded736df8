"""What a miss costs the replay engine, against a hit, on a large recording (issue 13: a miss
used to search every recorded request and diff each in depth: ~3 s with 200 000 recorded
requests, 2.5 s for a 2.5 MB request, all of it event-loop time in the HTTP replayer).

The recording: N tools/call requests with distinct arguments, each answered, and one 2.5 MB
request. Timed in one run: a request that matches (the baseline: parsing and matching, which any
request pays), a small request that matches nothing, and a 2.5 MB request that matches nothing
against the same 2.5 MB request when it matches.

    python bench/nearest_miss.py [--requests 200000] [--repeat 20]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable

from tapes.cassette.frames import Frame
from tapes.cassette.stdio_framer import StdioFramer, Stream
from tapes.replay.engine import ReplayEngine, Repeats

BLOB = "x" * (2_500_000)


def recording(count: int) -> list[Frame]:
    framer = StdioFramer()
    frames: list[Frame] = []
    for n in range(count + 1):
        arguments = {"n": n} if n < count else {"n": n, "blob": BLOB}
        request = {"jsonrpc": "2.0", "id": n, "method": "tools/call", "params": {"name": "echo", "arguments": arguments}}
        frames += framer.data(n, Stream.CLIENT_STDIN, json.dumps(request).encode() + b"\n")
        frames += framer.data(n, Stream.SERVER_STDOUT, json.dumps({"jsonrpc": "2.0", "id": n, "result": {}}).encode() + b"\n")
    return frames


def call(live_id: int, arguments: dict[str, object]) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": live_id, "method": "tools/call",
                       "params": {"name": "echo", "arguments": arguments}}).encode()


def timed(action: Callable[[], object], repeat: int) -> float:
    """The median of `repeat` runs, in milliseconds."""
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        action()
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=200_000)
    parser.add_argument("--repeat", type=int, default=20)
    options = parser.parse_args()
    print(f"building the engine on {options.requests} recorded requests ...", flush=True)
    engine = ReplayEngine(recording(options.requests))
    hits = iter(range(options.requests))
    hit = timed(lambda: engine.receive(call(0, {"n": next(hits)})), options.repeat)
    small_miss = timed(lambda: engine.receive(call(0, {"n": "nope"})), options.repeat)
    large = call(0, {"n": -1, "blob": BLOB})
    large_miss = timed(lambda: engine.receive(large), options.repeat)
    answering = ReplayEngine(recording(10), repeats=Repeats.ALLOW)  # the 2.5 MB request answered again and again
    large_call = call(0, {"n": 10, "blob": BLOB})
    large_hit = timed(lambda: answering.receive(large_call), options.repeat)
    print(f"hit (baseline)       {hit:8.2f} ms")
    print(f"small miss           {small_miss:8.2f} ms   {small_miss / hit:6.1f}x the hit")
    print(f"2.5 MB hit           {large_hit:8.2f} ms   (reading and matching it: any 2.5 MB request pays that)")
    print(f"2.5 MB miss          {large_miss:8.2f} ms   {large_miss / large_hit:6.2f}x the 2.5 MB hit")


if __name__ == "__main__":
    main()
