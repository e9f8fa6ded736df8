"""An HTTP cassette as its replay reads it: at once, or, when it is big, a step at a time while it is
served, so that its first request is answered long before its end is read.

What the replay needs of the whole recording is folded over the frames as they come: its sessions
(`SessionSplit`), what it says of its server (`ServerFacts`), the response heads and events HTTP
cannot carry (`check_frame_sendable`). A decision the part read so far makes final is taken at once
(a recorded session opened exactly as the live one is, a path or version the recording has); one
that more of the recording could change (a miss, a refusal, a session served again) waits until the
whole of it is read (`read_all`). The adapter reads the rest a step at a time while clients are idle.

A recording with an authorization flow, fault plans, new episodes or a race policy that reads every
cancel first is read whole before serving: those need all of it at once. A flow is told from the
first step, read at least to the first response head (a flow's first exchange is a refusal, or
metadata off the MCP path, or its client already has credentials): one found only past it (a
server that asked for credentials only later) is replayed as the sessions' exchanges, and said
so in the summary.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from tapes.cassette.frames import Frame, Kind
from tapes.cassette.store import Cassette, CassetteError, CassetteStream
from tapes.replay.http_rules import ServerFacts, check_frame_sendable
from tapes.replay.oauth import AuthFlow, refuses_credentials
from tapes.replay.sessions import RecordedSession, SessionSplit
from tapes.wire.http import header

READ_STEP = 20_000
"""Frames read at a time when a big cassette is read as it is served: before the first answer, and
in each step while clients are idle (so one waits for one step at most)."""


class CassetteReading:
    """The frames of an HTTP cassette read so far (`frames`) and what they tell (`facts`, `split`,
    `auth`); `complete` once all of it is. `on_session` hears of each recorded session as its first
    frame is read. Nothing is read before `begin`."""

    def __init__(self, cassette: Cassette | CassetteStream, on_session: Callable[[RecordedSession], None]) -> None:
        self.header = cassette.header
        self._stream = cassette if isinstance(cassette, CassetteStream) else None
        self._source: Iterator[Frame] = iter(cassette.frames if isinstance(cassette, Cassette) else cassette)
        self.frames: list[Frame] = []
        self.facts = ServerFacts()
        self.split = SessionSplit(on_session)
        self.complete = False
        self.late_flow: str | None = None  # an authorization flow's first sign past the first step
        self.failure: str | None = None  # the damage a step read found (what the replay says at its end)
        self.auth = AuthFlow([], set(), self.header.labels.get("origin"))

    def begin(self, read_whole: bool = False) -> None:
        """Read the first step, or all of it (`read_whole`, a small cassette, one with an authorization flow)."""
        origin = self.header.labels.get("origin")
        first, exhausted = self._pull(READ_STEP)
        more = first
        while not exhausted and not any(frame.kind is Kind.HTTP_RESPONSE for frame in more):
            more, exhausted = self._pull(READ_STEP)  # up to a response head: its exchange tells a flow
            first += more
        if not (exhausted or read_whole):  # (else the flow is told from all of it, below)
            self.auth, _ = AuthFlow.split(first, origin)
        if exhausted or read_whole or self.auth or self.auth.credentials:
            self._pull(sys.maxsize)
            self.auth, mcp_frames = AuthFlow.split(self.frames, origin)
            flow = {exchange.channel for exchange in self.auth.exchanges}
            for frame in self.frames:
                self.facts.add(frame, frame.channel not in flow)
            for frame in mcp_frames:
                self.split.add(frame)
            self.split.end()
            self.complete = True
            self._close()
        else:
            self._file(first, exhausted=False)

    def read_more(self) -> bool:
        """Read one more step of the cassette; false once it is all read. At a damaged frame the
        recording ends, before it, and `failure` says what it is."""
        if self.complete:
            return False
        read = len(self.frames)
        try:
            _, exhausted = self._pull(READ_STEP)
        except CassetteError as error:
            self.failure = str(error)
            exhausted = True
        self._file(self.frames[read:], exhausted)
        return True

    def read_all(self) -> None:
        """Read the rest of the cassette (a decision the whole recording makes is asked for)."""
        while self.read_more():
            pass

    def _pull(self, count: int) -> tuple[list[Frame], bool]:
        """Up to `count` more frames, checked; and whether the cassette has no more. Raises the
        CassetteError of a damaged one (those before it are kept)."""
        frames: list[Frame] = []
        try:
            for frame in self._source:
                check_frame_sendable(frame)
                frames.append(frame)
                if len(frames) == count:
                    break
        finally:
            self.frames += frames
        return frames, len(frames) < count

    def _file(self, frames: list[Frame], exhausted: bool) -> None:
        facts, split = self.facts, self.split
        for frame in frames:
            facts.add(frame)
            split.add(frame)
            if self.late_flow is None and _flow_sign(frame):
                self.late_flow = f"frame {frame.seq}"
        if exhausted:
            split.end()
            self.complete = True
            self._close()

    def _close(self) -> None:
        if self._stream is not None:
            self._stream.close()

    def close(self) -> None:
        """Stop reading (the replay is over)."""
        self._close()


def _flow_sign(frame: Frame) -> bool:
    """Whether a frame is of an authorization flow: a request with credentials, a refusal of them."""
    info = frame.info or {}
    if frame.kind is Kind.HTTP_REQUEST:
        return header(info.get("headers"), "authorization") is not None
    return frame.kind is Kind.HTTP_RESPONSE and refuses_credentials(info.get("status"), info.get("headers"))
