"""Telling the sessions of an HTTP cassette apart, so each can be replayed by its own engine.

A Streamable HTTP session is named by the `Mcp-Session-Id` the server issued in its initialize
response and the client carried on every later request; a legacy HTTP+SSE session by the
`sessionId` (or `session_id`) in the endpoint URL its SSE stream announced. Exchanges that carry
neither (a stateless 2026-07-28 server, or the client's probe before initialize) form the
session with id None.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from urllib.parse import parse_qs, urlsplit

from tapes.cassette.frames import Frame, Kind
from tapes.wire.http import header

SESSION_HEADER = "mcp-session-id"
LEGACY_SESSION_PARAMETERS = ("sessionId", "session_id")


@dataclass(frozen=True)
class RecordedSession:
    session_id: str | None
    frames: list[Frame]


def legacy_session_id(url: str) -> str | None:
    """The session named in a legacy endpoint URL (`/message?sessionId=X`, `/messages/?session_id=X`)."""
    query = parse_qs(urlsplit(url).query)
    for name in LEGACY_SESSION_PARAMETERS:
        if query.get(name):
            return query[name][0]
    return None


def _channel_sessions(frames: Sequence[Frame]) -> dict[str, str]:
    sessions: dict[str, str] = {}
    for frame in frames:
        if frame.channel in sessions:
            continue
        found = None
        if frame.kind in (Kind.HTTP_REQUEST, Kind.HTTP_RESPONSE) and frame.info:
            found = header(frame.info.get("headers"), SESSION_HEADER)
            if found is None and frame.kind is Kind.HTTP_REQUEST:
                found = legacy_session_id(frame.info.get("path", ""))
        elif frame.kind is Kind.SSE_EVENT and frame.info and frame.info.get("event") == "endpoint":
            found = legacy_session_id(frame.payload.decode("utf-8", "replace"))
        if found is not None:
            sessions[frame.channel] = found
    return sessions


def split_sessions(frames: Sequence[Frame]) -> list[RecordedSession]:
    """The cassette's sessions in order of first appearance, each with its frames in recorded order."""
    sessions = _channel_sessions(frames)
    grouped: dict[str | None, list[Frame]] = {}
    for frame in frames:
        grouped.setdefault(sessions.get(frame.channel), []).append(frame)
    return [RecordedSession(session_id, session_frames) for session_id, session_frames in grouped.items()]
