"""`tapes redact`: the record-time redaction (RedactionRules through a Redactor, then a
before-record hook) applied to a cassette that already exists, e.g. before it goes into a bug
report. Returns the new cassette and what was replaced, by kind and location, never the secret.

Placeholders already in the cassette keep their numbers: the Redactor is first taught that each
`<redacted:N>` found stands for itself, so a new secret gets the number after the highest and an
already redacted value is not redacted again under another name.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote_plus

from tapes.cassette.frames import STDIO, Frame, Kind
from tapes.cassette.redact import Redactor
from tapes.cassette.scrub import FrameHook, hook_label, run_hook
from tapes.cassette.store import Cassette
from tapes.wire.http import header

# a number that fits 64 bits (a longer one is no placeholder of ours), also as a form or query
# value carries it, percent-encoded
_PLACEHOLDER = re.compile(rb"(?:<|%3C)redacted(?::|%3A)(\d{1,18})(?:>|%3E)", re.IGNORECASE)


@dataclass
class Replaced:
    """One kind of replacement at one location: `header Authorization`, `json params.arguments.key`,
    `hook mod:fn (changed)`; the frames it happened in and the placeholders it wrote."""

    what: str
    frames: list[int] = field(default_factory=list)
    placeholders: set[str] = field(default_factory=set)

    def describe(self) -> str:
        shown = ", ".join(map(str, self.frames[:8])) + (", ..." if len(self.frames) > 8 else "")
        ordered = sorted(self.placeholders, key=_number)
        placeholders = ", ".join(ordered[:5]) + (", ..." if len(ordered) > 5 else "")
        frames = f"{len(self.frames)} frame{'s' * (len(self.frames) != 1)} ({shown})"
        return f"{self.what}: {frames}" + (f" -> {placeholders}" if placeholders else "")


def _number(placeholder: str) -> int:
    found = _PLACEHOLDER.search(placeholder.encode())
    return int(found[1]) if found else 0


def redact_cassette(cassette: Cassette, redactor: Redactor, hook: FrameHook | None = None) -> tuple[Cassette, list[Replaced]]:
    _keep_existing_placeholders(cassette, redactor)
    report: dict[str, Replaced] = {}

    def note(what: str, seq: int, placeholder: str | None = None) -> None:
        entry = report.setdefault(what, Replaced(what))
        if not entry.frames or entry.frames[-1] != seq:
            entry.frames.append(seq)
        if placeholder:
            entry.placeholders.add(placeholder)

    frames = []
    content_types: dict[tuple[str, str], str | None] = {}  # (channel, direction) -> its head's content type
    for frame in cassette.frames:
        redacted = _redacted_frame(frame, redactor, note, content_types)
        if hook is not None:
            scrubbed = run_hook(hook, redacted)
            if scrubbed is None:
                note(f"{hook_label(hook)} (dropped)", frame.seq)
                continue
            if scrubbed != redacted:
                note(f"{hook_label(hook)} (changed)", frame.seq)
            redacted = scrubbed
        frames.append(redacted)
    names = [*cassette.header.redaction]
    names += [name for name in redactor.rules.names() if name not in names]
    if hook is not None and hook_label(hook) not in names:
        names.append(hook_label(hook))
    header = dataclasses.replace(cassette.header, redaction=tuple(names))
    return Cassette(header, frames, list(cassette.warnings)), list(report.values())


def _keep_existing_placeholders(cassette: Cassette, redactor: Redactor) -> None:
    for frame in cassette.frames:
        seen = frame.shown_payload + (repr(frame.info).encode() if frame.info else b"")
        for found in _PLACEHOLDER.finditer(seen):
            redactor.keep(f"<redacted:{found[1].decode()}>", int(found[1]))


def _redacted_frame(frame: Frame, redactor: Redactor, note: Any, content_types: dict[tuple[str, str], str | None]) -> Frame:
    changes: dict[str, Any] = {}
    headers = (frame.info or {}).get("headers")
    if frame.kind in (Kind.HTTP_REQUEST, Kind.HTTP_RESPONSE):
        content_types[(frame.channel, frame.direction)] = header(headers, "content-type")
    if frame.kind is Kind.HTTP_REQUEST and (target := frame.info.get("path")):
        redacted_target = redactor.path(target)
        if redacted_target != target:
            for placeholder in _new_placeholders(target, redacted_target):
                note("query", frame.seq, placeholder)
            changes["info"] = {**frame.info, "path": redacted_target}
    if frame.kind is Kind.RAW and frame.channel != STDIO and frame.data:
        # a form or JSON document on an HTTP exchange (an OAuth token request or answer, say)
        body = redactor.body(content_types.get((frame.channel, frame.direction)), frame.data)
        if body != frame.data:
            for placeholder in _new_placeholders(frame.data.decode("utf-8", "replace"), body.decode("utf-8", "replace")):
                note("body", frame.seq, placeholder)
            changes["data"] = body
    if headers:
        new_headers = redactor.headers((name, value) for name, value in headers)
        if new_headers != [list(pair) for pair in headers]:
            for (name, old), (_, new) in zip(headers, new_headers):
                if old != new:
                    note(f"header {name}", frame.seq, new)
            changes["info"] = {**changes.get("info", frame.info), "headers": new_headers}
    if frame.message is not None:
        message, changed = redactor.message(frame.message)
        if changed:
            for path, new in _changed_leaves(frame.message, message, ""):
                note(f"json {path}", frame.seq, new if isinstance(new, str) else None)
            changes["message"] = message
            changes["data"] = None  # the verbatim bytes held the secret too
    return frame._replace(**changes) if changes else frame


def _new_placeholders(old: str, new: str) -> set[str]:
    """The placeholders in `new` that `old` did not have (a form body holds them URL-encoded)."""
    def found(text: str) -> set[str]:
        return {match[0].decode() for match in _PLACEHOLDER.finditer(unquote_plus(text).encode())}
    return found(new) - found(old)


def _changed_leaves(old: Any, new: Any, path: str) -> Iterator[tuple[str, Any]]:
    """(dotted path, new value) of every value that differs (lists by index)."""
    if isinstance(old, dict) and isinstance(new, dict):
        for key in old:
            yield from _changed_leaves(old[key], new.get(key), f"{path}.{key}" if path else str(key))
    elif isinstance(old, list) and isinstance(new, list) and len(old) == len(new):
        for index, (a, b) in enumerate(zip(old, new)):
            yield from _changed_leaves(a, b, f"{path}.{index}" if path else str(index))
    elif old != new:
        yield path, new
