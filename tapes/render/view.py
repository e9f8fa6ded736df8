"""`tapes view`: a cassette as one self-contained HTML page, a sequence diagram of the session.

The client's lane is on the left, the server's on the right, and between them the wire, one
column per channel (stdio; on HTTP each exchange: a POST's stream, the GET stream, a legacy SSE
stream). Every frame is an arrow at its time, on its channel's column. Marks tie frames together
the way the replay engine does: a cancellation and the response it raced, a server→client request
and the client's answer, progress and the request it reports on, a stream the client dropped and
the GET that resumed it from its last event id, a task's polls and the request that created the
task (2025-11-25), a subscription's events and its subscriptions/listen request (2026-07-28).

Python turns the cassette into a small JSON model of the diagram; the script in view_assets/
draws it. Cassettes are untrusted: their content reaches the page only as JSON inside a script
element, with `<`, `>` and `&` escaped, and the script writes it with textContent, never as
markup. The page loads nothing from anywhere (its Content-Security-Policy forbids it).
"""

from __future__ import annotations

import base64
import html
import json
import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from importlib.resources import files
from typing import Any

from tapes.analysis.diff import DiffReport
from tapes.cassette.frames import STDIO, Frame, Kind
from tapes.cassette.store import Cassette, CassetteError
from tapes.render.show import compact, describe, server_text
from tapes.replay.index import Interaction, RecordingIndex
from tapes.replay.polls import POLL_METHODS
from tapes.replay.sessions import split_sessions
from tapes.wire.http import header
from tapes.wire.jsonrpc import MessageType, classify, items

SUMMARY_LIMIT = 100  # characters of a payload summary shown on a row
DETAIL_LIMIT = 64_000  # characters of one frame's JSON kept for the details panel; the rest is cut

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


def render_page(cassette: Cassette, title: str) -> str:
    """The page for one cassette; `title` names it (usually its file name)."""
    return _page(title, {"sides": [_diagram(cassette, title, {})], "differences": []})


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
    model = {
        "sides": [_diagram(a, titles[0], notes[0]), _diagram(b, titles[1], notes[1])],
        "differences": [
            {"note": d.note, "severity": d.severity, "a": list(d.a_seqs), "b": list(d.b_seqs)} for d in differences
        ],
    }
    return _page(f"{titles[0]} ↔ {titles[1]}", model)


def _page(title: str, model: dict[str, Any]) -> str:
    assets = files("tapes.render") / "view_assets"
    data = json.dumps(model, ensure_ascii=False, separators=(",", ":"))
    # str.replace, not str.translate: translate with a table went char by char, a third of the page's time
    data = data.replace("&", "\\u0026").replace("<", "\\u003c").replace(">", "\\u003e")
    # A lone surrogate (legal in a JSON-RPC string) cannot be encoded as UTF-8: write it as the
    # JSON escape it came from, so the page can always be saved.
    data = data.encode("utf-8", "backslashreplace").decode("utf-8")
    return (
        '<!doctype html>\n<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{_CSP}">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{html.escape(title.encode('utf-8', 'backslashreplace').decode())} · tapes view</title>"
        f"<style>{(assets / 'view.css').read_text()}</style></head>\n<body>"
        "<noscript>This page draws the session with JavaScript; please enable it.</noscript>"
        f'<script type="application/json" id="tapes-data">{data}</script>\n'
        f"<script>{(assets / 'view.js').read_text()}</script></body></html>\n"
    )


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
    label: str = ""

    def model(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "label": self.label or self.name,
            "first": self.first,
            "last": self.last,
            "req": self.request_row,
            "res": self.response_row,
            "end": self.end,
        }


