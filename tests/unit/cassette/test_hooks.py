"""The before-record hook's frames: what it changes is what is kept, and sent."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tapes.cassette.frames import STDIO, Direction, Frame, Kind
from tapes.cassette.scrub import run_hook

SPACED = b'{"jsonrpc": "2.0", "id": 1, "result": {"token": "sk-live-SECRET"}}'  # as Python's json.dumps writes it


def _frame() -> Frame:
    return Frame(1, 0.0, Direction.SERVER_TO_CLIENT, STDIO, Kind.MESSAGE, json.loads(SPACED), SPACED)


def _anew(frame: Frame) -> Frame:
    return frame._replace(message={**frame.message, "result": {"token": "<scrubbed>"}})


def _in_place(frame: Frame) -> Frame:
    frame.message["result"]["token"] = "<scrubbed>"
    return frame


@pytest.mark.parametrize("hook", [_anew, _in_place], ids=["a new message", "changed in place"])
def test_a_message_the_hook_changed_loses_the_bytes_it_was_recorded_as(hook: Any) -> None:
    changed = run_hook(hook, _frame())
    assert changed is not None and changed.data is None  # the bytes said the secret, and would be sent
    assert changed.payload == b'{"jsonrpc":"2.0","id":1,"result":{"token":"<scrubbed>"}}'


def test_a_message_the_hook_left_alone_keeps_its_bytes() -> None:
    kept = run_hook(lambda frame: frame, _frame())
    assert kept is not None and kept.payload == SPACED
