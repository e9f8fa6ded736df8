"""Hostile input never stops a replay: generated JSON-RPC-shaped messages (recorded ones with
fields swapped for odd values, batches, deep nesting, bytes that are not JSON) go into the replay
engine of every committed cassette, and each is answered without an exception; an engine reading
the recording as it goes answers them as one over the whole recording does.

The example count comes from TAPES_FUZZ_EXAMPLES (bench/fuzz_engine.py runs 100 000)."""

from __future__ import annotations

import copy
import json
import os
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tapes.cassette.frames import Frame, Kind
from tapes.cassette.store import load
from tapes.replay import engine as engine_module
from tapes.replay.engine import ReplayEngine
from tapes.replay.sessions import split_sessions
from tapes.wire.jsonrpc import items

from tests.support.paths import CASSETTES as ROOT_CASSETTES

CASSETTES = sorted(ROOT_CASSETTES.glob("**/*.tape"))
EXAMPLES = int(os.environ.get("TAPES_FUZZ_EXAMPLES", "300"))


@cache
def sessions(path: Path) -> list[list[Frame]]:
    """The frames of each session of a cassette (one for stdio)."""
    return [session.frames for session in split_sessions(load(path).frames)]


def client_items(frames: list[Frame]) -> list[dict[str, Any]]:
    return [item for frame in frames if frame.from_client and frame.kind is Kind.MESSAGE
            for item in items(frame.message) if isinstance(item, dict)]


# --- generated input ---------------------------------------------------------------------------

_SCALARS = st.one_of(
    st.none(), st.booleans(), st.integers(min_value=-(2**70), max_value=2**70), st.floats(),
    st.text(max_size=6), st.sampled_from(["\ud800", "\udfff", "[/x]", "", "2.0", "initialize"]),
)
_JSON = st.recursive(_SCALARS, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3),
                     max_leaves=8)
# where a recorded message gets an odd value put in, or a member taken out
_PATHS = [("id",), ("jsonrpc",), ("method",), ("params",), ("result",), ("error",), ("error", "code"),
          ("params", "_meta"), ("params", "_meta", "progressToken"), ("params", "requestId"),
          ("params", "progressToken"), ("params", "name"), ("params", "arguments"), ("params", "cursor")]
_METHODS = st.sampled_from(["initialize", "notifications/initialized", "notifications/cancelled",
                            "notifications/progress", "tools/call", "tools/list", "ping", "[/foo]"])


def _put(message: Any, path: tuple[str, ...], value: Any, remove: bool) -> None:
    for step in path[:-1]:
        if not isinstance(message, dict):
            return
        message = message.setdefault(step, {}) if not isinstance(message.get(step), dict | list) else message[step]
    if isinstance(message, dict):
        if remove:
            message.pop(path[-1], None)
        else:
            message[path[-1]] = value


@st.composite
def messages(draw: st.DrawFn, recorded: list[dict[str, Any]]) -> Any:
    if recorded and draw(st.integers(0, 3)):
        message = copy.deepcopy(draw(st.sampled_from(recorded)))
    else:
        message = {"jsonrpc": "2.0", "id": draw(_SCALARS), "method": draw(_METHODS), "params": draw(_JSON)}
    for _ in range(draw(st.integers(0, 3))):
        value = draw(st.one_of(_JSON, _METHODS))
        _put(message, draw(st.sampled_from(_PATHS)), value, remove=draw(st.integers(0, 4)) == 0)
    return message if draw(st.integers(0, 9)) else draw(_JSON)  # now and then not a message at all


def _dumped(value: Any, ascii_only: bool) -> bytes:
    # a lone surrogate goes out as an escape, or as the bytes no UTF-8 decoder takes
    return json.dumps(value, ensure_ascii=ascii_only).encode("utf-8", "surrogatepass")


@st.composite
def payloads(draw: st.DrawFn, recorded: list[dict[str, Any]]) -> bytes:
    shape = draw(st.sampled_from(["message", "message", "message", "batch", "nested", "bytes"]))
    if shape == "message":
        return _dumped(draw(messages(recorded)), draw(st.booleans()))
    if shape == "batch":
        return _dumped(draw(st.lists(messages(recorded), max_size=4)), draw(st.booleans()))
    if shape == "nested":
        depth = draw(st.sampled_from([100, 128, 129, 999, 5_000, 100_000]))
        opening, closing = draw(st.sampled_from([(b"[", b"]"), (b'{"a":', b"}")]))
        inner = opening * depth + b"1" + closing * depth
        return b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"x":' + inner + b"}}" if draw(st.booleans()) else inner
    return draw(st.binary(max_size=40))


@st.composite
def replays(draw: st.DrawFn) -> tuple[Path, int, list[bytes], list[str | None]]:
    path = draw(st.sampled_from(CASSETTES))
    session = draw(st.integers(0, len(sessions(path)) - 1))
    recorded = client_items(sessions(path)[session])
    sent = draw(st.lists(payloads(recorded), min_size=1, max_size=6))
    opened = draw(st.lists(st.one_of(st.none(), st.text(max_size=6)), max_size=2))  # Last-Event-IDs of GETs
    return path, session, sent, opened


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(replay=replays())
def test_the_engine_answers_anything_a_client_sends(replay: tuple[Path, int, list[bytes], list[str | None]]) -> None:
    path, session, sent, opened = replay
    engine = ReplayEngine(sessions(path)[session])
    engine.start()
    for payload in sent:
        reception = engine.receive(payload)
        for reply in reception.replies:  # made-up answers: JSON-RPC errors with a usable id or none, empty results to pings
            answer = json.loads(reply.payload)
            assert type(answer["id"]) in (str, int, type(None))
            assert type(answer["error"]["code"]) is int if "error" in answer else answer["result"] == {}
    for last_event_id in opened:
        engine.open("GET", last_event_id)
    engine.end()
    assert engine.report.lines()


@settings(max_examples=EXAMPLES // 3, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(replay=replays())
def test_an_engine_reading_the_recording_as_it_goes_answers_as_the_whole_one(
    replay: tuple[Path, int, list[bytes], list[str | None]],
) -> None:
    """The same hostile input, to an engine that indexes one frame at a time: the same replies,
    the same frames sent in the end, the same report."""
    path, session, sent, opened = replay
    frames = sessions(path)[session]
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(engine_module, "INDEX_STEP", 1)
        outcomes = [_driven(engine, sent, opened) for engine in (ReplayEngine(frames), ReplayEngine(iter(frames)))]
    assert outcomes[0] == outcomes[1]


def _driven(engine: ReplayEngine, sent: list[bytes], opened: list[str | None]) -> tuple[list[Any], ...]:
    actions = list(engine.start())
    replies = []
    for payload in sent:
        reception = engine.receive(payload)
        actions += reception.actions
        replies += [reply.payload for reply in reception.replies]
    for last_event_id in opened:
        actions += engine.open("GET", last_event_id).actions
    actions += engine.end()
    return sorted((action.frame.seq, action.payload) for action in actions), replies, engine.report.lines()
