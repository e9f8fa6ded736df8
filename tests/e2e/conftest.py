"""Fixtures for the end-to-end tests: the npm server-everything over stdio."""

from __future__ import annotations

import shutil

import pytest

from tests.support.paths import EVERYTHING_JS


@pytest.fixture(scope="session")
def everything_stdio() -> list[str]:
    """argv of the npm server-everything in stdio mode (installed by .ci/run into tests/peers)."""
    node = shutil.which("node")
    if node is None or not EVERYTHING_JS.exists():
        pytest.fail("server-everything is not installed: run `npm install --prefix tests/peers` (.ci/run does)")
    return [node, str(EVERYTHING_JS), "stdio"]
