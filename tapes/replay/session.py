"""The one interface every replayer adapter drives: a `ReplaySession` is one live session played
from one recorded session. It owns the replay engine, the bookkeeping a hand-over to the real
server needs (record mode new_episodes), and the session's part of the summary.

An adapter (stdio, HTTP, in-memory, ...) only moves bytes:
1. `start()` once, then `receive()` for each live client message (HTTP: `open()` for a bodiless
   request), `end()` when the client closes its side; each returns a `Reception`. A session
   over frames read as it goes (a `CassetteStream`) wants `advance()` while the client is idle,
   until it is `indexed`.
2. It writes each `Reception.actions` frame as its kind and channel say, and each reply on
   whatever carried the live message.
3. When a reception `missed` and `may_hand_over`, it may start the real server, warm it up from
   `sent` and `replayed`, call `handed_over(reception.missed)` and forward the rest of the session
   to it; once the real server's recording is spliced in, `episode_recorded(frame_count)`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence
from typing import Any

from tapes.cassette.frames import STDIO, Direction, Frame, Kind
from tapes.cassette.scrub import FrameHook, run_hook
from tapes.replay.control import ReplayControl
from tapes.replay.engine import ReplayEngine
from tapes.replay.faults import MALFORMED, Fault, FaultAction, FaultPlan
from tapes.replay.index import FrameFeed
from tapes.replay.outcomes import Action, Reception, Reply, Report
from tapes.wire.http import HeaderFields
from tapes.wire.jsonrpc import INVALID_REQUEST, Incoming, MessageType, Refusal, classify, encode, items, parse, read_client


class ReplaySession:
    def __init__(self, frames: Iterable[Frame] | FrameFeed, control: ReplayControl, *, may_hand_over: bool = False,
                 name: str | None = None) -> None:
        self.name = name  # the recorded session's id, when a cassette holds several
        self.engine: ReplayEngine = control.engine(frames, remember_played=may_hand_over)
        self._scrub = control.scrub
        self._faults = FaultPlan.parse(control.faults)
        self._faulted: dict[Any, Fault] = {}  # live request id -> the fault that takes its answer
        self._silenced: set[str] = set()  # channels a hang (HTTP) or drop fault took: nothing more goes out on them
        self.may_hand_over = may_hand_over
        # With new episodes, what a warm-up needs: the live messages so far (with their HTTP
        # headers, none on stdio) and the JSON-RPC messages the replay sent meanwhile.
        self.sent: list[tuple[bytes, HeaderFields]] = []
        self.replayed: list[bytes] = []
        self._handed_over_misses = 0  # the misses of the message that handed over: recorded now, not misses

    def start(self) -> Reception:
        """What the server sent before the client said anything."""
        return self._noted(Reception(self.engine.start()))

    def receive(self, payload: bytes, incoming: Incoming | None = None, headers: HeaderFields = (), *,
                line: bool = False, path: str | None = None) -> Reception:
        """A live client message; `incoming`: what `jsonrpc.read_client` made of it, if the adapter
        read it; `line`: it came as a line of newline-delimited JSON, `path`: the path of the HTTP
        POST it came in (see `ReplayEngine.receive`)."""
        if incoming is None:
            incoming = read_client(payload)
        if self._scrub is not None and incoming.message is not None:
            payload, incoming = scrubbed_live(incoming, self._scrub)
        if self._faults.faults:
            for item in items(incoming.message) if incoming.message is not None else ():
                if classify(item) is MessageType.REQUEST and (fault := self._faults.for_request(item)) is not None:
                    self._faulted[item["id"]] = fault
                    self.engine.excuse_cancel(item["id"])  # a client that gives up on the answer cancels it
        reception = self.engine.receive(payload, incoming, line=line, path=path)
        for reply in reception.replies:  # a request that matched nothing got its error, not a fault
            self._faulted.pop(reply.message.get("id"), None)
        if self.may_hand_over and not reception.missed:
            self.sent.append((payload, headers))
        return self._noted(reception)

    def withdraw_misses(self, count: int) -> None:
        """The last live message's `count` misses were played from another recorded session."""
        self.engine.withdraw_misses(count)

    def overlong(self, size: int, limit: int) -> Reception:
        """A live message longer than the `limit` its adapter takes, which kept none of it: a
        miss, answered with a JSON-RPC error without an id (none could be read)."""
        reason = f"it is {size} bytes long, past the {limit} bytes a replay takes"
        self.engine.note_unmatched(f"a message of {size} bytes", reason)
        return Reception([], [Reply(Refusal(INVALID_REQUEST, reason).reply())])

    def open(self, method: str, target: str, last_event_id: str | None = None) -> Reception:
        return self._noted(self.engine.open(method, target, last_event_id))

    @property
    def indexed(self) -> bool:
        """Whether the whole recording is indexed (see `advance`)."""
        return self.engine.indexed

    def advance(self) -> Reception:
        """For a recording read as it is replayed: index one more bounded step of it, for an adapter
        to call while the client is idle, so what the live client already released goes out."""
        return self._noted(self.engine.advance())

    def index_all(self) -> None:
        """Index the rest of the recording (what it releases is not sent: for a session that ended)."""
        self.engine.index_all()

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
        report = self.engine.report
        report.unfired_faults = self._faults.unfired()
        if report.recorded:  # the new episode took the place of what the recording had left
            report.replaced, report.unused = report.unused, []
        return report

    @property
    def played_frames(self) -> set[int]:
        return self.engine.played_frames or set()

    def _noted(self, reception: Reception) -> Reception:
        if self._faulted or self._silenced:
            reception = dataclasses.replace(reception, actions=self._with_faults(reception.actions))
        if self.may_hand_over:
            self.replayed += [reply.payload for reply in reception.replies]
            self.replayed += [action.payload for action in reception.actions if action.frame.message is not None]
        return reception

    def _with_faults(self, actions: list[Action]) -> list[Action]:
        """The released actions with each faulted request's answer changed as its fault says."""
        out: list[Action] = []
        for action in actions:
            frame = action.frame
            if frame.channel in self._silenced:
                continue
            answered = _answered_id(action)
            fault = self._faulted.pop(answered, None) if answered is not _NO_ID else None
            if fault is None:
                out.append(action)
                continue
            self._faults.fire(fault)
            if fault.action is FaultAction.ERROR:
                error = {"jsonrpc": "2.0", "id": answered, "error": {"code": fault.code, "message": fault.message}}
                out.append(dataclasses.replace(action, frame=frame._replace(message=error, data=None),
                                               payload=encode(error)))
            elif fault.action is FaultAction.DELAY:
                out.append(dataclasses.replace(action, hold=action.hold + fault.seconds))
            elif fault.action is FaultAction.MALFORMED:
                out.append(dataclasses.replace(action, payload=MALFORMED))
            elif fault.action is FaultAction.HANG:
                if frame.channel != STDIO:
                    self._silenced.add(frame.channel)  # its stream stays open, with nothing more on it
            else:  # DROP: the connection goes where the answer would have gone, and nothing after it
                cut = Frame(frame.seq, frame.t, frame.direction, frame.channel, Kind.STREAM_END,
                            info={"reason": "upstream_error", "detail": f"fault {fault.spec}"})
                out.append(Action(cut, b""))
                self._silenced.add(frame.channel)
                if frame.channel == STDIO:
                    out.append(Action(cut._replace(kind=Kind.EXIT, info={"code": 1, "signal": None}), b""))
        return out