@dataclass
class _Row:
    frame: Frame
    channel: int
    what: str
    summary: str
    type: str
    ids: list[str] = field(default_factory=list)
    group: int | None = None
    marks: list[list[Any]] = field(default_factory=list)  # [kind, text, linked seq | None, explanation]

    def mark(self, kind: str, text: str, target: int | None = None, explanation: str = "") -> None:
        self.marks.append([kind, text, target, explanation or text])

    def model(self, notes: list[str]) -> dict[str, Any]:
        frame = self.frame
        row: dict[str, Any] = {
            "seq": frame.seq,
            "t": round(frame.t, 6),
            "dir": "c" if frame.from_client else "s",
            "ch": self.channel,
            "type": self.type,
            "what": self.what,
            "body": _body(frame),
        }
        optional = {
            "sum": self.summary,
            "eid": _event_id(frame),
            "g": self.group,
            "ids": self.ids,
            "marks": self.marks,
            "notes": notes,
        }
        row.update((key, value) for key, value in optional.items() if value or value == 0)
        return row


def _diagram(cassette: Cassette, title: str, notes: dict[int, list[str]]) -> dict[str, Any]:
    frames = cassette.frames
    channels: dict[str, _Channel] = {}
    rows: list[_Row] = []
    for index, frame in enumerate(frames):
        channel = channels.get(frame.channel) or channels.setdefault(
            frame.channel, _Channel(frame.channel, len(channels), index)
        )
        channel.last = index
        if frame.kind is Kind.HTTP_REQUEST and channel.request_row is None:
            channel.request_row = index
        elif frame.kind is Kind.HTTP_RESPONSE and channel.response_row is None:
            channel.response_row = index
        elif frame.kind is Kind.STREAM_END:
            channel.end = str((frame.info or {}).get("reason", "closed"))
        what, summary, kind = _label(frame)
        rows.append(_Row(frame, channel.index, what, summary, kind, _ids(frame)))
    for channel in channels.values():
        channel.label = _channel_label(channel, frames)
    groups = _link_interactions(frames, rows)
    _mark_streams(frames, rows, channels)
    _mark_tasks(rows)
    recorded = cassette.header
    meta = [
        ["transport", recorded.transport],
        ["server", server_text(recorded.server)],
        ["created", recorded.created],
        ["protocol", cassette.protocol_version or "unknown"],
        ["frames", str(len(frames))],
        ["recorded by", recorded.tool],
    ]
    if recorded.labels:
        meta.append(["labels", " ".join(f"{key}={value}" for key, value in recorded.labels.items())])
    return {
        "title": title,
        "meta": meta,
        "warnings": cassette.warnings,
        "channels": [channel.model() for channel in channels.values()],
        "groups": groups,
        "rows": [row.model(notes.get(row.frame.seq, [])) for row in rows],
    }


def _label(frame: Frame) -> tuple[str, str, str]:
    """(what, summary, type) of a row; the type picks the arrow's colour and style."""
    info = frame.info or {}
    if frame.kind is Kind.HTTP_REQUEST:
        return f"{_text(info.get('method'), 20)} {_text(info.get('path'), 80)}", "", "http"
    if frame.kind is Kind.HTTP_RESPONSE:
        content_type = header(info.get("headers"), "content-type") or ""
        return f"HTTP {compact(info.get('status'), 10)} {_text(content_type, 40)}".rstrip(), "", "http"
    if frame.kind is Kind.STREAM_END:
        reason = info.get("reason")
        what = {"client_disconnect": "client disconnected", "upstream_error": "upstream error"}.get(
            reason if isinstance(reason, str) else "", f"stream end ({compact(reason, 30)})"
        )
        detail = info.get("detail")
        return what, "" if detail is None else _text(detail, SUMMARY_LIMIT), "end"
    if frame.kind is Kind.SSE_EVENT and frame.message is None:
        data = (frame.data or b"").decode("utf-8", "replace")
        if not data and info.get("id") is not None:
            return "sse priming", "", "sse"
        event = info.get("event")
        return f"sse {_text(event, 30) if event else 'event'}", data[:SUMMARY_LIMIT], "sse"
    if frame.kind is Kind.EXIT:
        return "exit", " ".join(f"{key}={compact(value, 20)}" for key, value in info.items()), "exit"
    what, summary, _ = describe(frame, SUMMARY_LIMIT)
    if frame.kind is Kind.SSE_EVENT:
        what = what.removeprefix("sse event ")  # its event id says it came as an SSE event
    kind = classify(frame.message).value if frame.message is not None else frame.kind.value
    what = what.removeprefix("notification ")  # its method says so: notifications/…
    if kind == "notification" and frame.message.get("method") == "notifications/progress":
        params = frame.message.get("params") or {}
        total = f"/{compact(params.get('total'), 12)}" if "total" in params else ""
        what = f"progress {compact(params.get('progress'), 12)}{total}"
    return what, summary[: SUMMARY_LIMIT + 1], kind


