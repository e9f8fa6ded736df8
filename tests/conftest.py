"""Shared fixtures: where the real peers are and how to run the `tapes` command."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PEERS = ROOT / "tests" / "peers"
EVERYTHING_JS = PEERS / "node_modules" / "@modelcontextprotocol" / "server-everything" / "dist" / "index.js"
TAPES = [sys.executable, "-m", "tapes"]


@pytest.fixture(scope="session")
def everything_stdio() -> list[str]:
    """argv of the npm server-everything in stdio mode (installed by .ci/run into tests/peers)."""
    node = shutil.which("node")
    if node is None or not EVERYTHING_JS.exists():
        pytest.fail("server-everything is not installed: run `npm install --prefix tests/peers` (.ci/run does)")
    return [node, str(EVERYTHING_JS), "stdio"]

pytest_plugins = ["pytester"]  # tests of our pytest plugin run inner pytest sessions
