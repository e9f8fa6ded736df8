"""`tapes diff`: a semantic diff of two sessions, also across protocol eras.

Both cassettes become era-neutral sessions (tapes.analysis.normalize). Their steps are aligned by what
they ask — method plus tool name, prompt name or resource URI — in order, not by position, so an
extra request on one side does not shift everything after it. Then the report lists:
- interactions added, removed or changed (JSON pointers into the step: request, outcome, asks,
  progress), and those that are the same behaviour expressed in another era's form;
- capability changes, the tool surface (tools added or removed, input/output schema changes,
  each classified breaking or compatible), notifications, transport-level facts.
Every change has a severity: "breaking", "compatible" or "changed" (a difference that is
neither, e.g. a different result value).
"""

from __future__ import annotations

import json
import re
from collections import Counter, defaultdict, deque
from dataclasses import asdict, dataclass, field
from difflib import SequenceMatcher
from typing import Any

from tapes.analysis.normalize import Noise, Session, Step, session
from tapes.cassette.frames import STOPPING_SIGNALS
from tapes.cassette.store import Cassette
from tapes.replay.matching import MISSING, Difference, differences
from tapes.wire.text import printable, terminal_line

BREAKING = "breaking"
COMPATIBLE = "compatible"
CHANGED = "changed"
SEVERITIES = (BREAKING, CHANGED, COMPATIBLE)


@dataclass(frozen=True)
class Delta:
    """One JSON value that differs: where, and old → new (None when absent on that side)."""

    path: str
    old: Any
    new: Any

    @classmethod
    def of(cls, difference: Difference) -> Delta:
        return cls(difference.path or "/", _present(difference.recorded), _present(difference.live))

    def describe(self) -> str:
        old, new = _text(self.old), _text(self.new)
        # both cut where they are still the same would read alike: show them from where they part
        same = next((i for i, (a, b) in enumerate(zip(old, new, strict=False)) if a != b), min(len(old), len(new)))
        start = max(0, same - _CONTEXT) if same > _LIMIT - _CONTEXT else 0
        return f"{self.path}: {_short(old, start)} → {_short(new, start)}"


def _present(value: Any) -> Any:
    return None if value is MISSING else value


_LIMIT = 70  # characters of a value shown
_CONTEXT = 20  # ... of them before where two values part, when that is past the limit


def _text(value: Any) -> str:
    return "(absent)" if value is None else json.dumps(value, ensure_ascii=False)


def _short(text: str, start: int = 0) -> str:
    shown = ("…" if start else "") + text[start:]
    return shown if len(shown) <= _LIMIT else shown[: _LIMIT - 1] + "…"


@dataclass(frozen=True)
class Change:
    section: str  # "session", "interaction", "capability", "tool", "notification", "transport"
    kind: str  # "added", "removed", "changed"
    subject: str
    severity: str
    deltas: tuple[Delta, ...] = ()
    frames: tuple[tuple[int, ...], tuple[int, ...]] = ((), ())  # frame seqs on the old and new side
    note: str = ""


@dataclass(frozen=True)
class Equivalence:
    """A step both sessions did the same way in substance, in different protocol forms."""

    subject: str
    old_form: tuple[str, ...]
    new_form: tuple[str, ...]
    era: str  # the era whose form the new side uses
    frames: tuple[tuple[int, ...], tuple[int, ...]] = ((), ())

    def describe(self) -> str:
        return (f"{self.subject}: same behaviour, expressed as in {self.era} "
                f"({' + '.join(self.new_form) or 'plain request'} ↔ {' + '.join(self.old_form) or 'plain request'})")


