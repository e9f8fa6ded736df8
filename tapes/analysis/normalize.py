"""A cassette as an era-neutral session: what the client asked, what the server did about it.

`tapes diff` compares two of these, so everything here is about taking out what differs between
two runs of the same behaviour:
- volatile values: request ids and progress tokens are never compared (steps are keyed by what
  they ask, not by id); `_meta`, UUIDs (session and event ids that leak into content) and
  timestamps are set aside by named noise rules; more paths can be ignored by JSON pointer;
- protocol eras: the 2026-07-28 forms are folded into the same steps as their older twins —
  `initialize` and `server/discover` are both the handshake; a server→client request
  (`sampling/createMessage`, `elicitation/create`, `roots/list`) and an `input_required` result
  answered by a retry with `inputResponses` are both an *ask* inside the step; `resources/subscribe`
  and `subscriptions/listen` are both a subscription per URI (answered by the listen's
  acknowledgment), and `resources/unsubscribe` and the client closing a listen stream (a cancel, or
  a disconnect on HTTP) are both leaving it; what a listen stream carries is an event like any
  other, whichever stream it names; resource-not-found `-32002` and
  `-32602` are one error; `resultType: "complete"`, `ttlMs` and `cacheScope` carry no behaviour.
  Each fold is remembered (`Step.expressed`, `Session.folds`) so a report can say "same
  behaviour, expressed as in 2026-07-28".
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from tapes.cassette.frames import STDIO, Direction, Frame, Kind
from tapes.cassette.http_framer import CLIENT_DISCONNECT
from tapes.cassette.store import Cassette
from tapes.replay.matching import canonical
from tapes.replay.polls import is_poll
from tapes.wire.eras import (
    CACHE_HINTS, SERVER_INFO_KEY, STATELESS_ERAS, STATELESS_RESULT_MEMBERS, SUBJECT_PARAMS, SUBSCRIPTION_ID_KEY,
)
from tapes.wire.http import header, media_type
from tapes.wire.jsonrpc import MessageType, classify, items, plain
from tapes.wire.pointer import REMOVED, tokens, without

CLIENT_CAPABILITIES_KEY = "io.modelcontextprotocol/clientCapabilities"
RESOURCE_NOT_FOUND = "resource not found"  # -32002 before 2026-07-28, -32602 from then on
NOT_HONORED = "subscription not honored"  # a URI a listen asked for that its acknowledgment left out
_RESOURCE_NOT_FOUND_CODES = (-32002, -32602)
_RETRY_FIELDS = ("inputResponses", "requestState")

# --- noise rules --------------------------------------------------------------------------

_UUID = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")
_TIMESTAMP = re.compile(r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:Z|[+-]\d{2}:?\d{2})?")


def _drop_meta(value: Any) -> Any:
    if isinstance(value, dict):
        return {key: _drop_meta(item) for key, item in value.items() if key != "_meta"}
    if isinstance(value, list):
        return [_drop_meta(item) for item in value]
    return value


def _strings(replace: Callable[[str], str]) -> Callable[[Any], Any]:
    def walk(value: Any) -> Any:
        if isinstance(value, str):
            return replace(value)
        if isinstance(value, dict):
            return {key: walk(item) for key, item in value.items()}
        if isinstance(value, list):
            return [walk(item) for item in value]
        return value

    return walk


NOISE_RULES: dict[str, Callable[[Any], Any]] = {
    "meta": _drop_meta,  # per-request _meta: progress tokens, the 2026-07-28 envelope, server stamps
    "uuids": _strings(lambda text: _UUID.sub("<uuid>", text)),  # session ids, event ids, generated ids
    "timestamps": _strings(lambda text: _TIMESTAMP.sub("<timestamp>", text)),
}


@dataclass(frozen=True)
class Noise:
    """What to set aside before comparing: named rules, and JSON pointers into a step's document
    (`/outcome/result/content/0/text`; a `*` segment matches any member)."""

    rules: tuple[str, ...] = tuple(NOISE_RULES)
    ignore: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        for name in self.rules:
            if name not in NOISE_RULES:
                raise ValueError(f"unknown noise rule {name!r} (known: {', '.join(NOISE_RULES)})")
        for pointer in self.ignore:
            if not pointer.startswith("/"):
                raise ValueError(f"ignored path {pointer!r} is not a JSON pointer (it must start with /)")

    def clean(self, value: Any) -> Any:
        for name in self.rules:
            value = NOISE_RULES[name](value)
        return canonical(value)

    def strip(self, document: Any) -> Any:
        for pointer in self.ignore:
            stripped = without(document, tokens(pointer))
            document = None if stripped is REMOVED else stripped
        return document


# --- the session model --------------------------------------------------------------------


@dataclass
class Ask:
    """Something the server needed from the client to answer a step: a server→client request, or
    (2026-07-28) an entry of an `input_required` result answered in the retry's `inputResponses`."""

    method: str
    params: Any
    answer: Any = None  # the client's result (or {"error": ...}); None: never answered
    input_key: str | None = None  # 2026-07-28: the name the retry's inputResponses answers it under

    def document(self) -> dict[str, Any]:
        return {"method": self.method, "params": self.params, "answer": self.answer}


