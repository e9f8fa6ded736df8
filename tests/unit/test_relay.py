"""The stdio recorder's per-chunk loop, in C (recorder/_relay.c) and in Python (for a build without
a C compiler): what each chunk becomes on the capture and the sink, and where the loop hands a
chunk back to `_pump`."""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import msgpack
import pytest

from recorder import stdio

try:
    from recorder._relay import relay as relay_in_c
except ImportError:
    relay_in_c = None

Relay = Callable[..., tuple[int, int, int, int]]
CODE = 1


def test_the_loop_in_c_is_built() -> None:
    assert relay_in_c is not None, "recorder/_relay.c was not built: reinstall (pip install -e .) where gcc or cc is"
    assert stdio._relay is relay_in_c


@pytest.fixture(params=["c", "python"])
def relay(request: pytest.FixtureRequest) -> Relay:
    if request.param == "python":
        return stdio._relay_in_python
    assert relay_in_c is not None, "recorder/_relay.c was not built"
    return relay_in_c


@pytest.fixture
def pipes() -> Iterator[Callable[[], tuple[int, int]]]:
    opened: list[int] = []

    def make() -> tuple[int, int]:
        read_end, write_end = os.pipe()
        opened.extend((read_end, write_end))
        return read_end, write_end

    yield make
    for fd in opened:
        try:
            os.close(fd)
        except OSError:
            pass  # closed by the test


def records(path: Path) -> list[Any]:
    return list(msgpack.Unpacker(open(path, "rb"), raw=False))


def run(relay: Relay, source: int, sink: int, capture: int, failed: int = 0) -> tuple[int, int, int, int]:
    start = time.monotonic()
    return relay(source, sink, capture, CODE, start, bytearray(1 << 16), bytearray([failed]))


def test_each_chunk_is_appended_with_its_time_then_forwarded_until_the_source_ends(
        relay: Relay, pipes: Callable[[], tuple[int, int]], tmp_path: Path) -> None:
    source, feed = pipes()
    drain, sink = pipes()
    capture = os.open(tmp_path / "capture", os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    os.write(feed, b"abc")
    os.close(feed)
    before = time.monotonic()
    start = before - 5.0
    assert relay(source, sink, capture, CODE, start, bytearray(4096), bytearray(1)) == (stdio._READ, 0, 0, 0)
    after = time.monotonic()
    assert os.read(drain, 100) == b"abc"
    [(t, code, payload)] = records(tmp_path / "capture")
    assert (code, payload) == (CODE, b"abc")
    assert before - start <= t <= after - start  # time.monotonic()'s clock


def test_a_chunk_is_not_appended_once_the_capture_failed_nor_forwarded_without_a_sink(
        relay: Relay, pipes: Callable[[], tuple[int, int]], tmp_path: Path) -> None:
    capture = os.open(tmp_path / "capture", os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    source, feed = pipes()
    drain, sink = pipes()
    os.write(feed, b"forwarded only")
    os.close(feed)
    assert run(relay, source, sink, capture, failed=1) == (stdio._READ, 0, 0, 0)
    assert os.read(drain, 100) == b"forwarded only"
    source, feed = pipes()
    os.write(feed, b"appended only")
    os.close(feed)
    assert run(relay, source, -1, capture) == (stdio._READ, 0, 0, 0)
    assert [payload for _, _, payload in records(tmp_path / "capture")] == [b"appended only"]


def test_a_sink_whose_reader_is_gone_hands_back_the_chunk_it_appended(
        relay: Relay, pipes: Callable[[], tuple[int, int]], tmp_path: Path) -> None:
    source, feed = pipes()
    drain, sink = pipes()
    os.close(drain)
    capture = os.open(tmp_path / "capture", os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    os.write(feed, b"late")
    assert run(relay, source, sink, capture) == (stdio._FORWARD, 4, 0, errno.EPIPE)
    assert [payload for _, _, payload in records(tmp_path / "capture")] == [b"late"]  # appended first


def test_a_sink_that_takes_part_of_a_chunk_hands_back_the_rest(
        relay: Relay, pipes: Callable[[], tuple[int, int]], tmp_path: Path) -> None:
    source, feed = pipes()
    drain, sink = pipes()
    fcntl.fcntl(sink, fcntl.F_SETPIPE_SZ, 1 << 16)
    os.set_blocking(sink, False)
    capture = os.open(tmp_path / "capture", os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    os.write(feed, b"x" * 10_000)  # above PIPE_BUF: a non-blocking write of it may be partial
    os.write(sink, b"y" * 60_000)
    stage, size, written, error = run(relay, source, sink, capture)
    assert (stage, size, error) == (stdio._FORWARD, 10_000, 0)
    assert 0 < written < 10_000
    os.set_blocking(drain, False)
    received = bytearray()
    with contextlib.suppress(BlockingIOError):
        while chunk := os.read(drain, 1 << 16):
            received += chunk
    assert received == b"y" * 60_000 + b"x" * written


def test_a_capture_that_cannot_be_written_hands_back_the_chunk_unforwarded(
        relay: Relay, pipes: Callable[[], tuple[int, int]], tmp_path: Path) -> None:
    source, feed = pipes()
    drain, sink = pipes()
    (tmp_path / "capture").touch()
    capture = os.open(tmp_path / "capture", os.O_RDONLY)
    os.write(feed, b"kept")
    assert run(relay, source, sink, capture) == (stdio._APPEND, 4, 0, errno.EBADF)
    os.set_blocking(drain, False)
    with pytest.raises(BlockingIOError):
        os.read(drain, 100)


def test_an_empty_non_blocking_source_hands_back_its_eagain(relay: Relay, pipes: Callable[[], tuple[int, int]],
                                                           tmp_path: Path) -> None:
    source, _ = pipes()
    os.set_blocking(source, False)
    drain, sink = pipes()
    capture = os.open(tmp_path / "capture", os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    assert run(relay, source, sink, capture) == (stdio._READ, 0, 0, errno.EAGAIN)
