"""`tapes verify`'s sans-IO client script: what it sends when, to which live ids."""

from __future__ import annotations

import json
from typing import Any

from tapes.wire.jsonrpc import encode
from tapes.analysis.verify import ClientScript

from tests.support.messages import note, req, res
from tests.support.recordings import stdio_cassette


def sent(payloads: list[bytes | None]) -> list[Any]:
    return [None if payload is None else json.loads(payload) for payload in payloads]


def test_a_request_waits_for_the_response_recorded_before_it() -> None:
    script = ClientScript(stdio_cassette(("c", req(1, "tools/list")), ("s", res(1, {"tools": []})),
                                         ("c", req(2, "tools/call", {"name": "a"}))).frames)
    assert sent(script.ready()) == [req(1, "tools/list")]
    assert script.ready() == [] and script.waiting_for == [("response", 1)]
    script.receive(encode(res(1, {"tools": ["anything"]})))
    assert sent(script.ready()) == [req(2, "tools/call", {"name": "a"})]
    assert script.finished


def test_answers_go_to_the_live_server_request_id() -> None:
    script = ClientScript(stdio_cassette(("c", req(1, "tools/call", {"name": "ask"})),
                                         ("s", req(0, "roots/list")), ("c", res(0, {"roots": []})),
                                         ("s", res(1, {"content": []}))).frames)
    script.ready()
    script.receive(encode(req(41, "roots/list")))
    assert sent(script.ready()) == [res(41, {"roots": []})]


def test_a_retry_carries_the_live_request_state_even_when_captured_before_its_result() -> None:
    retry = req(2, "tools/call", {"name": "ask", "requestState": "recorded", "inputResponses": {"k": {}}})
    script = ClientScript(stdio_cassette(("c", req(1, "tools/call", {"name": "ask"})), ("c", retry),
                                         ("s", res(1, {"resultType": "input_required", "requestState": "recorded",
                                                       "inputRequests": {"k": {"method": "roots/list"}}}))).frames)
    assert len(script.ready()) == 1 and script.waiting_for == [("response", 1)]
    script.receive(encode(res(1, {"resultType": "input_required", "requestState": "live", "inputRequests": {}})))
    assert sent(script.ready())[0]["params"]["requestState"] == "live"


def test_a_cancelled_request_is_not_waited_for_and_force_gives_up_waiting() -> None:
    slow = req(1, "tools/call", {"name": "slow", "_meta": {"progressToken": "t"}})
    progress = note("notifications/progress", {"progressToken": "t", "progress": 1})
    cancel = note("notifications/cancelled", {"requestId": 1})
    script = ClientScript(stdio_cassette(("c", slow), ("s", progress), ("c", cancel),
                                         ("s", {**progress, "params": {"progressToken": "t", "progress": 2}}),
                                         ("c", req(2, "ping")), ("s", res(2, {}))).frames)
    assert sent(script.ready()) == [slow]
    assert script.waiting_for == [("progress", "t", 1)]
    script.receive(encode(progress))
    assert sent(script.ready()) == [cancel, req(2, "ping")]  # progress 2 came after the cancel
    assert script.finished

    stuck = ClientScript(stdio_cassette(("c", req(1, "ping")), ("s", res(1, {})), ("c", req(2, "ping"))).frames)
    stuck.ready()
    assert sent(stuck.force()) == [req(2, "ping")]