@dataclass
class Step:
    """One thing the client asked for, with all the server did about it."""

    method: str  # "handshake" for initialize / server/discover
    subject: str  # tool or prompt name, resource URI; "" when the method has none
    request: Any
    seqs: list[int]  # frames involved, first one first
    outcome: dict[str, Any] | None = None  # {"result": ...} or {"error": ...}; None: no answer seen
    asks: list[Ask] = field(default_factory=list)
    progress: list[Any] = field(default_factory=list)
    cancelled: bool = False
    expressed: list[str] = field(default_factory=list)  # era-specific forms folded into this step
    polls: int = 0  # a poll (tasks/get): how many times it was asked; its outcome is the last answer's

    @property
    def key(self) -> tuple[str, str]:
        return self.method, self.subject

    def describe(self) -> str:
        return f"{self.method} {self.subject}".rstrip()

    def document(self, noise: Noise) -> dict[str, Any]:
        """What is compared: the request, the outcome, the asks, the progress, the cancellation."""
        document = {
            "request": noise.clean(self.request),
            "outcome": {"cancelled": True} if self.cancelled else noise.clean(self.outcome),
            "asks": [noise.clean(ask.document()) for ask in self.asks],
            "progress": noise.clean(self.progress),
        }
        return noise.strip(document)


@dataclass(frozen=True)
class Event:
    """A notification tied to no step (log messages, list_changed, resource updates)."""

    direction: Direction
    method: str
    params: Any
    seq: int


@dataclass
class Session:
    era: str | None
    transport: str  # "stdio", "Streamable HTTP", "legacy HTTP+SSE"
    steps: list[Step]
    events: list[Event]
    server_capabilities: Any = None
    client_capabilities: Any = None
    tools: dict[str, dict[str, Any]] | None = None  # name -> tool, from the last tools/list results
    wire: dict[str, Any] = field(default_factory=dict)  # transport-level facts (framing, headers, ...)
    exit: str | None = None  # how a stdio server's process ended ("code 0", "signal 11", "not recorded"); None over HTTP
    folds: list[str] = field(default_factory=list)  # era-specific forms set aside, once each


# --- building it ---------------------------------------------------------------------------


@dataclass(frozen=True)
class _Message:
    frame: Frame
    item: dict[str, Any]

    @property
    def kind(self) -> MessageType:
        return classify(self.item)


def messages(frames: Iterable[Frame]) -> Iterator[_Message]:
    """Every JSON-RPC message of the frames (batches flattened), wherever it travelled, as `plain`
    JSON (what is compared is then JSON: a msgpack cassette may hold bytes in a message)."""
    for frame in frames:
        if frame.message is not None:
            for item in items(frame.message):
                if isinstance(item, dict) and classify(item) is not MessageType.INVALID:
                    yield _Message(frame, plain(item))


def _params(item: dict[str, Any]) -> dict[str, Any]:
    params = item.get("params")
    return params if isinstance(params, dict) else {}


def _subject(method: str, params: dict[str, Any]) -> str:
    value = params.get(SUBJECT_PARAMS.get(method, ""))
    return value if isinstance(value, str) else ""


