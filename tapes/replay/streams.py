"""SSE stream bookkeeping for the HTTP replayer, sans-IO: what the engine released for each recorded
HTTP exchange, where a `Last-Event-ID` resumes, and the faults to inject on the way.

The replay engine releases frames by happens-before, often before the live request of their
exchange has arrived (notifications recorded on the standalone GET stream) and sometimes after the
live connection that carried them is gone (the client dropped it). So the released frames of every
recorded channel are kept in a `ChannelLog`, and each live connection reads one log from a
`Cursor`. A new connection starts at the beginning of its log; a `GET` with a `Last-Event-ID` that
no recorded request carried resumes right after that event, in the log of the channel that sent
it, which is how "events k+1.. of that stream, none twice, none of another stream" falls out.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from tapes.cassette.frames import Direction, Frame, Kind
from tapes.errors import UserError
from tapes.replay.outcomes import LONGEST_WAIT, Action
from tapes.wire.sse import encode_event, recorded_event
from tapes.wire.text import is_digits

MALFORMED_EVENT = b'event: message\ndata: {"jsonrpc": "2.0", "method": \n\n'
"""What a `malformed` fault sends: an event whose data is cut-off JSON."""


@dataclass(frozen=True, slots=True)
class Delivery:
    """A released body frame of a channel; `event` is its 1-based number among the channel's SSE
    events (None for other frames), the position faults are given in."""

    action: Action
    event: int | None


@dataclass
class ChannelLog:
    """What the engine released for one recorded exchange: its response head, then its body in
    release order; a STREAM_END, when released, is the last delivery. Positions in the body count
    from its first delivery, also once the start was let go (`forget_before`)."""

    head: Action | None = None
    body: list[Delivery] = field(default_factory=list)  # the deliveries kept, from position `forgotten` on
    events: int = 0
    after_event: dict[str, int] = field(default_factory=dict)  # event id -> body position after it
    forgotten: int = 0

    @property
    def ended(self) -> bool:
        return bool(self.body) and self.body[-1].action.frame.kind is Kind.STREAM_END

    @property
    def released(self) -> int:
        """The position after the last delivery."""
        return self.forgotten + len(self.body)

    def at(self, position: int) -> Delivery:
        return self.body[position - self.forgotten]

    def since(self, position: int) -> list[Delivery]:
        return self.body[position - self.forgotten :]

    def forget_before(self, position: int) -> None:
        """Let go of the deliveries before `position`, which the stream's one reader has passed: a
        legacy HTTP+SSE stream, which no client resumes, carries every answer of its session, and
        a client may ask all session long."""
        del self.body[: position - self.forgotten]
        self.forgotten = position

    def append(self, action: Action) -> None:
        frame = action.frame
        if frame.kind is Kind.HTTP_RESPONSE:
            self.head = action
            return
        number = None
        if frame.kind is Kind.SSE_EVENT:
            self.events += 1
            number = self.events
        self.body.append(Delivery(action, number))
        event_id = (frame.info or {}).get("id") if frame.kind is Kind.SSE_EVENT else None
        if event_id is not None:
            self.after_event[event_id] = self.released


@dataclass(frozen=True, slots=True)
class Cursor:
    """Where a live connection reads: a recorded channel and a position in its log's body."""

    channel: str
    position: int = 0


