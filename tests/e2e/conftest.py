"""Fixtures for the end-to-end tests: the npm server-everything over stdio, the notes server's recorded session."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.support.fault_flows import FaultRun, record_notes_over_stdio
from tests.support.paths import EVERYTHING_JS


@pytest.fixture(scope="session")
def everything_stdio() -> list[str]:
    """argv of the npm server-everything in stdio mode (installed by .ci/run into tests/peers)."""
    node = shutil.which("node")
    if node is None or not EVERYTHING_JS.exists():
        pytest.fail("server-everything is not installed: run `npm install --prefix tests/peers` (.ci/run does)")
    return [node, str(EVERYTHING_JS), "stdio"]


@pytest.fixture(scope="module")
def notes_recording(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, FaultRun]:
    """The notes server's session recorded through `tapes record` by the official SDK client, and
    what that client saw live (the faults tests replay it)."""
    cassette = tmp_path_factory.mktemp("faults") / "notes.tape"
    return cassette, record_notes_over_stdio(cassette)
