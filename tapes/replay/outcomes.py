"""What the replay engine hands its adapters: recorded frames to write (`Action`), replies it made
up itself (`Reply`), both grouped per live message (`Reception`), and the end-of-replay `Report`."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from tapes.cassette.frames import Frame
from tapes.wire.jsonrpc import INVALID_REQUEST, PARSE_ERROR, wire_form

LONGEST_WAIT = (2**31 - 1) / 1000  # seconds (24 days): the most poll(2) waits; an Action's wait is at most this

NO_MATCH = -32090  # in JSON-RPC's implementation-defined server error range
SUMMARY_LIMIT = 10
"""Lines per list (unmatched, unused) in the printed summary; the JSON report has them all."""


@dataclass(frozen=True, slots=True)
class Action:
    """A recorded frame to write as it was written (its kind and channel say how), with the live
    ids already in `payload`."""

    frame: Frame
    payload: bytes
    gap: float = 0.0  # recorded seconds between what released this frame (or the frame before it) and it
    hold: float = 0.0  # seconds to wait before it whatever the timing (a delay fault)


@dataclass(frozen=True, slots=True)
class Reply:
    """A JSON-RPC answer the engine made up for a live message the recording has no answer for
    (an error, or the empty result of an unrecorded ping). It answers that message itself, on
    whatever carried it; it belongs to no recorded channel."""

    message: dict[str, Any]

    @classmethod
    def error(cls, request_id: Any, code: int, text: str) -> Reply:
        return cls({"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": text}})

    @classmethod
    def result(cls, request_id: Any, result: dict[str, Any]) -> Reply:
        return cls({"jsonrpc": "2.0", "id": request_id, "result": result})

    @property
    def payload(self) -> bytes:
        """Its wire bytes (`wire_form`: what it quotes of a cassette may hold a lone surrogate)."""
        return wire_form(self.message)

    @property
    def malformed(self) -> bool:
        """The live message was not JSON-RPC at all (an HTTP adapter answers it with 400)."""
        error = self.message.get("error")
        return error is not None and error["code"] in (PARSE_ERROR, INVALID_REQUEST)


def answer_payload(replies: Sequence[Reply], batch: bool) -> bytes:
    """The replies made up for one live message, as the one answer it gets: an array for a batch
    (JSON-RPC 2.0, section 6), else the reply itself."""
    return replies[0].payload if len(replies) == 1 and not batch else wire_form([reply.message for reply in replies])


@dataclass(frozen=True, slots=True)
class Reception:
    """What a live client message (or HTTP request) led to: the recorded frames it released, the
    replies made up for the parts of it that matched nothing, and the recorded channel it was
    matched to (an HTTP adapter answers on that exchange's framing; None when nothing matched).
    `missed`: how many of its items matched nothing. `repeated`: how many of `actions`, at their
    start, answer a request again under Repeats.ALLOW (or a poll, or a resumption polled back
    again); their channel was played already, so an HTTP adapter serves them on a fresh copy of
    that exchange."""

    actions: list[Action]
    replies: list[Reply] = field(default_factory=list)
    channel: str | None = None
    missed: int = 0
    repeated: int = 0
    batch: bool = False  # the live message was a batch: its replies go back as one (JSON-RPC 2.0, section 6)


@dataclass(frozen=True, slots=True)
class Unmatched:
    """A live client message the cassette had no answer for."""

    summary: str  # e.g. "tools/call id 7"
    reason: str  # one sentence: what was expected instead


@dataclass
class Report:
    played: int = 0  # recorded server frames released
    repeated: int = 0  # requests answered again under Repeats.ALLOW, and polls answered again
    skipped: int = 0  # recorded polls the live client did not make (it polled less often)
    unmatched: list[Unmatched] = field(default_factory=list)
    unused: list[str] = field(default_factory=list)  # recorded client requests never received
    recorded: int = 0  # frames a new episode added to the cassette (record mode new_episodes)
    replaced: list[str] = field(default_factory=list)  # recorded requests the new episode superseded
    unfired_faults: list[str] = field(default_factory=list)  # --fault specs whose request never came
    # what the protocol answered, not the cassette: a handshake from a client unlike the recorded
    # one, pings the recording has none left of (no misses: a real server answers them too)
    adapted: list[str] = field(default_factory=list)

    @property
    def clean(self) -> bool:
        return not self.unmatched

    def as_json(self) -> dict[str, Any]:
        return {
            "played": self.played,
            "repeated": self.repeated,
            "skipped": self.skipped,
            "unmatched": [{"summary": miss.summary, "reason": miss.reason} for miss in self.unmatched],
            "unused": self.unused,
            "recorded": self.recorded,
            "replaced": self.replaced,
            "unfired_faults": self.unfired_faults,
            "adapted": self.adapted,
        }

    def lines(self, limit: int = SUMMARY_LIMIT) -> list[str]:
        """The end-of-replay summary: a count line, then a line per problem, `limit` of each kind."""
        counts = f"played {self.played} frames, {len(self.unmatched)} unmatched, {len(self.unused)} unused"
        if self.repeated:
            counts += f", {self.repeated} repeated"
        if self.skipped:
            counts += f", {self.skipped} recorded poll{'' if self.skipped == 1 else 's'} skipped"
        if self.recorded:
            counts += f", {self.recorded} new frames recorded from the real server"
        if self.replaced:
            counts += f", replacing {len(self.replaced)} recorded request{'' if len(self.replaced) == 1 else 's'}"
        return (
            [counts]
            + _capped([f"unmatched {miss.summary}: {miss.reason}" for miss in self.unmatched[: limit + 1]], len(self.unmatched), limit, "unmatched")
            + _capped([f"unused {request}" for request in self.unused[: limit + 1]], len(self.unused), limit, "unused")
            + [f"fault never fired: {spec}" for spec in self.unfired_faults]
            + _capped([f"adapted {what}" for what in self.adapted[: limit + 1]], len(self.adapted), limit, "adapted")
        )

    def merge(self, other: Report) -> None:
        self.played += other.played
        self.repeated += other.repeated
        self.skipped += other.skipped
        self.recorded += other.recorded
        self.unmatched += other.unmatched
        self.unused += other.unused
        self.replaced += other.replaced
        self.unfired_faults += other.unfired_faults
        self.adapted += other.adapted


def _capped(lines: list[str], total: int, limit: int, what: str) -> list[str]:
    if total <= limit:
        return lines
    more = f"{total - limit:,}".replace(",", " ")
    return [*lines[:limit], f"… and {more} more {what} (all of them in the JSON report: --report FILE)"]