@dataclass
class DiffReport:
    old_name: str
    new_name: str
    old_era: str | None
    new_era: str | None
    changes: list[Change] = field(default_factory=list)
    equivalences: list[Equivalence] = field(default_factory=list)
    folds: dict[str, list[str]] = field(default_factory=dict)  # era forms set aside, per side
    matched: int = 0  # steps found on both sides

    @property
    def same(self) -> bool:
        return not self.changes

    def exit_code(self, fail_on: str = "any") -> int:
        if fail_on == BREAKING:
            return int(any(change.severity == BREAKING for change in self.changes))
        return int(bool(self.changes))

    def to_json(self) -> dict[str, Any]:
        return {
            "old": {"cassette": self.old_name, "protocol": self.old_era},
            "new": {"cassette": self.new_name, "protocol": self.new_era},
            "same": self.same,
            "matched": self.matched,
            "counts": dict(Counter(change.severity for change in self.changes)),
            "changes": [asdict(change) for change in self.changes],
            "equivalences": [{**asdict(equivalence), "description": equivalence.describe()}
                             for equivalence in self.equivalences],
            "folds": self.folds,
        }


# --- comparing --------------------------------------------------------------------------------


def diff_cassettes(old: Cassette, new: Cassette, *, old_name: str = "old", new_name: str = "new",
                   noise: Noise | None = None) -> DiffReport:
    return diff_sessions(session(old), session(new), old_name=old_name, new_name=new_name, noise=noise)


def diff_sessions(old: Session, new: Session, *, old_name: str = "old", new_name: str = "new",
                  noise: Noise | None = None) -> DiffReport:
    noise = noise or Noise()
    report = DiffReport(old_name, new_name, old.era, new.era, folds={"old": old.folds, "new": new.folds})
    if old.era != new.era:
        report.changes.append(Change("session", "changed", "protocol version", CHANGED, (Delta("/protocolVersion", old.era, new.era),)))
    _compare_steps(old, new, noise, report)
    _compare_capabilities(old, new, report)
    _compare_tools(old, new, noise, report)
    _compare_events(old, new, noise, report)
    _compare_wire(old, new, report)
    _compare_exit(old, new, report)
    return report


def align(old: list[Step], new: list[Step], noise: Noise | None = None) -> list[tuple[Step | None, Step | None]]:
    """Pairs of steps that ask the same thing, in order; a step found on one side only is paired
    with None. Within a stretch the two sides do differently, steps with the same key still pair up
    in order, and so does a step that moved to another stretch. Steps of one key asked one after
    the other (concurrent calls of a tool, sent in another order) pair by equal requests first."""
    # The stretches both begin and end with asking the same pair up at once: SequenceMatcher takes
    # time quadratic in a run of one key (a session calling one tool 4000 times took seconds).
    head = 0
    while head < min(len(old), len(new)) and old[head].key == new[head].key:
        head += 1
    tail = 0
    while tail < min(len(old), len(new)) - head and old[-1 - tail].key == new[-1 - tail].key:
        tail += 1
    old_keys, new_keys = [step.key for step in old[head:len(old) - tail]], [step.key for step in new[head:len(new) - tail]]
    pairs: list[tuple[Step | None, Step | None]] = list(zip(old[:head], new[:head], strict=True))
    for tag, i1, i2, j1, j2 in SequenceMatcher(None, old_keys, new_keys, autojunk=False).get_opcodes():
        i1, i2, j1, j2 = i1 + head, i2 + head, j1 + head, j2 + head
        if tag == "equal":
            pairs += zip(old[i1:i2], new[j1:j2], strict=True)
            continue
        rest = _by_key(new[j1:j2])
        paired: set[int] = set()
        for step in old[i1:i2]:
            twins = rest.get(step.key)
            twin = twins.popleft() if twins else None
            if twin is not None:
                paired.add(id(twin))
            pairs.append((step, twin))
        pairs += [(None, step) for step in new[j1:j2] if id(step) not in paired]
    pairs += zip(old[len(old) - tail:], new[len(new) - tail:], strict=True)
    return _pair_equal_requests(_pair_moved(pairs), noise or Noise())


def _by_key(steps: list[Step]) -> dict[tuple[str, str], deque[Step]]:
    """The steps with each key, in order: the next twin of a key is found at once (a scan of the
    other side per step made diffs of long sessions quadratic)."""
    found: dict[tuple[str, str], deque[Step]] = defaultdict(deque)
    for step in steps:
        found[step.key].append(step)
    return found


