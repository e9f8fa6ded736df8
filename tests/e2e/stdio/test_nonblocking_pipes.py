"""A client may hand `tapes replay` pipes in non-blocking mode (the mode belongs to the pipe, which
the client shares with it): no input yet is not the end of the input, and a stdout whose reader is
behind is waited for, not given up. The replay took the first for the client's end and stopped,
and dropped all its output after the second."""

from __future__ import annotations

import fcntl
import json
import os
import subprocess

import pytest

from tapes.cassette.frames import Kind
from tapes.cassette.store import load

from tests.support.paths import CASSETTES, TAPES

CASSETTE = CASSETTES / "everything-stdio-2025-11-25.tape"
TIMEOUT = 60


def _client_lines() -> list[bytes]:
    return [frame.payload + b"\n" for frame in load(CASSETTE).frames if frame.from_client and frame.kind is Kind.MESSAGE]


def _nonblocking(fd: int) -> None:
    fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) | os.O_NONBLOCK)


def test_a_nonblocking_stdin_without_input_yet_is_waited_on() -> None:
    read, write = os.pipe()
    _nonblocking(read)
    replay = subprocess.Popen([*TAPES, "replay", str(CASSETTE)], stdin=read, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    os.close(read)
    assert replay.stdout is not None
    discover, initialize = _client_lines()[:2]
    try:
        os.write(write, discover)
        assert json.loads(replay.stdout.readline())["id"] == 1
        # nothing tells when it reads the empty stdin: it is given the time (it took that for the end at once)
        with pytest.raises(subprocess.TimeoutExpired):
            replay.wait(0.5)
        os.write(write, initialize)
        assert json.loads(replay.stdout.readline())["id"] == 2
    finally:
        os.close(write)
    _, said = replay.communicate(timeout=TIMEOUT)
    assert replay.returncode == 0 and b"Traceback" not in said


def test_a_nonblocking_stdout_whose_reader_is_behind_loses_nothing() -> None:
    read, write = os.pipe()
    _nonblocking(write)
    fcntl.fcntl(write, fcntl.F_SETPIPE_SZ, 4096)  # a page: half of the tools/list answer fills it
    replay = subprocess.Popen([*TAPES, "replay", str(CASSETTE)], stdin=subprocess.PIPE, stdout=write, stderr=subprocess.PIPE)
    os.close(write)
    assert replay.stdin is not None and replay.stderr is not None
    replay.stdin.write(b"".join(_client_lines()[:4]))  # server/discover, initialize, initialized, tools/list
    replay.stdin.close()
    received = bytearray()
    while byte := os.read(read, 1):  # a byte at a time: the page is full for a while after each write
        received += byte
    os.close(read)
    answers = [json.loads(line) for line in received.splitlines()]
    said = replay.stderr.read()
    assert replay.wait(TIMEOUT) == 0 and b"Traceback" not in said
    assert [answer.get("id") for answer in answers] == [1, 2, None, None, None, 3]  # 3 tools/list_changed before it
    assert len(answers[-1]["result"]["tools"]) > 10
