"""Live messages are scrubbed as the cassette was before they are matched: by the before-record
hook, and by leaving out of matching the params the cassette's JSON-path redaction replaced."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

from tapes.cassette.frames import STDIO, Direction, Frame, Kind
from tapes.cassette.store import Header
from tapes.replay.control import ReplayControl
from tapes.replay.session import ReplaySession


def call(request_id: int, arguments: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": {"name": "login", "arguments": arguments}}


def recording(arguments: dict[str, Any]) -> list[Frame]:
    return [Frame(1, 0.0, Direction.CLIENT_TO_SERVER, STDIO, Kind.MESSAGE, call(1, arguments)),
            Frame(2, 0.1, Direction.SERVER_TO_CLIENT, STDIO, Kind.MESSAGE, {"jsonrpc": "2.0", "id": 1, "result": {}})]


def sent(session: ReplaySession, message: dict[str, Any]) -> list[Any]:
    reception = session.receive(json.dumps(message).encode())
    return [json.loads(out.payload) for out in [*reception.replies, *reception.actions]]


def test_a_redacted_json_path_under_params_is_left_out_of_matching() -> None:
    header = Header("stdio", {"command": ["server"]}, redaction=("json:params.arguments.token",))
    frames = recording({"user": "ada", "token": "<redacted:1>"})
    control = ReplayControl().for_cassette(header)
    assert sent(ReplaySession(frames, control), call(7, {"user": "ada", "token": "s3cr3t"})) == [
        {"jsonrpc": "2.0", "id": 7, "result": {}}]
    # what is not redacted still counts
    assert sent(ReplaySession(frames, control), call(8, {"user": "bob", "token": "s3cr3t"}))[0]["error"]


def test_without_redaction_rules_the_control_is_unchanged() -> None:
    control = ReplayControl()
    assert control.for_cassette(Header("stdio", {"command": ["server"]})) is control


def test_the_before_record_hook_scrubs_live_messages_before_matching() -> None:
    def mask(frame: Frame) -> Frame:
        text = frame.payload.decode().replace("s3cr3t", "<redacted:1>")
        return replace(frame, message=json.loads(text), data=None)

    frames = recording({"user": "ada", "password": "<redacted:1>"})
    scrubbing = replace(ReplayControl(), scrub=mask)
    assert sent(ReplaySession(frames, scrubbing), call(3, {"user": "ada", "password": "s3cr3t"})) == [
        {"jsonrpc": "2.0", "id": 3, "result": {}}]
    assert sent(ReplaySession(frames, ReplayControl()), call(3, {"user": "ada", "password": "s3cr3t"}))[0]["error"]