def _pair_moved(pairs: list[tuple[Step | None, Step | None]]) -> list[tuple[Step | None, Step | None]]:
    """A step found on one side only in one stretch and its twin on the other side only in
    another stretch moved: e.g. a client's close of a subscription racing its next request. They
    pair up, in order, where the old one was."""
    added: dict[tuple[str, str], deque[tuple[int, Step]]] = defaultdict(deque)
    for index, (before, after) in enumerate(pairs):
        if before is None and after is not None:
            added[after.key].append((index, after))
    moved: set[int] = set()
    for index, (before, after) in enumerate(pairs):
        if after is None and before is not None and added.get(before.key):
            other, twin = added[before.key].popleft()
            moved.add(other)
            pairs[index] = (before, twin)
    return [pair for index, pair in enumerate(pairs) if index not in moved]


def _pair_equal_requests(pairs: list[tuple[Step | None, Step | None]], noise: Noise) -> list[tuple[Step | None, Step | None]]:
    """Within each run of paired steps of one key, a step pairs with the first twin that asks the
    same (its params, noise aside), the others in order: two concurrent calls of a tool sent in
    another order are not both changed."""
    found: list[tuple[Step | None, Step | None]] = []
    run: list[tuple[Step, Step]] = []
    for before, after in pairs:
        if before is not None and after is not None and (not run or run[0][0].key == before.key):
            run.append((before, after))
            continue
        found += _by_request(run, noise)
        run = [(before, after)] if before is not None and after is not None else []
        if not run:
            found.append((before, after))
    return found + _by_request(run, noise)


def _by_request(run: list[tuple[Step, Step]], noise: Noise) -> list[tuple[Step | None, Step | None]]:
    if len(run) < 2:
        return list(run)
    waiting: dict[str, deque[Step]] = defaultdict(deque)
    for _, after in run:
        waiting[_asked(after, noise)].append(after)
    twins = [waiting[asked].popleft() if waiting.get(asked := _asked(before, noise)) else None for before, _ in run]
    taken = {id(twin) for twin in twins if twin is not None}
    rest = deque(after for _, after in run if id(after) not in taken)
    return [(before, twin or rest.popleft()) for (before, _), twin in zip(run, twins, strict=True)]


def _asked(step: Step, noise: Noise) -> str:
    """What a step asks, as compared (noise aside), in one string to look twins up by."""
    document = step.document(noise)
    return json.dumps(document.get("request") if isinstance(document, dict) else None, sort_keys=True)


def _compare_steps(old: Session, new: Session, noise: Noise, report: DiffReport) -> None:
    for before, after in align(old.steps, new.steps, noise):
        if before is None or after is None:
            step = before or after
            assert step is not None
            kind = "removed" if after is None else "added"
            report.changes.append(Change("interaction", kind, step.describe(), BREAKING if kind == "removed" else COMPATIBLE,
                                         frames=(tuple(sorted(before.seqs)) if before else (), tuple(sorted(after.seqs)) if after else ())))
            continue
        report.matched += 1
        frames = (tuple(sorted(before.seqs)), tuple(sorted(after.seqs)))
        found = differences(before.document(noise), after.document(noise))
        if found:
            report.changes.append(Change("interaction", "changed", before.describe(), _step_severity(before, after),
                                         tuple(Delta.of(d) for d in found), frames))
        elif before.expressed != after.expressed:
            report.equivalences.append(Equivalence(before.describe(), tuple(before.expressed), tuple(after.expressed),
                                                   new.era or "the new recording", frames))


def _step_severity(before: Step, after: Step) -> str:
    old_outcome, new_outcome = before.outcome or {}, after.outcome or {}
    if "result" in old_outcome and ("error" in new_outcome or not new_outcome or _is_tool_error(new_outcome)):
        return BREAKING  # it worked, now it does not
    if ("error" in old_outcome or _is_tool_error(old_outcome)) and "result" in new_outcome and not _is_tool_error(new_outcome):
        return COMPATIBLE  # it failed, now it works
    return CHANGED


def _is_tool_error(outcome: dict[str, Any]) -> bool:
    result = outcome.get("result")
    return isinstance(result, dict) and result.get("isError") is True


