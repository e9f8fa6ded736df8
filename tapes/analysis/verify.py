"""`tapes verify`, the sans-IO half: the recorded client side as a script to play against a live
server. The adapter (recorder/verify.py) writes what `ready()` gives, feeds every line the live
server writes to `receive()`, and calls `force()` when nothing came for too long.

Happens-before, from the client's side: a recorded client message goes out once the live server
has sent every server message tied to a request (its response, progress for its token, a
server→client request made for it) that the recording has before it — the things the client was
waiting for when it spoke. Messages tied to no request (log lines, list_changed) are left out:
when they come is a race. So are what a cancelled request still got after its cancellation.

What the live server decides is put in place of what the recorded one decided: the client's
answer to a server→client request carries the live request's id (the k-th live request of a
method answers as the k-th recorded one did), and a 2026-07-28 retry carries the live
`requestState` in place of the recorded one (it also waits for the result that issued it, which
the recorder may have captured after the retry: the two directions are captured apart).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from tapes.cassette.frames import Frame, Kind
from tapes.replay.index import checked_payload
from tapes.replay.polls import is_poll
from tapes.wire.http import header, legacy_session_id
from tapes.wire.jsonrpc import MessageType, classify, decode, id_member, items, meta_of, params_of, wire_form
from tapes.wire.text import is_digits, printable

# ("response", id) | ("progress", token, n) | ("request", method, n); over HTTP also ("head", exchange),
# ("event", exchange, n) and ("end", exchange)
ServerKey = tuple[Any, ...]
Outgoing = bytes | None  # a line to write to the server, or None: close its input (the recorded end)


MAX_PAUSE = 5.0
"""Longest recorded pause a poll waits for (a client that polled once a minute is not followed)."""


@dataclass(frozen=True)
class _Line:
    seq: int
    message: Any  # the JSON-RPC message or batch to send; None for raw bytes or the end
    # bytes sent verbatim: those of a message as recorded, when its data kept them (it went out as
    # recorded when nothing live is put in), or bytes that are not JSON-RPC; None with no message: the end
    raw: bytes | None
    waits_for: frozenset[ServerKey]
    exchange: int | None = None  # over HTTP: the recorded exchange (channel http:N) this request opens
    pause: float = 0.0  # a poll's: the recorded seconds since the client's line before it (its pace)


def _request_state(members: Any) -> str | None:
    """The 2026-07-28 `requestState` of a result or a retry's params, if it has one (a string)."""
    state = members.get("requestState") if isinstance(members, dict) else None
    return state if isinstance(state, str) else None


def _created_task(item: dict[str, Any]) -> str | None:
    """The id of the task a server's answer created (a CreateTaskResult), if it created one."""
    result = item.get("result")
    task = result.get("task") if isinstance(result, dict) else None
    task_id = task.get("taskId") if isinstance(task, dict) else None
    return task_id if isinstance(task_id, str) else None


class _Keys:
    """Names server messages the same way in the recording and live: by the client's own request
    ids and progress tokens (the script sends the recorded ones), and server→client requests by
    method and count."""

    def __init__(self) -> None:
        self.progress: Counter[Any] = Counter()
        self.requests: Counter[str] = Counter()

    def of(self, item: dict[str, Any]) -> ServerKey | None:
        kind = classify(item)
        if kind in (MessageType.RESULT, MessageType.ERROR):
            return ("response", item["id"])
        if kind is MessageType.REQUEST:
            self.requests[item["method"]] += 1
            return ("request", item["method"], self.requests[item["method"]])
        if item.get("method") == "notifications/progress":
            token = id_member(params_of(item), "progressToken")
            if token is None:
                return None  # it names no request: tied to none
            self.progress[token] += 1
            return ("progress", token, self.progress[token])
        return None


