"""Hostile HTTP cassettes that load (tests/support/hostile_cassettes.py) served by the HTTP
replayer: a client that sends what the recorded one did, with its recorded heads, gets an answer or
a JSON-RPC error for each request (or the connection cut where the recording has no answer), never
a 500, and the server logs no exception. A cassette the replay refuses says so in one sentence.
`tapes verify` of an HTTP cassette with odd recorded heads ends with its diff, no traceback. A JSON
answer whose end the recorder never saw is served whole.

The example count comes from TAPES_FUZZ_EXAMPLES (a tenth of it: each starts a server)."""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import subprocess
from pathlib import Path

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from replayer.http import replay_server
from tapes.cassette.frames import Frame, Kind
from tapes.cassette.store import Cassette, load, loads, save
from tapes.errors import UserError

from tests.support.hostile_cassettes import cassettes, mutated_cassettes, recursion_as_in_the_cli
from tests.support.paths import ROOT, TAPES
from tests.support.processes import TIMEOUT

EXAMPLES = max(int(os.environ.get("TAPES_FUZZ_EXAMPLES", "40")) // 10, 2)
SENT_HEADERS = ("content-type", "accept", "last-event-id", "mcp-session-id", "mcp-protocol-version", "mcp-method", "mcp-name")


def _requests(cassette: Cassette) -> list[tuple[str, str, list[tuple[str, str]], bytes | None]]:
    """Each recorded request: its method, path, the headers a client sends, and its body."""
    heads: dict[str, Frame] = {}
    bodies: dict[str, bytes] = {}
    for frame in cassette.frames:
        if frame.from_client and frame.kind is Kind.HTTP_REQUEST:
            heads.setdefault(frame.channel, frame)
        elif frame.from_client and frame.kind is Kind.MESSAGE and frame.channel not in bodies:
            bodies[frame.channel] = frame.shown_payload
    return [(head.info["method"], head.info["path"],
             [(name, value) for name, value in head.info["headers"] if name.lower() in SENT_HEADERS and value.isascii()
              and value.isprintable()], bodies.get(channel))
            for channel, head in heads.items()]


def _http_cassettes() -> st.SearchStrategy[Cassette]:
    return st.one_of(cassettes(), mutated_cassettes()).map(lambda file: loads(*file)).filter(
        lambda cassette: cassette.header.transport == "http")


@settings(max_examples=EXAMPLES, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much,
                                 HealthCheck.function_scoped_fixture])
@given(cassette=_http_cassettes())
def test_the_http_replayer_serves_any_cassette_that_loads_without_a_500(cassette: Cassette,
                                                                         caplog: pytest.LogCaptureFixture) -> None:
    caplog.clear()
    with recursion_as_in_the_cli(), caplog.at_level(logging.ERROR):
        try:
            serving = replay_server(cassette)
            server = serving.__enter__()
        except UserError:
            return
        try:
            origin = server.url[: len(server.url) - len(server.replayer.endpoint)]  # (a recorded path may not parse: "[")
            with httpx.Client(timeout=httpx.Timeout(5, read=2)) as client:
                for method, path, headers, body in _requests(cassette):
                    if not path.startswith("/") or path.startswith("//") or method not in ("GET", "POST", "DELETE"):
                        continue
                    try:
                        response = client.request(method, origin + path, headers=headers, content=body)
                    except (httpx.TransportError, httpx.InvalidURL):
                        continue  # the recording has no answer here: the connection is cut, or the stream stays open
                    assert response.status_code != 500, response.text
        finally:
            serving.__exit__(None, None, None)
        server.report_lines
    assert not [record for record in caplog.records if record.levelno >= logging.ERROR], caplog.text


def test_verify_over_http_sends_recorded_heads_as_recorded_or_says_the_exchange_broke(tmp_path: Path) -> None:
    """A recorded header value in Latin-1 (as the recorder reads heads) goes out as those bytes,
    and a request whose recorded path makes no URL is a broken exchange of the live session: the
    diff says so, no thread prints a traceback."""
    recorded = load(ROOT / "cassettes" / "everything-http-2025-11-25.tape")
    posts = [index for index, frame in enumerate(recorded.frames) if frame.kind is Kind.HTTP_REQUEST
             and frame.info["method"] == "POST"]
    frames = list(recorded.frames)
    for index, change in ((posts[1], {"headers": [*frames[posts[1]].info["headers"], ["Mcp-Odd", "é"]]}),
                          (posts[-1], {"path": "http://[::1/mcp"})):
        frames[index] = dataclasses.replace(frames[index], info={**frames[index].info, **change})
    save(dataclasses.replace(recorded, frames=frames), tmp_path / "odd.tape")
    with replay_server(recorded) as server:
        run = subprocess.run([*TAPES, "verify", str(tmp_path / "odd.tape"), "--upstream", server.url, "--step-timeout", "1",
                              "--format", "json"], capture_output=True, timeout=120)
    assert b"Traceback" not in run.stderr and run.returncode == 1, run.stderr
    assert json.loads(run.stdout)["changes"]  # the last exchange never reached the server


def test_a_json_answer_whose_end_the_recorder_never_saw_is_served_whole() -> None:
    recorded = load(ROOT / "cassettes" / "feed-http-2026-07-28.tape")
    cut = dataclasses.replace(recorded, frames=[frame for frame in recorded.frames if frame.kind is not Kind.STREAM_END])
    discover = next(frame.payload for frame in recorded.frames if frame.from_client and frame.kind is Kind.MESSAGE)
    headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json",
               "MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "server/discover"}
    with replay_server(cut) as server:
        answer = httpx.post(server.url, content=discover, headers=headers, timeout=TIMEOUT)  # waited for ever
    assert answer.status_code == 200 and answer.json()["result"]["capabilities"]
