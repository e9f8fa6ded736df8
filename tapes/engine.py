"""The replay engine: a state machine that is fed the live client's messages and answers with
the recorded server frames they release. Transport-agnostic and sans-IO; every replayer
adapter drives this one engine.

The model is happens-before, not global order. An *interaction* is a client request and all
that is causally tied to it: the server's progress notifications for its progressToken,
server→client requests sent while it was pending, the client's answers to those, a cancellation
of it, and its response. A recorded server frame is released once the live client has sent
every client message that preceded it within its interaction; a frame tied to no request waits
for the last client message recorded before it. Frames released together go out in recorded
order, so order within an interaction is always kept.
"""

from __future__ import annotations

import json
from collections import defaultdict, deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from tapes.frames import Frame, Kind
from tapes.jsonrpc import MessageType, classify, decode, encode, items
from tapes.matching import Matcher

NO_MATCH = -32090  # in JSON-RPC's implementation-defined server error range
PARSE_ERROR = -32700
INVALID_REQUEST = -32600

ItemKey = tuple[int, int]  # (frame seq, index within a batch)


@dataclass(frozen=True, slots=True)
class Action:
    """Something the adapter must do: write `payload` as the recorded `frame` was written (its
    kind and channel say how), or, when `frame` is None, send `payload` as a reply the engine
    made up (an error for a message that matched nothing)."""

    frame: Frame | None
    payload: bytes


@dataclass
class Interaction:
    request: dict[str, Any]  # the recorded request
    frame_seq: int
    client_items: list[ItemKey] = field(default_factory=list)
    live_id: Any = None
    live_token: Any = None
    matched: bool = False

    @property
    def recorded_id(self) -> Any:
        return self.request["id"]

    @property
    def recorded_token(self) -> Any:
        return ((self.request.get("params") or {}).get("_meta") or {}).get("progressToken")

    def describe(self) -> str:
        return f"{self.request['method']} #{self.recorded_id} (frame {self.frame_seq})"


@dataclass(frozen=True, slots=True)
class Unmatched:
    """A live client message the cassette had no answer for."""

    summary: str  # e.g. "tools/call id 7"
    reason: str  # one sentence: what was expected instead


@dataclass
class Report:
    played: int = 0  # recorded server frames released
    unmatched: list[Unmatched] = field(default_factory=list)
    unused: list[str] = field(default_factory=list)  # recorded client requests never received

    @property
    def clean(self) -> bool:
        return not self.unmatched

    def lines(self) -> list[str]:
        """The end-of-replay summary: a count line, then one line per problem."""
        counts = f"played {self.played} frames, {len(self.unmatched)} unmatched, {len(self.unused)} unused"
        return (
            [counts]
            + [f"unmatched {miss.summary}: {miss.reason}" for miss in self.unmatched]
            + [f"unused {request}" for request in self.unused]
        )


@dataclass
class _ServerItem:
    """A recorded server frame waiting for its dependencies."""

    frame: Frame
    owners: list[Interaction | None]  # per batch item: the interaction it belongs to
    waiting: int = 0