class _Builder:
    """Folds a cassette's messages into steps. It ties messages with the same rules as the replay's
    causality index (tapes.replay.index: response by id, progress by token, a server request to
    the newest pending request) but cannot be that index: a step spans interactions (a 2026-07-28
    retry is a new request that joins the step of the input_required result it answers, and may be
    captured before that result), and it needs no per-exchange release dependencies."""

    def __init__(self, cassette: Cassette) -> None:
        self.era = cassette.protocol_version
        self.session = Session(self.era, _transport_name(cassette), [], [])
        self.open: dict[Any, Step] = {}  # client request id -> its step, until answered
        # open steps by identity, oldest first: a list searched by equality made thousands of
        # concurrent requests quadratic (each compared whole)
        self.pending: dict[int, Step] = {}
        self.by_token: dict[Any, Step] = {}
        self.asks: dict[Any, tuple[Ask, Step | None]] = {}  # server→client request id -> the ask it is, and its step
        self.retries: dict[Any, Step] = {}  # requestState (or request key) -> the step waiting for its retry
        # Retries captured before the input_required result they answer: the recorder timestamps
        # each direction on its own thread, so across directions capture order is not causal.
        self.early_retries: dict[Any, tuple[dict[str, Any], _Message]] = {}
        self.channel_steps: dict[str, list[Step]] = {}
        # Tasks (2025-11-25): the server (or client) names each task with a fresh id; a session
        # calls them <task 1>, <task 2>, ... in the order they were created, so two recordings
        # compare. A task's polls are one step, answered by the last poll; its status
        # notifications say when the task moved on, which is timing, not behaviour.
        self.task_names: dict[str, str] = {}
        self.polls: dict[tuple[str, Any], Step] = {}  # (method, task) -> the step its polls fold into
        # subscriptions/listen (2026-07-28): each open stream's request id -> its per-URI
        # subscription steps, and on HTTP the channel it rides (a client leaves by disconnecting)
        self.listens: dict[Any, list[Step]] = {}
        self.listen_channels: dict[str, Any] = {}
        self.left: set[Any] = set()  # listens the client closed: what the server still sends on them races the close

    def fold(self, note: str) -> None:
        if note not in self.session.folds:
            self.session.folds.append(note)

    def build(self, frames: list[Frame]) -> Session:
        for frame in frames:
            if frame.kind is Kind.STREAM_END and (frame.info or {}).get("reason") == CLIENT_DISCONNECT \
                    and frame.channel in self.listen_channels:
                self.leave(self.listen_channels[frame.channel], frame)
            for message in messages([frame]):
                message = self.with_task_names(message)
                if message.frame.from_client:
                    self.client(message)
                else:
                    self.server(message)
        self.drop_failed_probes()
        return self.session

    def with_task_names(self, message: _Message) -> _Message:
        result = message.item.get("result")
        task = result.get("task") if isinstance(result, dict) else None
        if isinstance(task, dict) and isinstance(task.get("taskId"), str) and task["taskId"] not in self.task_names:
            self.task_names[task["taskId"]] = f"<task {len(self.task_names) + 1}>"
        if not self.task_names:
            return message
        return _Message(message.frame, _strings(lambda text: self.task_names.get(text, text))(message.item))

    # client → server

    def client(self, message: _Message) -> None:
        item, kind = message.item, message.kind
        if kind is MessageType.REQUEST:
            self.client_request(message)
        elif kind in (MessageType.RESULT, MessageType.ERROR):
            ask, owner = self.asks.get(item["id"], (None, None))
            if ask is not None:
                ask.answer = item.get("result") if kind is MessageType.RESULT else {"error": item["error"]}
            if owner is not None:
                owner.seqs.append(message.frame.seq)
        elif item["method"] == "notifications/cancelled" and _tie(_params(item).get("requestId")) in self.listens:
            self.leave(_params(item)["requestId"], message.frame)
        elif item["method"] == "notifications/cancelled":
            step = self.open.get(_tie(_params(item).get("requestId")))
            if step is not None:
                step.cancelled = True
                step.seqs.append(message.frame.seq)
        elif item["method"] != "notifications/initialized":  # part of the handshake
            self.session.events.append(Event(Direction.CLIENT_TO_SERVER, item["method"], _params(item), message.frame.seq))

    def client_request(self, message: _Message) -> None:
        item = message.item
        method, params = item["method"], _params(item)
        if self.client_capabilities_from_meta(params) and self.era in STATELESS_ERAS:
            self.fold("per-request _meta carries the protocol version and client capabilities (no initialize)")
        if any(name in params for name in _RETRY_FIELDS):
            step = self.retries.pop(_retry_lookup(method, params), None)
            if step is None:
                self.early_retries[_retry_lookup(method, params)] = (params, message)
                return
            self.continue_with_retry(step, params, message)
            return
        if method in ("initialize", "server/discover"):
            step = Step("handshake", "", None, [message.frame.seq], expressed=[method])
            if method == "initialize":
                self.session.client_capabilities = params.get("capabilities")
        elif method == "subscriptions/listen":
            self.listen(message, params)
            return
        elif is_poll(method) and (folded := self.polls.get((method, _tie(params.get("taskId"))))) is not None:
            folded.polls += 1
            folded.seqs.append(message.frame.seq)
            self.track(item["id"], folded, message.frame)
            return
        else:
            step = Step(method, _subject(method, params), {k: v for k, v in params.items() if k != "_meta"},
                        [message.frame.seq])
            if method in ("resources/subscribe", "resources/unsubscribe"):
                step.expressed.append(method)
            if is_poll(method):
                step.polls = 1
                self.polls[(method, _tie(params.get("taskId")))] = step
        self.session.steps.append(step)
        self.register_token(params, step)
        self.track(item["id"], step, message.frame)

    def register_token(self, params: dict[str, Any], step: Step) -> None:
        meta = params.get("_meta")
        if isinstance(meta, dict) and meta.get("progressToken") is not None:
            self.by_token[_tie(meta["progressToken"])] = step

    def client_capabilities_from_meta(self, params: dict[str, Any]) -> bool:
        meta = params.get("_meta")
        if isinstance(meta, dict) and CLIENT_CAPABILITIES_KEY in meta:
            if self.session.client_capabilities is None:
                self.session.client_capabilities = meta[CLIENT_CAPABILITIES_KEY]
            return True
        return False

    def listen(self, message: _Message, params: dict[str, Any]) -> None:
        """subscriptions/listen: one subscription step per resource URI, as resources/subscribe
        would have made, answered by the stream's acknowledgment; the opt-in list_changed filters
        say no more than the capabilities do."""
        steps = [Step("resources/subscribe", uri, {"uri": uri}, [message.frame.seq], expressed=["subscriptions/listen"])
                 for uri in _subscribed_uris(params)]
        self.session.steps += steps
        self.listens[message.item["id"]] = steps
        if message.frame.channel != STDIO:
            self.listen_channels[message.frame.channel] = message.item["id"]
        self.fold("subscriptions/listen stream in place of resources/subscribe and the GET stream")

    def acknowledged(self, steps: list[Step], params: dict[str, Any], frame: Frame) -> None:
        """The listen's acknowledgment answers its subscriptions: those it names are made, as an
        empty resources/subscribe result says; one it leaves out was refused."""
        honored = _subscribed_uris(params)
        for step in steps:
            step.outcome = {"result": {}} if step.subject in honored else {"error": {"message": NOT_HONORED}}
            step.seqs.append(frame.seq)

    def listen_ended(self, message: _Message) -> None:
        """The response to a listen ends its stream: a result is the server closing it, which
        before 2026-07-28 a server did without a word; an error refuses the subscriptions."""
        steps = self.listens.pop(message.item["id"])
        for step in steps:
            step.seqs.append(message.frame.seq)
            if "error" in message.item and step.outcome is None:
                step.outcome = {"error": message.item["error"]}
        if "result" in message.item:
            self.fold("a subscriptions/listen stream closed by the server (no wire form before 2026-07-28)")

    def leave(self, listen_id: Any, frame: Frame) -> None:
        """The client closing a listen stream is resources/unsubscribe of each of its URIs."""
        self.left.add(_tie(listen_id))
        for subscribed in self.listens.pop(_tie(listen_id), []):
            self.session.steps.append(Step("resources/unsubscribe", subscribed.subject, {"uri": subscribed.subject}, [frame.seq],
                                           outcome={"result": {}}, expressed=["subscriptions/listen closed by the client"]))

    def track(self, request_id: Any, step: Step, frame: Frame) -> None:
        self.open[request_id] = step
        self.pending.pop(id(step), None)  # a poll folded into its step makes the step the newest again
        self.pending[id(step)] = step
        if frame.channel != STDIO:
            self.channel_steps.setdefault(frame.channel, []).append(step)

    def continue_with_retry(self, step: Step, params: dict[str, Any], message: _Message) -> None:
        responses = params.get("inputResponses") if isinstance(params.get("inputResponses"), dict) else {}
        for ask in step.asks:
            if ask.input_key in responses:
                ask.answer = responses[ask.input_key]
        step.seqs.append(message.frame.seq)
        self.register_token(params, step)
        self.track(message.item["id"], step, message.frame)

    # server → client

    def server(self, message: _Message) -> None:
        item, kind = message.item, message.kind
        if kind in (MessageType.RESULT, MessageType.ERROR):
            self.response(message)
        elif kind is MessageType.REQUEST:
            owner = self.owner_of_server_request(message.frame)
            ask = Ask(item["method"], item.get("params"))
            self.asks[item["id"]] = (ask, owner)
            if owner is None:
                self.session.events.append(Event(Direction.SERVER_TO_CLIENT, item["method"], item.get("params"), message.frame.seq))
            else:
                last = owner.asks[-1] if owner.asks else None
                if is_poll(ask.method) and last is not None and (last.method, last.params) == (ask.method, ask.params):
                    owner.asks.remove(last)  # the server polled the client's task again: the last answer tells
                owner.asks.append(ask)
                owner.seqs.append(message.frame.seq)
                _note(owner, "server→client request")
        elif item["method"] == "notifications/progress":
            params = _params(item)
            step = self.by_token.get(_tie(params.get("progressToken")))
            if step is None:
                self.session.events.append(Event(Direction.SERVER_TO_CLIENT, item["method"], params, message.frame.seq))
            elif not step.cancelled:  # progress racing a cancel says nothing about the server
                step.progress.append({k: v for k, v in params.items() if k != "progressToken"})
                step.seqs.append(message.frame.seq)
        elif item["method"] == "notifications/subscriptions/acknowledged" and _listen_of(item) in self.listens:
            self.acknowledged(self.listens[_listen_of(item)], _params(item), message.frame)
        elif _listen_of(item) in self.left:
            pass  # sent before the server saw the client close the stream: timing, not behaviour
        elif item["method"] != "notifications/tasks/status":  # when a task moved on: timing, not behaviour
            self.session.events.append(Event(Direction.SERVER_TO_CLIENT, item["method"], _off_stream(_params(item)), message.frame.seq))

    def owner_of_server_request(self, frame: Frame) -> Step | None:
        # On HTTP a server→client request rides the stream of the request it serves; elsewhere
        # (stdio, the GET stream) the newest pending request is the one the server is busy with.
        on_channel = [step for step in self.channel_steps.get(frame.channel, []) if id(step) in self.pending]
        return on_channel[-1] if on_channel else next(reversed(self.pending.values()), None)

    def response(self, message: _Message) -> None:
        item = message.item
        if item.get("id") in self.listens:
            self.listen_ended(message)
            return
        step = self.open.pop(item.get("id"), None)
        if step is None:
            return
        self.pending.pop(id(step), None)
        step.seqs.append(message.frame.seq)
        if step.cancelled:
            return
        if "error" in item:
            step.outcome = {"error": self.error(step, item["error"])}
        else:
            step.outcome = {"result": self.result(step, item["result"])}

    def error(self, step: Step, error: Any) -> Any:
        if step.method == "resources/read" and isinstance(error, dict) and error.get("code") in _RESOURCE_NOT_FOUND_CODES:
            _note(step, f"resource-not-found error {error['code']}")
            return {**{k: v for k, v in error.items() if k not in ("code", "data")}, "code": RESOURCE_NOT_FOUND}
        return error

    def result(self, step: Step, result: Any) -> Any:
        if not isinstance(result, dict):
            return result
        if result.get("resultType") == "input_required":
            self.await_retry(step, result)
            return None
        if result.get("resultType") == "complete":
            self.fold('resultType "complete" on results (absent before 2026-07-28)')
        if any(hint in result for hint in CACHE_HINTS):
            self.fold("ttlMs / cacheScope caching hints on results (2026-07-28)")
        result = {k: v for k, v in result.items() if k not in STATELESS_RESULT_MEMBERS}
        if step.method == "handshake":
            return self.handshake(result)
        if step.method == "tools/list":
            tools = self.session.tools if self.session.tools is not None else {}
            for tool in result.get("tools") if isinstance(result.get("tools"), list) else ():
                if isinstance(tool, dict) and isinstance(tool.get("name"), str):
                    tools[tool["name"]] = tool
            self.session.tools = tools
        return result

    def handshake(self, result: dict[str, Any]) -> dict[str, Any]:
        """What the handshake says about the server, in either form (capabilities are compared
        apart; the protocol version is the session's era)."""
        self.session.server_capabilities = result.get("capabilities")
        meta = result.get("_meta") if isinstance(result.get("_meta"), dict) else {}
        server_info = result.get("serverInfo", meta.get(SERVER_INFO_KEY))
        return {"serverInfo": server_info, "instructions": result.get("instructions")}

    def await_retry(self, step: Step, result: dict[str, Any]) -> None:
        """An input_required result: the step goes on in the client's retry, which carries the
        answers in inputResponses (and, if given, the same requestState)."""
        requests = result.get("inputRequests")
        for name, request in requests.items() if isinstance(requests, dict) else ():
            request = request if isinstance(request, dict) else {}
            step.asks.append(Ask(request.get("method", "?"), request.get("params"), input_key=name))
        _note(step, "input_required result + retry with inputResponses")
        lookup = _retry_lookup(step.method, {**(step.request or {}), "requestState": result.get("requestState")})
        early = self.early_retries.pop(lookup, None)
        if early is None:
            self.retries[lookup] = step
        else:
            self.continue_with_retry(step, *early)

    def drop_failed_probes(self) -> None:
        """A client that speaks 2026-07-28 first probes with server/discover; an older server
        refuses it and the client falls back to initialize. The probe is how the client chose
        the era, not behaviour of the server: in every session of the recording (an HTTP one may
        hold several, each opened by its own probe), not only the first."""
        handshakes = [step for step in self.session.steps if step.method == "handshake"]
        probes = {id(step) for step in handshakes[:-1]  # one a later handshake follows
                  if step.expressed == ["server/discover"] and "result" not in (step.outcome or {})}
        if probes:
            self.session.steps = [step for step in self.session.steps if id(step) not in probes]
            self.fold("a refused server/discover probe before initialize")