def _text(value: Any, limit: int) -> str:
    return value[:limit] if isinstance(value, str) else compact(value, limit)


def _event_id(frame: Frame) -> str | None:
    if frame.kind is not Kind.SSE_EVENT or not frame.info or frame.info.get("id") is None:
        return None
    return _text(frame.info["id"], 200)


def _ids(frame: Frame) -> list[str]:
    """The JSON-RPC ids a row answers to in the filter box: its messages' ids, and the request a
    cancellation or a progress notification refers to."""
    if frame.message is None:
        return []
    found = []
    for item in items(frame.message):
        if not isinstance(item, dict):
            continue
        params = item.get("params") if isinstance(item.get("params"), dict) else {}
        for value in (item.get("id"), params.get("requestId"), params.get("progressToken")):
            if isinstance(value, (str, int)) and not isinstance(value, bool):
                found.append(str(value))
    return found


def _channel_label(channel: _Channel, frames: Sequence[Frame]) -> str:
    """What an exchange was: `POST tools/call #4`, `GET stream`, `GET resume`, `legacy SSE`."""
    if channel.request_row is None:
        return channel.name
    info = frames[channel.request_row].info or {}
    method = info.get("method") if isinstance(info.get("method"), str) else "?"
    if method == "POST":
        body = frames[channel.request_row + 1] if channel.request_row + 1 < len(frames) else None
        if body is not None and body.channel == channel.name and body.from_client and body.message is not None:
            what, _, _ = describe(body, 0)
            return f"{channel.name} POST {what.split(' ', 1)[-1]}"
        return f"{channel.name} POST"
    if method == "GET":
        if header(info.get("headers"), "last-event-id") is not None:
            return f"{channel.name} GET resume"
        events = (f for f in frames[channel.first : channel.last + 1] if f.channel == channel.name)
        if any(f.kind is Kind.SSE_EVENT and (f.info or {}).get("event") == "endpoint" for f in events):
            return f"{channel.name} legacy SSE"
        return f"{channel.name} GET stream"
    return f"{channel.name} {_text(method, 12)}"


def _body(frame: Frame) -> Any:
    """What the details panel shows of a frame: its message, bytes and info, cut at DETAIL_LIMIT."""
    body: dict[str, Any] = {}
    if frame.message is not None:
        body["message"] = _jsonable(frame.message)
    if frame.data is not None:
        try:
            body["data"] = frame.data.decode("utf-8")
        except UnicodeDecodeError:
            body["data (base64)"] = base64.b64encode(frame.data).decode("ascii")
    if frame.info is not None:
        body["info"] = _jsonable(frame.info)
    text = json.dumps(body, ensure_ascii=False)
    if len(text) > DETAIL_LIMIT:
        return f"{text[:DETAIL_LIMIT]}… ({len(text) - DETAIL_LIMIT} more characters; `tapes export` has them all)"
    return body