def _compare_capabilities(old: Session, new: Session, report: DiffReport) -> None:
    for side, before, after in (("server", old.server_capabilities, new.server_capabilities),
                                ("client", old.client_capabilities, new.client_capabilities)):
        for difference in differences(before or {}, after or {}):
            delta = Delta.of(difference)
            severity = BREAKING if delta.new in (None, False) and delta.old not in (None, False) else \
                COMPATIBLE if delta.old in (None, False) else CHANGED
            kind = "added" if delta.old is None else "removed" if delta.new is None else "changed"
            report.changes.append(Change("capability", kind, f"{side} {delta.path.lstrip('/')}", severity, (delta,)))


# --- the tool surface ---------------------------------------------------------------------------


def _compare_tools(old: Session, new: Session, noise: Noise, report: DiffReport) -> None:
    if old.tools is None or new.tools is None:
        return  # one side never listed its tools: nothing to say about the surface
    for name in sorted(old.tools.keys() - new.tools.keys()):
        report.changes.append(Change("tool", "removed", name, BREAKING))
    for name in sorted(new.tools.keys() - old.tools.keys()):
        report.changes.append(Change("tool", "added", name, COMPATIBLE))
    for name in sorted(old.tools.keys() & new.tools.keys()):
        before, after = noise.clean(old.tools[name]), noise.clean(new.tools[name])
        for schema, rules in (("inputSchema", _input_rules), ("outputSchema", _output_rules)):
            for delta, severity, note in schema_changes(before.get(schema), after.get(schema), rules, f"/{schema}"):
                report.changes.append(Change("tool", "changed", name, severity, (delta,), note=note))
        rest = differences({k: v for k, v in before.items() if not k.endswith("Schema")},
                           {k: v for k, v in after.items() if not k.endswith("Schema")})
        if rest:
            report.changes.append(Change("tool", "changed", name, COMPATIBLE, tuple(Delta.of(d) for d in rest),
                                         note="description or annotations"))


# For each kind of schema change: its severity for an input schema (what clients send) and for an
# output schema (what clients read).
_input_rules = {"schema added": BREAKING, "schema removed": COMPATIBLE, "property added": COMPATIBLE,
                "required property added": BREAKING, "property removed": BREAKING, "now required": BREAKING,
                "no longer required": COMPATIBLE, "type changed": BREAKING, "other": CHANGED}
_output_rules = {"schema added": COMPATIBLE, "schema removed": BREAKING, "property added": COMPATIBLE,
                 "required property added": COMPATIBLE, "property removed": BREAKING, "now required": COMPATIBLE,
                 "no longer required": BREAKING, "type changed": BREAKING, "other": CHANGED}


def schema_changes(old: Any, new: Any, rules: dict[str, str], path: str) -> list[tuple[Delta, str, str]]:
    """Each change between two JSON schemas, with its severity under `rules` and what kind it is."""
    found: list[tuple[Delta, str, str]] = []

    def add(kind: str, where: str, before: Any, after: Any) -> None:
        found.append((Delta(where, before, after), rules[kind], kind))

    if old is None or new is None:
        if old != new:
            add("schema added" if old is None else "schema removed", path, old, new)
        return found
    if not isinstance(old, dict) or not isinstance(new, dict):
        if old != new:
            add("other", path, old, new)
        return found
    if old.get("type") != new.get("type"):
        add("type changed", f"{path}/type", old.get("type"), new.get("type"))
    old_props, new_props = _properties(old), _properties(new)
    old_required, new_required = _required(old), _required(new)
    for name in old_props.keys() - new_props.keys():
        add("property removed", f"{path}/properties/{name}", old_props[name], None)
    for name in new_props.keys() - old_props.keys():
        add("required property added" if name in new_required else "property added", f"{path}/properties/{name}", None, new_props[name])
    for name in sorted(old_props.keys() & new_props.keys()):
        found += schema_changes(old_props[name], new_props[name], rules, f"{path}/properties/{name}")
        if name in new_required and name not in old_required:
            add("now required", f"{path}/required", sorted(old_required), sorted(new_required))
        elif name in old_required and name not in new_required:
            add("no longer required", f"{path}/required", sorted(old_required), sorted(new_required))
    skip = {"type", "properties", "required"}
    for difference in differences({k: v for k, v in old.items() if k not in skip},
                                  {k: v for k, v in new.items() if k not in skip}, path):
        kind = "other" if difference.path.split("/")[-1] not in ("title", "description", "$schema") else None
        if kind:
            add(kind, difference.path, _present(difference.recorded), _present(difference.live))
    return found


