"""`tapes view`: a cassette as one self-contained HTML page, a sequence diagram of the session.

The client's lane is on the left, the server's on the right, and between them the wire, one
column per channel (stdio; on HTTP each exchange: a POST's stream, the GET stream, a legacy SSE
stream). Every frame is an arrow at its time, on its channel's column. Marks tie frames together
the way the replay engine does: a cancellation and the response it raced, a server→client request
and the client's answer, progress and the request it reports on, a stream the client dropped and
the GET that resumed it from its last event id, a task's polls and the request that created the
task (2025-11-25), a subscription's events and its subscriptions/listen request (2026-07-28).

Big cassettes: the page is written while the frames stream in, never holding them all. Rows go
out in chunks of ROWS_PER_CHUNK, each as columns (a `tapes-rows` JSON element) followed by the
frames' full JSON, one line per frame (a `tapes-bodies` text element the script reads only when a
frame is opened or the filter searches text). What is known only later (a request's progress
count, a cancel that no response followed) goes out as marks in a later chunk; channels, groups'
session facts and the header's meta close the page (`tapes-data`). The script draws only the rows
on screen.

Cassettes are untrusted: their content reaches the page only as JSON or JSON lines inside script
elements that run nothing, with `<`, `>` and `&` escaped, and the script writes it with
textContent, never as markup. The page loads nothing from anywhere (its Content-Security-Policy
forbids it).
"""

from __future__ import annotations

import base64
import html
import io
import json
import math
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from importlib.resources import files
from typing import Any, BinaryIO

from tapes.analysis.diff import DiffReport
from tapes.cassette.frames import STDIO, Frame, Kind
from tapes.cassette.store import Cassette, Header, VersionWatch, gc_paused
from tapes.render.show import compact, describe, message_what, server_text
from tapes.replay.polls import POLL_METHODS, TASK_PARAM, TASK_STATUS
from tapes.replay.sessions import SESSION_HEADER, legacy_session_id
from tapes.wire.eras import LONG_LIVED_METHODS, SUBSCRIPTION_ID_KEY
from tapes.wire.http import header
from tapes.wire.jsonrpc import MessageType, classify, encode, items, params_of, plain

SUMMARY_LIMIT = 100  # characters of a payload summary shown on a row
DETAIL_LIMIT = 64_000  # characters of one frame's JSON kept for the details panel; the rest is cut
ROWS_PER_CHUNK = 4096  # rows per data element: the writer holds one chunk, the page parses them one by one

# A row's type picks its arrow's colour and style; the page gets its index (times two, plus one
# for server→client), so view.js holds the same list.
TYPES = ("request", "notification", "result", "error", "batch", "invalid",
         "raw", "stderr", "http", "end", "sse", "exit")  # fmt: skip
_TYPE_CODE = {name: index for index, name in enumerate(TYPES)}

