"""`tapes lint`: check a cassette against the rules of the protocol version it negotiated.

Each finding names the frame and the rule. Message shapes are checked with the official SDK's
per-version types (`mcp_types.methods`), which cover every era from 2024-11-05 to 2026-07-28;
the wire rules (batches, headers, streams, ids, progress, ordering) are checked here.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from typing import Any

from tapes.cassette.frames import STDIO, Direction, Frame, Kind
from tapes.cassette.store import Cassette
from tapes.replay.oauth import AuthFlow
from tapes.replay.sessions import split_sessions
from tapes.wire.eras import BATCH_ERAS, HEADER_ERAS, NAME_PARAMS, STATELESS_ERAS, TASK_ERAS
from tapes.wire.http import header
from tapes.wire.jsonrpc import MessageType, classify, items, plain, usable_id, wire_form


@dataclass(frozen=True)
class Finding:
    seq: int
    rule: str
    message: str

    def describe(self) -> str:
        return f"frame {self.seq}: {self.rule}: {self.message}"


RULES: dict[str, str] = {
    "batch": "JSON-RPC batches exist only in 2025-03-26",
    "protocol-version-header": "HTTP requests after initialize carry MCP-Protocol-Version with the negotiated version (2025-06-18+)",
    "get-stream-response": "a standalone GET stream carries no responses unless it resumes a request's stream",
    "event-id-reuse": "SSE event ids are unique across the streams of a session",
    "request-id-reuse": "a side never reuses its own request id within a session",
    "response-to-notification": "notifications and responses get no JSON-RPC answer (HTTP: 202 Accepted, no body)",
    "unknown-response-id": "every response answers a request the other side sent",
    "duplicate-response": "a request is answered once",
    "notification-with-id": "a notification carries no id",
    "routing-headers": "Mcp-Method / Mcp-Name headers are present and match the body (2026-07-28)",
    "progress-not-increasing": "progress for a token increases with every notification",
    "before-initialize": "the client sends nothing but ping before initialize is answered",
    "shape": "every message has the shape the negotiated version's schema gives it",
    "task-states": "a task's status never leaves a terminal state (completed, failed, cancelled)",
}

TERMINAL_TASK_STATES = frozenset({"completed", "failed", "cancelled"})


def lint(cassette: Cassette) -> list[Finding]:
    era = cassette.protocol_version
    if cassette.header.transport != STDIO:
        # An authorization flow is not MCP: its documents, registration, /authorize and /token
        # need no MCP header, and a request refused with 401/403 is retried with its id.
        cassette = replace(cassette, frames=AuthFlow.split(cassette.frames)[1])
    findings: list[Finding] = []
    for check in _CHECKS:
        findings += check(cassette, era)
    return sorted(findings, key=lambda finding: (finding.seq, finding.rule))


# --- the checks -----------------------------------------------------------------------------------


def _messages(frames: list[Frame]) -> Iterator[tuple[Frame, dict[str, Any]]]:
    for frame in frames:
        if frame.message is not None:
            for item in items(frame.message):
                if isinstance(item, dict):
                    yield frame, item


def _sessions(cassette: Cassette) -> list[list[Frame]]:
    """The frames of each session. Where the server named its sessions, an exchange outside them
    (a client's server/discover probe before its initialize) is one of its own: the probes of
    several clients are not one session."""
    if cassette.header.transport == STDIO:
        return [cassette.frames]
    recorded = split_sessions(cassette.frames)
    if all(session.session_id is None for session in recorded):
        return [session.frames for session in recorded]
    found: list[list[Frame]] = []
    for session in recorded:
        if session.session_id is not None:
            found.append(session.frames)
            continue
        exchanges: dict[str, list[Frame]] = defaultdict(list)
        for frame in session.frames:
            exchanges[frame.channel].append(frame)
        found += exchanges.values()
    return found


def _check_batches(cassette: Cassette, era: str | None) -> list[Finding]:
    if era is None or era in BATCH_ERAS:
        return []
    return [Finding(frame.seq, "batch", f"a batch of {len(frame.message)} messages under {era}")
            for frame in cassette.frames if isinstance(frame.message, list)]


def _http_requests(frames: list[Frame]) -> Iterator[tuple[Frame, list[dict[str, Any]]]]:
    """Each HTTP request head with the JSON-RPC items of its body."""
    bodies: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for frame, item in _messages(frames):
        if frame.from_client and frame.kind is Kind.MESSAGE:
            bodies[frame.channel].append(item)
    for frame in frames:
        if frame.kind is Kind.HTTP_REQUEST:
            yield frame, bodies.get(frame.channel, [])


def _check_version_header(cassette: Cassette, era: str | None) -> list[Finding]:
    if cassette.header.transport == STDIO:
        return []
    found = []
    for frames in _sessions(cassette):
        negotiated = Cassette(cassette.header, frames).protocol_version or era  # each session negotiates its own
        if negotiated not in HEADER_ERAS:
            continue
        initialized_after = _initialize_answered_at(frames)
        for frame, body in _http_requests(frames):
            if any(item.get("method") == "initialize" for item in body) or _is_legacy_endpoint(frame):
                continue
            if frame.seq <= initialized_after:  # made before initialize was answered
                continue
            value = header((frame.info or {}).get("headers"), "mcp-protocol-version")
            if value is None:
                found.append(Finding(frame.seq, "protocol-version-header", "no MCP-Protocol-Version header after initialize"))
            elif value != negotiated:
                found.append(Finding(frame.seq, "protocol-version-header",
                                     f"MCP-Protocol-Version {value} but {negotiated} was negotiated"))
    return found


def _is_legacy_endpoint(frame: Frame) -> bool:
    return (frame.info or {}).get("method") == "GET" and (frame.info or {}).get("path", "").split("?")[0].endswith("/sse")


def _initialize_answered_at(frames: list[Frame]) -> float:
    """The seq after which an initialize request and its result had both been seen (infinity when
    none was answered): a request made later is made after initialize. Worked out in one pass, not
    once per request (that was quadratic in the exchanges of a long HTTP recording)."""
    asked: dict[Any, int] = {}  # initialize request id -> the seq it was first sent at
    results: list[tuple[Any, int]] = []
    for frame, item in _messages(frames):
        if frame.from_client and item.get("method") == "initialize" and "id" in item:
            asked[item["id"]] = min(asked.get(item["id"], frame.seq), frame.seq)
        elif not frame.from_client and "result" in item:
            results.append((item.get("id"), frame.seq))
    return min((max(asked[answered], seq) for answered, seq in results if answered in asked), default=math.inf)


def _check_get_streams(cassette: Cassette, era: str | None) -> list[Finding]:
    standalone = {frame.channel for frame in cassette.frames if frame.kind is Kind.HTTP_REQUEST
                  and (frame.info or {}).get("method") == "GET" and header((frame.info or {}).get("headers"), "last-event-id") is None
                  and not _is_legacy_endpoint(frame)}
    return [Finding(frame.seq, "get-stream-response", f"response #{item.get('id')} on the standalone GET stream {frame.channel}")
            for frame, item in _messages(cassette.frames)
            if frame.channel in standalone and not frame.from_client and classify(item) in (MessageType.RESULT, MessageType.ERROR)]


def _check_event_ids(cassette: Cassette, era: str | None) -> list[Finding]:
    found = []
    for frames in _sessions(cassette):
        first_channel: dict[str, str] = {}
        for frame in frames:
            event_id = (frame.info or {}).get("id") if frame.kind is Kind.SSE_EVENT else None
            if event_id is None:
                continue
            if first_channel.setdefault(event_id, frame.channel) != frame.channel:
                found.append(Finding(frame.seq, "event-id-reuse",
                                     f"event id {event_id!r} on {frame.channel} was already used on {first_channel[event_id]}"))
    return found


def _check_ids(cassette: Cassette, era: str | None) -> list[Finding]:
    found = []
    for frames in _sessions(cassette):
        sent: dict[Direction, set[Any]] = defaultdict(set)
        answered: dict[tuple[Direction, Any], int] = {}  # (requester, request id) -> the seq of its answer
        for frame, item in _messages(frames):
            kind = classify(item)
            if kind is MessageType.REQUEST:
                if item["id"] in sent[frame.direction]:
                    found.append(Finding(frame.seq, "request-id-reuse", f"request id {_shown(item['id'])} was already used by the {_side(frame)}"))
                sent[frame.direction].add(item["id"])
                answered.pop((frame.direction, item["id"]), None)  # a reused id asks anew
                if item["method"].startswith("notifications/"):
                    found.append(Finding(frame.seq, "notification-with-id", f"{item['method']} sent with id {_shown(item['id'])}"))
            elif kind in (MessageType.RESULT, MessageType.ERROR):
                other = Direction.SERVER_TO_CLIENT if frame.from_client else Direction.CLIENT_TO_SERVER
                if item["id"] not in sent[other]:
                    found.append(Finding(frame.seq, "unknown-response-id",
                                         f"response #{_shown(item['id'])} from the {_side(frame)} answers no request it was sent"))
                elif (other, item["id"]) in answered:
                    found.append(Finding(frame.seq, "duplicate-response",
                                         f"response #{_shown(item['id'])} from the {_side(frame)} answers a request "
                                         f"answered at frame {answered[(other, item['id'])]}"))
                else:
                    answered[(other, item["id"])] = frame.seq
    return found


def _side(frame: Frame) -> str:
    return "client" if frame.from_client else "server"


def _check_notification_answers(cassette: Cassette, era: str | None) -> list[Finding]:
    """HTTP: a POST of notifications and responses only is answered 202 with no body."""
    found = []
    posted = {frame.channel: body for frame, body in _http_requests(cassette.frames) if (frame.info or {}).get("method") == "POST"}
    for frame in cassette.frames:
        body = posted.get(frame.channel)
        if not body or any(classify(item) is MessageType.REQUEST for item in body) or frame.from_client:
            continue
        if frame.kind is Kind.HTTP_RESPONSE and (frame.info or {}).get("status") != 202:
            found.append(Finding(frame.seq, "response-to-notification",
                                 f"status {(frame.info or {}).get('status')} to a POST without requests (202 expected)"))
        elif frame.message is not None:
            found.append(Finding(frame.seq, "response-to-notification", "a JSON-RPC message in answer to notifications"))
    return found


def _check_routing_headers(cassette: Cassette, era: str | None) -> list[Finding]:
    if era not in STATELESS_ERAS or cassette.header.transport == STDIO:
        return []
    found = []
    for frame, body in _http_requests(cassette.frames):
        if len(body) != 1 or "method" not in body[0]:
            continue
        item, info = body[0], frame.info or {}
        method = header(info.get("headers"), "mcp-method")
        if method != item["method"]:
            what = "no Mcp-Method header" if method is None else f"Mcp-Method {method!r}"
            found.append(Finding(frame.seq, "routing-headers", f"{what} but the body's method is {item['method']!r}"))
        name_key = NAME_PARAMS.get(item["method"])
        params = item.get("params") if isinstance(item.get("params"), dict) else {}
        if name_key is not None and header(info.get("headers"), "mcp-name") != params.get(name_key):
            name = header(info.get("headers"), "mcp-name")
            what = "no Mcp-Name header" if name is None else f"Mcp-Name {name!r}"
            found.append(Finding(frame.seq, "routing-headers", f"{what} but the body's {name_key} is {params.get(name_key)!r}"))
    return found


def _check_progress(cassette: Cassette, era: str | None) -> list[Finding]:
    """Per session, and per request: a token is unique among active requests only, so it is
    forgotten once its request is answered."""
    found = []
    for frames in _sessions(cassette):
        last: dict[Any, float] = {}
        tokens: dict[tuple[Direction, Any], Any] = {}  # (requester, request id) -> the progress token it gave
        for frame, item in _messages(frames):
            kind, params = classify(item), item.get("params")
            if kind is MessageType.REQUEST and usable_id(item["id"]) and isinstance(params, dict) and isinstance(params.get("_meta"), dict):
                tokens[(frame.direction, item["id"])] = params["_meta"].get("progressToken")
            elif kind in (MessageType.RESULT, MessageType.ERROR) and usable_id(item["id"]):
                requester = Direction.SERVER_TO_CLIENT if frame.from_client else Direction.CLIENT_TO_SERVER
                token = tokens.pop((requester, item["id"]), None)
                if usable_id(token):
                    last.pop(token, None)
            if item.get("method") != "notifications/progress" or not isinstance(params, dict):
                continue
            token, progress = params.get("progressToken"), params.get("progress")
            if not isinstance(progress, (int, float)) or not usable_id(token):  # no token ties it to others
                continue
            if token in last and progress <= last[token]:
                found.append(Finding(frame.seq, "progress-not-increasing", f"progress {progress} for token {token!r} after {last[token]}"))
            last[token] = progress
    return found


def _check_before_initialize(cassette: Cassette, era: str | None) -> list[Finding]:
    if era in STATELESS_ERAS:
        return []
    found = []
    for frames in _sessions(cassette):
        messages = list(_messages(frames))
        if not any(frame.from_client and item.get("method") == "initialize" for frame, item in messages):
            continue  # no handshake to be before: a recording without one, or a probe outside every session
        initialize_ids: set[Any] = set()
        done = False
        for frame, item in messages:
            kind = classify(item)
            if frame.from_client and kind is MessageType.REQUEST:
                if item["method"] == "initialize":
                    initialize_ids.add(item["id"])
                elif not done and item["method"] not in ("ping", "server/discover"):  # server/discover: a newer client's probe
                    found.append(Finding(frame.seq, "before-initialize", f"{item['method']} sent before initialize was answered"))
            elif frame.from_client and kind is MessageType.NOTIFICATION and item["method"] == "notifications/initialized" and not done:
                found.append(Finding(frame.seq, "before-initialize", f"{item['method']} sent before initialize was answered"))
            elif not frame.from_client and kind is MessageType.RESULT and item["id"] in initialize_ids:
                done = True
    return found


def _check_shapes(cassette: Cassette, era: str | None) -> list[Finding]:
    """Every message against the SDK's types for `era` (request → its result by method)."""
    from mcp_types import methods
    from pydantic import ValidationError

    if era not in methods.KNOWN_PROTOCOL_VERSIONS:
        return []
    found = []
    tasks = _TaskShapes() if era in TASK_ERAS else None
    pending: dict[tuple[Direction, Any], str] = {}  # (requester, id) -> method
    augmented: set[tuple[Direction, Any]] = set()  # requests that asked to run as a task
    for frame, item in _messages(cassette.frames):
        item = plain(item)  # what the SDK's types check is JSON: a msgpack cassette may hold bytes in a message
        kind, params = classify(item), item.get("params")
        check: Callable[[], Any] | None = None
        what = ""
        if kind is MessageType.REQUEST and item["method"] == "server/discover" and era not in STATELESS_ERAS:
            continue  # a 2026-07-28 client's version probe, sent before the older era was negotiated
        if kind is MessageType.REQUEST:
            pending[(frame.direction, item["id"])] = item["method"]
            if tasks and isinstance(params, dict) and "task" in params:
                augmented.add((frame.direction, item["id"]))
            what = f"{item['method']} request"
            if tasks and item["method"] in tasks.requests:
                model = tasks.requests[item["method"]]
                check = lambda: model.model_validate({"jsonrpc": "2.0", "id": 0, **_body(item)}, by_name=False)  # noqa: E731
            elif frame.from_client:
                check = lambda: methods.validate_client_request(item["method"], era, params)  # noqa: E731
            else:
                check = lambda: methods.SERVER_REQUESTS[(item["method"], era)].model_validate(
                    {"jsonrpc": "2.0", "id": 0, **_body(item)}, by_name=False)
        elif kind is MessageType.NOTIFICATION:
            what = f"{item['method']} notification"
            if tasks and item["method"] == "notifications/tasks/status":
                check = lambda: tasks.status.model_validate({"jsonrpc": "2.0", **_body(item)}, by_name=False)  # noqa: E731
            elif frame.from_client:
                check = lambda: methods.validate_client_notification(item["method"], era, params)  # noqa: E731
            else:
                check = lambda: methods.SERVER_NOTIFICATIONS[(item["method"], era)].model_validate(
                    {"jsonrpc": "2.0", **_body(item)}, by_name=False)
        elif kind is MessageType.RESULT:
            requester = Direction.SERVER_TO_CLIENT if frame.from_client else Direction.CLIENT_TO_SERVER
            method = pending.get((requester, item["id"]))
            if method is not None and isinstance(item["result"], dict):
                what = f"{method} result"
                validate = methods.validate_client_result if frame.from_client else methods.validate_server_result
                check = lambda: validate(method, era, item["result"])  # noqa: E731
                if tasks and (requester, item["id"]) in augmented:
                    what = f"{method} result (a task)"
                    check = lambda: tasks.created.model_validate(item["result"], by_name=False)  # noqa: E731
                elif tasks and method in tasks.results:
                    model = tasks.results[method]
                    check = lambda: model.model_validate(item["result"], by_name=False)  # noqa: E731
        if check is None:
            continue
        try:
            check()
        except KeyError:
            found.append(Finding(frame.seq, "shape", f"{what}: not part of protocol version {era}"))
        except ValidationError as error:
            first = error.errors()[0]
            where = "/".join(str(part) for part in first["loc"])
            found.append(Finding(frame.seq, "shape", f"{what}: {where}: {first['msg']} ({error.error_count()} problem(s))"))
        except ValueError as error:  # valid, but too deep for the SDK to write back (pydantic's serializer)
            found.append(Finding(frame.seq, "shape", f"{what}: the SDK's types cannot check it ({error})"))
    return found


class _TaskShapes:
    """The 2025-11-25 schema's task messages: the SDK's per-version method tables leave them out
    (the Python SDK runs no tasks), its generated 2025-11-25 types have them."""

    def __init__(self) -> None:
        import mcp_types._v2025_11_25 as v2025_11_25

        v = v2025_11_25
        self.requests = {"tasks/get": v.GetTaskRequest, "tasks/result": v.GetTaskPayloadRequest,
                         "tasks/list": v.ListTasksRequest, "tasks/cancel": v.CancelTaskRequest}
        self.results = {"tasks/get": v.GetTaskResult, "tasks/result": v.GetTaskPayloadResult,
                        "tasks/list": v.ListTasksResult, "tasks/cancel": v.CancelTaskResult}
        self.status = v.TaskStatusNotification
        self.created = v.CreateTaskResult


def _check_task_states(cassette: Cassette, era: str | None) -> list[Finding]:
    """Every status a task is reported in (its creation, tasks/get results, status notifications),
    in recorded order: once terminal it stays so. Tasks run on both sides, so per side."""
    if era not in TASK_ERAS:
        return []
    found = []
    for frames in _sessions(cassette):
        final: dict[tuple[Direction, Any], str] = {}  # (side reporting it, task id) -> terminal status
        for frame, item in _messages(frames):
            task = _reported_task(item)
            if task is None:
                continue
            key = (frame.direction, task.get("taskId"))
            status = task.get("status")
            if not usable_id(key[1]):  # no id ties it to a task
                continue
            if key in final and status != final[key]:
                found.append(Finding(frame.seq, "task-states", f"task {_shown(key[1])} is {_shown(status)} after it was {final[key]}"))
            elif isinstance(status, str) and status in TERMINAL_TASK_STATES:
                final[key] = status
    return found


def _reported_task(item: dict[str, Any]) -> dict[str, Any] | None:
    """The task (its id and status) a message reports, if it reports one."""
    body = item.get("result") if "result" in item else item.get("params") if item.get("method") == "notifications/tasks/status" else None
    if not isinstance(body, dict):
        return None
    task = body.get("task", body)
    return task if isinstance(task, dict) and "taskId" in task and "status" in task else None


def _body(item: dict[str, Any]) -> dict[str, Any]:
    return {"method": item["method"], **({"params": item["params"]} if "params" in item else {})}


_CHECKS = (_check_batches, _check_version_header, _check_get_streams, _check_event_ids, _check_ids,
           _check_notification_answers, _check_routing_headers, _check_progress, _check_before_initialize, _check_shapes,
           _check_task_states)


def _shown(value: Any) -> str:
    """A JSON value as JSON (a null id is `null`, not Python's None)."""
    return wire_form(value).decode()
