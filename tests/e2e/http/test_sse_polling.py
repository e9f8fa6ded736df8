"""2025-11-25 SSE polling recorded from the Python SDK server (tests/servers/resumable_server.py
with an event store and `retry`, cycles(3)): the server closes the call's stream three times and
the Python SDK client polls back with Last-Event-ID after each `retry`. Replayed instantly and on
the recorded clock, the client goes through the same three cycles and gets the same progress and
result, with nothing unmatched or unused; a client that polls back more often than recorded (the
same Last-Event-ID twice) gets the same continuation again."""

from __future__ import annotations

import json
from typing import Any

import anyio
import httpx
import pytest

from tapes.cassette.frames import Kind
from tapes.cassette.store import load
from tapes.replay.control import ReplayControl
from tapes.wire.sse import SSEEvent, SSEParser
from replayer.http import ReplayOptions, replay_server

from tests.support.flows import sse_polling_flow
from tests.support.http_clients import ACCEPT
from tests.support.http_peers import assert_clean
from tests.support.paths import CASSETTES
from tests.support.processes import TIMEOUT

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


class RawClient:
    """A 2025-11-25 client by hand, polling back when it likes (a real client honours `retry`)."""

    def __init__(self, http: httpx.Client, url: str) -> None:
        self.http, self.url, self.session = http, url, ""
        with self.stream("POST", {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}}) as response:
            self.session = response.headers["mcp-session-id"]
            self.events(response)
        with self.stream("POST", {"jsonrpc": "2.0", "method": "notifications/initialized"}) as response:
            assert response.status_code == 202

    def stream(self, method: str, body: Any = None, last_event_id: str | None = None) -> Any:
        headers = {**ACCEPT, "MCP-Protocol-Version": "2025-11-25"}
        headers.update({"Mcp-Session-Id": self.session} if self.session else {})
        headers.update({"Last-Event-ID": last_event_id} if last_event_id else {})
        return self.http.stream(method, self.url, headers=headers, json=body)

    def events(self, response: httpx.Response) -> list[SSEEvent]:
        """The stream's events, up to its end or its response (after which the recorded client
        closed the stream: the replay keeps it open until the live client closes it too)."""
        parser, events = SSEParser(), []
        for chunk in response.iter_bytes():
            events += parser.feed(chunk)
            if any(event.data and "result" in json.loads(event.data) for event in events):
                break
        return events

    def poll(self, last_event_id: str) -> list[SSEEvent]:
        with self.stream("GET", last_event_id=last_event_id) as response:
            assert response.status_code == 200
            return self.events(response)


def test_a_client_polling_back_more_often_than_recorded_gets_the_stream_continued_again() -> None:
    with replay_server(CASSETTE) as server, httpx.Client(timeout=TIMEOUT) as http:
        client = RawClient(http, server.url)
        with client.stream("POST", {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                                    "params": {"name": "cycles", "arguments": {"n": 3}, "_meta": {"progressToken": 2}}}) as response:
            [priming] = client.events(response)
        assert priming.data == "" and priming.retry == 100  # primed, then closed by the server
        cursor, messages = priming.id, []
        first = client.poll(cursor)
        assert client.poll(cursor) == first  # an extra poll back from the same event: the same again
        while not any("result" in message for message in messages):
            events = first or client.poll(cursor)
            first = []
            messages += [json.loads(event.data) for event in events if event.data]
            cursor = events[-1].id
        with client.stream("POST", {"jsonrpc": "2.0", "id": 3, "method": "tools/list"}) as response:
            client.events(response)
    assert [message["params"]["progress"] for message in messages if "params" in message] == [1, 2, 3]
    assert messages[-1]["result"]["structuredContent"] == {"result": "cycled 3"}
    assert_clean(server)
