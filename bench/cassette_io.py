"""Cassette I/O speed: write N frames with CassetteWriter, then `load` them back.

    python bench/cassette_io.py [--frames 1000000] [--dir DIR] [--rounds 5]

Each phase runs in its own subprocess so its peak RSS (ru_maxrss) is its own. The frames are
small, realistic MCP stdio traffic of mixed kinds. "write/frame" calls `write()` once per frame
(a flush each, as a recorder does under a slow trickle of traffic); "write/batch" hands over
1000 frames per call (a recorder's writer catching up after a burst). The "floor" rows are
msgpack alone on the same frames (packing the prebuilt v1 maps; iterating an Unpacker over a
file of v1 maps, cyclic GC off): what the v1 layout cost before a single frame was built, so
"x floor" says what the cassette code costs against it, whatever the machine's speed.
"load/v2 floor" is msgpack alone on the v2 file that `load` reads (positional arrays). The three
loads run --rounds times each, in turn, and each row shows its median run: one run of a load
swings by 10-20 % on a shared machine.
"""

from __future__ import annotations

import argparse
import gc
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import msgpack

from tapes.cassette.store import CassetteWriter, Header, frame_record, load
from tapes.cassette.frames import STDIO, Direction, Frame, Kind

C2S, S2C = Direction.CLIENT_TO_SERVER, Direction.SERVER_TO_CLIENT
BATCH = 1000


def _frames_for(seq: int, t: float) -> list[Frame]:
    """Eight frames of stdio traffic: a tool call with progress, a stderr line and its result,
    a ping answered by an error, a non-canonical (verbatim) notification, a non-JSON line."""
    n = seq // 8
    return [
        Frame(seq, t, C2S, STDIO, Kind.MESSAGE, {
            "jsonrpc": "2.0", "id": n, "method": "tools/call",
            "params": {"name": "get_weather", "arguments": {"city": f"City {n}", "units": "metric"},
                       "_meta": {"progressToken": n}},
        }),
        Frame(seq + 1, t + 0.001, S2C, STDIO, Kind.MESSAGE, {
            "jsonrpc": "2.0", "method": "notifications/progress",
            "params": {"progressToken": n, "progress": 0.5, "total": 1.0, "message": "fetching"},
        }),
        Frame(seq + 2, t + 0.002, S2C, STDIO, Kind.STDERR, data=f"INFO fetching weather for City {n}".encode()),
        Frame(seq + 3, t + 0.003, S2C, STDIO, Kind.MESSAGE, {
            "jsonrpc": "2.0", "id": n,
            "result": {"content": [{"type": "text", "text": f"City {n}: 21.5 C, light rain, wind 12 km/h"}],
                       "isError": False},
        }),
        Frame(seq + 4, t + 0.004, C2S, STDIO, Kind.MESSAGE, {"jsonrpc": "2.0", "id": f"p{n}", "method": "ping"}),
        Frame(seq + 5, t + 0.005, S2C, STDIO, Kind.MESSAGE,
              {"jsonrpc": "2.0", "id": f"p{n}", "error": {"code": -32601, "message": "Method not found"}}),
        Frame(seq + 6, t + 0.006, C2S, STDIO, Kind.MESSAGE,
              {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": n - 1}},
              data=b'{"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": %d}}' % (n - 1)),
        Frame(seq + 7, t + 0.007, S2C, STDIO, Kind.RAW, data=b"Server ready on stdio (pid 4242)"),
    ]


def make_frames(count: int) -> list[Frame]:
    frames: list[Frame] = []
    while len(frames) < count:
        frames.extend(_frames_for(len(frames) + 1, len(frames) * 0.001))
    return frames[:count]


def _peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # kB on Linux


def _phase(phase: str, path: Path, count: int) -> dict[str, Any]:
    header = Header(transport="stdio", server={"command": ["python", "weather_server.py"]})
    if phase.startswith("load"):
        before = _peak_rss_mb()
        start = time.perf_counter()
        if phase == "load":
            cassette = load(path)
            assert len(cassette.frames) == count and not cassette.warnings
        else:
            gc.disable()
            with open(path if phase == "load/v2 floor" else path.with_suffix(".v1"), "rb") as file:
                records = list(msgpack.Unpacker(file, max_buffer_size=0))
            assert len(records) == count + 1
    else:
        frames = make_frames(count)
        records = [frame_record(frame) for frame in frames]
        before = _peak_rss_mb()
        start = time.perf_counter()
        if phase == "write/floor":
            pack = msgpack.Packer().pack
            packed = [pack(record) for record in records]
            seconds = time.perf_counter() - start
            # the same frames in the v1 layout, for the load floor
            path.with_suffix(".v1").write_bytes(pack(header.record(1)) + b"".join(packed))
            return {"seconds": seconds, "rss_before": before, "rss_peak": _peak_rss_mb()}
        else:
            with CassetteWriter(path, header) as writer:
                if phase == "write/frame":
                    for frame in frames:
                        writer.write((frame,))
                else:
                    for i in range(0, count, BATCH):
                        writer.write(frames[i : i + BATCH])
    seconds = time.perf_counter() - start
    return {"seconds": seconds, "rss_before": before, "rss_peak": _peak_rss_mb()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frames", type=int, default=1_000_000)
    parser.add_argument("--dir", type=Path, default=None, help="Where to put the cassette (default: a temp dir).")
    parser.add_argument("--rounds", type=int, default=5, help="Runs of each load phase; the median is shown.")
    parser.add_argument("--phase", help=argparse.SUPPRESS)
    parser.add_argument("--path", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.phase:  # child: run one phase, report as JSON
        print(json.dumps(_phase(args.phase, args.path, args.frames)))
        return

    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        path = Path(tmp) / "bench.tape"
        runs: dict[str, list[dict[str, Any]]] = {}
        writes, loads = ("write/floor", "write/frame", "write/batch"), ("load/floor", "load/v2 floor", "load")
        # the loads alternate, round after round: a machine's drift reaches each of them alike
        for phase in (*writes, *loads * args.rounds):
            out = subprocess.run(
                [sys.executable, __file__, "--phase", phase, "--path", str(path), "--frames", str(args.frames)],
                check=True, capture_output=True, text=True,
            ).stdout
            runs.setdefault(phase, []).append(json.loads(out))
        rows = {phase: sorted(results, key=lambda r: r["seconds"])[len(results) // 2] for phase, results in runs.items()}
        size_mb, v1_mb = path.stat().st_size / 1e6, path.with_suffix(".v1").stat().st_size / 1e6

    print(f"{args.frames:,} frames, cassette {size_mb:.1f} MB ({size_mb * 1e6 / args.frames:.0f} B/frame; "
          f"{v1_mb:.1f} MB as v1 maps); loads: the median of {args.rounds} alternating runs")
    columns = ("seconds", "x floor", "frames/s", "µs/frame", "RSS before", "RSS peak")
    print(f"{'phase':<13}", *(f"{name:>{width}}" for name, width in zip(columns, (8, 8, 11, 9, 11, 9))))
    for phase, r in rows.items():
        rate = args.frames / r["seconds"]
        floor = rows[phase.split("/")[0] + "/floor"]["seconds"]
        print(
            f"{phase:<13} {r['seconds']:>8.2f} {r['seconds'] / floor:>8.2f} {rate:>11,.0f} {1e6 / rate:>9.2f}"
            f" {r['rss_before']:>9.0f}MB {r['rss_peak']:>7.0f}MB"
        )


if __name__ == "__main__":
    main()
