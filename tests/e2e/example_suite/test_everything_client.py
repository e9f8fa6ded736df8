"""The example suite: a client library tested against cassettes of server-everything with
nothing but the tape marker and fixtures. Offline: the cassettes under cassettes/ replay the
server; delete one and run with --tape-record-mode=once (the server running for HTTP) to re-record."""

from __future__ import annotations

import anyio
import pytest
from everything_client import add, echo

from tests.support.paths import EVERYTHING_JS

EVERYTHING_STDIO = ["node", str(EVERYTHING_JS), "stdio"]
EVERYTHING_HTTP = "http://127.0.0.1:3001/mcp"  # `node dist/index.js streamableHttp` (PORT=3001)


@pytest.mark.tape(server=EVERYTHING_STDIO)
def test_echo_over_stdio(tape_server: list[str]) -> None:
    assert anyio.run(echo, tape_server, "hello tapes") == "Echo: hello tapes"


@pytest.mark.tape(server=EVERYTHING_STDIO)
def test_add_over_stdio(tape_server: list[str]) -> None:
    assert anyio.run(add, tape_server, 2, 40) == "The sum of 2 and 40 is 42."


@pytest.mark.tape(upstream=EVERYTHING_HTTP)
def test_echo_over_http(tape_url: str) -> None:
    assert anyio.run(echo, tape_url, "hello tapes") == "Echo: hello tapes"