# The marks that tie rows together: name -> (kind, text, explanation). A mark in the page is
# [row, its number here, linked seq or null, *args]; the page fills {0}, {1}... with the args and
# {t} with the linked seq (these templates go with the page, so view.js holds no copy).
MARKS = {
    "progress": ("progress", "progress ×{0}", "{0} progress notifications report on this request"),
    "progress of": ("of", "of #{0}", "progress of request #{0}"),
    "late": ("late", "after cancel", "the server reported progress after the client had cancelled the request"),
    "events": ("progress", "events ×{0}", "{0} notifications came on this subscription's stream"),
    "event of": ("of", "on #{0}", "sent on the stream of subscriptions/listen #{0}"),
    "closed": ("cancel", "server closed", "the server ended subscription #{0} (frame {t})"),
    "cancels": ("cancel", "✕ cancels #{0}", "the client cancels request #{0} (frame {t})"),
    "cancelled": ("cancel", "✕ cancelled", "the client cancelled this request (frame {t})"),
    "no response": ("race", "no response", "the server never answered the cancelled request"),
    "never answered": ("race", "never answered", "no response to this request was recorded"),
    "too late": ("race", "⚡ too late: answered", "the response (frame {t}) was already sent: the response won the race"),
    "still came": ("race", "⚡ response still came", "the server answered anyway (frame {t}): the race the cancel lost"),
    "after cancel": ("race", "⚡ after cancel", "sent after the client cancelled (frame {t})"),
    "raced": ("race", "⚡ raced a cancel", "the client's cancel (frame {t}) came after it"),
    "answers": ("answer", "↪ answers server #{0}", "the client's answer to the server's request (frame {t})"),
    "answered": ("answer", "↩ answered at {t}", "the client answered this request in frame {t}"),
    "for": ("of", "for #{0}", "sent while serving request #{0} (frame {t})"),
    "poll": ("poll", "poll {0} of task", "{1} about task {2}, created by the request in frame {t}"),
    "about task": ("poll", "{0} of task", "{1} about task {2}, created by the request in frame {t}"),
    "polled": ("poll", "polled ×{0}", "task {1} was polled {0} times"),
    "retry": ("retry", "retry {0} ms", "the server tells the client when to reconnect"),
    "cut": ("cut", "✂ stream cut", "the stream broke: {0}"),
    "resume": ("resume", "⟲ resumes {0} after {1}", "the client resumes {0} after its event {2}"),
    "resume unseen": ("resume", "⟲ Last-Event-ID {0}", "resumes after an event id this recording never saw"),
    "resumed": ("resumed", "⟲ resumed by {0}", "the client resumed this stream with {0}"),
}
_MARK_NUMBER = {name: number for number, name in enumerate(MARKS)}

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

    @classmethod
    def of(cls, cassette: Cassette, title: str, notes: dict[int, list[str]] | None = None) -> Side:
        return cls(cassette.header, cassette.frames, lambda: cassette.warnings, title, notes or {})


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
    with gc_paused():  # millions of small containers, none of them garbage
        models = [_Diagram(index, side, out).draw() for index, side in enumerate(sides)]
    model = {
        "marks": list(MARKS.values()),
        "sides": models,
        "differences": [
            {"note": d.note, "severity": d.severity, "a": list(d.a_seqs), "b": list(d.b_seqs)} for d in differences
        ],
    }
    out.write(b'<script type="application/json" id="tapes-data">' + _json(model) + b"</script>\n")
    out.write(f"<script>{(assets / 'view.js').read_text()}</script></body></html>\n".encode())


def _json(value: Any) -> bytes:
    """`value` as JSON that is safe inside a script element, and always UTF-8."""
    return _script_safe(json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode("utf-8", "backslashreplace"))


def _script_safe(data: bytes) -> bytes:
    # In JSON these three occur only inside strings, where their \u escapes mean the same. With
    # no `<` left, nothing can close the element or open a comment. (bytes.replace, not a
    # translate table: that went char by char, a third of the page's time.)
    return data.replace(b"&", b"\\u0026").replace(b"<", b"\\u003c").replace(b">", b"\\u003e")


# --- the diagram model ------------------------------------------------------------------------


@dataclass
class _Channel:
    name: str
    index: int  # its column
    first: int  # row of its first frame
    last: int = 0  # row of its last frame
    request_row: int | None = None  # HTTP: the rows of its request and response heads
    response_row: int | None = None
    end: str | None = None  # how its last stream end went: "closed", "client_disconnect", ...
    end_row: int | None = None  # the row of its first stream end
    label: str = ""
    method: str = ""  # HTTP: its request's method
    resumes: bool = False  # a GET carrying Last-Event-ID
    legacy: bool = False  # it announced a legacy SSE endpoint
    group: int | None = None  # the interaction of the first request it carried
    session: str | None = None

    def model(self) -> dict[str, Any]:
        if self.request_row is not None and not self.label:
            if self.method == "GET":
                kind = "resume" if self.resumes else "legacy SSE" if self.legacy else "stream"
                self.label = f"{self.name} GET {kind}" if kind != "legacy SSE" else f"{self.name} {kind}"
            else:
                self.label = f"{self.name} {self.method}"
        return {
            "name": self.name,
            "label": self.label or self.name,
            "first": self.first,
            "last": self.last,
            "req": self.request_row,
            "res": self.response_row,
            "end": self.end,
            "g": self.group,
        }


