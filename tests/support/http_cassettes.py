"""Reading an HTTP cassette by exchange: its channels and their shape."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from tapes.cassette.frames import Frame, Kind
from tapes.cassette.store import Cassette, CassetteWriter, load

from tests.support.paths import CASSETTES

REPEATED = CASSETTES / "everything-http-2025-11-25.tape"


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


def write_repeated_session(path: Path, count: int) -> int:
    """A big HTTP cassette of about `count` frames: `REPEATED`'s frames (its client's probe, then its
    session) again and again, each copy under a session id and channels of its own, as clients one
    after the other recorded them; how many frames it has. Every copy opens alike, so a client gets
    the first one no client played yet."""
    source = load(REPEATED)
    session_id = source.header.labels["sessions"]
    span = source.frames[-1].t - source.frames[0].t + 0.01

    def renamed(value: Any, copy: int) -> Any:
        if isinstance(value, str):
            return value.replace(session_id, f"{session_id}-{copy}")
        if isinstance(value, list):
            return [renamed(item, copy) for item in value]
        if isinstance(value, dict):
            return {key: renamed(item, copy) for key, item in value.items()}
        return value

    with CassetteWriter(path, source.header) as writer:
        seq, written = 0, 0
        for copy in range(1, count // len(source.frames) + 2):
            batch = []
            for frame in source.frames:
                seq += 1
                batch.append(frame._replace(seq=seq, t=round(frame.t + copy * span, 3), channel=f"{frame.channel}:{copy}",
                                            info=renamed(frame.info, copy)))
            writer.write(batch)
            written += len(batch)
            if written >= count:
                break
    return written
