"""Fixtures for the HTTP end-to-end tests: the real HTTP servers, one per test module, and
`tapes record` as a proxy, killed after the test."""

from __future__ import annotations

import signal
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.support.http_peers import Recorder, start_everything, start_resumable


@pytest.fixture(scope="module")
def everything_http() -> Iterator[str]:
    server, url = start_everything("streamableHttp")
    yield url
    server.stop()


@pytest.fixture(scope="module")
def everything_sse() -> Iterator[str]:
    server, url = start_everything("sse")
    yield url
    server.stop()


@pytest.fixture(scope="module")
def resumable() -> Iterator[str]:
    server, url = start_resumable()
    yield url
    server.stop()


@pytest.fixture
def record(tmp_path: Path) -> Iterator[Callable[..., Recorder]]:
    started: list[Recorder] = []

    def start(upstream: str | None, *options: str, name: str = "session.tape") -> Recorder:
        recorder = Recorder(tmp_path / name, upstream, *options)
        started.append(recorder)
        return recorder

    yield start
    for recorder in started:
        recorder.process.stop(signal.SIGKILL)
