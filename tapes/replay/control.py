"""How a replay is steered: the matcher, the race and repeats policies, the timing and the
before-record hook, as one value every replayer adapter takes, built from flags, `[tool.tapes]`
or a pytest marker."""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from typing import TypeVar

from tapes.cassette.frames import Frame
from tapes.cassette.scrub import FrameHook, load_hook
from tapes.cassette.store import Header
from tapes.errors import UserError
from tapes.replay.engine import Race, Repeats, ReplayEngine
from tapes.replay.faults import FaultPlan
from tapes.replay.index import FrameFeed
from tapes.replay.matching import Matcher, matcher_named
from tapes.replay.polls import Polls
from tapes.replay.sessions import SERVED_FROM


@dataclass(frozen=True)
class ReplayControl:
    matcher: Matcher = field(default_factory=Matcher)
    race: Race = Race.RECORDED
    repeats: Repeats = Repeats.IN_ORDER
    speed: float | None = None  # None: instant; 1.0: the recorded gaps; 2.0: twice as fast
    # The before-record hook the cassette was scrubbed with: live messages pass through it before
    # they are matched, so a scrubbed recording still matches the unscrubbed live session.
    scrub: FrameHook | None = None
    faults: tuple[str, ...] = ()  # JSON-RPC level faults (tapes.replay.faults), as the user wrote them
    polls: Polls = Polls.LATEST
    # Whether a stdio recording without the server's exit was cut short (false for an HTTP
    # recording's messages served over stdio, which never had one: see `for_cassette`).
    exits_recorded: bool = True

    def engine(self, frames: Iterable[Frame] | FrameFeed, *, remember_played: bool = False) -> ReplayEngine:
        return ReplayEngine(frames, self.matcher, race=self.race, repeats=self.repeats, remember_played=remember_played,
                            polls=self.polls, clock=self._recorded_clock(), exits_recorded=self.exits_recorded)

    def _recorded_clock(self) -> Callable[[], float] | None:
        """With a timing, the live time in recorded seconds: polls advance on the recorded clock."""
        if self.speed is None:
            return None
        speed = self.speed
        return lambda: time.monotonic() * speed

    def for_cassette(self, header: Header) -> ReplayControl:
        """This control, with the matcher also ignoring the request params the cassette's JSON path
        redaction replaced (their recorded values are placeholders, the live ones are secrets), and
        knowing an HTTP recording served over stdio for one (`served_over_stdio`)."""
        pointers = ["/" + "/".join(path.split(".")[1:]) for rule in header.redaction
                    if rule.startswith("json:") and (path := rule[len("json:"):]).startswith("params.")]
        control = replace(self, matcher=self.matcher.also_ignoring(pointers)) if pointers else self
        return replace(control, exits_recorded=False) if header.labels.get(SERVED_FROM) == "http" else control

    def delay(self, gap: float) -> float:
        """Seconds to wait before carrying out an action with this recorded gap."""
        return 0.0 if self.speed is None else gap / self.speed

    @classmethod
    def build(
        cls,
        *,
        match: str = "default",
        ignore: Iterable[str] = (),
        race: str = Race.RECORDED.value,
        repeats: str = Repeats.IN_ORDER.value,
        timing: str = "instant",
        before_record: str | None = None,
        faults: Iterable[str] = (),
        polls: str = Polls.LATEST.value,
    ) -> ReplayControl:
        """From user-given names; a bad one is a UserError naming the choices."""
        faults = tuple(faults)
        FaultPlan.parse(faults)  # a bad fault is refused here, before anything is served
        return cls(matcher_named(match, ignore), _choice(Race, race, "race"), _choice(Repeats, repeats, "repeats"),
                   parse_timing(timing), load_hook(before_record) if before_record else None, faults,
                   _choice(Polls, polls, "polls"))


Choice = TypeVar("Choice", Race, Repeats, Polls)


def _choice(kind: type[Choice], value: str, what: str) -> Choice:
    try:
        return kind(value)
    except ValueError:
        raise UserError(f"{what} {value!r} is not one of {', '.join(member.value for member in kind)}") from None


def parse_timing(text: str) -> float | None:
    """`instant`, `recorded`, or a speed factor such as `2` (twice as fast as recorded)."""
    if text == "instant":
        return None
    if text == "recorded":
        return 1.0
    try:
        speed = float(text)
    except ValueError:
        speed = 0.0
    if not 0 < speed < math.inf or 1 / speed == math.inf:  # NaN too; a speed so small no gap could be waited
        raise UserError(f"timing {text!r} is not instant, recorded or a positive speed factor")
    return speed
