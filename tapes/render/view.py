"""`tapes view`: a cassette as one self-contained HTML page, a sequence diagram of the session.

The client's lane is on the left, the server's on the right, and between them the wire, one
column per channel (stdio; on HTTP each exchange: a POST's stream, the GET stream, a legacy SSE
stream). Every frame is an arrow at its time, on its channel's column, and marks tie frames
together the way the replay engine does (view_assets/view_model.js lists them).

Big cassettes: the page carries each session's frames as a cassette stores them, v2 msgpack
records in base64 (`tapes-frames` elements), and its script makes the rows and their links as
the page opens, drawing only the rows on screen. So writing the page is reading the cassette once
to check every frame, as every command does, then copying its bytes: a cassette in the v2 layout
is copied as it is in the file; frames from anywhere else are packed as the writer packs them.
What the page needs besides (titles, the header's facts, the loader's warnings, the notes of a
comparison) closes it as JSON (`tapes-data`).

Cassettes are untrusted: their content reaches the page only as base64, or as JSON inside script
elements that run nothing, with `<`, `>` and `&` escaped, and the script writes it with
textContent, never as markup. The page loads nothing from anywhere (its Content-Security-Policy
forbids it).
"""

from __future__ import annotations

import base64
import html
import io
import json
import os
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from importlib.resources import files
from typing import TYPE_CHECKING, Any, BinaryIO

import msgpack

from tapes.cassette.frames import Frame
from tapes.cassette.store import (
    Cassette,
    CassetteStream,
    FramePacker,
    Header,
    as_bytes,
    frame_array,
    gc_paused,
)
from tapes.render.show import server_text
from tapes.wire.jsonrpc import wire_form

if TYPE_CHECKING:  # only named: importing the diff would bring the replay engine in, for every page
    from tapes.analysis.diff import DiffReport

BYTES_PER_ELEMENT = 3 << 20  # frame bytes per page element (4 MiB of base64): the writer holds one

_pack = msgpack.Packer().pack

_CSP = "default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:"


@dataclass(frozen=True, slots=True)
class Difference:
    """One difference between two sessions, for `render_comparison`: what differs, the frames
    (sequence numbers) it concerns on each side (empty when a side has none), and optionally a
    severity shown beside it ("breaking", ...)."""

    note: str
    a_seqs: tuple[int, ...] = ()
    b_seqs: tuple[int, ...] = ()
    severity: str = ""


@dataclass
class Side:
    """One session to draw: its header, its frames as they come, and the loader's warnings, read
    once the frames are exhausted (a streamed cassette knows them only then)."""

    header: Header
    frames: Iterable[Frame]
    warnings: Callable[[], list[str]]
    title: str
    notes: dict[int, list[str]] = field(default_factory=dict)  # frame seq -> differences noted on it
    stored: tuple[str, int] | None = None  # (file, offset) where `frames` lie as v2 records, one per frame

    @classmethod
    def of(cls, cassette: Cassette, title: str, notes: dict[int, list[str]] | None = None) -> Side:
        return cls(cassette.header, cassette.frames, lambda: cassette.warnings, title, notes or {})

    @classmethod
    def of_stream(cls, frames: CassetteStream, path: str, title: str) -> Side:
        """A cassette file as it is read; its frames are copied as they are stored when it holds
        them as v2 records and can be read again (a regular file, not a pipe)."""
        stored = None
        if frames.v2_frames_at is not None and os.path.isfile(path):
            stored = (path, frames.v2_frames_at)
        return cls(frames.header, frames, lambda: frames.warnings, title, stored=stored)


def render_page(cassette: Cassette, title: str) -> str:
    """The page for one cassette; `title` names it (usually its file name)."""
    out = io.BytesIO()
    write_page(out, title, [Side.of(cassette, title)])
    return out.getvalue().decode("utf-8")


def render_comparison(
    a: Cassette, b: Cassette, differences: Sequence[Difference], titles: tuple[str, str] = ("A", "B")
) -> str:
    """Two cassettes side by side, each frame named in `differences` highlighted with its note,
    and a list of the differences that scrolls both sides to them."""
    notes: tuple[dict[int, list[str]], dict[int, list[str]]] = (defaultdict(list), defaultdict(list))
    for difference in differences:
        for side, seqs in zip(notes, (difference.a_seqs, difference.b_seqs), strict=True):
            for seq in seqs:
                side[seq].append(difference.note)
    out = io.BytesIO()
    write_page(out, f"{titles[0]} ↔ {titles[1]}",
               [Side.of(a, titles[0], notes[0]), Side.of(b, titles[1], notes[1])], differences)
    return out.getvalue().decode("utf-8")


def write_page(out: BinaryIO, title: str, sides: Sequence[Side], differences: Sequence[Difference] = ()) -> None:
    """Write the page to `out` as the sides' frames stream in."""
    assets = files("tapes.render") / "view_assets"
    out.write((
        '<!doctype html>\n<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{_CSP}">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{html.escape(title.encode('utf-8', 'backslashreplace').decode())} · tapes view</title>"
        f"<style>{(assets / 'view.css').read_text()}</style></head>\n<body>"
        "<noscript>This page draws the session with JavaScript; please enable it.</noscript>\n"
    ).encode())
    model = {
        "sides": [_write_frames(out, index, side) for index, side in enumerate(sides)],
        "differences": [
            {"note": d.note, "severity": d.severity, "a": list(d.a_seqs), "b": list(d.b_seqs)} for d in differences
        ],
    }
    out.write(b'<script type="application/json" id="tapes-data">' + _json(model) + b"</script>\n")
    script = (assets / "view_model.js").read_text() + (assets / "view.js").read_text()
    out.write(f"<script>{script}</script></body></html>\n".encode())