class _Diagram:
    """One side, drawn as its frames stream past: each frame becomes a row of the current chunk
    (columns, plus its JSON line), and the links keep only small state per request."""

    def __init__(self, index: int, side: Side, out: BinaryIO) -> None:
        self.index = index
        self.side = side
        self.out = out
        self.channels: dict[str, _Channel] = {}
        self.links = _Links(self)
        self.rows = 0
        self.protocol = VersionWatch()
        self.previous: _Channel | None = None  # the channel of the row before, if it was a POST's head
        self._new_chunk()

    def _new_chunk(self) -> None:
        self.seq: list[int] = []
        self.t: list[float] = []
        self.code: list[int] = []
        self.ch: list[int] = []
        self.what: list[str] = []
        self.summary: list[str] = []  # "" where the page works it out from the body
        self.ids: list[str] = []  # JSON-RPC ids the filter's #id finds the row by, space-separated
        self.group: list[int] = []
        self.event_ids: list[list[Any]] = []  # [row, SSE event id]
        self.marks: list[list[Any]] = []  # [row, MARKS number, linked seq | None, *args]
        self.notes: list[list[Any]] = []  # [row, note]
        self.groups: list[int | str] = []  # the groups (interactions) begun in this chunk: their request's row, or label
        self.bodies: list[bytes] = []

    def mark(self, row: int, name: str, target: int | None, *args: Any) -> None:
        """Mark a row with the MARKS entry `name`, linked to the frame `target` (a seq) if not None."""
        self.marks.append([row, _MARK_NUMBER[name], target, *args])

    def draw(self) -> dict[str, Any]:
        notes = self.side.notes
        for frame in self.side.frames:
            self.add(frame)
            if frame.seq in notes:
                self.notes += [[self.rows - 1, note] for note in notes[frame.seq]]
            if len(self.seq) == ROWS_PER_CHUNK:
                self.flush()
        self.links.finish()
        self.flush()
        recorded = self.side.header
        meta = [
            ["transport", recorded.transport],
            ["server", server_text(recorded.server)],
            ["created", recorded.created],
            ["protocol", self.protocol.version or "unknown"],
            ["frames", str(self.rows)],
            ["recorded by", recorded.tool],
        ]
        if recorded.labels:
            meta.append(["labels", " ".join(f"{key}={value}" for key, value in recorded.labels.items())])
        if recorded.redaction:
            meta.append(["redaction", ", ".join(recorded.redaction)])
        return {
            "title": self.side.title,
            "meta": meta,
            "warnings": self.side.warnings(),
            "rows": self.rows,
            "channels": [channel.model() for channel in self.channels.values()],
        }

    def flush(self) -> None:
        if not self.seq and not self.marks:
            return
        chunk = {"seq": self.seq, "t": self.t, "k": self.code, "ch": self.ch, "w": self.what, "s": self.summary,
                 "i": self.ids, "g": self.group, "e": self.event_ids, "m": self.marks, "n": self.notes,
                 "gl": self.groups}
        self.out.write(b'<script type="application/json" class="tapes-rows" data-side="%d">' % self.index
                       + _json(chunk) + b"</script>\n")
        self.out.write(b'<script type="text/plain" class="tapes-bodies" data-side="%d">' % self.index
                       + _script_safe(b"\n".join(self.bodies)) + b"</script>\n")
        self._new_chunk()

    def add(self, frame: Frame) -> None:
        row = self.rows
        self.rows += 1
        channel = self.channels.get(frame.channel)
        if channel is None:
            channel = self.channels[frame.channel] = _Channel(frame.channel, len(self.channels), row)
        channel.last = row
        kind = frame.kind
        message = frame.message
        self.protocol.see(frame)
        post, self.previous = self.previous, None
        if kind is Kind.MESSAGE:
            type_, what = _message_label(message)
            summary = ""
        else:
            what, summary, type_ = self._label(frame, channel, row)
            if message is not None:
                summary = ""  # an SSE event carrying a message: the page summarises it as one
        if frame.partial:
            what += " (partial)"
        if post is channel and frame.from_client and message is not None:  # a POST's body names it
            channel.label = f"{channel.name} POST {what.split(' ', 1)[-1]}"
        self.seq.append(frame.seq)
        self.t.append(round(frame.t, 6))
        self.code.append(_TYPE_CODE[type_] * 2 + (not frame.from_client))
        self.ch.append(channel.index)
        self.what.append(what)
        self.summary.append(summary)
        self.ids.append(_ids(message) if message is not None else "")
        self.group.append(self.links.see(frame, row, channel, type_) if message is not None else -1)
        self.bodies.append(_body(frame))

    def _label(self, frame: Frame, channel: _Channel, row: int) -> tuple[str, str, str]:
        """(what, summary, type) of a frame that is not a plain message, noting on the way what
        its channel is and the streams' links."""
        info = frame.info or {}
        if frame.kind is Kind.HTTP_REQUEST:
            if channel.request_row is None:
                channel.request_row = row
                channel.method = method = info.get("method") if isinstance(info.get("method"), str) else "?"
                if method == "POST":
                    self.previous = channel
                elif method != "GET":
                    channel.label = f"{channel.name} {_text(method, 12)}"
            self.links.http_request(frame, channel, row)
            return f"{_text(info.get('method'), 20)} {_text(info.get('path'), 80)}", "", "http"
        if frame.kind is Kind.HTTP_RESPONSE:
            if channel.response_row is None:
                channel.response_row = row
            self.links.session_found(channel, header(info.get("headers"), SESSION_HEADER))
            content_type = header(info.get("headers"), "content-type") or ""
            return f"HTTP {compact(info.get('status'), 10)} {_text(content_type, 40)}".rstrip(), "", "http"
        if frame.kind is Kind.STREAM_END:
            reason = info.get("reason")
            channel.end = str(info.get("reason", "closed"))
            self.links.stream_end(frame, channel, row)
            what = {"client_disconnect": "client disconnected", "upstream_error": "upstream error"}.get(
                reason if isinstance(reason, str) else "", f"stream end ({compact(reason, 30)})"
            )
            detail = info.get("detail")
            return what, "" if detail is None else _text(detail, SUMMARY_LIMIT), "end"
        if frame.kind is Kind.SSE_EVENT:
            event_id = info.get("id")
            if event_id is not None:
                self.event_ids.append([row, _text(event_id, 200)])
            if info.get("event") == "endpoint":
                channel.legacy = True
                self.links.session_found(channel, legacy_session_id(frame.shown_payload.decode("utf-8", "replace")))
            self.links.sse_event(frame, row)
            if frame.message is None:
                data = (frame.data or b"").decode("utf-8", "replace")
                if not data and event_id is not None:
                    return "sse priming", "", "sse"
                event = info.get("event")
                return f"sse {_text(event, 30) if event else 'event'}", data[:SUMMARY_LIMIT], "sse"
            type_, what = _message_label(frame.message)
            return what, "", type_
        if frame.kind is Kind.EXIT:
            return "exit", " ".join(f"{key}={compact(value, 20)}" for key, value in info.items()), "exit"
        what, _, _ = describe(frame, 0)  # a stderr or raw line: the page summarises it from the body
        return what.removesuffix(" (partial)"), "", frame.kind.value


