"""Which recorded HTTP sessions only opened: a connection check before the real session (mcp-remote
opens one), which a live client matching no session exactly is led past; and what opened a
session, which a live session going on in it plays first."""

from __future__ import annotations

import pytest

from tapes.cassette.frames import Direction, Frame, Kind
from tapes.replay.sessions import messages_before, only_opened


@pytest.mark.parametrize(("methods", "opened"), [
    ({"initialize", "notifications/initialized"}, True),
    ({"initialize", "notifications/initialized", "ping", None}, True),  # None: the client's answers
    (set(), True),  # a legacy stream opened and left
    ({"initialize", "notifications/initialized", "tools/list"}, False),
    ({"initialize", "notifications/cancelled"}, False),
])
def test_a_session_only_opened_when_its_client_sent_nothing_but_its_handshake(methods: set, opened: bool) -> None:
    assert only_opened(methods) is opened


def _client(seq: int, message: object, kind: Kind = Kind.MESSAGE) -> Frame:
    return Frame(seq, seq / 10, Direction.CLIENT_TO_SERVER, f"http:{seq}", kind, message)


def test_a_session_opened_with_what_its_client_sent_before_its_first_work() -> None:
    initialize = _client(2, {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {}})
    answer = Frame(3, 0.3, Direction.SERVER_TO_CLIENT, "http:2", Kind.MESSAGE, {"jsonrpc": "2.0", "id": 0, "result": {}})
    initialized = _client(4, {"jsonrpc": "2.0", "method": "notifications/initialized"})
    roots = _client(5, {"jsonrpc": "2.0", "id": 0, "result": {"roots": []}})  # the client's answer, still opening
    head = _client(6, {"method": "POST"}, Kind.HTTP_REQUEST)
    work = _client(7, {"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
    ping = _client(8, {"jsonrpc": "2.0", "id": 2, "method": "ping"})
    frames = [initialize, answer, initialized, roots, head, work, ping]
    assert messages_before(frames) == [initialize, initialized, roots]
    assert messages_before([initialize, _client(9, [{"jsonrpc": "2.0", "method": "ping", "id": 3}])]) == [initialize]  # a batch is work
    # ... and to where a live client that did some work goes on: what the recorded client sent up to its next
    cancel = _client(10, {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}})
    more = _client(11, {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "x"}})
    assert messages_before([*frames, cancel, more], done=1) == [initialize, initialized, roots, work, ping, cancel]
