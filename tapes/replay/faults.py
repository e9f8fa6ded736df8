"""Faults at the JSON-RPC level, sans-IO: what a replay does in place of the recorded answer to a
chosen live request, on every transport alike.

A fault is written `TARGET:ACTION[:ARGS]`. TARGET is a method, with an optional `@name` (the tool
name, resource URI or prompt name the request is about) and `#N` (the Nth live request that
matches, 1-based; the first by default). ACTION is one of:
- `error:CODE:MESSAGE`: a JSON-RPC error in place of the recorded answer;
- `delay:SECONDS`: the recorded answer, that much later;
- `hang`: no answer, ever;
- `malformed`: a broken message (a cut-off line, or SSE event) in place of the answer;
- `drop`: the connection goes (stdio: stdout is closed and the replayer exits; HTTP: the
  connection is cut) where the answer would have gone.

    tools/call@get_forecast#2:error:-32000:rate limited

`FaultPlan` counts the live requests each fault targets and says which answer to change; a fault
that never fired is reported at the end (a warning, an error under fail_on_unused). `dry_run` says
which recorded request each fault would take if the client made the recorded requests again.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from tapes.cassette.frames import Frame, Kind
from tapes.errors import UserError
from tapes.replay.outcomes import LONGEST_WAIT
from tapes.replay.sessions import split_sessions
from tapes.wire.eras import SUBJECT_PARAMS
from tapes.wire.jsonrpc import MessageType, classify, items

_SPEC = re.compile(r"^(?P<target>.+?):(?P<action>error|delay|hang|malformed|drop)(?::(?P<args>.*))?$", re.S)
_TARGET = re.compile(r"^(?P<method>[^@#]+)(?:@(?P<name>.+?))?(?:#(?P<nth>\d+))?$", re.S)

MALFORMED = b'{"jsonrpc": "2.0", "id": '
"""What a `malformed` fault sends in place of a message: JSON cut off mid-value."""


class FaultAction(StrEnum):
    ERROR = "error"
    DELAY = "delay"
    HANG = "hang"
    MALFORMED = "malformed"
    DROP = "drop"


@dataclass(frozen=True)
class Fault:
    spec: str  # as the user wrote it
    method: str
    name: str | None
    nth: int
    action: FaultAction
    code: int = 0  # ERROR
    message: str = ""  # ERROR
    seconds: float = 0.0  # DELAY

    @classmethod
    def parse(cls, spec: str) -> Fault:
        found = _SPEC.match(spec.strip())
        target = _TARGET.match(found["target"]) if found else None
        if found is None or target is None:
            raise UserError(f"fault {spec!r} is not TARGET:ACTION[:ARGS] (e.g. tools/call@get_forecast#2:error:-32000:rate limited; "
                            "actions: error:CODE:MESSAGE, delay:SECONDS, hang, malformed, drop)")
        action, args = FaultAction(found["action"]), found["args"]
        nth = int(target["nth"]) if target["nth"] else 1
        if nth < 1:
            raise UserError(f"fault {spec!r}: #N counts from 1")
        base = {"spec": spec, "method": target["method"], "name": target["name"], "nth": nth, "action": action}
        if action is FaultAction.ERROR:
            code, _, message = (args or "").partition(":")
            if not re.fullmatch(r"-?\d+", code or ""):
                raise UserError(f"fault {spec!r}: error takes CODE:MESSAGE, e.g. error:-32000:rate limited")
            return cls(**base, code=int(code), message=message or "fault injected by mcp-tapes")
        if action is FaultAction.DELAY:
            try:
                seconds = float(args or "")
            except ValueError:
                seconds = -1.0
            if not 0 <= seconds < math.inf:  # NaN too
                raise UserError(f"fault {spec!r}: delay takes a number of seconds, e.g. delay:2.5")
            if seconds > LONGEST_WAIT:
                raise UserError(f"fault {spec!r}: a delay is at most {LONGEST_WAIT:.0f} seconds (24 days)")
            return cls(**base, seconds=seconds)
        if args:
            raise UserError(f"fault {spec!r}: {action.value} takes no arguments")
        return cls(**base)

    def targets(self, request: dict[str, Any]) -> bool:
        if request.get("method") != self.method:
            return False
        if self.name is None:
            return True
        params = request.get("params")
        subject = params.get(SUBJECT_PARAMS.get(self.method, "name")) if isinstance(params, dict) else None
        return subject == self.name


@dataclass
class FaultPlan:
    """The faults of one replay session, counting the live requests they target."""

    faults: tuple[Fault, ...] = ()
    _seen: dict[int, int] = field(default_factory=dict)  # fault index -> live requests it targeted so far
    fired: set[int] = field(default_factory=set)

    @classmethod
    def parse(cls, specs: tuple[str, ...] | list[str]) -> FaultPlan:
        return cls(tuple(Fault.parse(spec) for spec in specs))

    def for_request(self, request: dict[str, Any]) -> Fault | None:
        """The fault that takes this live request's answer, if any (it fires when that answer goes)."""
        chosen = None
        for index, fault in enumerate(self.faults):
            if not fault.targets(request):
                continue
            self._seen[index] = self._seen.get(index, 0) + 1
            if chosen is None and self._seen[index] == fault.nth:
                chosen = fault
        return chosen

    def fire(self, fault: Fault) -> None:
        """The fault changed an answer. (A fault whose request matched nothing recorded never fires:
        that request got the replay's no-match error, not the fault.)"""
        self.fired.add(next(index for index, planned in enumerate(self.faults) if planned is fault))

    def unfired(self) -> list[str]:
        return [fault.spec for index, fault in enumerate(self.faults) if index not in self.fired]


@dataclass(frozen=True)
class DryRunHit:
    spec: str
    session: str | None  # the recorded session's id, when the cassette holds several
    request: str | None  # the recorded request whose answer the fault would take; None: it would never fire


def dry_run(specs: Sequence[str], frames: Sequence[Frame]) -> list[DryRunHit]:
    """Where each fault would fire if the live client made the recorded requests in the recorded
    order: in each recorded session where it fires (a replayed session counts its requests afresh),
    the request whose answer it would take; or one hit with no request, for a fault that never would."""
    taken: list[list[DryRunHit]] = [[] for _ in specs]
    for session in split_sessions(frames):
        plan = FaultPlan.parse(specs)
        position = {id(fault): index for index, fault in enumerate(plan.faults)}
        for frame in session.frames:
            if not frame.from_client or frame.kind is not Kind.MESSAGE or frame.message is None:
                continue
            for item in items(frame.message):
                if classify(item) is MessageType.REQUEST and (fault := plan.for_request(item)) is not None:
                    request = f"{item['method']} #{item['id']} (frame {frame.seq})"
                    taken[position[id(fault)]].append(DryRunHit(fault.spec, session.session_id, request))
    return [hit for spec, hits in zip(specs, taken, strict=True) for hit in hits or [DryRunHit(spec, None, None)]]