class ClientScript:
    def __init__(self, frames: Sequence[Frame]) -> None:
        self._lines: list[_Line] = []
        self._next = 0
        self._received: set[ServerKey] = set()
        self._recorded_server_requests: dict[Any, ServerKey] = {}  # recorded id -> its key
        self._live_ids: dict[ServerKey, Any] = {}  # key -> the live server request's id
        self._states: dict[Any, Any] = {}  # recorded requestState -> the response id that issued it
        self._live_states: dict[Any, Any] = {}  # recorded requestState -> live requestState
        self._state_of_response: dict[Any, Any] = {}  # response id -> recorded requestState it issued
        self._task_of_response: dict[Any, str] = {}  # response id -> the task it created (a CreateTaskResult)
        self._live_tasks: dict[str, str] = {}  # recorded task id -> the live server's
        self._live = _Keys()
        self._previous_t: float | None = None  # the time of the client's last line, as the script is built
        self.pause = 0.0  # seconds the adapter waits before the next line goes out (`waited` then)
        self._paused = False
        self._build(frames)

    def _build(self, frames: Sequence[Frame]) -> None:
        # Not the replay's causality index (tapes.replay.index): that one says what each server
        # frame waits for, by recorded ids. A script needs the inverse, what each client line
        # waits for, keyed by content a live server reproduces (its ids and tokens are its own).
        self._note_states(frames)
        awaited: set[ServerKey] = set()
        token_owner: dict[Any, Any] = {}  # progress token -> client request id
        cancelled: set[Any] = set()
        keys = _Keys()
        for frame in frames:
            if frame.from_client:
                line = self._client_line(frame, awaited, token_owner, cancelled)
                if line is not None:
                    self._lines.append(line)
                continue
            self._server_frame(frame, keys, awaited, token_owner, cancelled)

    def _note_states(self, frames: Sequence[Frame]) -> None:
        for frame in frames:
            if frame.from_client:
                continue
            for item in items(frame.message) if frame.message is not None else ():
                state = _request_state(item.get("result"))
                if state is not None:
                    self._states[state] = item["id"]
                    self._state_of_response[item["id"]] = state
                if (task := _created_task(item)) is not None:
                    self._task_of_response[item["id"]] = task

    def _server_frame(self, frame: Frame, keys: _Keys, awaited: set[ServerKey], token_owner: dict[Any, Any],
                      cancelled: set[Any]) -> None:
        for item in items(frame.message) if frame.message is not None else ():
            key = keys.of(item)
            if key is None:
                continue
            if classify(item) is MessageType.REQUEST:
                self._recorded_server_requests[item["id"]] = key
            owner = item.get("id") if key[0] == "response" else token_owner.get(key[1]) if key[0] == "progress" else None
            if owner is None or owner not in cancelled:
                awaited.add(key)

    def _client_line(self, frame: Frame, awaited: set[ServerKey], token_owner: dict[Any, Any],
                     cancelled: set[Any]) -> _Line | None:
        waits_for = set(awaited)
        if frame.kind is Kind.STREAM_END:
            return _Line(frame.seq, None, None, frozenset(waits_for))
        if frame.kind is Kind.RAW:
            return _Line(frame.seq, None, frame.payload, frozenset(waits_for))
        if frame.kind is not Kind.MESSAGE:
            return None
        checked_payload(frame)  # refused now, in one sentence, if it has no JSON form to send
        # a poll goes at the recorded pace: sent at once, it reads a state the server had not reached then
        pause = frame.t - self._previous_t if self._previous_t is not None and any(
            is_poll(str(item.get("method"))) for item in items(frame.message)) else 0.0
        self._previous_t = frame.t
        for item in items(frame.message):
            kind = classify(item)
            if kind is MessageType.REQUEST:
                token = id_member(meta_of(item), "progressToken")
                if token is not None:
                    token_owner[token] = item["id"]
                if (state := _request_state(item.get("params"))) in self._states:
                    waits_for.add(("response", self._states[state]))
            elif kind in (MessageType.RESULT, MessageType.ERROR) and item["id"] in self._recorded_server_requests:
                waits_for.add(self._recorded_server_requests[item["id"]])
            elif item.get("method") == "notifications/cancelled":
                cancelled.add(id_member(params_of(item), "requestId"))
        return _Line(frame.seq, frame.message, frame.data, frozenset(waits_for), pause=min(max(pause, 0.0), MAX_PAUSE))

    # --- driving ------------------------------------------------------------------------------

    @property
    def finished(self) -> bool:
        return self._next >= len(self._lines)

    @property
    def waiting_for(self) -> list[ServerKey]:
        """What the next line still waits for (for a timeout message)."""
        return sorted(self._lines[self._next].waits_for - self._received, key=repr) if not self.finished else []

    def ready(self) -> list[Outgoing]:
        """The next client payloads whose turn has come, in recorded order (None, the end, last);
        before a poll whose pause is not waited yet, none: `pause` says how long to wait."""
        out = []
        while not self.finished and self._lines[self._next].waits_for <= self._received:
            line = self._lines[self._next]
            if line.pause and not self._paused:
                self.pause = line.pause
                break
            self._paused = False
            out.append(self._payload(line))
            self._next += 1
        return out

    def waited(self) -> None:
        """The adapter waited `pause`: the poll may go."""
        self.pause, self._paused = 0.0, True

    def force(self) -> list[Outgoing]:
        """Give up waiting: the next line goes out now, and any that follow it and are ready."""
        if self.finished:
            return []
        line = self._lines[self._next]
        self._next += 1
        return [self._payload(line), *self.ready()]

    def receive(self, payload: bytes) -> None:
        """A line the live server wrote."""
        message = decode(payload).message
        if message is None:
            return
        for item in items(message):
            key = self._live.of(item)
            if key is None:
                continue
            self._received.add(key)
            if key[0] == "request":
                self._live_ids[key] = item["id"]
            elif key[1] in self._state_of_response and isinstance(item.get("result"), dict):
                self._live_states[self._state_of_response[key[1]]] = item["result"].get("requestState")
            if key[0] == "response" and key[1] in self._task_of_response and (task := _created_task(item)) is not None:
                self._live_tasks[self._task_of_response[key[1]]] = task  # the live server names its tasks afresh

    def _payload(self, line: _Line) -> Outgoing:
        return line.raw if line.message is None else self._sent(line)

    def _sent(self, line: _Line) -> bytes:
        """A message line's bytes: the recorded ones when nothing live is put in, else the message
        with the live values (a lone surrogate a JSON Lines cassette holds written as its escape)."""
        recorded = items(line.message)
        restamped = [self._restamp(item) for item in recorded]
        if line.raw is not None and all(new is old for new, old in zip(restamped, recorded, strict=True)):
            return line.raw
        return wire_form(restamped if isinstance(line.message, list) else restamped[0])

    def _restamp(self, item: dict[str, Any]) -> dict[str, Any]:
        kind = classify(item)
        if kind in (MessageType.RESULT, MessageType.ERROR):
            key = self._recorded_server_requests.get(item["id"])
            if key in self._live_ids:
                return {**item, "id": self._live_ids[key]}
        elif kind is MessageType.REQUEST:
            state = _request_state(item.get("params"))
            if self._live_states.get(state) is not None:
                return {**item, "params": {**item["params"], "requestState": self._live_states[state]}}
            task = params_of(item).get("taskId")
            if isinstance(task, str) and task in self._live_tasks:  # tasks/get, tasks/result, tasks/cancel
                return {**item, "params": {**item["params"], "taskId": self._live_tasks[task]}}
        return item