class ReplayEngine:
    def __init__(self, frames: Sequence[Frame], matcher: Matcher | None = None) -> None:
        self._matcher = matcher or Matcher()
        self._requests: dict[tuple[str, str], deque[Interaction]] = defaultdict(deque)
        self._interactions: list[Interaction] = []
        self._notifications: dict[tuple[str, str], deque[ItemKey]] = defaultdict(deque)
        self._cancels: dict[int, deque[ItemKey]] = {}  # id(interaction) -> its recorded cancels
        self._answers: dict[Any, deque[ItemKey]] = defaultdict(deque)  # server request id -> client answers
        self._raw: dict[bytes, deque[ItemKey]] = defaultdict(deque)
        self._end: deque[ItemKey] = deque()
        self._dependents: dict[ItemKey, list[_ServerItem]] = defaultdict(list)
        self._by_live_id: dict[Any, Interaction] = {}
        self._ready: list[_ServerItem] = []
        self._report = Report()
        self._index(frames)

    # --- reading the recording -------------------------------------------------------------

    def _index(self, frames: Sequence[Frame]) -> None:
        open_by_id: dict[Any, Interaction] = {}  # recorded client request id -> interaction awaiting response
        by_token: dict[Any, Interaction] = {}
        by_server_request: dict[Any, Interaction | None] = {}
        pending: list[Interaction] = []  # open interactions, oldest first
        last_client_item: ItemKey | None = None

        for frame in frames:
            if frame.from_client:
                keys = self._index_client_frame(frame, open_by_id, by_token, by_server_request, pending)
                if keys:
                    last_client_item = keys[-1]
                continue
            if frame.kind is Kind.MESSAGE:
                owners = [
                    self._owner(item, open_by_id, by_token, by_server_request, pending) for item in items(frame.message)
                ]
                for item, owner in zip(items(frame.message), owners, strict=True):
                    kind = classify(item)
                    if kind in (MessageType.RESULT, MessageType.ERROR) and owner is not None:
                        open_by_id.pop(item["id"], None)
                        if owner in pending:
                            pending.remove(owner)
            else:
                owners = [None]
            deps: set[ItemKey] = set()
            for owner in owners:
                if owner is None:
                    if last_client_item is not None:
                        deps.add(last_client_item)
                else:
                    deps.update(owner.client_items)
            server_item = _ServerItem(frame, owners, waiting=len(deps))
            for key in deps:
                self._dependents[key].append(server_item)
            if not deps:
                self._ready.append(server_item)

    def _index_client_frame(
        self,
        frame: Frame,
        open_by_id: dict[Any, Interaction],
        by_token: dict[Any, Interaction],
        by_server_request: dict[Any, Interaction | None],
        pending: list[Interaction],
    ) -> list[ItemKey]:
        if frame.kind is Kind.RAW:
            key = (frame.seq, 0)
            self._raw[frame.payload].append(key)
            return [key]
        if frame.kind is Kind.STREAM_END:
            key = (frame.seq, 0)
            self._end.append(key)
            return [key]
        if frame.kind is not Kind.MESSAGE:
            return []
        keys = []
        for index, item in enumerate(items(frame.message)):
            key = (frame.seq, index)
            keys.append(key)
            kind = classify(item)
            if kind is MessageType.REQUEST:
                interaction = Interaction(item, frame.seq, [key])
                self._interactions.append(interaction)
                self._requests[self._matcher.key(item["method"], item.get("params"))].append(interaction)
                open_by_id[item["id"]] = interaction
                if interaction.recorded_token is not None:
                    by_token[interaction.recorded_token] = interaction
                pending.append(interaction)
            elif kind in (MessageType.RESULT, MessageType.ERROR):
                owner = by_server_request.get(item["id"])
                if owner is not None:
                    owner.client_items.append(key)
                self._answers[item["id"]].append(key)
            elif item["method"] == "notifications/cancelled":
                target = open_by_id.get((item.get("params") or {}).get("requestId"))
                if target is not None:
                    target.client_items.append(key)
                    self._cancels.setdefault(id(target), deque()).append(key)
                else:
                    self._notifications[self._matcher.key(item["method"], item.get("params"))].append(key)
            else:
                self._notifications[self._matcher.key(item["method"], item.get("params"))].append(key)
        return keys

    @staticmethod
    def _owner(
        item: dict[str, Any],
        open_by_id: dict[Any, Interaction],
        by_token: dict[Any, Interaction],
        by_server_request: dict[Any, Interaction | None],
        pending: list[Interaction],
    ) -> Interaction | None:
        kind = classify(item)
        if kind in (MessageType.RESULT, MessageType.ERROR):
            return open_by_id.get(item["id"])
        if kind is MessageType.REQUEST:
            # On stdio nothing on the wire says which request a server→client request serves;
            # the newest pending request is the one the server is working on when there is one.
            owner = pending[-1] if pending else None
            by_server_request[item["id"]] = owner
            return owner
        params = item.get("params") or {}
        if item["method"] == "notifications/progress":
            return by_token.get(params.get("progressToken"))
        if item["method"] == "notifications/cancelled":
            return by_server_request.get(params.get("requestId"))
        return None

    # --- driving ---------------------------------------------------------------------------

    def start(self) -> list[Action]:
        """What the server sent before the client said anything."""
        return self._release()

    def receive(self, payload: bytes) -> list[Action]:
        """One message (or batch) from the live client, as wire bytes."""
        decoded = decode(payload)
        if decoded.message is None:
            return self._receive_raw(payload)
        replies: list[Action] = []
        for item in items(decoded.message):
            replies += self._receive_item(item)
        return replies + self._release()

    def end(self) -> list[Action]:
        """The live client closed its side (stdin EOF, or the end of an HTTP session)."""
        if self._end:
            self._consume(self._end.popleft())
        return self._release()

    @property
    def report(self) -> Report:
        self._report.unused = [i.describe() for i in self._interactions if not i.matched]
        return self._report

    def _receive_raw(self, payload: bytes) -> list[Action]:
        recorded = self._raw.get(payload)
        if recorded:
            self._consume(recorded.popleft())
            return self._release()
        self._miss(f"{len(payload)} bytes that are not JSON-RPC", "the recording has no such bytes from the client")
        if _is_json(payload):
            return [_error_reply(None, INVALID_REQUEST, "Invalid Request")]
        return [_error_reply(None, PARSE_ERROR, "Parse error")]

    def _receive_item(self, item: dict[str, Any]) -> list[Action]:
        kind = classify(item)
        if kind is MessageType.REQUEST:
            return self._receive_request(item)
        if kind in (MessageType.RESULT, MessageType.ERROR):
            answers = self._answers.get(item["id"])
            if answers:
                self._consume(answers.popleft())
            else:
                self._miss(f"response id {item['id']!r}", "no recorded server request has that id")
            return []
        if item["method"] == "notifications/cancelled":
            return self._receive_cancel(item)
        recorded = self._notifications.get(self._matcher.key(item["method"], item.get("params")))
        if recorded:
            self._consume(recorded.popleft())
        else:
            self._miss(item["method"], "the recording has no such notification from the client at this point")
        return []

    def _receive_request(self, request: dict[str, Any]) -> list[Action]:
        candidates = self._requests.get(self._matcher.key(request["method"], request.get("params")))
        if not candidates:
            reason = self._nearest(request)
            self._miss(f"{request['method']} id {request['id']!r}", reason)
            return [_error_reply(request["id"], NO_MATCH, f"mcp-tapes: {reason}")]
        interaction = candidates.popleft()
        interaction.matched = True
        interaction.live_id = request["id"]
        interaction.live_token = ((request.get("params") or {}).get("_meta") or {}).get("progressToken")
        self._by_live_id[request["id"]] = interaction
        self._consume(interaction.client_items[0])
        return []

    def _receive_cancel(self, notification: dict[str, Any]) -> list[Action]:
        live_id = (notification.get("params") or {}).get("requestId")
        interaction = self._by_live_id.get(live_id)
        cancels = self._cancels.get(id(interaction)) if interaction is not None else None
        if cancels:
            self._consume(cancels.popleft())
        else:
            self._miss(f"notifications/cancelled for id {live_id!r}", "the recording has no cancellation of it")
        return []

    def _nearest(self, request: dict[str, Any]) -> str:
        """One sentence naming the closest unplayed recorded request and what differed."""
        method = request["method"]
        unplayed = [i for i in self._interactions if not i.matched]
        if not unplayed:
            return f"no recorded request matches {method}: every recorded request was already played"
        scored = []
        for interaction in unplayed:
            found = self._matcher.differences(interaction.request, request)
            scored.append((interaction.request["method"] != method, len(found), interaction.frame_seq, interaction, found))
        _, _, _, nearest, found = min(scored, key=lambda entry: entry[:3])
        shown = "; ".join(d.describe() for d in found[:3]) + ("; …" if len(found) > 3 else "")
        return f"no recorded request matches {method}; nearest recorded is {nearest.describe()}, differing at {shown}"

    def _miss(self, summary: str, reason: str) -> None:
        self._report.unmatched.append(Unmatched(summary, reason))

    # --- releasing -------------------------------------------------------------------------

    def _consume(self, key: ItemKey) -> None:
        for server_item in self._dependents.pop(key, ()):
            server_item.waiting -= 1
            if server_item.waiting == 0:
                self._ready.append(server_item)

    def _release(self) -> list[Action]:
        ready, self._ready = self._ready, []
        ready.sort(key=lambda server_item: server_item.frame.seq)
        actions = []
        for server_item in ready:
            action = self._restamp(server_item)
            if action is not None:
                actions.append(action)
                self._report.played += 1
        return actions

    def _restamp(self, server_item: _ServerItem) -> Action | None:
        """The frame with the live ids in place of the recorded ones; None if nothing is left to send."""
        frame = server_item.frame
        if frame.kind is not Kind.MESSAGE:
            return Action(frame, frame.payload)
        changed = False
        out = []
        for item, owner in zip(items(frame.message), server_item.owners, strict=True):
            new = _restamp_item(item, owner)
            changed = changed or new is not item
            if new is not None:
                out.append(new)
        if not out:
            return None
        if not changed:
            return Action(frame, frame.payload)
        message = out if isinstance(frame.message, list) else out[0]
        return Action(frame, encode(message))


def _restamp_item(item: dict[str, Any], owner: Interaction | None) -> dict[str, Any] | None:
    if owner is None:
        return item
    kind = classify(item)
    if kind in (MessageType.RESULT, MessageType.ERROR) and item["id"] == owner.recorded_id:
        return {**item, "id": owner.live_id} if item["id"] != owner.live_id else item
    if kind is MessageType.NOTIFICATION and item["method"] == "notifications/progress":
        if owner.live_token is None:
            return None  # the live client asked for no progress
        params = item["params"]
        if params.get("progressToken") == owner.live_token:
            return item
        return {**item, "params": {**params, "progressToken": owner.live_token}}
    return item


def _is_json(payload: bytes) -> bool:
    try:
        json.loads(payload)
    except (ValueError, UnicodeDecodeError):
        return False
    return True


def _error_reply(request_id: Any, code: int, message: str) -> Action:
    return Action(None, encode({"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": message}}))
