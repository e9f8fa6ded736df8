"""Telling the sessions of an HTTP cassette apart, so each can be replayed by its own engine.

A Streamable HTTP session is named by the `Mcp-Session-Id` the server issued in its initialize
response and the client carried on every later request; a legacy HTTP+SSE session by the
`sessionId` (or `session_id`) in the endpoint URL its SSE stream announced. Exchanges that carry
neither (a stateless 2026-07-28 server, or the client's probe before initialize) form the
session with id None.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass, replace
from typing import Any

from tapes.cassette.frames import STDIO, Frame, Kind
from tapes.cassette.store import Cassette
from tapes.errors import UserError
from tapes.wire.eras import HANDSHAKE_DONE, HANDSHAKE_METHOD
from tapes.wire.http import header, legacy_session_id
from tapes.wire.jsonrpc import MessageType, classify, without_meta

SESSION_HEADER = "mcp-session-id"
# What a client sends to open a session and check it is alive; None stands for its answers.
_OPENING_METHODS = frozenset({HANDSHAKE_METHOD, HANDSHAKE_DONE, "ping", None})


SERVED_FROM = "served_from"  # a header label: "http" on an HTTP recording's messages served over stdio


@dataclass(frozen=True)
class RecordedSession:
    session_id: str | None
    frames: list[Frame]


def only_opened(client_methods: Collection[str | None]) -> bool:
    """Whether a recorded session's client, by the methods it sent, only opened it: a session that
    checked the connection, as mcp-remote opens one before its host's. A live client whose opening
    equals no recorded one exactly is led to a session that did more first."""
    return _OPENING_METHODS.issuperset(client_methods)


def messages_before(frames: Sequence[Frame], done: int = 0) -> list[Frame]:
    """The recorded client's messages before its work number `done` (from 0: its first message
    that did more than open the session, see `does_work`): what a session played from its start
    must be sent to get where a live session goes on that opened it and did `done` such things."""
    sent = []
    for frame in frames:
        if frame.from_client and frame.kind is Kind.MESSAGE:
            if does_work(frame.message):
                if not done:
                    break
                done -= 1
            sent.append(frame)
    return sent


def does_work(message: Any) -> bool:
    """Whether a client message does more than open its session: a request past the opening, or a
    batch. (A notification, an answer to the server, rides along with what it belongs to.)"""
    return isinstance(message, list) or (classify(message) is MessageType.REQUEST and not only_opened([message["method"]]))


def _opening(messages: Sequence[Frame]) -> tuple[str, Any] | None:
    """How a session was opened: its first request's method and params, `_meta` aside."""
    for frame in messages:
        if frame.from_client and classify(frame.message) is MessageType.REQUEST:
            return frame.message["method"], without_meta(frame.message.get("params"))
    return None


def _past_opening(messages: list[Frame]) -> list[Frame]:
    """A session's messages from its client's first that did more than open it."""
    start = next((index for index, frame in enumerate(messages) if frame.from_client and does_work(frame.message)), len(messages))
    return messages[start:]


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
            found = legacy_session_id(frame.shown_payload.decode("utf-8", "replace"))  # a damaged one may have no JSON form
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


def messages_over_stdio(frames: Sequence[Frame]) -> tuple[list[Frame], int, int]:
    """The JSON-RPC messages of an HTTP recording's first session, as a stdio recording of them,
    then those of each later session its client opened the same way, from past their opening (a
    client that ran one session per step, as the Inspector CLI does: a stdio client runs the steps
    in one); how many sessions the recording has (whose server took any message), and how many of
    them are served. What only HTTP has stays behind: heads, priming and endpoint events, stream
    ends, and every exchange the server did not take (a 401 before the login, a 404 for an expired
    session), whose request the client sent again."""
    sessions = [messages for session in split_sessions(frames) if (messages := _taken_messages(session.frames))]
    if not sessions:
        return [], 0, 0
    first, *later = sessions
    opened = _opening(first)
    alike = [messages for messages in later if opened is not None and _opening(messages) == opened]
    return [*first, *(frame for messages in alike for frame in _past_opening(messages))], len(sessions), 1 + len(alike)


def _taken_messages(frames: list[Frame]) -> list[Frame]:
    taken = {frame.channel for frame in frames
             if frame.kind is Kind.HTTP_RESPONSE and type(status := (frame.info or {}).get("status")) is int and 200 <= status < 300}
    return [Frame(frame.seq, frame.t, frame.direction, STDIO, Kind.MESSAGE, frame.message, _one_line(frame.data))
            for frame in frames if frame.channel in taken and _is_message(frame)]


def _is_message(frame: Frame) -> bool:
    return frame.message is not None and frame.kind in (Kind.MESSAGE, Kind.SSE_EVENT)


def _one_line(data: bytes | None) -> bytes | None:
    """A message's verbatim bytes, where they fit on one stdio line (an SSE event's data may span several)."""
    return data if data is not None and b"\n" not in data and b"\r" not in data else None


def served_over_stdio(cassette: Cassette, name: str) -> Cassette:
    """`cassette` as a stdio replay serves it: an HTTP recording becomes the messages of its first
    session, with a warning that says so; a stdio recording stays as it is."""
    if cassette.header.transport == STDIO:
        return cassette
    frames, sessions, served = messages_over_stdio(cassette.frames)
    if not frames:
        raise UserError(f"{name} was recorded over HTTP and its server took no JSON-RPC message: nothing to replay")
    if served > 1:
        of = f"{'its' if served == sessions else f'{served} of its'} {sessions} sessions, opened alike, one after the other"
    else:
        of = f"its session{f' (the first of {sessions})' if sessions > 1 else ''}"
    note = (f"{name} was recorded over HTTP: this stdio replay serves the JSON-RPC messages of {of}, "
            "without HTTP's heads and event ids (--http serves it over HTTP)")
    header = replace(cassette.header, transport=STDIO, labels={**cassette.header.labels, SERVED_FROM: "http"})
    return Cassette(header, frames, [*cassette.warnings, note])