def _message_label(message: Any) -> tuple[str, str]:
    """(type, what) of a JSON-RPC message; the page works out its summary from the body."""
    kind = classify(message)
    if kind is MessageType.NOTIFICATION:
        if message["method"] == "notifications/progress":
            params = params_of(message)
            total = f"/{_text(params.get('total'), 12)}" if "total" in params else ""
            return kind.value, f"progress {_text(params.get('progress'), 12)}{total}"
        return kind.value, message["method"]
    return kind.value, message_what(message, kind)


def _text(value: Any, limit: int) -> str:
    if isinstance(value, str):
        return value[:limit]
    if type(value) is int or type(value) is float:
        return repr(value)[:limit] if math.isfinite(value) else compact(value, limit)
    return compact(value, limit)


def _ids(message: Any) -> str:
    """The JSON-RPC ids a row answers to in the filter box, space-separated: its messages' ids,
    and the request a cancellation or a progress notification refers to."""
    found = []
    for item in (message,) if type(message) is dict else items(message):
        if type(item) is not dict:
            continue
        params = item.get("params")
        values = (item.get("id"), params.get("requestId"), params.get("progressToken")) if type(params) is dict \
            else (item.get("id"),)
        for value in values:
            if type(value) is int or type(value) is str:
                found.append(str(value).replace(" ", "\u00a0"))
    return " ".join(found)


