"""A task recorded from server-everything over Streamable HTTP (simulate-research-query, polled
every 500 ms by the TypeScript SDK client, one POST per tasks/get) replays to the same client
polling faster and slower than the recording, on the recorded clock: both get the recorded result
with nothing unmatched or unused."""

from __future__ import annotations

import pytest

from tapes.replay.control import ReplayControl
from replayer.http import ReplayOptions, replay_server

from tests.support.paths import CASSETTES
from tests.support.task_peers import assert_polled_as_recorded, run_task_client

CASSETTE = CASSETTES / "everything-tasks-http-2025-11-25.tape"


@pytest.mark.parametrize("poll_ms", [100, 1500], ids=["faster", "slower"])
def test_a_client_polling_on_its_own_clock_gets_the_recorded_result(poll_ms: int) -> None:
    options = ReplayOptions(control=ReplayControl.build(timing="recorded"))
    with replay_server(CASSETTE, options=options) as server:
        live = run_task_client(poll_ms, ["--url", server.url])
    report = server.replayer.report().as_json()
    assert_polled_as_recorded(live, report, CASSETTE, faster=poll_ms < 500)