def _listen_of(item: dict[str, Any]) -> Any:
    meta = _params(item).get("_meta")
    return _tie(meta.get(SUBSCRIPTION_ID_KEY)) if isinstance(meta, dict) else None


_UNTIED = object()  # in no table: what an id that is an object or an array looks up


def _tie(value: Any) -> Any:
    """An id, token, task id or request state as the key of a table that ties messages together: as
    it is, or `_UNTIED` for an object or an array (no MCP id is one, and neither is hashable)."""
    return _UNTIED if isinstance(value, (dict, list)) else value


def _subscribed_uris(params: dict[str, Any]) -> list[str]:
    """The resource URIs of a listen request or its acknowledgment (notifications.resourceSubscriptions)."""
    notifications = params.get("notifications")
    uris = notifications.get("resourceSubscriptions") if isinstance(notifications, dict) else None
    return [uri for uri in uris if isinstance(uri, str)] if isinstance(uris, list) else []


def _off_stream(params: dict[str, Any]) -> dict[str, Any]:
    """An event without the listen stream it names (a request id, never compared): the same event
    reaches a 2025 client as a plain notification."""
    meta = params.get("_meta")
    if not isinstance(meta, dict) or SUBSCRIPTION_ID_KEY not in meta:
        return params
    rest = {key: value for key, value in params.items() if key != "_meta"}
    meta = {key: value for key, value in meta.items() if key != SUBSCRIPTION_ID_KEY}
    return {**rest, "_meta": meta} if meta else rest


