"""A big cassette, end to end: how long until it is usable, against msgpack alone.

    python bench/big_cassette.py [--frames 1000000] [--dir DIR] [--skip-view]

Writes N frames of stdio traffic (the mix of bench/cassette_io.py) as a v2 cassette, then, each
in its own process so each peak RSS is its own:
- decode floor: msgpack alone iterating over the file (cyclic GC off): no loader can beat it;
- v1 decode floor: the same, over the same frames in the v1 layout (maps), the floor the
  targets were first set against;
- load: `tapes.cassette.store.load`;
- replay, first answer: `tapes replay FILE` started, sent the first recorded request, until its
  answer is read (process start, imports and indexing included);
- replay, a miss: the same, sent a request the cassette does not have, until its error is read:
  the replay reads the whole cassette first (what the whole index costs, and its memory);
- view: `tapes view FILE -o PAGE` until it exits (the page's size beside it);
- page: that page opened in headless Chromium until its script has drawn it (its memory is the
  browser's JS heap), then how long a filter by a word of the frames' JSON takes, and whether
  the last row shows once scrolled to the end and its details open on a click (skipped when
  Chromium is not installed);
- show: `tapes show FILE` until it exits (and when its first frame's row came).
Then an HTTP cassette of about as many frames (the committed cassettes/everything-http-2025-11-25.tape's
session recorded again and again, each under a session id of its own), each phase likewise:
- http decode floor: msgpack alone over that file;
- http replay, first answer: `tapes replay FILE --http` started, until the answer to the first
  recorded initialize, POSTed once it announces its URL, is read.
Prints seconds, the ratio to the decode floor (of its own file), and peak RSS against the file size.
"""

from __future__ import annotations

import argparse
import gc
import http.client
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import urlsplit

import msgpack

from cassette_io import make_frames
from tapes.cassette.frames import Kind
from tapes.cassette.store import CassetteWriter, Header, frame_record, load

sys.path.insert(0, str(Path(__file__).parent.parent))
from tests.support.browser import CHROMIUM, Browser  # noqa: E402 - the repository's root is on the path only now
from tests.support.http_cassettes import REPEATED, write_repeated_session

TAPES = [sys.executable, "-m", "tapes"]
FILTER = """(() => {{ const box = document.querySelector('input.filter'); box.value = {query};
  const start = performance.now(); box.dispatchEvent(new Event('input'));
  return new Promise((done) => setTimeout(() => done(performance.now() - start - 80), 80)); }})()"""


def _peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _child_peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024


