"""`tapes show`: a cassette as a readable timeline.

A header block (how the session was recorded), then one line per frame: sequence number, time
offset, direction, channel, what the frame is (`request tools/call #4`, `error #4 -32601`,
`raw 31 B`, ...) and a one-line summary of its payload.

Big cassettes: frames are printed as they are read (`print_frames` takes a stream), in chunks
of plain segments with column widths fixed by the first chunk (a rich Table measures every cell
and takes about a millisecond a row); what is known only at the end of a long stream (the frame
count, the loader's warnings) follows the rows. Summaries are built only up to the width they
will be shown at, however large the payload.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Callable, Iterable
from itertools import islice
from json.encoder import encode_basestring
from typing import Any

from rich.cells import cell_len, set_cell_size
from rich.console import Console, ConsoleOptions, RenderResult
from rich.segment import Segment
from rich.style import Style
from rich.table import Table
from rich.text import Text

from tapes.cassette.frames import Direction, Frame, Kind
from tapes.cassette.store import Cassette, Header, VersionWatch
from tapes.wire.jsonrpc import MessageType, classify, items
from tapes.wire.text import printable  # every cell goes through it: cassettes are untrusted

ARROWS = {Direction.CLIENT_TO_SERVER: "C→S", Direction.SERVER_TO_CLIENT: "S→C"}
_CHUNK = 1000  # rows per console.print: output streams, memory stays flat
_MAX_CHANNEL = 16
_MAX_WHAT = 44
_MIN_SUMMARY = 12
_MORE_SEQ, _MORE_TIME, _MORE_CHANNEL = 7, 10, 10  # widths when more frames may follow: 9999999, +9999.999s, http:99999

_DIRECTION_STYLES = {
    Direction.CLIENT_TO_SERVER: Style(color="cyan"),
    Direction.SERVER_TO_CLIENT: Style(color="magenta"),
}
_TYPE_STYLES = {
    MessageType.REQUEST: Style(color="blue", bold=True),
    MessageType.NOTIFICATION: Style(color="yellow"),
    MessageType.RESULT: Style(color="green"),
    MessageType.ERROR: Style(color="red", bold=True),
    MessageType.BATCH: Style(color="blue"),
    MessageType.INVALID: Style(color="red"),
}
_KIND_STYLES = {Kind.RAW: Style(color="red"), Kind.STDERR: Style(color="yellow", dim=True)}
_DIM = Style(dim=True)
_PLAIN = Style()



def print_timeline(cassette: Cassette, width: int | None = None, console: Console | None = None) -> None:
    """Print the cassette's header and one row per frame to `console` (default: stdout), in
    `width` columns (default: the console's)."""
    print_frames(cassette.header, cassette.frames, lambda: cassette.warnings, width, console)


def print_frames(
    header: Header,
    frames: Iterable[Frame],
    warnings: Callable[[], list[str]],
    width: int | None = None,
    console: Console | None = None,
) -> None:
    """`print_timeline` of frames as they stream in (`warnings` is read once they are all in).
    Rows are printed a chunk at a time: the column widths come from the first chunk, and what is
    known only at the end of a long stream (frame count, warnings) follows the rows."""
    console = console or Console(width=width)
    width = min(width or console.width, console.width)  # a console never prints wider than itself
    frames = iter(frames)
    chunk = list(islice(frames, _CHUNK))
    complete = len(chunk) < _CHUNK
    protocol = VersionWatch()
    for frame in chunk:
        protocol.see(frame)
    summary: list[tuple[str, str]] = []
    if complete or protocol.version:
        summary.append(("protocol", protocol.version or "unknown"))
    if complete:
        summary.append(("frames", str(len(chunk))))
    console.print(_header_block(header, summary, warnings() if complete else []), width=width, highlight=False)
    layout = _Layout(chunk, width, complete)
    console.print(layout.heading(width), width=width)
    count = 0
    while chunk:
        # Rows come cut to the width: rich need not measure every segment again.
        console.print(_Rows(chunk, layout), width=width, crop=False)
        count += len(chunk)
        if complete:
            break
        chunk = list(islice(frames, _CHUNK))
        for frame in chunk if protocol.version is None else ():
            protocol.see(frame)
    if not count:
        console.print(Text("(no frames)", style=_DIM), width=width)
    if not complete:
        summary = [("frames", str(count))] + ([] if any(name == "protocol" for name, _ in summary)
                                              else [("protocol", protocol.version or "unknown")])
        console.print(_grid(summary, warnings()), width=width, highlight=False)


def _header_block(header: Header, summary: list[tuple[str, str]], warnings: list[str]) -> _RightTrimmed:
    rows = [
        ("transport", header.transport),
        ("server", server_text(header.server)),
        ("created", header.created),
        *summary,
        ("recorded by", header.tool),
    ]
    if header.labels:
        rows.append(("labels", " ".join(f"{key}={value}" for key, value in header.labels.items())))
    if header.redaction:
        rows.append(("redaction", ", ".join(header.redaction)))
    return _grid(rows, warnings)


def _grid(rows: list[tuple[str, str]], warnings: list[str]) -> _RightTrimmed:
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="bold", min_width=len("recorded by"))  # the footer lines up with the header
    grid.add_column()
    for name, value in rows:
        grid.add_row(name, Text(printable(value)))  # Text: no markup parsing of cassette content
    for warning in warnings:
        grid.add_row(Text("warning", style="bold yellow"), Text(printable(warning), style="yellow"))
    return _RightTrimmed(grid)