# --- Streamable HTTP ------------------------------------------------------------------------------
#
# Over HTTP the unit the client sends is an exchange (channel http:N): a request head and its body.
# It goes out when the live server has sent what the recorded client had seen when it sent it —
# the same JSON-RPC keys as over stdio, plus the response heads recorded before it (a session id
# comes in one) and, for a resumption, the event it resumes after. What the live server decides
# over HTTP is put in place too: its Mcp-Session-Id (the session a recorded head issued is the one
# the live head of the same exchange issued) and its event ids (Last-Event-ID names the live event
# at the position of the same exchange's stream where the recorded one was).

_SENT_HEADERS = frozenset({"accept", "content-type", "last-event-id"})  # and every mcp-* header


@dataclass(frozen=True)
class HttpRequest:
    """One request the adapter sends: to `path` (the recorded one), with the live values put in."""

    exchange: int  # the recorded exchange number: report what it gets back under it
    method: str
    path: str
    headers: list[tuple[str, str]]
    body: bytes | None
    disconnect_after: int | None  # close the response after this many SSE events (the recording's client did)


def _exchange_number(channel: str) -> int | None:
    prefix, _, number = channel.partition(":")
    return int(number) if prefix == "http" and is_digits(number) else None


class HttpClientScript(ClientScript):
    def __init__(self, frames: Sequence[Frame]) -> None:
        self._heads: dict[int, dict[str, Any]] = {}  # exchange -> recorded request head info
        self._disconnects: dict[int, int] = {}  # exchange -> SSE events the recorded client read before leaving
        self._event_positions: dict[str, tuple[int, int]] = {}  # recorded event id -> (exchange, position)
        self._live_event_ids: dict[tuple[int, int], str] = {}
        self._issued_sessions: dict[int, str] = {}  # exchange -> the session id its recorded response issued
        self._issued_endpoints: dict[int, str] = {}  # exchange -> the legacy session its recorded endpoint event named
        self._live_sessions: dict[str, str] = {}  # recorded session id -> live one
        self._live_events: Counter[int] = Counter()  # exchange -> SSE events received live
        self._at_end: frozenset[ServerKey] = frozenset()  # what the recorded server had sent by the session's end
        super().__init__(frames)

    def _build(self, frames: Sequence[Frame]) -> None:
        # Not the replay's causality index (tapes.replay.index): that one says what each server
        # frame waits for, by recorded ids. A script needs the inverse, what each client line
        # waits for, keyed by content a live server reproduces (its ids and tokens are its own).
        self._note_states(frames)
        awaited: set[ServerKey] = set()
        token_owner: dict[Any, Any] = {}
        cancelled: set[Any] = set()
        keys = _Keys()
        events: Counter[int] = Counter()
        closed: set[int] = set()  # exchanges whose stream the server had closed so far
        opened: dict[int, int] = {}  # exchange -> where its line is while its body may still follow
        for frame in frames:
            exchange = _exchange_number(frame.channel)
            if exchange is None:
                continue
            if frame.kind is Kind.HTTP_REQUEST:
                info = frame.info or {}
                self._heads[exchange] = info
                waits_for = set(awaited)
                event_id = header(info.get("headers", ()), "last-event-id")
                if event_id in self._event_positions:
                    resumed, position = self._event_positions[event_id]
                    waits_for.add(("event", resumed, position))
                    if resumed in closed:  # resumed once the server closed that stream: while it is open, a server refuses it
                        waits_for.add(("end", resumed))
                opened[exchange] = len(self._lines)
                self._lines.append(_Line(frame.seq, None, None, frozenset(waits_for), exchange))
            elif frame.from_client:
                index = opened.pop(exchange, None)
                body = self._client_line(frame, awaited, token_owner, cancelled) if frame.kind is Kind.MESSAGE else None
                if index is None:
                    continue
                head = self._lines[index]
                raw = body.raw if body else checked_payload(frame)
                self._lines[index] = _Line(head.seq, frame.message if body else None, raw,
                                           head.waits_for | (body.waits_for if body else frozenset()), exchange,
                                           body.pause if body else 0.0)
            elif frame.kind is Kind.HTTP_RESPONSE:
                awaited.add(("head", exchange))
                session = header((frame.info or {}).get("headers", ()), "mcp-session-id")
                if session is not None and session not in self._issued_sessions.values():
                    self._issued_sessions[exchange] = session
            elif frame.kind is Kind.SSE_EVENT:
                events[exchange] += 1
                event_id = (frame.info or {}).get("id")
                if event_id is not None:
                    self._event_positions.setdefault(event_id, (exchange, events[exchange]))
                if (frame.info or {}).get("event") == "endpoint":  # legacy HTTP+SSE: POSTs go where it says
                    session = legacy_session_id(frame.payload.decode("utf-8", "replace"))
                    if session is not None:
                        self._issued_endpoints[exchange] = session
                    awaited.add(("event", exchange, events[exchange]))
                self._server_frame(frame, keys, awaited, token_owner, cancelled)
            elif frame.kind is Kind.STREAM_END:
                if (frame.info or {}).get("reason") == "client_disconnect":
                    self._disconnects[exchange] = events[exchange]
                else:
                    closed.add(exchange)
            else:
                self._server_frame(frame, keys, awaited, token_owner, cancelled)
        # what comes after the last request (its answer on a stream the client left, legacy SSE's)
        self._at_end = frozenset(awaited | {("end", exchange) for exchange in closed})

    @property
    def settled(self) -> bool:
        """Whether the live server has sent all that the recorded one had by the session's end
        (tied to a request) and ended each response the recorded one ended by itself."""
        return self._at_end <= self._received

    # --- what the live server sent, by exchange -----------------------------------------------------

    def receive_head(self, exchange: int, headers: Sequence[Sequence[str]]) -> None:
        self._received.add(("head", exchange))
        live = header(headers, "mcp-session-id")
        if exchange in self._issued_sessions and live is not None:
            self._live_sessions[self._issued_sessions[exchange]] = live

    def receive_event(self, exchange: int, event_id: str | None, data: str, event: str | None = None) -> None:
        self._live_events[exchange] += 1
        position = (exchange, self._live_events[exchange])
        self._received.add(("event", *position))
        if event_id is not None:
            self._live_event_ids[position] = event_id
        if event == "endpoint":
            live = legacy_session_id(data)
            if exchange in self._issued_endpoints and live is not None:
                self._live_sessions[self._issued_endpoints[exchange]] = live
        elif data:
            self.receive(data.encode())

    def receive_end(self, exchange: int) -> None:
        self._received.add(("end", exchange))

    def _live_event_id(self, exchange: int, position: int, recorded: str) -> str:
        """The live id of the event at a recorded event's place on its stream; where the live event
        there had none (or did not come), the newest live id before it: the recorded id means
        nothing to the live server."""
        for earlier in range(position, 0, -1):
            if (exchange, earlier) in self._live_event_ids:
                return self._live_event_ids[(exchange, earlier)]
        return recorded

    def _payload(self, line: _Line) -> HttpRequest:  # type: ignore[override]
        assert line.exchange is not None
        info = self._heads[line.exchange]
        headers = []
        for name, value in info.get("headers", ()):
            lower = name.lower()
            if lower not in _SENT_HEADERS and not lower.startswith("mcp-"):
                continue
            if lower == "mcp-session-id":
                value = self._live_sessions.get(value, value)
            elif lower == "last-event-id" and value in self._event_positions:
                value = self._live_event_id(*self._event_positions[value], value)
            headers.append((name, value))
        body = self._sent(line) if line.message is not None else line.raw or None
        path = info.get("path", "/")
        for recorded, live in self._live_sessions.items():  # a legacy endpoint names its session in the URL
            path = path.replace(f"={recorded}", f"={live}")
        return HttpRequest(line.exchange, info.get("method", "POST"), path, headers, body,
                           self._disconnects.get(line.exchange))


def silent_server(recording: Sequence[Frame], live: Sequence[Frame]) -> str | None:
    """None, unless the recorded server answered and the live one answered nothing at all (it did
    not start, or died at once): then how it ended and what it said on stderr, as far as a stdio
    session shows it ("" when it shows nothing)."""
    if not _answers(recording) or _answers(live):
        return None
    ended = next((frame.info or {} for frame in live if frame.kind is Kind.EXIT), None)
    how = []
    if ended is not None:
        how.append(f"it was killed by signal {ended['signal']}" if ended.get("signal") else f"it exited with code {ended.get('code')}")
    said = [line for frame in live if frame.kind is Kind.STDERR for line in frame.payload.decode(errors="replace").splitlines()]
    if said:
        how.append(f"its stderr: {printable(' / '.join(said[:3]))}")
    return "; ".join(how)


def _answers(frames: Sequence[Frame]) -> bool:
    """Whether a server sent any JSON-RPC message in `frames`."""
    return any(not frame.from_client and frame.message is not None for frame in frames)
