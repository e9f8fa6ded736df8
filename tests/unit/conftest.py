"""The unit tests are sans-IO: one that starts a process or opens a socket fails at once, here,
instead of slowing the quick run down."""

from __future__ import annotations

import socket
import subprocess
from typing import Any

import pytest


@pytest.fixture(autouse=True)
def sans_io(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("a unit test started a process or opened a socket: it belongs in tests/e2e")

    monkeypatch.setattr(subprocess.Popen, "__init__", refuse)
    monkeypatch.setattr(socket.socket, "__init__", refuse)