def _jsonable(value: Any) -> Any:
    """`value` as plain JSON: the page's data must parse with JSON.parse, so no NaN, and msgpack's
    bytes become text."""
    if isinstance(value, dict):
        return {str(key): _jsonable(member) for key, member in value.items()}
    if isinstance(value, list):
        return [_jsonable(member) for member in value]
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, bytes):
        return f"<{len(value)} bytes: {base64.b64encode(value[:DETAIL_LIMIT]).decode('ascii')}>"
    return value


# --- links between frames ---------------------------------------------------------------------


def _owners(frames: Sequence[Frame]) -> dict[tuple[int, int], Interaction]:
    """The interaction each message item (frame seq, index in a batch) belongs to, exactly as the
    replay engine ties them: both read the recording's causality index."""
    owners: dict[tuple[int, int], Interaction] = {}
    for session in split_sessions(frames):  # ids are only unique within an HTTP session
        try:
            owners.update(RecordingIndex.of(session.frames).interactions_by_item())
        except CassetteError:
            continue  # e.g. msgpack bytes inside a message: the page shows the frames unlinked
    return owners


def _link_interactions(frames: Sequence[Frame], rows: list[_Row]) -> list[dict[str, Any]]:
    """Group rows by interaction and mark cancellations, races, server→client requests and
    progress. Returns the groups: a label and the seqs of their frames."""
    row_of_seq = {row.frame.seq: row for row in rows}
    groups: dict[int, dict[str, Any]] = {}  # id(interaction) -> its group
    stories: dict[int, _Story] = {}
    for (seq, index), interaction in sorted(_owners(frames).items()):
        row = row_of_seq[seq]
        group = groups.setdefault(
            id(interaction), {"label": interaction.describe(), "seqs": [], "index": len(groups)}
        )
        if row.group is None:
            row.group = group["index"]
            group["seqs"].append(seq)
        story = stories.setdefault(id(interaction), _Story(interaction))
        story.add(row, items(row.frame.message)[index])
    for story in stories.values():
        story.mark()
    _group_http_heads(rows, groups)
    return [{"label": group["label"], "seqs": group["seqs"]} for group in groups.values()]


def _group_http_heads(rows: list[_Row], groups: dict[int, dict[str, Any]]) -> None:
    """On HTTP, the heads, priming event and end of a request's own exchange belong to it too."""
    by_group = {group["index"]: group for group in groups.values()}
    channel_group: dict[int, int] = {}
    for row in rows:
        if row.group is not None and row.frame.from_client and row.type == MessageType.REQUEST:
            channel_group.setdefault(row.channel, row.group)
    for row in rows:
        if row.group is None and row.frame.channel != STDIO and row.channel in channel_group:
            row.group = channel_group[row.channel]
            by_group[row.group]["seqs"].append(row.frame.seq)
    for group in groups.values():
        group["seqs"].sort()


