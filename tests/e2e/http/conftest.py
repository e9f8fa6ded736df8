"""Fixtures for the HTTP end-to-end tests: the real HTTP servers, one per test module, and
`tapes record` as a proxy, killed after the test."""

from __future__ import annotations

import signal
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tapes.replay import http_reading
from tests.support.http_peers import Recorder, start_everything, start_resumable

# The in-process replayer tests run twice: with the cassette read before serving (any cassette
# under READ_STEP frames is), and read as it is served, a few frames at a time (as a big one is),
# where every answer must be the one the whole recording gives.
READ_AS_SERVED = {"test_replayer", "test_replayer_rules", "test_replay_control", "test_oauth", "test_hostile_requests",
                  "test_sse_polling", "test_task_polls"}


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if metafunc.module.__name__.rpartition(".")[2] in READ_AS_SERVED:
        metafunc.parametrize("read_step", [http_reading.READ_STEP, 3], ids=["read-first", "read-as-served"], indirect=True)


@pytest.fixture(autouse=True)
def read_step(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """Frames read at a time (see READ_AS_SERVED)."""
    monkeypatch.setattr(http_reading, "READ_STEP", getattr(request, "param", http_reading.READ_STEP))


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