def _note(step: Step, expression: str) -> None:
    if expression not in step.expressed:
        step.expressed.append(expression)


def _retry_lookup(method: str, params: dict[str, Any]) -> Any:
    """What ties a retry to its input_required result: the requestState the server issued, or
    failing that the method and params the retry repeats."""
    state = params.get("requestState")
    if state is not None:
        return ("state", json.dumps(canonical(state), sort_keys=True)) if isinstance(state, (dict, list)) else state
    rest = {k: v for k, v in params.items() if k not in (*_RETRY_FIELDS, "_meta")}
    return method, json.dumps(canonical(rest), sort_keys=True)


def _transport_name(cassette: Cassette) -> str:
    if cassette.header.transport != "http":
        return cassette.header.transport
    legacy = any(frame.kind is Kind.SSE_EVENT and (frame.info or {}).get("event") == "endpoint" for frame in cassette.frames)
    return "legacy HTTP+SSE" if legacy else "Streamable HTTP"


def wire_facts(cassette: Cassette) -> dict[str, Any]:
    """Transport-level behaviour, as facts that do not depend on how many requests were made."""
    frames = cassette.frames
    facts: dict[str, Any] = {"transport": _transport_name(cassette),
                             "batches": any(isinstance(frame.message, list) for frame in frames)}
    if cassette.header.transport != "http":
        facts["output that is not JSON-RPC"] = any(frame.kind is Kind.RAW and not frame.from_client for frame in frames)
        return facts
    heads = {frame.channel: frame.info or {} for frame in frames if frame.kind is Kind.HTTP_REQUEST}
    framing: set[str] = set()
    client_headers: set[str] = set()
    server_headers: set[str] = set()
    for frame in frames:
        info = frame.info or {}
        if frame.kind is Kind.HTTP_REQUEST:
            client_headers.update(name.lower() for name, _ in info.get("headers") or () if _mcp_header(name))
        elif frame.kind is Kind.HTTP_RESPONSE:
            server_headers.update(name.lower() for name, _ in info.get("headers") or () if _mcp_header(name))
            if heads.get(frame.channel, {}).get("method") == "POST":
                content_type = media_type(header(info.get("headers"), "content-type"))
                framing.add("202 Accepted" if info.get("status") == 202 else
                            "SSE" if content_type == "text/event-stream" else "JSON" if content_type else f"{info.get('status')}")
    events = [frame for frame in frames if frame.kind is Kind.SSE_EVENT]
    facts.update({
        "POST answered with": sorted(framing),
        "client MCP headers": sorted(client_headers),
        "server MCP headers": sorted(server_headers),
        "standalone GET stream": any(info.get("method") == "GET" and header(info.get("headers"), "last-event-id") is None
                                     and facts["transport"] == "Streamable HTTP" for info in heads.values()),
        "SSE event ids": any((frame.info or {}).get("id") is not None for frame in events),
        "priming events": any((frame.info or {}).get("id") is not None and frame.message is None and not frame.data
                              for frame in events),
        "retry field": any((frame.info or {}).get("retry") is not None for frame in events),
        "resumption (Last-Event-ID)": any(header(info.get("headers"), "last-event-id") is not None for info in heads.values()),
    })
    return facts


def _mcp_header(name: str) -> bool:
    return name.lower().startswith("mcp-") or name.lower() == "last-event-id"


def session(cassette: Cassette) -> Session:
    """The cassette as an era-neutral session."""
    built = _Builder(cassette).build(cassette.frames)
    built.wire = wire_facts(cassette)
    built.exit = _exit(cassette)
    return built


def _exit(cassette: Cassette) -> str | None:
    """How the server's process ended, for a stdio recording."""
    if cassette.header.transport != "stdio":
        return None
    ended = next((frame.info or {} for frame in reversed(cassette.frames) if frame.kind is Kind.EXIT), None)
    if ended is None:
        return "not recorded"
    return f"signal {ended['signal']}" if ended.get("signal") is not None else f"code {ended.get('code')}"
