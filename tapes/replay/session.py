"""The one interface every replayer adapter drives: a `ReplaySession` is one live session played
from one recorded session. It owns the replay engine, the bookkeeping a hand-over to the real
server needs (record mode new_episodes), and the session's part of the summary.

An adapter (stdio, HTTP, in-memory, ...) only moves bytes:
1. `start()` once, then `receive()` for each live client message (HTTP: `open()` for a bodiless
   request), `end()` when the client closes its side; each returns a `Reception`.
2. It writes each `Reception.actions` frame as its kind and channel say, and each reply on
   whatever carried the live message.
3. When a reception `missed` and `may_hand_over`, it may start the real server, warm it up from
   `sent` and `replayed`, call `handed_over(reception.missed)` and forward the rest of the session
   to it; once the real server's recording is spliced in, `episode_recorded(frame_count)`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tapes.cassette.frames import STDIO, Direction, Frame, Kind
from tapes.cassette.scrub import FrameHook
from tapes.replay.control import ReplayControl
from tapes.replay.engine import ReplayEngine
from tapes.replay.outcomes import Reception, Report
from tapes.wire.http import HeaderFields
from tapes.wire.jsonrpc import encode, items, parse

_UNPARSED = object()


class ReplaySession:
    def __init__(self, frames: Sequence[Frame], control: ReplayControl, *, may_hand_over: bool = False,
                 name: str | None = None) -> None:
        self.name = name  # the recorded session's id, when a cassette holds several
        self.engine: ReplayEngine = control.engine(frames, remember_played=may_hand_over)
        self._scrub = control.scrub
        self.may_hand_over = may_hand_over
        # With new episodes, what a warm-up needs: the live messages so far (with their HTTP
        # headers, none on stdio) and the JSON-RPC messages the replay sent meanwhile.
        self.sent: list[tuple[bytes, HeaderFields]] = []
        self.replayed: list[bytes] = []
        self._handed_over_misses = 0  # the misses of the message that handed over: recorded now, not misses

    def start(self) -> Reception:
        """What the server sent before the client said anything."""
        return self._noted(Reception(self.engine.start()))

    def receive(self, payload: bytes, message: Any = _UNPARSED, headers: HeaderFields = ()) -> Reception:
        if self._scrub is not None:
            payload, message = scrubbed_live(payload, self._scrub)
        reception = self.engine.receive(payload) if message is _UNPARSED else self.engine.receive(payload, message)
        if self.may_hand_over and not reception.missed:
            self.sent.append((payload, headers))
        return self._noted(reception)

    def open(self, method: str, last_event_id: str | None = None) -> Reception:
        return self._noted(self.engine.open(method, last_event_id))

    def end(self) -> Reception:
        return self._noted(Reception(self.engine.end()))

    def handed_over(self, misses: int) -> None:
        """The real server took the session over at a message with `misses` unmatched items."""
        self.may_hand_over = False
        self._handed_over_misses = misses

    def episode_recorded(self, frames: int) -> None:
        """The real server's part of the session, `frames` long, is in the cassette now."""
        report = self.engine.report
        if self._handed_over_misses:
            del report.unmatched[-self._handed_over_misses :]  # recorded now, not misses
        report.recorded = frames

    @property
    def report(self) -> Report:
        return self.engine.report

    @property
    def played_frames(self) -> set[int]:
        return self.engine.played_frames or set()

    def _noted(self, reception: Reception) -> Reception:
        if self.may_hand_over:
            self.replayed += [reply.payload for reply in reception.replies]
            self.replayed += [action.payload for action in reception.actions if action.frame.message is not None]
        return reception


def scrubbed_live(payload: bytes, hook: FrameHook) -> tuple[bytes, Any]:
    """A live client message as the before-record hook would have recorded it: each JSON-RPC item
    passes through the hook as a client frame would (an item the hook drops is kept as it is:
    dropping it from the session would leave its sender waiting)."""
    message = parse(payload)
    if message is None:
        return payload, None
    scrubbed = []
    for item in items(message):
        frame = hook(Frame(0, 0.0, Direction.CLIENT_TO_SERVER, STDIO, Kind.MESSAGE, item))
        scrubbed.append(frame.message if frame is not None and frame.message is not None else item)
    message = scrubbed if isinstance(message, list) else scrubbed[0]
    return encode(message), message


def summary(sessions: Sequence[ReplaySession]) -> tuple[list[str], bool]:
    """The end-of-replay summary lines (one block per session, named when there are several) and
    whether the replay was clean (every live message matched)."""
    lines = []
    for session in sessions:
        block = session.report.lines()
        if len(sessions) > 1:
            block = [f"session {session.name or '(none)'}: {line}" for line in block]
        lines += block
    return lines, all(session.report.clean for session in sessions)


def merged_report(sessions: Sequence[ReplaySession]) -> Report:
    merged = Report()
    for session in sessions:
        merged.merge(session.report)
    return merged
