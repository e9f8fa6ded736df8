"""subscriptions/listen (2026-07-28) recorded from the Python SDK feed server with the Python SDK
client (cassettes/feed-*-2026-07-28), replayed over stdio and Streamable HTTP: the client gets the
acknowledgment, each post's events in order, the server's graceful close and its own close of a
second listen, as from the real server; and a client that leaves the first subscription before
the server closes it gets the same as the real server gives it, with nothing unmatched or unused."""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

import anyio
import pytest

from replayer.http import replay_server

from tests.support.flows import feed_flow
from tests.support.http_peers import assert_clean
from tests.support.paths import CASSETTES, FEED_SERVER, TAPES

LEAVES = pytest.mark.parametrize("leave_early", [False, True], ids=["server-closes", "client-leaves-first"])


def run(server: list[str] | str, leave_early: bool) -> dict[str, Any]:
    return anyio.run(functools.partial(feed_flow, server, leave_early=leave_early))


@pytest.fixture(scope="module")
def real() -> dict[bool, dict[str, Any]]:
    """What the real feed server gives the flow (a fresh server each time: it counts its items)."""
    return {leave_early: run(FEED_SERVER, leave_early) for leave_early in (False, True)}


@LEAVES
def test_over_stdio(real: dict[bool, dict[str, Any]], leave_early: bool, tmp_path: Path) -> None:
    report = tmp_path / "report.json"
    live = run([*TAPES, "replay", str(CASSETTES / "feed-stdio-2026-07-28.tape"), "--report", str(report)], leave_early)
    assert live == real[leave_early]
    assert live["events"][0] == ["ResourcesListChanged()", "ResourceUpdated(uri='feed://latest')"]
    summary = json.loads(report.read_text())
    assert summary["unmatched"] == [] and summary["unused"] == []


@LEAVES
def test_over_streamable_http(real: dict[bool, dict[str, Any]], leave_early: bool) -> None:
    with replay_server(CASSETTES / "feed-http-2026-07-28.tape") as server:
        live = run(server.url, leave_early)
    assert live == real[leave_early]
    assert_clean(server)


def test_the_recording_client_runs_again_on_one_replay(real: dict[bool, dict[str, Any]]) -> None:
    """A stateless 2026-07-28 recording has no session to open again: a client starting over (its
    server/discover probe) gets the recorded exchanges outside a session from their start again."""
    with replay_server(CASSETTES / "feed-http-2026-07-28.tape") as server:
        runs = [run(server.url, False) for _ in range(2)]
    assert runs == [real[False]] * 2
    assert server.clean, server.report_lines
    assert any("served the recorded exchanges outside a session again from their start" in line
               for line in server.report_lines), server.report_lines