class _RightTrimmed:
    """A renderable's lines without the spaces a grid pads its last column with (text pasted from
    a terminal keeps them)."""

    def __init__(self, renderable: Table) -> None:
        self.renderable = renderable

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        for line in console.render_lines(self.renderable, options, pad=False):
            while line and not line[-1].text.strip():
                line.pop()
            if line:
                line[-1] = Segment(line[-1].text.rstrip(), line[-1].style)
            yield from line
            yield Segment.line()


def server_text(server: dict[str, Any]) -> str:
    command = server.get("command")
    if isinstance(command, list) and all(isinstance(part, str) for part in command):
        return shlex.join(command)
    if isinstance(server.get("url"), str):
        return server["url"]
    return compact(server, 200)


# --- rows -----------------------------------------------------------------------------------


class _Layout:
    """Column widths, fixed before the first row so that chunks line up."""

    COLUMNS = ("#", "time", "dir", "channel", "what", "summary")

    def __init__(self, frames: list[Frame], width: int, complete: bool = True) -> None:
        """Widths for `frames`; when more may follow (not `complete`), with room for longer ones."""
        seqs = [frame.seq for frame in frames] or [0]
        times = [frame.t for frame in frames] or [0.0]
        channels = {frame.channel for frame in frames}
        room = 0 if complete else 1
        self.seq = max(len(str(max(seqs))), len(str(min(seqs))), 1, room * _MORE_SEQ)
        self.time = max(len(_offset(max(times))), len(_offset(min(times))), 4, room * _MORE_TIME)
        self.channel = min(max([len("channel"), room * _MORE_CHANNEL, *map(cell_len, map(printable, channels))]), _MAX_CHANNEL)
        fixed = self.seq + self.time + 3 + self.channel + 5  # 5 single-space gutters
        self.what = min(_MAX_WHAT, max(len("what"), (width - fixed) * 2 // 5))
        self.summary = max(_MIN_SUMMARY, width - fixed - self.what)
        self.width = fixed + self.what + self.summary

    def widths(self) -> tuple[int, ...]:
        return (self.seq, self.time, 3, self.channel, self.what, self.summary)

    def heading(self, width: int) -> Text:
        """The column names, cut to `width` (the rows are cut there too)."""
        seq, time, *rest = zip(self.COLUMNS, self.widths())
        cells = [name.rjust(width) for name, width in (seq, time)] + [_fit(name, width) for name, width in rest]
        return Text(" ".join(cells)[:width].rstrip(), style="bold underline", no_wrap=True, overflow="crop")


class _Rows:
    """A chunk of frames as table rows, rendered straight to segments."""

    def __init__(self, frames: list[Frame], layout: _Layout) -> None:
        self.frames = frames
        self.layout = layout

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        seq_width, time_width, _, channel_width, what_width, summary_width = self.layout.widths()
        too_narrow = self.layout.width > options.max_width  # for even the narrowest columns
        for frame in self.frames:
            what, summary, style = describe(frame, summary_width)
            summary = _fit(printable(summary), summary_width).rstrip()
            what = _fit(printable(what), what_width)
            row = [
                Segment(str(frame.seq).rjust(seq_width) + " "),
                Segment(_offset(frame.t).rjust(time_width), _DIM),
                Segment(" "),
                Segment(ARROWS[frame.direction], _DIRECTION_STYLES[frame.direction]),
                Segment(" " + _fit(printable(frame.channel), channel_width) + " "),
                *([Segment(what, style), Segment(" " + summary)] if summary else [Segment(what.rstrip(), style)]),
            ]
            yield from Segment.adjust_line_length(row, options.max_width, pad=False) if too_narrow else row
            yield Segment.line()


def _offset(t: float) -> str:
    return f"+{t:.3f}s"


def _fit(text: str, width: int) -> str:
    """Exactly `width` cells: padded, or cut with an ellipsis."""
    if cell_len(text) > width:
        return set_cell_size(text, width - 1) + "…"
    return set_cell_size(text, width)


# --- what a frame is ------------------------------------------------------------------------


def describe(frame: Frame, limit: int) -> tuple[str, str, Style]:
    """(what, summary, style of what) for one frame; the summary is built to about `limit` cells."""
    label = frame.kind.value.replace("_", " ")
    if frame.message is not None:
        what, summary, style = _describe_message(frame.message, limit)
        if frame.kind is not Kind.MESSAGE:  # e.g. an SSE event that carried a message
            what = f"{label} {what}"
    elif frame.kind in (Kind.RAW, Kind.STDERR):
        data = frame.data or b""
        what = f"raw {len(data)} B" if frame.kind is Kind.RAW else label
        summary, style = data[: limit * 4].decode("utf-8", "replace"), _KIND_STYLES[frame.kind]
    else:  # HTTP heads, SSE events, stream ends, exits: whatever their info (and data) hold
        fields = {key: value for key, value in (frame.info or {}).items() if key != "partial"}
        if frame.data is not None:  # e.g. the data of an SSE event that is not JSON-RPC, or empty
            fields["data"] = frame.data[: limit * 4].decode("utf-8", "replace")
        what, style = label, _PLAIN
        summary = " ".join(f"{key}={compact(value, limit)}" for key, value in fields.items())
    if frame.partial:
        what += " (partial)"
    return what, summary, style


def _describe_message(message: Any, limit: int) -> tuple[str, str, Style]:
    kind = classify(message)
    return message_what(message, kind), _message_summary(message, kind, limit), _TYPE_STYLES[kind]


def message_what(message: Any, kind: MessageType) -> str:
    """What a JSON-RPC message is: `request tools/call #4`, `result #4`, `batch [3]`, ..."""
    if kind is MessageType.REQUEST:
        return f"request {message['method']} #{_id(message['id'])}"
    if kind is MessageType.NOTIFICATION:
        return f"notification {message['method']}"
    if kind is MessageType.RESULT:
        return f"result #{_id(message['id'])}"
    if kind is MessageType.ERROR:
        return f"error #{_id(message['id'])} {compact(message['error'].get('code'), 20)}"
    if kind is MessageType.BATCH:
        return f"batch [{len(message)}]"
    return "invalid JSON-RPC"


def _message_summary(message: Any, kind: MessageType, limit: int) -> str:
    if kind in (MessageType.REQUEST, MessageType.NOTIFICATION):
        return compact(message["params"], limit) if "params" in message else ""
    if kind is MessageType.RESULT:
        return compact(message["result"], limit)
    if kind is MessageType.ERROR:
        error = message["error"]
        text = error.get("message")
        summary = text if isinstance(text, str) else compact(text, limit)
        return f"{summary} {compact(error['data'], limit)}" if "data" in error else summary
    if kind is MessageType.BATCH:
        parts: list[str] = []
        size = 0
        for item in items(message):  # only as many members as fit
            parts.append(message_what(item, classify(item)))
            size += len(parts[-1]) + 2
            if size > limit:
                break
        return ", ".join(parts)
    return compact(message, limit)


def _id(value: Any) -> str:
    return str(value) if type(value) is int else compact(value, 40)


class _Full(Exception):
    pass


def compact(value: Any, limit: int) -> str:
    """Compact one-line JSON of `value`, cut at about `limit` characters. Stops walking as soon
    as the limit is reached: a 30 MB tool result costs as much as a small one."""
    if type(value) is int:  # the common scalars (ids, codes) the quick way
        return str(value)
    if type(value) is str and len(value) <= limit:
        return encode_basestring(value)
    parts: list[str] = []
    size = 0

    def emit(text: str) -> None:
        nonlocal size
        parts.append(text)
        size += len(text)
        if size > limit:
            raise _Full

    def walk(item: Any) -> None:
        if isinstance(item, dict):
            emit("{")
            for index, (key, member) in enumerate(item.items()):
                emit(("," if index else "") + _scalar(str(key), limit) + ":")
                walk(member)
            emit("}")
        elif isinstance(item, list):
            emit("[")
            for index, member in enumerate(item):
                if index:
                    emit(",")
                walk(member)
            emit("]")
        else:
            emit(_scalar(item, limit))

    try:
        walk(value)
    except _Full:
        pass
    return "".join(parts)


def _scalar(value: Any, limit: int) -> str:
    if isinstance(value, str):
        return encode_basestring(value[: limit + 1])  # JSON string: escapes control characters
    if value is None or isinstance(value, (bool, int, float)):
        return json.dumps(value)
    if isinstance(value, bytes):
        return f"<{len(value)} bytes>"
    return repr(value)[: limit + 1]