def _properties(schema: dict[str, Any]) -> dict[str, Any]:
    properties = schema.get("properties")
    return properties if isinstance(properties, dict) else {}


def _required(schema: dict[str, Any]) -> set[str]:
    """The property names a schema requires (a `required` that is no list of names requires none)."""
    required = schema.get("required")
    return {name for name in required if isinstance(name, str)} if isinstance(required, list) else set()


# --- notifications and the wire -------------------------------------------------------------------


def _compare_events(old: Session, new: Session, noise: Noise, report: DiffReport) -> None:
    """Notifications tied to no request are compared as a multiset: when they come relative to
    requests is a race, what they say is not."""
    def counted(session_: Session) -> Counter[str]:
        return Counter(json.dumps([event.direction, event.method, noise.clean(event.params)], sort_keys=True)
                       for event in session_.events)

    before, after = counted(old), counted(new)
    for key in sorted((before - after) + (after - before)):
        direction, method, params = json.loads(key)
        kind = "removed" if before[key] > after[key] else "added"
        count = abs(before[key] - after[key])
        subject = f"{'client' if direction == 'c2s' else 'server'} {method}" + (f" ×{count}" if count > 1 else "")
        deltas = (Delta("/params", params if kind == "removed" else None, params if kind == "added" else None),) if params else ()
        report.changes.append(Change("notification", kind, subject, CHANGED, deltas))


def _compare_wire(old: Session, new: Session, report: DiffReport) -> None:
    """The facts both transports have (a stdio session has no headers to compare with HTTP's)."""
    for name in [name for name in old.wire if name in new.wire]:
        before, after = old.wire[name], new.wire[name]
        if before != after:
            report.changes.append(Change("transport", "changed", name, CHANGED, (Delta(f"/{name}", before, after),)))


def _compare_exit(old: Session, new: Session, report: DiffReport) -> None:
    """How a stdio server ended: a crash (a signal it did not get from its client's side, a
    non-zero code) where it ended cleanly is breaking."""
    if old.exit is None or new.exit is None or old.exit == new.exit:
        return
    clean = ("code 0", *(f"signal {signum}" for signum in STOPPING_SIGNALS))
    severity = BREAKING if old.exit in clean and new.exit not in clean else CHANGED
    report.changes.append(Change("session", "changed", "server exit", severity, (Delta("/exit", old.exit, new.exit),)))


# --- rendering --------------------------------------------------------------------------------------

_SECTIONS = ("session", "interaction", "capability", "tool", "notification", "transport")
_SECTION_TITLES = {"session": "Session", "interaction": "Interactions", "capability": "Capabilities",
                   "tool": "Tool surface", "notification": "Notifications", "transport": "Transport"}
_SYMBOLS = {"added": "+", "removed": "-", "changed": "~"}
_MAX_DELTAS = 8


def _verdict(report: DiffReport) -> str:
    if report.same:
        return f"same behaviour ({report.matched} interactions matched)"
    counts = Counter(change.severity for change in report.changes)
    parts = [f"{counts[severity]} {severity}" for severity in SEVERITIES if counts[severity]]
    return f"different: {', '.join(parts)} ({report.matched} interactions matched)"


def _frames(change: Change | Equivalence) -> str:
    old, new = change.frames
    shown = [f"{side} #{','.join(map(str, seqs[:4]))}{'…' if len(seqs) > 4 else ''}"
             for side, seqs in (("old", old), ("new", new)) if seqs]
    return f" (frames {'; '.join(shown)})" if shown else ""


