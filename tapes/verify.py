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

from tapes.frames import Frame, Kind
from tapes.jsonrpc import MessageType, classify, decode, encode, items

ServerKey = tuple[Any, ...]  # ("response", id) | ("progress", token, n) | ("request", method, n)
Outgoing = bytes | None  # a line to write to the server, or None: close its input (the recorded end)


@dataclass(frozen=True)
class _Line:
    seq: int
    message: Any  # the JSON-RPC message or batch to send; None for raw bytes or the end
    raw: bytes | None  # bytes that are not JSON-RPC, sent verbatim; None with no message: the end
    waits_for: frozenset[ServerKey]


def _params(item: dict[str, Any]) -> dict[str, Any]:
    params = item.get("params")
    return params if isinstance(params, dict) else {}


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
            token = _params(item).get("progressToken")
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
        self._live = _Keys()
        self._build(frames)

    def _build(self, frames: Sequence[Frame]) -> None:
        awaited: set[ServerKey] = set()
        token_owner: dict[Any, Any] = {}  # progress token -> client request id
        cancelled: set[Any] = set()
        for frame in frames:
            if frame.from_client:
                continue
            for item in items(frame.message) if frame.message is not None else ():
                state = (item.get("result") or {}).get("requestState") if isinstance(item.get("result"), dict) else None
                if state is not None:
                    self._states[state] = item["id"]
                    self._state_of_response[item["id"]] = state
        keys = _Keys()
        for frame in frames:
            if frame.from_client:
                line = self._client_line(frame, awaited, token_owner, cancelled)
                if line is not None:
                    self._lines.append(line)
                continue
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
        for item in items(frame.message):
            kind = classify(item)
            params = _params(item)
            if kind is MessageType.REQUEST:
                token = (params.get("_meta") or {}).get("progressToken") if isinstance(params.get("_meta"), dict) else None
                if token is not None:
                    token_owner[token] = item["id"]
                if params.get("requestState") in self._states:
                    waits_for.add(("response", self._states[params["requestState"]]))
            elif kind in (MessageType.RESULT, MessageType.ERROR) and item["id"] in self._recorded_server_requests:
                waits_for.add(self._recorded_server_requests[item["id"]])
            elif item.get("method") == "notifications/cancelled":
                cancelled.add(params.get("requestId"))
        return _Line(frame.seq, frame.message, None, frozenset(waits_for))

    # --- driving ------------------------------------------------------------------------------

    @property
    def finished(self) -> bool:
        return self._next >= len(self._lines)

    @property
    def waiting_for(self) -> list[ServerKey]:
        """What the next line still waits for (for a timeout message)."""
        return sorted(self._lines[self._next].waits_for - self._received, key=repr) if not self.finished else []

    def ready(self) -> list[Outgoing]:
        """The next client payloads whose turn has come, in recorded order (None, the end, last)."""
        out = []
        while not self.finished and self._lines[self._next].waits_for <= self._received:
            out.append(self._payload(self._lines[self._next]))
            self._next += 1
        return out

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

    def _payload(self, line: _Line) -> Outgoing:
        if line.message is None:
            return line.raw
        restamped = [self._restamp(item) for item in items(line.message)]
        return encode(restamped if isinstance(line.message, list) else restamped[0])

    def _restamp(self, item: dict[str, Any]) -> dict[str, Any]:
        kind = classify(item)
        if kind in (MessageType.RESULT, MessageType.ERROR):
            key = self._recorded_server_requests.get(item["id"])
            if key in self._live_ids:
                return {**item, "id": self._live_ids[key]}
        elif kind is MessageType.REQUEST:
            state = _params(item).get("requestState")
            if self._live_states.get(state) is not None:
                return {**item, "params": {**item["params"], "requestState": self._live_states[state]}}
        return item