def _body(frame: Frame) -> bytes:
    """The frame's JSON for the details panel (its message, bytes and info) as one line, cut at
    DETAIL_LIMIT characters."""
    parts = []
    try:
        if frame.message is not None:
            parts.append(b'"message":' + encode(frame.message))
        if frame.data is not None:
            parts.append(b'"data":' + encode(frame.data.decode("utf-8")))
        if frame.info is not None:
            parts.append(b'"info":' + encode(frame.info))
        line = b"{" + b",".join(parts) + b"}"
        if b"NaN" in line or b"Infinity" in line:  # maybe not JSON (JSON.parse refuses NaN): the slow way
            raise ValueError
    except (TypeError, ValueError):  # bytes in the message or info, a lone surrogate, bytes not UTF-8
        body: dict[str, Any] = {}
        if frame.message is not None:
            body["message"] = _finite(plain(frame.message))
        if frame.data is not None:
            try:
                body["data"] = frame.data.decode("utf-8")
            except UnicodeDecodeError:
                body["data (base64)"] = base64.b64encode(frame.data).decode("ascii")
        if frame.info is not None:
            body["info"] = _finite(plain(frame.info))
        line = json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode("utf-8", "backslashreplace")
    if len(line) > DETAIL_LIMIT:
        text = line.decode("utf-8", "replace")
        if len(text) > DETAIL_LIMIT:
            cut = f"{text[:DETAIL_LIMIT]}… ({len(text) - DETAIL_LIMIT} more characters; `tapes export` has them all)"
            line = json.dumps(cut, ensure_ascii=False).encode("utf-8", "backslashreplace")
    return line


def _finite(value: Any) -> Any:
    """Plain JSON as the page's JSON.parse takes it: NaN and the infinities as text."""
    if type(value) is dict:
        return {key: _finite(member) for key, member in value.items()}
    if type(value) is list:
        return [_finite(member) for member in value]
    if type(value) is float and not math.isfinite(value):
        return str(value)
    return value


# --- links between frames ---------------------------------------------------------------------


def _key(request_id: Any) -> Any:
    """A JSON-RPC id as a dict key: 1 and "1" are different ids, 1 and 1.0 are not (the replay
    index ties them the same way). Ids JSON-RPC does not allow are not keys at all."""
    if isinstance(request_id, str):
        return ("s", request_id)
    if isinstance(request_id, (int, float)) and not isinstance(request_id, bool):
        return request_id
    return None


class _Interaction:
    """A client request and what the page links to it, kept small: row numbers and counts."""

    __slots__ = ("cancel", "events", "group", "id_key", "long_lived", "progress", "request_id", "response",
                 "row", "seq", "server_requests", "token")

    def __init__(self, group: int, row: int, seq: int, request_id: Any, long_lived: bool) -> None:
        self.group = group
        self.row = row
        self.seq = seq
        self.request_id = str(request_id) if type(request_id) is int else compact(request_id, 40)
        self.long_lived = long_lived
        self.response: tuple[int, int] | None = None  # (row, seq) of the server's response
        self.cancel: tuple[int, int] | None = None  # ... of the client's first cancel of it
        self.progress: list[int] = []  # [count, seq of the first] of its progress notifications
        self.events: list[int] = []  # the same for what its subscriptions/listen stream carried
        self.server_requests: dict[Any, tuple[int, int]] | None = None  # server→client requests sent for it
        self.id_key: Any = None  # its keys in its session's tables (`_key`), None where it has none
        self.token: Any = None


@dataclass
class _Session:
    """What the links need of one session: request ids are only unique within it."""

    open_by_id: dict[Any, _Interaction] = field(default_factory=dict)  # awaiting a response
    by_id: dict[Any, _Interaction] = field(default_factory=dict)  # the latest request with the id (a cancel may race its answer)
    by_token: dict[Any, _Interaction] = field(default_factory=dict)
    by_server_request: dict[Any, _Interaction | None] = field(default_factory=dict)
    pending: dict[int, _Interaction] = field(default_factory=dict)  # open, oldest first (by id())
    on_channel: dict[str, _Interaction] = field(default_factory=dict)  # HTTP: the last request an exchange carried
    unanswered: dict[tuple[bool, Any], tuple[int, int]] = field(default_factory=dict)  # (sent by the client, id) -> row, for tasks
    tasks: dict[tuple[bool, Any], _Task] = field(default_factory=dict)  # (run by the client, task id)


@dataclass
class _Task:
    created: tuple[int, int] | None = None  # (row, seq) of the request answered with the task
    name: str = ""
    polls: int = 0
    first_poll: int | None = None  # its seq
    before: list[tuple[int, int, str]] = field(default_factory=list)  # (row, seq, method) about it before it was created