class StreamBook:
    """The logs of every recorded channel of one recorded session, and of the copies an answer sent
    again goes out on, each until a live connection was sent all of it."""

    def __init__(self) -> None:
        self._logs: dict[str, ChannelLog] = {}
        self._event_channel: dict[str, str] = {}  # event id -> the channel that sent it last
        self._copied: dict[str, str] = {}  # a copy of a recorded channel (an answer sent again) -> that channel

    def add(self, actions: Iterable[Action]) -> None:
        """File released actions under their recorded channel."""
        for action in actions:
            frame = action.frame
            self.log(frame.channel).append(action)
            if frame.kind is Kind.SSE_EVENT and (event_id := (frame.info or {}).get("id")) is not None:
                self._event_channel[event_id] = frame.channel

    def log(self, channel: str) -> ChannelLog:
        log = self._logs.get(channel)
        if log is None:
            log = self._logs[channel] = ChannelLog()
        return log

    def add_copy(self, copy: str, of: str) -> None:
        """`copy` is a fresh channel that carries the answer of recorded channel `of` again (`--repeats allow`)."""
        self._copied[copy] = of

    def sent_whole(self, channel: str) -> None:
        """A live connection was sent `channel`'s stream to its end. A copy is forgotten then, so a
        client repeating a request all session long is not kept a log per repeat: its event ids
        name the recorded stream it copied again, which sent them too."""
        recorded = self._copied.pop(channel, None)
        if recorded is None:
            return
        copied = self._logs.get(recorded)  # (none in a book made afresh since: a session that went on in another recording)
        for event_id in self._logs.pop(channel).after_event:
            if self._event_channel.get(event_id) != channel:
                continue  # a later stream sent it again
            if copied is not None and event_id in copied.after_event:
                self._event_channel[event_id] = recorded
            else:
                del self._event_channel[event_id]

    def resume(self, last_event_id: str) -> Cursor | None:
        """Where a live `GET` with this `Last-Event-ID` continues: right after the event, on the
        stream that sent it (an id a resumed stream re-sent belongs to that newer stream). None
        when no released event has the id."""
        channel = self._event_channel.get(last_event_id)
        if channel is None:
            return None
        return Cursor(channel, self._logs[channel].after_event[last_event_id])


def as_stream_message(channel: str, payload: bytes) -> Action:
    """A message that is not in the recording (a reply the engine made up, or what a real server
    said after a hand-over), sent as a `message` event on `channel`: on a legacy HTTP+SSE session
    that stream is the only place a client reads answers from."""
    frame = Frame(0, 0.0, Direction.SERVER_TO_CLIENT, channel, Kind.SSE_EVENT, json.loads(payload),
                  info={"id": None, "event": "message", "retry": None})
    return Action(frame, payload)


def stream_end(channel: str) -> Action:
    """The end of `channel`'s stream, where the recording has none there (it came on another exchange)."""
    return Action(Frame(0, 0.0, Direction.SERVER_TO_CLIENT, channel, Kind.STREAM_END, info={"reason": "closed"}), b"")


def sse_bytes(action: Action) -> bytes:
    """The wire form of a released SSE_EVENT action, with its recorded id, event name and retry
    (and its data's bytes as recorded, UTF-8 or not)."""
    return encode_event(recorded_event(action.payload.decode("utf-8", "surrogateescape"), action.frame.info or {}))


# --- fault injection ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Faults:
    """Faults to inject, each at a position of a recorded stream: `channel` is its recorded
    exchange ("http:9"), `event` the 1-based number of an SSE event on it. Stream faults fire
    once, on the first live delivery that reaches the position, so the client's retry succeeds."""

    drop_after: Mapping[str, int] = field(default_factory=dict)  # cut the connection after event N
    delays: Mapping[tuple[str, int], float] = field(default_factory=dict)  # seconds before event N
    malformed_after: frozenset[tuple[str, int]] = frozenset()  # a malformed event after event N
    missing_sessions: frozenset[str] = frozenset()  # session ids answered 404

    def __bool__(self) -> bool:
        """Whether any fault is asked for."""
        return bool(self.drop_after or self.delays or self.malformed_after or self.missing_sessions)

    @classmethod
    def from_options(
        cls,
        drop_after: Iterable[str] = (),
        delays: Iterable[str] = (),
        malformed_after: Iterable[str] = (),
        missing_sessions: Iterable[str] = (),
    ) -> Faults:
        """From the CLI's spellings: `CHANNEL:N` for drops and malformed events, `CHANNEL:N:SECONDS`
        for delays (e.g. `http:9:2`, `http:9:2:0.5`). Raises UserError naming a bad one, or a
        channel given two drops (a stream is cut once)."""
        drops: dict[str, int] = {}
        for channel, event in (_position(text, "--drop-after") for text in drop_after):
            if channel in drops:
                raise UserError(f"--drop-after names {channel} twice ({drops[channel]} and {event}): a stream is cut once")
            drops[channel] = event
        return cls(
            drop_after=drops,
            delays=dict(_delay(text) for text in delays),
            malformed_after=frozenset(_position(text, "--malformed") for text in malformed_after),
            missing_sessions=frozenset(missing_sessions),
        )

    def check(self, events: Mapping[str, int], session_ids: Iterable[str]) -> None:
        """Refuse a fault that could never fire: at an SSE event the recorded exchange does not
        have (`events`: how many each exchange's stream carried), or on a session the cassette
        does not hold."""
        for flag, channel, event in ([("--drop-after", *at) for at in self.drop_after.items()]
                                     + [("--delay", *at) for at in self.delays]
                                     + [("--malformed", *at) for at in sorted(self.malformed_after)]):
            if channel not in events:
                numbered = sorted(events, key=lambda name: int(name[5:]) if is_digits(name[5:]) else 0)
                streams = ", ".join(numbered[:8]) + (", ..." if len(events) > 8 else "")
                raise UserError(f"{flag} {channel}:{event}: the cassette has no exchange {channel} that streamed events "
                                f"({'those that did: ' + streams if events else 'none did'})")
            if event > events[channel]:
                raise UserError(f"{flag} {channel}:{event}: exchange {channel} streamed {events[channel]} "
                                f"event{'' if events[channel] == 1 else 's'}")
        known = set(session_ids)
        for session_id in sorted(self.missing_sessions - known):
            named = ", ".join(sorted(known)[:4]) + (", ..." if len(known) > 4 else "")
            raise UserError(f"--session-404 {session_id!r}: the cassette has no session with that id "
                            f"({'its sessions: ' + named if known else 'it has no session ids'})")