@dataclass
class _Story:
    """The frames of one interaction that the page links to each other."""

    interaction: Interaction
    request: _Row | None = None
    response: _Row | None = None
    cancels: list[_Row] = field(default_factory=list)
    progress: list[_Row] = field(default_factory=list)
    events: list[_Row] = field(default_factory=list)  # what a subscriptions/listen stream carried
    server_requests: dict[Any, _Row] = field(default_factory=dict)  # by their id
    answers: list[tuple[Any, _Row]] = field(default_factory=list)  # (server request id, the client's answer)

    def add(self, row: _Row, item: dict[str, Any]) -> None:
        kind = classify(item)
        from_client = row.frame.from_client
        if kind is MessageType.REQUEST:
            if from_client:
                self.request = self.request or row
            else:
                self.server_requests.setdefault(_key(item["id"]), row)
        elif kind in (MessageType.RESULT, MessageType.ERROR):
            if from_client:
                self.answers.append((_key(item["id"]), row))
            elif _key(item["id"]) == _key(self.interaction.recorded_id):
                self.response = self.response or row
        elif item["method"] == "notifications/cancelled" and from_client:
            self.cancels.append(row)
        elif item["method"] == "notifications/progress" and not from_client:
            self.progress.append(row)
        elif not from_client and self.interaction.long_lived:
            self.events.append(row)

    def mark(self) -> None:
        request, response = self.request, self.response
        request_id = compact(self.interaction.recorded_id, 40)
        if request is not None and self.progress:
            request.mark("progress", f"progress ×{len(self.progress)}", self.progress[0].frame.seq,
                         f"{len(self.progress)} progress notifications report on this request")
        for progress in self.progress:
            progress.mark("of", f"of #{request_id}", self.interaction.frame_seq, f"progress of request #{request_id}")
            if self.cancels and progress.frame.seq > self.cancels[0].frame.seq:
                progress.mark("late", "after cancel", self.cancels[0].frame.seq,
                              "the server reported progress after the client had cancelled the request")
        if request is not None and self.events:
            request.mark("progress", f"events ×{len(self.events)}", self.events[0].frame.seq,
                         f"{len(self.events)} notifications came on this subscription's stream")
        for event in self.events:
            event.mark("of", f"on #{request_id}", self.interaction.frame_seq,
                       f"sent on the stream of subscriptions/listen #{request_id}")
        if response is not None and self.interaction.long_lived:
            response.mark("cancel", "server closed", self.interaction.frame_seq,
                          f"the server ended subscription #{request_id} (frame {self.interaction.frame_seq})")
        for cancel in self.cancels:
            cancel.mark("cancel", f"✕ cancels #{request_id}", self.interaction.frame_seq,
                        f"the client cancels request #{request_id} (frame {self.interaction.frame_seq})")
            if response is None:
                cancel.mark("race", "no response", None, "the server never answered the cancelled request")
            elif response.frame.seq < cancel.frame.seq:
                cancel.mark("race", "⚡ too late: answered", response.frame.seq,
                            f"the response (frame {response.frame.seq}) was already sent: the response won the race")
            else:
                cancel.mark("race", "⚡ response still came", response.frame.seq,
                            f"the server answered anyway (frame {response.frame.seq}): the race the cancel lost")
        if self.cancels and request is not None:
            first = self.cancels[0].frame.seq
            request.mark("cancel", "✕ cancelled", first, f"the client cancelled this request (frame {first})")
            if response is None:
                request.mark("race", "never answered", None, "no response to this request was recorded")
        if self.cancels and response is not None:
            first = self.cancels[0].frame.seq
            if response.frame.seq > first:
                response.mark("race", "⚡ after cancel", first, f"sent after the client cancelled (frame {first})")
            else:
                response.mark("race", "⚡ raced a cancel", first, f"the client's cancel (frame {first}) came after it")
        for server_request_id, answer in self.answers:
            asked = self.server_requests.get(server_request_id)
            if asked is not None:
                answer.mark("answer", f"↪ answers server #{compact(server_request_id[1], 40)}", asked.frame.seq,
                            f"the client's answer to the server's request (frame {asked.frame.seq})")
                asked.mark("answer", f"↩ answered at {answer.frame.seq}", answer.frame.seq,
                           f"the client answered this request in frame {answer.frame.seq}")
        for server_request in self.server_requests.values():
            server_request.mark("of", f"for #{request_id}", self.interaction.frame_seq,
                                f"sent while serving request #{request_id} (frame {self.interaction.frame_seq})")


