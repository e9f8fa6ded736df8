"""Telling the sessions of an HTTP cassette apart, so each can be replayed by its own engine.

A Streamable HTTP session is named by the `Mcp-Session-Id` the server issued in its initialize
response and the client carried on every later request; a legacy HTTP+SSE session by the
`sessionId` (or `session_id`) in the endpoint URL its SSE stream announced. Exchanges that carry
neither (a stateless 2026-07-28 server, or the client's probe before initialize) form the
session with id None.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import replace
from typing import Any

from tapes.cassette.frames import STDIO, Frame, Kind
from tapes.cassette.store import Cassette
from tapes.errors import UserError
from tapes.wire.eras import HANDSHAKE_DONE, HANDSHAKE_METHOD
from tapes.wire.http import header, legacy_session_id
from tapes.wire.jsonrpc import MessageType, classify, without_meta
from tapes.wire.sse import is_event_stream

SESSION_HEADER = "mcp-session-id"
# What a client sends to open a session and check it is alive; None stands for its answers.
_OPENING_METHODS = frozenset({HANDSHAKE_METHOD, HANDSHAKE_DONE, "ping", None})


SERVED_FROM = "served_from"  # a header label: "http" on an HTTP recording's messages served over stdio


class RecordedSession:
    """One recorded session: its frames in recorded order (`frames`, which grow while a cassette is
    read as it is served: see `SessionSplit`) and what tells it apart, folded over them as they come."""

    def __init__(self, session_id: str | None, frames: Iterable[Frame] = ()) -> None:
        self.session_id = session_id
        self.frames: list[Frame] = []
        self.opening: Frame | None = None  # its first request head: how its client opened it
        self.http_methods: set[str] = set()
        self.rpc_methods: set[str | None] = set()  # of its client's messages (objects)
        self.first_request: dict[str, Any] | None = None  # what a live session is matched by (initialize)
        self.work: list[Any] = []  # what its client did past the opening, in order (see `does_work`)
        for frame in frames:
            self.add(frame)

    def add(self, frame: Frame) -> None:
        self.frames.append(frame)
        if frame.kind is Kind.HTTP_REQUEST:
            self.opening = self.opening or frame
            if isinstance(method := (frame.info or {}).get("method"), str):
                self.http_methods.add(method)
        elif frame.from_client and frame.kind is Kind.MESSAGE:
            message = frame.message
            if isinstance(message, dict):
                self.rpc_methods.add(message.get("method"))
                if self.first_request is None and classify(message) is MessageType.REQUEST:
                    self.first_request = message
            if does_work(message):
                self.work.append(message)


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


class SessionSplit:
    """An HTTP recording's sessions as its frames come (`add`), each frame filed, in recorded order,
    under its exchange's session: the one named by the exchange's request head (`Mcp-Session-Id`,
    or a legacy endpoint URL's session id), else its response head, else a legacy `endpoint` event
    on its event stream; an exchange named by none is outside any session (id None). An exchange
    is held, with every frame after it, until it is known which: a frame goes to its session only
    once all before it have (so a session's frames are those `split_sessions` gives, in order).
    `sessions` are in order of first appearance; `on_session` hears of each new one."""

    def __init__(self, on_session: Callable[[RecordedSession], None] | None = None) -> None:
        self.sessions: list[RecordedSession] = []
        self._by_id: dict[str | None, RecordedSession] = {}
        self._channels: dict[str, str | None] = {}  # exchange -> its session id, once known
        self._gets: dict[str, bool] = {}  # ... until then: whether it is a GET (a legacy SSE stream may be)
        self._held: deque[Frame] = deque()
        self._on_session = on_session

    def add(self, frame: Frame) -> None:
        channel = frame.channel
        if channel not in self._channels:
            if frame.kind is Kind.HTTP_REQUEST:
                self._gets[channel] = (frame.info or {}).get("method") == "GET"
            if (found := _named_session(frame, self._gets.get(channel, True))) is not _UNKNOWN:
                self._channels[channel] = found
                self._gets.pop(channel, None)
        if self._held or channel not in self._channels:
            self._held.append(frame)
            self._release()
        else:
            self._file(frame, self._channels[channel])

    def end(self) -> None:
        """The recording's end: an exchange still unnamed belongs to no session."""
        for frame in self._held:
            self._channels.setdefault(frame.channel, None)
        self._release()

    def _release(self) -> None:
        held, channels = self._held, self._channels
        while held and held[0].channel in channels:
            frame = held.popleft()
            self._file(frame, channels[frame.channel])

    def _file(self, frame: Frame, session_id: str | None) -> None:
        session = self._by_id.get(session_id)
        if session is None:
            session = self._by_id[session_id] = RecordedSession(session_id)
            self.sessions.append(session)
            if self._on_session is not None:
                self._on_session(session)
        session.add(frame)


class SessionFeed:
    """A recorded session's frames for its replay's index (a `FrameFeed`) while the cassette is read
    as it is served: those filed so far; when it has taken them all, more of the cassette is read
    (`read_more`, false once all of it is) until the session has more, or has none."""

    def __init__(self, session: RecordedSession, read_more: Callable[[], bool]) -> None:
        self._session = session
        self._read_more = read_more
        self._taken = 0
        self.exhausted = False

    @property
    def waiting(self) -> int:
        return len(self._session.frames) - self._taken

    def take(self, count: int) -> list[Frame]:
        frames = self._session.frames
        while self._taken == len(frames):
            if not self._read_more():
                self.exhausted = True
                return []
        taken = frames[self._taken : self._taken + count]
        self._taken += len(taken)
        return taken


_UNKNOWN: Any = object()  # an exchange's session is not told by this frame


def _named_session(frame: Frame, get: bool) -> str | None:
    """The session a frame names its exchange's as, None when it tells the exchange is outside any,
    `_UNKNOWN` when it does not tell. `get`: whether the exchange is a GET (or its head is unknown)."""
    kind = frame.kind
    if kind is Kind.HTTP_REQUEST:
        info = frame.info or {}
        return header(info.get("headers"), SESSION_HEADER) or legacy_session_id(info.get("path", "")) or _UNKNOWN
    if kind is Kind.HTTP_RESPONSE:
        found = header((frame.info or {}).get("headers"), SESSION_HEADER)
        if found is not None:
            return found
        # only a GET's stream can still name it, with a legacy endpoint event
        return _UNKNOWN if get or is_event_stream(header((frame.info or {}).get("headers"), "content-type")) else None
    if kind is Kind.SSE_EVENT and frame.info and frame.info.get("event") == "endpoint":
        # a damaged one may have no JSON form
        return legacy_session_id(frame.shown_payload.decode("utf-8", "replace")) or _UNKNOWN
    if kind is Kind.STREAM_END or frame.channel == STDIO:
        return None
    return _UNKNOWN


def split_sessions(frames: Iterable[Frame]) -> list[RecordedSession]:
    """The recording's sessions in order of first appearance, each with its frames in recorded order."""
    split = SessionSplit()
    for frame in frames:
        split.add(frame)
    split.end()
    return split.sessions


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