class _Links:
    """The one streaming pass that ties rows together: interactions as the replay index ties them
    (tapes/replay/index.py), tasks, and resumed streams; each session keeps its own state."""

    def __init__(self, diagram: _Diagram) -> None:
        self.diagram = diagram
        self.interactions = 0
        self.sessions: dict[str | None, _Session] = {}
        self.unsettled: dict[str, list[_Interaction]] = {}  # channels whose session is not known yet
        self.last_event: dict[str, tuple[int, int, str]] = {}  # SSE event id -> (row, seq, channel) carrying it last
        self.resumed: dict[str, tuple[int, str, int]] = {}  # channel -> (origin row, resuming channel, its seq)
        self.ends: dict[str, int] = {}  # channel -> the row of its stream end
        self.watched: list[_Interaction] = []  # those with marks to write at the end (counts, cancels)

    def session(self, channel: _Channel) -> _Session:
        found = self.sessions.get(channel.session)
        if found is None:
            found = self.sessions[channel.session] = _Session()
        return found

    def session_found(self, channel: _Channel, session_id: str | None) -> None:
        """`channel` belongs to `session_id` (an HTTP head or an endpoint named it). What it carried
        before its session was known (an initialize POST's request) moves there."""
        if session_id is None or channel.session is not None or channel.name == STDIO:
            return
        old = self.session(channel)
        channel.session = session_id
        new = self.session(channel)
        for interaction in self.unsettled.pop(channel.name, ()):
            for table, key in (("open_by_id", interaction.id_key), ("by_id", interaction.id_key), ("by_token", interaction.token)):
                source = getattr(old, table)
                if key is not None and source.get(key) is interaction:
                    getattr(new, table)[key] = source.pop(key)
            if old.pending.pop(id(interaction), None) is not None:
                new.pending[id(interaction)] = interaction
            if old.on_channel.get(channel.name) is interaction:
                new.on_channel[channel.name] = old.on_channel.pop(channel.name)

    def http_request(self, frame: Frame, channel: _Channel, row: int) -> None:
        info = frame.info or {}
        self.session_found(channel, header(info.get("headers"), SESSION_HEADER))
        self.session_found(channel, legacy_session_id(info.get("path") or "") if isinstance(info.get("path"), str) else None)
        resumed_from = header(info.get("headers"), "last-event-id")
        if resumed_from is None:
            return
        channel.resumes = True
        mark = self.diagram.mark
        origin = self.last_event.get(_text(resumed_from, 200))
        if origin is None:
            mark(row, "resume unseen", None, resumed_from[:40])
            return
        origin_row, origin_seq, origin_channel = origin
        mark(row, "resume", origin_seq, origin_channel, resumed_from[:40], resumed_from)
        end = self.ends.get(origin_channel)
        if end is not None and end >= origin_row:
            self._mark_resumed(end, frame.channel, frame.seq)
        else:  # its end comes later, or never: the mark goes on the end, or on the event
            self.resumed[origin_channel] = (origin_row, frame.channel, frame.seq)

    def sse_event(self, frame: Frame, row: int) -> None:
        info = frame.info or {}
        if info.get("retry") is not None:
            self.diagram.mark(row, "retry", None, compact(info["retry"], 12))
        if info.get("id") is not None:
            self.last_event[_text(info["id"], 200)] = (row, frame.seq, frame.channel)

    def stream_end(self, frame: Frame, channel: _Channel, row: int) -> None:
        reason = (frame.info or {}).get("reason")
        if reason in ("client_disconnect", "upstream_error"):
            self.diagram.mark(row, "cut", None, reason)
        self.ends.setdefault(frame.channel, row)
        if frame.channel in self.resumed and self.resumed[frame.channel][0] <= row:
            self._mark_resumed(row, *self.resumed.pop(frame.channel)[1:])

    def _mark_resumed(self, row: int, by: str, seq: int) -> None:
        self.diagram.mark(row, "resumed", seq, by)

    # --- interactions

    def see(self, frame: Frame, row: int, channel: _Channel, type_: str) -> int:
        """Link a frame's message items; returns the group of the row (its first item's interaction), or -1."""
        session = self.session(channel)
        group = -1
        for item in items(frame.message):
            if not isinstance(item, dict):
                continue
            kind = classify(item)
            if kind is MessageType.INVALID:
                continue
            if frame.from_client:
                owner = self.client_item(session, frame, row, channel, item, kind)
                if owner is not None and type_ == "request" and channel.group is None and channel.name != STDIO:
                    channel.group = owner.group
            else:
                owner = self.server_item(session, frame, row, channel, item, kind)
            if owner is not None and group < 0:
                group = owner.group
            self.tasks(session, frame, row, item, kind)
        return group

    def client_item(self, session: _Session, frame: Frame, row: int, channel: _Channel, item: dict[str, Any],
                    kind: MessageType) -> _Interaction | None:
        mark = self.diagram.mark
        if kind is MessageType.REQUEST:
            request_id = item["id"]
            interaction = _Interaction(self.interactions, row, frame.seq, request_id,
                                       item["method"] in LONG_LIVED_METHODS)
            self.interactions += 1
            # the page names the group after the request's row; one in a batch is named here
            self.diagram.groups.append(row if type(frame.message) is dict and not frame.partial
                                       else f"{_text(item['method'], 80)} #{interaction.request_id} (frame {frame.seq})")
            key = interaction.id_key = _key(request_id)
            if key is not None:
                session.open_by_id[key] = session.by_id[key] = interaction
            params = item.get("params")
            meta = params.get("_meta") if isinstance(params, dict) else None
            token = interaction.token = _key(meta.get("progressToken")) if isinstance(meta, dict) else None
            if token is not None:
                session.by_token[token] = interaction
            session.pending[id(interaction)] = interaction
            if channel.name != STDIO:
                session.on_channel[channel.name] = interaction
                if channel.session is None:
                    self.unsettled.setdefault(channel.name, []).append(interaction)
            return interaction
        if kind in (MessageType.RESULT, MessageType.ERROR):
            owner = session.by_server_request.get(_key(item["id"]))
            asked = owner.server_requests.get(_key(item["id"])) if owner and owner.server_requests else None
            if asked is not None:
                shown = compact(item["id"], 40)
                mark(row, "answers", asked[1], shown)
                mark(asked[0], "answered", frame.seq)
            return owner
        if item["method"] != "notifications/cancelled":
            return None
        params = item.get("params")
        target = session.by_id.get(_key(params.get("requestId"))) if isinstance(params, dict) else None
        if target is None:
            return None
        shown, request_seq = target.request_id, target.seq
        mark(row, "cancels", request_seq, shown)
        if target.response is not None:
            response_row, response_seq = target.response
            mark(row, "too late", response_seq)
            if target.cancel is None:
                mark(response_row, "raced", frame.seq)
        if target.cancel is None:
            target.cancel = (row, frame.seq)
            if not target.progress and not target.events:
                self.watched.append(target)
        return target

    def server_item(self, session: _Session, frame: Frame, row: int, channel: _Channel, item: dict[str, Any],
                    kind: MessageType) -> _Interaction | None:
        mark = self.diagram.mark
        if kind in (MessageType.RESULT, MessageType.ERROR):
            owner = session.open_by_id.pop(_key(item["id"]), None)
            if owner is None:
                return None
            session.pending.pop(id(owner), None)
            if owner.response is None:
                owner.response = (row, frame.seq)
                if owner.long_lived:
                    mark(row, "closed", owner.seq, owner.request_id)
                if owner.cancel is not None:
                    cancel_row, cancel_seq = owner.cancel
                    mark(row, "after cancel", cancel_seq)
                    mark(cancel_row, "still came", frame.seq)
            return owner
        if kind is MessageType.REQUEST:
            # On HTTP a server→client request travels on the stream of the request it serves. On
            # stdio nothing says which; the newest pending request is the one the server is busy with.
            owner = session.on_channel.get(channel.name) if channel.name != STDIO else None
            if owner is None and session.pending:
                owner = next(reversed(session.pending.values()))
            key = _key(item["id"])
            session.by_server_request[key] = owner
            if owner is not None:
                if owner.server_requests is None:
                    owner.server_requests = {}
                if key not in owner.server_requests:
                    owner.server_requests[key] = (row, frame.seq)
                    mark(row, "for", owner.seq, owner.request_id)
            return owner
        params = item.get("params") if isinstance(item.get("params"), dict) else {}
        meta = params.get("_meta")
        subscription = meta.get(SUBSCRIPTION_ID_KEY) if isinstance(meta, dict) else None
        listen = session.by_id.get(_key(subscription)) if subscription is not None else None
        method = item["method"]
        if listen is not None and listen.long_lived:
            owner = listen  # an acknowledgment or event of a subscriptions/listen stream
        elif method == "notifications/progress":
            owner = session.by_token.get(_key(params.get("progressToken")))
        elif method == "notifications/cancelled":
            owner = session.by_server_request.get(_key(params.get("requestId")))
        else:
            owner = None
        if owner is None:
            return None
        if method == "notifications/progress":
            self._count(owner, owner.progress, frame.seq)
            mark(row, "progress of", owner.seq, owner.request_id)
            if owner.cancel is not None:
                mark(row, "late", owner.cancel[1])
        elif owner.long_lived:
            self._count(owner, owner.events, frame.seq)
            mark(row, "event of", owner.seq, owner.request_id)
        return owner

    def _count(self, owner: _Interaction, counter: list[int], seq: int) -> None:
        if counter:
            counter[0] += 1
            return
        if not owner.progress and not owner.events and owner.cancel is None:
            self.watched.append(owner)
        counter += [1, seq]

    def tasks(self, session: _Session, frame: Frame, row: int, item: dict[str, Any], kind: MessageType) -> None:
        """Tie each task's polls, status notifications and result request to the request that
        created it (the one answered with the task): a task is asked about in requests of its own."""
        from_client = frame.from_client
        if kind is MessageType.REQUEST:
            session.unanswered[(from_client, _key(item["id"]))] = (row, frame.seq)
        elif kind in (MessageType.RESULT, MessageType.ERROR):
            asked = session.unanswered.pop((not from_client, _key(item["id"])), None)
            result = item.get("result")
            task = result.get("task") if isinstance(result, dict) else None
            task_id = _key(task.get(TASK_PARAM)) if isinstance(task, dict) else None
            if asked is not None and task_id is not None:
                state = session.tasks.setdefault((not from_client, task_id), _Task())
                if state.created is None:
                    state.created, state.name = asked, compact(task[TASK_PARAM], 12)
                    for about in state.before:
                        self._mark_task(state, *about)
                    state.before.clear()
            return
        method = item["method"]
        if not method.startswith("tasks/") and method != TASK_STATUS:
            return
        params = item.get("params") if isinstance(item.get("params"), dict) else {}
        task_id = _key(params.get(TASK_PARAM))
        if task_id is None:
            return
        # a request goes to the side that runs the task; a status comes from it
        runs_it = from_client if kind is MessageType.REQUEST else not from_client
        state = session.tasks.setdefault((runs_it, task_id), _Task())
        if state.created is None:
            state.before.append((row, frame.seq, method))
        else:
            self._mark_task(state, row, frame.seq, method)

    def _mark_task(self, state: _Task, row: int, seq: int, method: str) -> None:
        assert state.created is not None
        created_seq = state.created[1]
        if method in POLL_METHODS:
            state.polls += 1
            if state.first_poll is None:
                state.first_poll = seq
            self.diagram.mark(row, "poll", created_seq, state.polls, method, state.name)
        else:
            self.diagram.mark(row, "about task", created_seq, method.rsplit("/", 1)[-1], method, state.name)

    def finish(self) -> None:
        """What is known only at the end: counts on requests, cancels no response followed."""
        mark = self.diagram.mark
        for interaction in self.watched:
            if interaction.progress:
                count, first = interaction.progress
                mark(interaction.row, "progress", first, count)
            if interaction.events:
                count, first = interaction.events
                mark(interaction.row, "events", first, count)
            if interaction.cancel is not None:
                cancel_row, cancel_seq = interaction.cancel
                mark(interaction.row, "cancelled", cancel_seq)
                if interaction.response is None:
                    mark(cancel_row, "no response", None)
                    mark(interaction.row, "never answered", None)
        for session in self.sessions.values():
            for state in session.tasks.values():
                if state.created is not None and state.polls:
                    mark(state.created[0], "polled", state.first_poll, state.polls, state.name)
        for origin_row, by, seq in self.resumed.values():
            self._mark_resumed(origin_row, by, seq)


def render_diff(report: DiffReport, old: Cassette, new: Cassette) -> str:
    """The page of `tapes diff --format html`: both sessions side by side, each change and each
    same-behaviour-in-another-form mapping highlighted on the frames it concerns."""
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
    return render_comparison(old, new, differences, titles=(report.old_name, report.new_name))
