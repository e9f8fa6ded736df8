"""Reading an HTTP cassette by exchange: its channels and their shape."""

from __future__ import annotations

import re

from tapes.cassette.frames import Frame, Kind
from tapes.cassette.store import Cassette


def channels(cassette: Cassette) -> dict[str, list[Frame]]:
    out: dict[str, list[Frame]] = {}
    for frame in cassette.frames:
        out.setdefault(frame.channel, []).append(frame)
    return out


def kinds(frames: list[Frame]) -> list[Kind]:
    return [frame.kind for frame in frames]


def check_channel_shape(cassette: Cassette) -> None:
    """Every exchange follows tapes.cassette.frames: request head, optional body, response head and body
    (or no response at all when the upstream failed), then exactly one STREAM_END, last."""
    for name, frames in channels(cassette).items():
        assert re.fullmatch(r"http:\d+", name)
        assert frames[0].kind is Kind.HTTP_REQUEST and frames[-1].kind is Kind.STREAM_END, name
        assert kinds(frames).count(Kind.STREAM_END) == 1
        assert all(f.from_client for f in frames[: 1 + (frames[1].from_client if len(frames) > 1 else 0)])
        responses = [i for i, f in enumerate(frames) if f.kind is Kind.HTTP_RESPONSE]
        assert len(responses) <= 1
        if responses:
            assert all(not f.from_client for f in frames[responses[0]:])


def calling(cassette: Cassette, tool: str) -> str:
    """The channel of the recorded tools/call of `tool`."""
    return next(f.channel for f in cassette.frames if f.from_client and f.kind is Kind.MESSAGE
                and isinstance(f.message, dict) and (f.message.get("params") or {}).get("name") == tool)
