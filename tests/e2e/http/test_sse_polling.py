"""2025-11-25 SSE polling recorded from the Python SDK server (tests/servers/resumable_server.py
with an event store and `retry`, cycles(3)): the server closes the call's stream three times and
the Python SDK client polls back with Last-Event-ID after each `retry`. Replayed instantly and on
the recorded clock, the client goes through the same three cycles and gets the same progress and
result, with nothing unmatched or unused."""

from __future__ import annotations

import anyio
import pytest

from tapes.cassette.frames import Kind
from tapes.cassette.store import load
from tapes.replay.control import ReplayControl
from replayer.http import ReplayOptions, replay_server

from tests.support.flows import sse_polling_flow
from tests.support.http_peers import assert_clean
from tests.support.paths import CASSETTES

CASSETTE = CASSETTES / "resumable-polling-http-2025-11-25.tape"


def resumptions() -> list[str]:
    """The Last-Event-ID of each recorded poll back, in order."""
    return [value for frame in load(CASSETTE).frames if frame.kind is Kind.HTTP_REQUEST
            for name, value in frame.info["headers"] if name.lower() == "last-event-id"]


@pytest.mark.parametrize("timing", ["instant", "recorded"])
def test_the_client_polls_back_through_every_recorded_retry_cycle(timing: str) -> None:
    assert len(resumptions()) == 3
    with replay_server(CASSETTE, options=ReplayOptions(control=ReplayControl.build(timing=timing))) as server:
        live = anyio.run(sse_polling_flow, server.url)
    assert live["result"]["structuredContent"] == {"result": "cycled 3"}
    assert live["progress"] == [[1.0, 3.0], [2.0, 3.0], [3.0, 3.0]]
    assert_clean(server)