def text_lines(report: DiffReport) -> list[tuple[str, str]]:
    """The report as (style, line) pairs; the rich and plain renderings share them."""
    lines = [("bold", f"tapes diff {report.old_name} ({report.old_era or 'unknown'}) → "
                      f"{report.new_name} ({report.new_era or 'unknown'})"),
             ("bold green" if report.same else "bold red", _verdict(report))]
    styles = {BREAKING: "red", CHANGED: "yellow", COMPATIBLE: "green"}
    for section in _SECTIONS:
        changes = [change for change in report.changes if change.section == section]
        if not changes:
            continue
        lines.append(("bold underline", _SECTION_TITLES[section]))
        for change in changes:
            note = f" — {change.note}" if change.note else ""
            lines.append((styles[change.severity], f"  {_SYMBOLS[change.kind]} {change.subject} [{change.severity}]{note}{_frames(change)}"))
            for delta in change.deltas[:_MAX_DELTAS]:
                lines.append(("", f"      {delta.describe()}"))
            if len(change.deltas) > _MAX_DELTAS:
                lines.append(("dim", f"      … and {len(change.deltas) - _MAX_DELTAS} more"))
    if report.equivalences:
        lines.append(("bold underline", "Same behaviour in another protocol form"))
        lines += [("cyan", f"  = {equivalence.describe()}{_frames(equivalence)}") for equivalence in report.equivalences]
    lines += [("dim", f"  {line}") for line in set_aside(report)]
    return lines


def set_aside(report: DiffReport) -> list[str]:
    """A line for each era form set aside before comparing, naming the side it was found on."""
    old_folds, new_folds = report.folds.get("old", []), report.folds.get("new", [])
    lines = []
    for fold in old_folds + [fold for fold in new_folds if fold not in old_folds]:
        where = "both" if fold in old_folds and fold in new_folds else report.old_name if fold in old_folds else report.new_name
        lines.append(f"set aside ({where}): {fold}")
    return lines


def print_report(report: DiffReport, console: Any) -> None:
    from rich.text import Text

    for style, line in text_lines(report):
        console.print(Text(terminal_line(line), style=style), highlight=False)


def markdown(report: DiffReport) -> str:
    """The report as Markdown, for a pull-request comment."""
    out = [f"### tapes diff: {_md_code(report.old_name)} ({_md_cell(report.old_era or 'unknown')}) → "
           f"{_md_code(report.new_name)} ({_md_cell(report.new_era or 'unknown')})",
           "", f"**{_verdict(report)}**", ""]
    for section in _SECTIONS:
        changes = [change for change in report.changes if change.section == section]
        if not changes:
            continue
        out += [f"#### {_SECTION_TITLES[section]}", "", "| | subject | severity | details |", "|---|---|---|---|"]
        for change in changes:
            details = "<br>".join(_md_cell(delta.describe()) for delta in change.deltas[:_MAX_DELTAS])
            if change.note:
                details = f"{_md_cell(change.note)}<br>{details}" if details else _md_cell(change.note)
            out.append(f"| {_SYMBOLS[change.kind]} | {_md_cell(change.subject)} | {change.severity} | {details} |")
        out.append("")
    if report.equivalences:
        out += ["#### Same behaviour in another protocol form", ""]
        out += [f"- {_md_cell(equivalence.describe())}" for equivalence in report.equivalences]
    out += [f"- {_md_cell(line)}" for line in set_aside(report)]  # as the text report lists them, after the forms
    if out[-1]:
        out.append("")
    return "\n".join(out)


def _md_cell(text: str) -> str:
    """Text from a cassette as the text of a table cell: no column break, code span, HTML tag, link,
    image or emphasis of its own (a PR comment renders tags such as <img> or <details>, and
    `![](URL)` and `[text](URL)` as well). Its own backslashes are escaped first, so that they
    escape nothing."""
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace("\n", " ").replace("\\", "\\\\")
    return printable(text).translate(_MARKDOWN_ESCAPES)


def _md_code(text: str) -> str:
    """A file name as a code span on one line: fenced by more backticks than it holds in a row, as
    CommonMark has it (a backtick in the name closed a single-backtick span, and the rest rendered
    as Markdown)."""
    text = printable(text.replace("\n", " "))
    fence = "`" * (max(map(len, re.findall("`+", text)), default=0) + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""  # one space each side is dropped
    return f"{fence}{pad}{text}{pad}{fence}"


_MARKDOWN_ESCAPES = str.maketrans({char: f"\\{char}" for char in "|`[]*_~"})