def _write_frames(out: BinaryIO, index: int, side: Side) -> dict[str, Any]:
    """Write a side's frames as v2 records in base64 elements; what the page needs besides."""
    element = b'<script type="application/octet-stream" class="tapes-frames" data-side="%d">' % index

    def write(data: bytes) -> None:
        out.write(element + base64.b64encode(data) + b"</script>\n")

    count = 0
    with gc_paused():  # a frame at a time, but the loader's containers pile up as the collector counts them
        if side.stored is not None:
            for _ in side.frames:  # checked as every command checks them, and left as stored
                count += 1
            path, offset = side.stored
            with open(path, "rb") as file:  # the page's script reads `count` records; a cut-off tail is never read
                file.seek(offset)
                while data := file.read(BYTES_PER_ELEMENT):
                    write(data)
        else:
            packer, pending, size = FramePacker(instead=_shown), [], 0
            for frame in side.frames:
                record = packer.packed(frame)
                pending.append(record)
                size += len(record)
                count += 1
                if size >= BYTES_PER_ELEMENT:
                    write(b"".join(pending))
                    pending, size = [], 0
            if pending:
                write(b"".join(pending))
    recorded = side.header
    meta = [
        ["transport", recorded.transport],
        ["server", server_text(recorded.server)],
        ["created", recorded.created],
        ["protocol", None],  # the page's script finds it in the frames, and their count
        ["frames", None],
        ["recorded by", recorded.tool],
    ]
    if recorded.labels:
        meta.append(["labels", " ".join(f"{key}={value}" for key, value in recorded.labels.items())])
    if recorded.redaction:
        meta.append(["redaction", ", ".join(recorded.redaction)])
    return {"title": side.title, "rows": count, "meta": meta, "warnings": side.warnings(),
            "notes": [[seq, notes] for seq, notes in side.notes.items()]}


def _shown(frame: Frame) -> Frame:
    """A frame that has no msgpack form as the page shows it: a lone surrogate (a JSON Lines
    cassette can hold one) escaped in its text (`\\udfff`), an integer wider than 64 bits as its
    digits in a string; and what nests deeper than msgpack packs, its message as the bytes it
    stands for and its info as its JSON text."""
    shown = frame._replace(channel=_escaped(frame.channel), message=_escaped(frame.message), info=_escaped(frame.info))
    if not _packs(shown) and shown.message is not None:
        shown = as_bytes(shown)
    if not _packs(shown):
        shown = shown._replace(info={"info (JSON)": wire_form(shown.info).decode()})
    return shown


def _packs(frame: Frame) -> bool:
    try:
        _pack(frame_array(frame, {}))
    except (OverflowError, ValueError, TypeError):
        return False
    return True


def _escaped(value: Any) -> Any:
    if type(value) is str:
        return value.encode("utf-8", "backslashreplace").decode("utf-8")
    if type(value) is int and not -(1 << 63) <= value < 1 << 64:
        return str(value)
    if type(value) is dict:
        return {_escaped(key): _escaped(member) for key, member in value.items()}
    if type(value) is list:
        return [_escaped(member) for member in value]
    return value


def _json(value: Any) -> bytes:
    """`value` as JSON that is safe inside a script element, and always UTF-8."""
    return _script_safe(json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode("utf-8", "backslashreplace"))


def _script_safe(data: bytes) -> bytes:
    # In JSON these three occur only inside strings, where their \u escapes mean the same. With
    # no `<` left, nothing can close the element or open a comment. (bytes.replace, not a
    # translate table: that went char by char, a third of the page's time.)
    return data.replace(b"&", b"\\u0026").replace(b"<", b"\\u003c").replace(b">", b"\\u003e")


def render_diff(report: DiffReport, old: Cassette, new: Cassette) -> str:
    """The page of `tapes diff --format html`: both sessions side by side, each change and each
    same-behaviour-in-another-form mapping highlighted on the frames it concerns."""
    from tapes.analysis.diff import set_aside  # (the caller made the report: the diff is loaded already)

    differences = [
        Difference(
            f"{change.section} {change.kind}: {change.subject}"
            + (f" ({'; '.join(delta.describe() for delta in change.deltas[:3])})" if change.deltas else ""),
            change.frames[0],
            change.frames[1],
            change.severity,
        )
        for change in report.changes
    ]
    differences += [
        Difference(equivalence.describe(), equivalence.frames[0], equivalence.frames[1], "equivalent")
        for equivalence in report.equivalences
    ]
    # what the text and markdown reports list last: forms of an era left out of the comparison
    differences += [Difference(line.removeprefix("set aside "), severity="set aside") for line in set_aside(report)]
    return render_comparison(old, new, differences, titles=(report.old_name, report.new_name))