def _mark_tasks(rows: list[_Row]) -> None:
    """Tie each task's polls, status notifications and result request to the request that
    created it (the one answered with the task): a task is asked about in requests of its own."""
    created: dict[tuple[bool, Any], _Row] = {}  # (created by the server, task id) -> the request's row
    requests: dict[tuple[bool, Any], _Row] = {}  # (sent by the client, request id) -> its row
    about: dict[tuple[bool, Any], list[tuple[_Row, str]]] = defaultdict(list)
    for row in rows:
        for item in items(row.frame.message) if row.frame.message is not None else ():
            if not isinstance(item, dict):
                continue
            kind, from_client = classify(item), row.frame.from_client
            if kind is MessageType.REQUEST:
                requests[(from_client, _key(item["id"]))] = row
            result = item.get("result") if kind is MessageType.RESULT else None
            task = result.get("task") if isinstance(result, dict) else None
            if isinstance(task, dict) and (asked := requests.get((not from_client, _key(item["id"])))) is not None:
                created.setdefault((not from_client, task.get("taskId")), asked)
            params = item.get("params") if isinstance(item.get("params"), dict) else {}
            if kind in (MessageType.REQUEST, MessageType.NOTIFICATION) and str(item["method"]).startswith("tasks/") \
                    or item.get("method") == "notifications/tasks/status":
                # a request goes to the side that runs the task; a status comes from it
                runs_it = from_client if kind is MessageType.REQUEST else not from_client
                about[(runs_it, params.get("taskId"))].append((row, item["method"]))
    for key, asked in created.items():
        task = compact(key[1], 12)
        polls = [row for row, method in about.get(key, []) if method in POLL_METHODS]
        if polls:
            asked.mark("poll", f"polled ×{len(polls)}", polls[0].frame.seq, f"task {task} was polled {len(polls)} times")
        for row, method in about.get(key, []):
            text = f"poll {polls.index(row) + 1} of task" if method in POLL_METHODS else f"{method.rsplit('/', 1)[-1]} of task"
            row.mark("poll", text, asked.frame.seq, f"{method} about task {task}, created by the request in frame {asked.frame.seq}")


def _key(request_id: Any) -> tuple[str, Any]:
    """A JSON-RPC id as a dict key: 1 and "1" are different ids, 1 and 1.0 are not."""
    return (type(request_id).__name__ if isinstance(request_id, str) else "number", request_id)


# --- streams: disconnects and resumptions -----------------------------------------------------


def _mark_streams(frames: Sequence[Frame], rows: list[_Row], channels: dict[str, _Channel]) -> None:
    """Mark streams the client dropped, and the GETs that resumed them by Last-Event-ID."""
    last_event: dict[str, int] = {}  # event id -> row of the latest event that carried it
    names = list(channels)
    for index, frame in enumerate(frames):
        row = rows[index]
        info = frame.info or {}
        if frame.kind is Kind.SSE_EVENT and info.get("retry") is not None:
            row.mark("retry", f"retry {compact(info['retry'], 12)} ms", None, "the server tells the client when to reconnect")
        if frame.kind is Kind.SSE_EVENT and info.get("id") is not None:
            last_event[_text(info["id"], 200)] = index
        elif frame.kind is Kind.STREAM_END and info.get("reason") in ("client_disconnect", "upstream_error"):
            row.mark("cut", "✂ stream cut", None, f"the stream broke: {info['reason']}")
        elif frame.kind is Kind.HTTP_REQUEST and (resumed_from := header(info.get("headers"), "last-event-id")) is not None:
            origin = last_event.get(resumed_from)
            if origin is None:
                row.mark("resume", f"⟲ Last-Event-ID {resumed_from[:40]}", None,
                         "resumes after an event id this recording never saw")
                continue
            origin_row = rows[origin]
            origin_channel = names[origin_row.channel]
            row.mark("resume", f"⟲ resumes {origin_channel} after {resumed_from[:40]}", origin_row.frame.seq,
                     f"the client resumes {origin_channel} after its event {resumed_from}")
            end = _stream_end_row(rows, origin_row.channel, origin)
            (end or origin_row).mark("resumed", f"⟲ resumed by {frame.channel}", frame.seq,
                                     f"the client resumed this stream with {frame.channel}")


def _stream_end_row(rows: list[_Row], channel: int, after: int) -> _Row | None:
    for row in rows[after:]:
        if row.channel == channel and row.frame.kind is Kind.STREAM_END:
            return row
    return None


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