class FaultPlan:
    """The faults still to fire; consulted by the adapter around each SSE event it writes."""

    def __init__(self, faults: Faults) -> None:
        self._drops = dict(faults.drop_after)
        self._delays = dict(faults.delays)
        self._malformed = set(faults.malformed_after)
        self.missing_sessions = faults.missing_sessions
        self._refused: set[str] = set()  # the missing sessions a live request named

    def any_on(self, channel: str) -> bool:
        """Whether a stream fault is still to fire on this channel."""
        return (
            channel in self._drops
            or any(at == channel for at, _ in self._delays)
            or any(at == channel for at, _ in self._malformed)
        )

    def refuses(self, session_id: str) -> bool:
        """Whether a request naming this session is answered 404 (--session-404)."""
        if session_id in self.missing_sessions:
            self._refused.add(session_id)
            return True
        return False

    def delay_before(self, channel: str, event: int) -> float:
        return self._delays.pop((channel, event), 0.0)

    def malformed_after(self, channel: str, event: int) -> bool:
        if (channel, event) in self._malformed:
            self._malformed.discard((channel, event))
            return True
        return False

    def drop_after(self, channel: str, event: int) -> bool:
        if self._drops.get(channel) == event:
            del self._drops[channel]
            return True
        return False

    def unfired(self) -> list[str]:
        """The faults no live delivery reached (their stream was never read that far), as given."""
        return ([f"--drop-after {channel}:{event}" for channel, event in self._drops.items()]
                + [f"--delay {channel}:{event}:{seconds:g}" for (channel, event), seconds in self._delays.items()]
                + [f"--malformed {channel}:{event}" for channel, event in sorted(self._malformed)]
                + [f"--session-404 {session_id}" for session_id in sorted(self.missing_sessions - self._refused)])


def _position(text: str, flag: str) -> tuple[str, int]:
    channel, _, number = text.rpartition(":")
    if not channel.startswith("http:") or not is_digits(channel[5:]) or not is_digits(number) or int(number) < 1:
        raise UserError(f"{flag} {text!r} is not CHANNEL:N with N ≥ 1 (e.g. http:9:2, the 2nd event of exchange 9)")
    return channel, int(number)


def _delay(text: str) -> tuple[tuple[str, int], float]:
    position, _, seconds = text.rpartition(":")
    try:
        delay = float(seconds)
    except ValueError:
        delay = -1.0
    if not 0 <= delay <= LONGEST_WAIT or not position:  # NaN and infinity too
        raise UserError(f"--delay {text!r} is not CHANNEL:N:SECONDS with at most {LONGEST_WAIT:.0f} seconds (e.g. http:9:2:0.5)")
    return _position(position, "--delay"), delay