_NO_ID = object()


def _answered_id(action: Action) -> Any:
    """The live id the single JSON-RPC response an action sends answers (_NO_ID for anything else)."""
    if not isinstance(action.frame.message, dict):
        return _NO_ID
    message = parse(action.payload)  # restamped: the live id
    if isinstance(message, dict) and classify(message) in (MessageType.RESULT, MessageType.ERROR):
        return message.get("id")
    return _NO_ID


def scrubbed_live(incoming: Incoming, hook: FrameHook) -> tuple[bytes, Incoming]:
    """A live client message as the before-record hook would have recorded it: each JSON-RPC item
    passes through the hook as a client frame would (an item the hook drops is kept as it is:
    dropping it from the session would leave its sender waiting)."""
    scrubbed = []
    for item in items(incoming.message):
        frame = run_hook(hook, Frame(0, 0.0, Direction.CLIENT_TO_SERVER, STDIO, Kind.MESSAGE, item))
        scrubbed.append(frame.message if frame is not None and frame.message is not None else item)
    message = scrubbed if isinstance(incoming.message, list) else scrubbed[0]
    return encode(message), dataclasses.replace(incoming, message=message)


@dataclasses.dataclass(frozen=True)
class EndedSession:
    """What the summary keeps of a replay session whose live session ended: its name and report,
    its engine let go (a replay that runs for long serves thousands of sessions)."""

    name: str | None
    report: Report

    @classmethod
    def of(cls, session: ReplaySession) -> EndedSession:
        return cls(session.name, session.report)


def summary(sessions: Sequence[ReplaySession | EndedSession]) -> tuple[list[str], bool]:
    """The end-of-replay summary lines (one block per session, named when there are several) and
    whether the replay was clean (every live message matched)."""
    if len(sessions) == 1:
        return sessions[0].report.lines(), sessions[0].report.clean
    # Sessions with the very same summary (N clients of one recorded session, under --repeats
    # allow) share one block: what sets one apart is not lost among a thousand copies.
    alike: dict[tuple[str, ...], list[str]] = {}
    for session in sessions:
        alike.setdefault(tuple(session.report.lines()), []).append(session.name or "(none)")
    lines = []
    for block, names in alike.items():
        named = names[0] if len(names) == 1 else f"{names[0]} (and {len(names) - 1} more alike)"
        lines += [f"session {named}: {line}" for line in block]
    return lines, all(session.report.clean for session in sessions)


def merged_report(sessions: Sequence[ReplaySession | EndedSession]) -> Report:
    merged = Report()
    for session in sessions:
        merged.merge(session.report)
    return merged