def _phase(phase: str, path: Path) -> dict[str, float]:
    """One measurement, in this (fresh) process."""
    start = time.perf_counter()
    if phase.endswith("decode floor"):
        gc.disable()
        with open(path.with_suffix(".v1") if phase == "v1 decode floor" else path, "rb") as file:
            count = sum(1 for _ in msgpack.Unpacker(file, max_buffer_size=0))
        assert count > 1
    elif phase == "load":
        assert not load(path).warnings
    elif phase == "http replay, first answer":
        return _http_first_answer(path, start)
    elif phase.startswith("replay"):
        first = make_frames(1)[0].message  # the first recorded request (the frames are generated the same each time)
        if phase == "replay, a miss":
            first = {**first, "params": {**first["params"], "name": "not_recorded"}}
        replay = subprocess.Popen(
            [*TAPES, "replay", str(path)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
        )
        assert replay.stdin is not None and replay.stdout is not None
        replay.stdin.write(json.dumps(first).encode() + b"\n")
        replay.stdin.flush()
        while line := replay.stdout.readline():
            answer = json.loads(line)
            if answer.get("id") == first["id"] and "method" not in answer:
                assert ("error" in answer) == (phase == "replay, a miss")
                break
        seconds = time.perf_counter() - start
        status = Path(f"/proc/{replay.pid}/status").read_text()
        peak = int(next(row for row in status.splitlines() if row.startswith("VmHWM")).split()[1]) / 1024
        replay.kill()
        replay.wait()
        return {"seconds": seconds, "rss_peak": peak}
    elif phase == "view":
        subprocess.run([*TAPES, "view", str(path), "-o", str(path.with_suffix(".html"))], check=True,
                       stderr=subprocess.DEVNULL)
        return {"seconds": time.perf_counter() - start, "rss_peak": _child_peak_rss_mb(),
                "note": f"page {path.with_suffix('.html').stat().st_size / 1e6:.1f} MB"}
    elif phase == "page":
        return _page(path.with_suffix(".html"))
    elif phase == "show":
        show = subprocess.Popen([*TAPES, "show", str(path), "--width", "120"], stdout=subprocess.PIPE,
                                stderr=subprocess.DEVNULL)
        assert show.stdout is not None
        while b"+0.000s" not in show.stdout.readline():  # the first frame's row
            pass
        first_row = time.perf_counter() - start
        while show.stdout.read(1 << 20):
            pass
        assert show.wait() == 0
        return {"seconds": time.perf_counter() - start, "rss_peak": _child_peak_rss_mb(),
                "note": f"first row after {first_row:.2f} s"}
    return {"seconds": time.perf_counter() - start, "rss_peak": _peak_rss_mb()}


def _http_first_answer(path: Path, start: float) -> dict[str, float]:
    """`tapes replay --http`: from its start until the first recorded initialize is answered."""
    initialize = next(f.message for f in load(REPEATED).frames
                      if f.kind is Kind.MESSAGE and f.message.get("method") == "initialize")
    start = time.perf_counter()  # (the source cassette read above is no part of it)
    replay = subprocess.Popen([*TAPES, "replay", str(path), "--http", "--listen", "127.0.0.1:0"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    assert replay.stderr is not None
    while not (line := replay.stderr.readline()).startswith("tapes: replaying at "):
        assert line, "the replay ended before it served"
    url = urlsplit(line.split(" at ", 1)[1].strip())
    connection = http.client.HTTPConnection(url.hostname, url.port, timeout=600)
    connection.request("POST", url.path, json.dumps(initialize),
                       {"content-type": "application/json", "accept": "application/json, text/event-stream"})
    answer = connection.getresponse().read()
    seconds = time.perf_counter() - start
    assert b'"result"' in answer, answer[:200]
    status = Path(f"/proc/{replay.pid}/status").read_text()
    peak = int(next(row for row in status.splitlines() if row.startswith("VmHWM")).split()[1]) / 1024
    replay.kill()
    replay.wait()
    return {"seconds": seconds, "rss_peak": peak}


def _page(page: Path) -> dict[str, float]:
    """Open the page in headless Chromium; time its load and a filter, check a scroll and a click."""
    with tempfile.TemporaryDirectory() as profile:
        browser = Browser(Path(profile), timeout=600)
        try:
            start = time.perf_counter()
            browser.open(page)
            seconds = time.perf_counter() - start
            assert browser.evaluate("document.querySelector('.count').textContent").endswith(" frames")
            heap = browser.evaluate("performance.memory.usedJSHeapSize") / 1e6
            # the filter's debounce (80 ms) is waited out inside and taken off
            first = browser.evaluate(FILTER.format(query=json.dumps("weather"))) / 1000
            again = browser.evaluate(FILTER.format(query=json.dumps("city"))) / 1000
            browser.evaluate(FILTER.format(query='""'))
            browser.evaluate("document.querySelector('.scroll').scrollTop = 1e9")
            browser.evaluate("new Promise((done) => requestAnimationFrame(() => requestAnimationFrame(done)))")
            browser.evaluate("[...document.querySelectorAll('.row')].at(-1).click()")
            opened = browser.evaluate("document.querySelector('aside.details h2').textContent")
            assert opened.startswith("frame "), opened
        finally:
            browser.close()
    return {"seconds": seconds, "rss_peak": heap,
            "note": f"JS heap; filter by a word {first:.2f} s, by another {again:.2f} s; scrolled to the end, clicked"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frames", type=int, default=1_000_000)
    parser.add_argument("--dir", type=Path, default=None, help="Where to put the cassette (default: a temp dir).")
    parser.add_argument("--skip-view", action="store_true", help="Leave out `tapes view` and `tapes show`.")
    parser.add_argument("--skip-http", action="store_true", help="Leave out the HTTP cassette.")
    parser.add_argument("--phase", help=argparse.SUPPRESS)
    parser.add_argument("--path", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.phase:
        print(json.dumps(_phase(args.phase, args.path)))
        return

    with tempfile.TemporaryDirectory(dir=args.dir) as scratch:
        path = Path(scratch) / "big.tape"
        header = Header(transport="stdio", server={"command": ["python", "weather_server.py"]})
        frames = make_frames(args.frames)
        with CassetteWriter(path, header) as writer:
            for i in range(0, len(frames), 10_000):
                writer.write(frames[i : i + 10_000])
        pack = msgpack.Packer().pack
        with open(path.with_suffix(".v1"), "wb") as v1:
            v1.write(pack(header.record(1)))
            for i in range(0, len(frames), 10_000):
                v1.write(b"".join(pack(frame_record(frame)) for frame in frames[i : i + 10_000]))
        del frames
        size_mb = path.stat().st_size / 1e6
        phases = ["decode floor", "v1 decode floor", "load", "replay, first answer", "replay, a miss"]
        if not args.skip_view:
            phases += ["view", "page"] if os.access(CHROMIUM, os.X_OK) else ["view"]
            phases += ["show"]
        rows = {phase: _run_phase(phase, path) for phase in phases}
        if not args.skip_http:
            http_path = Path(scratch) / "big-http.tape"
            http_count = write_repeated_session(http_path, args.frames)
            http_mb = http_path.stat().st_size / 1e6
            http_rows = {phase: _run_phase(phase, http_path) for phase in ("http decode floor", "http replay, first answer")}

    _print(f"{args.frames:,} frames, cassette {size_mb:.1f} MB", rows, size_mb, rows["decode floor"]["seconds"],
           rows["v1 decode floor"]["seconds"])
    if not args.skip_http:
        print()
        _print(f"{http_count:,} frames over HTTP, cassette {http_mb:.1f} MB", http_rows, http_mb,
               http_rows["http decode floor"]["seconds"])


def _run_phase(phase: str, path: Path) -> dict[str, float]:
    """One phase, in a fresh process of its own."""
    out = subprocess.run(
        [sys.executable, __file__, "--phase", phase, "--path", str(path)],
        check=True, stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": str(Path(__file__).parent)},
    ).stdout
    return json.loads(out.strip().splitlines()[-1])


def _print(title: str, rows: dict[str, dict[str, float]], size_mb: float, floor: float, v1_floor: float | None = None) -> None:
    print(title)
    print(f"{'phase':<26} {'seconds':>8} {'x floor':>8}" + (f" {'x v1 floor':>10}" if v1_floor else "")
          + f" {'RSS peak':>9} {'x file':>7}")
    for phase, row in rows.items():
        print(f"{phase:<26} {row['seconds']:>8.2f} {row['seconds'] / floor:>8.2f}"
              + (f" {row['seconds'] / v1_floor:>10.2f}" if v1_floor else "")
              + f" {row['rss_peak']:>7.0f}MB {row['rss_peak'] / size_mb:>7.2f}" + (f"   {row['note']}" if "note" in row else ""))


if __name__ == "__main__":
    main()
