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
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from tapes.cassette.store import CassetteError
from tapes.cassette.frames import STDIO, Frame, Kind
from tapes.wire.jsonrpc import MessageType, classify, encode, items, parse
from tapes.replay.matching import Matcher

NO_MATCH = -32090  # in JSON-RPC's implementation-defined server error range
PARSE_ERROR = -32700
INVALID_REQUEST = -32600

ItemKey = tuple[int, int]  # (frame seq, index within a batch)
_UNPARSED = object()  # receive() was not handed the parsed message


@dataclass(frozen=True, slots=True)
class Action:
    """Something the adapter must do: write `payload` as the recorded `frame` was written (its
    kind and channel say how), or, when `frame` is None, send `payload` as a reply the engine
    made up (an error for a message that matched nothing)."""

    frame: Frame | None
    payload: bytes
    gap: float = 0.0  # recorded seconds between what released this frame (or the frame before it) and it


class Race(StrEnum):
    """Who wins when the client cancels a request the server is answering."""

    RECORDED = "recorded"  # as the recording has it
    CANCEL_WINS = "cancel-wins"  # a live cancel suppresses the response, whenever it was recorded
    RESPONSE_WINS = "response-wins"  # the response goes out without waiting for the cancel


class Repeats(StrEnum):
    """What a request that matches only already-played recorded requests gets."""

    IN_ORDER = "in-order"  # identical requests are consumed in recorded order; one too many is a miss
    ALLOW = "allow"  # the last played match is answered again
    STRICT = "strict-order"  # requests must come in the recorded order


@dataclass(frozen=True, slots=True)
class Reception:
    """What a live client message or HTTP request led to: the actions to carry out, and the
    recorded channel it was matched to (an HTTP adapter answers on that exchange's framing);
    None when nothing matched. `missed`: how many of its items matched nothing."""

    actions: list[Action]
    channel: str | None
    missed: int = 0


def header(info: dict[str, Any], name: str) -> str | None:
    """A header's value from an HTTP head's info (names compare case-insensitively)."""
    for key, value in info.get("headers") or ():
        if key.lower() == name:
            return value
    return None


@dataclass(eq=False)  # identity: two recorded requests may be equal in every field
class Interaction:
    request: dict[str, Any]  # the recorded request
    frame_seq: int
    channel: str
    client_items: list[ItemKey] = field(default_factory=list)
    live_id: Any = None
    live_token: Any = None
    matched: bool = False
    # Nothing more goes out for it: the live client cancelled it (under Race.CANCEL_WINS, or by
    # closing its 2026-07-28 response stream), or its exchange was answered without it.
    withheld: bool = False
    cancel_items: deque[ItemKey] = field(default_factory=deque)
    server_items: list[_ServerItem] = field(default_factory=list)  # what the server sent for it

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
    repeated: int = 0  # requests answered again under Repeats.ALLOW
    unmatched: list[Unmatched] = field(default_factory=list)
    unused: list[str] = field(default_factory=list)  # recorded client requests never received
    recorded: int = 0  # frames a new episode added to the cassette (record mode new_episodes)

    @property
    def clean(self) -> bool:
        return not self.unmatched

    def as_json(self) -> dict[str, Any]:
        return {
            "played": self.played,
            "repeated": self.repeated,
            "unmatched": [{"summary": miss.summary, "reason": miss.reason} for miss in self.unmatched],
            "unused": self.unused,
            "recorded": self.recorded,
        }

    def lines(self) -> list[str]:
        """The end-of-replay summary: a count line, then one line per problem."""
        counts = f"played {self.played} frames, {len(self.unmatched)} unmatched, {len(self.unused)} unused"
        if self.repeated:
            counts += f", {self.repeated} repeated"
        if self.recorded:
            counts += f", {self.recorded} new frames recorded from the real server"
        return (
            [counts]
            + [f"unmatched {miss.summary}: {miss.reason}" for miss in self.unmatched]
            + [f"unused {request}" for request in self.unused]
        )


@dataclass(eq=False)
class _ServerItem:
    """A recorded server frame waiting for its dependencies."""

    frame: Frame
    owners: list[Interaction | None]  # per batch item: the interaction it belongs to
    payload: bytes  # the frame's wire bytes, encoded once: most frames go out as recorded
    waiting: int = 0


class _Indexer:
    """Reads a recording once, front to back, and works out each server frame's dependencies.
    Holds only what that walk needs; the engine keeps the lookup tables it builds."""

    def __init__(self, engine: ReplayEngine) -> None:
        self.engine = engine
        self.open_by_id: dict[Any, Interaction] = {}  # recorded client request id -> awaiting its response
        self.by_id: dict[Any, Interaction] = {}  # ... -> the latest request with it, answered or not (a cancel may race the answer)
        self.by_token: dict[Any, Interaction] = {}
        self.by_server_request: dict[Any, Interaction | None] = {}
        self.pending: list[Interaction] = []  # open interactions, oldest first
        self.last_client_item: ItemKey | None = None
        self.channel_items = engine._channel_items
        self.channel_interactions = engine._channel_interactions

    def walk(self, frames: Sequence[Frame]) -> None:
        for frame in frames:
            if frame.from_client:
                if frame.message is not None:
                    _checked_payload(frame)  # only checked: a client frame is never sent
                keys = self.client_frame(frame)
                if keys:
                    self.last_client_item = keys[-1]
                    if frame.channel != STDIO:
                        self.channel_items[frame.channel] += keys
            else:
                self.server_frame(frame)

    def client_frame(self, frame: Frame) -> list[ItemKey]:
        engine = self.engine
        key = (frame.seq, 0)
        if frame.kind is Kind.HTTP_REQUEST:
            info = frame.info or {}
            if info.get("method") == "POST":
                return []  # a POST is matched by its body
            engine._opens[(info.get("method"), header(info, "last-event-id"))].append(key)
        elif frame.kind is Kind.RAW:
            engine._raw[frame.payload].append(key)
        elif frame.kind is Kind.STREAM_END:
            engine._end.append(key)
        elif frame.kind is Kind.MESSAGE:
            return [self.client_item(frame, index, item) for index, item in enumerate(items(frame.message))]
        else:
            return []
        engine._item_channels[key] = frame.channel
        engine._item_times[key] = frame.t
        return [key]

    def client_item(self, frame: Frame, index: int, item: dict[str, Any]) -> ItemKey:
        engine = self.engine
        key = (frame.seq, index)
        engine._item_channels[key] = frame.channel
        engine._item_times[key] = frame.t
        kind = classify(item)
        if kind is MessageType.REQUEST:
            interaction = Interaction(item, frame.seq, frame.channel, [key])
            engine._interactions.append(interaction)
            engine._requests[engine._matcher.key(item["method"], item.get("params"))].append(interaction)
            self.open_by_id[item["id"]] = interaction
            self.by_id[item["id"]] = interaction
            if interaction.recorded_token is not None:
                self.by_token[interaction.recorded_token] = interaction
            self.pending.append(interaction)
            if frame.channel != STDIO:
                self.channel_interactions[frame.channel].append(interaction)
        elif kind in (MessageType.RESULT, MessageType.ERROR):
            owner = self.by_server_request.get(item["id"])
            if owner is not None:
                owner.client_items.append(key)
            engine._answers[item["id"]].append(key)
        elif item["method"] == "notifications/cancelled" and (
            target := self.by_id.get((item.get("params") or {}).get("requestId"))
        ):
            target.cancel_items.append(key)
            if engine._race is not Race.RESPONSE_WINS:  # there the cancel holds nothing back
                target.client_items.append(key)
        else:
            engine._notifications[engine._matcher.key(item["method"], item.get("params"))].append(key)
        return key

    def server_frame(self, frame: Frame) -> None:
        if frame.kind is Kind.STREAM_END and (frame.info or {}).get("reason") == "client_disconnect":
            self.engine._closed_by_client.add(frame.channel)
        payload = _checked_payload(frame)
        if frame.message is not None:  # a MESSAGE frame or an SSE event carrying one
            owners = [self.owner(frame, item) for item in items(frame.message)]
            for item, owner in zip(items(frame.message), owners, strict=True):
                if owner is not None and classify(item) in (MessageType.RESULT, MessageType.ERROR):
                    self.open_by_id.pop(item["id"], None)
                    if owner in self.pending:
                        self.pending.remove(owner)
        else:
            owners = [None]
        deps: set[ItemKey] = set()
        for owner in owners:
            if owner is not None:
                deps.update(owner.client_items)
        exchange = self.channel_interactions.get(frame.channel, [])
        if frame.channel != STDIO:
            # On HTTP a frame goes out on its exchange: after what the client sent on it, and
            # after all that was tied to the requests it carries (answers, cancels) before it.
            deps.update(self.channel_items[frame.channel])
            for interaction in exchange:
                deps.update(interaction.client_items)
        if None in owners and not exchange and self.last_client_item is not None:
            deps.add(self.last_client_item)  # tied to no request: after the last thing the client said
        server_item = _ServerItem(frame, owners, payload)
        for interaction in {id(i): i for i in [*owners, *exchange] if i is not None}.values():
            interaction.server_items.append(server_item)
        self.engine._wait(server_item, deps)

    def owner(self, frame: Frame, item: dict[str, Any]) -> Interaction | None:
        kind = classify(item)
        if kind in (MessageType.RESULT, MessageType.ERROR):
            return self.open_by_id.get(item["id"])
        if kind is MessageType.REQUEST:
            # On HTTP a server→client request travels on the stream of the request it serves. On
            # stdio nothing says which; the newest pending request is the one the server is busy with.
            on_channel = self.channel_interactions.get(frame.channel)
            candidates = on_channel if on_channel else self.pending
            owner = candidates[-1] if candidates else None
            self.by_server_request[item["id"]] = owner
            return owner
        params = item.get("params") or {}
        if item["method"] == "notifications/progress":
            return self.by_token.get(params.get("progressToken"))
        if item["method"] == "notifications/cancelled":
            return self.by_server_request.get(params.get("requestId"))
        return None


class ReplayEngine:
    def __init__(
        self,
        frames: Sequence[Frame],
        matcher: Matcher | None = None,
        *,
        race: Race = Race.RECORDED,
        repeats: Repeats = Repeats.IN_ORDER,
        remember_played: bool = False,
    ) -> None:
        self._matcher = matcher or Matcher()
        self._race = race
        self._repeats = repeats
        self._requests: dict[Hashable, list[Interaction]] = defaultdict(list)  # unplayed, recorded order
        self._played: dict[Hashable, list[Interaction]] = defaultdict(list)
        self._interactions: list[Interaction] = []
        self._next_in_order = 0  # Repeats.STRICT: index of the next recorded request
        self._notifications: dict[Hashable, deque[ItemKey]] = defaultdict(deque)
        self._answers: dict[Any, deque[ItemKey]] = defaultdict(deque)  # server request id -> client answers
        self._raw: dict[bytes, deque[ItemKey]] = defaultdict(deque)
        self._opens: dict[tuple[Any, str | None], deque[ItemKey]] = defaultdict(deque)  # (method, Last-Event-ID)
        self._end: deque[ItemKey] = deque()
        self._item_channels: dict[ItemKey, str] = {}
        # HTTP: what the client sent on each exchange (its body's items, or a GET's request head),
        # the requests among it, and the exchanges whose stream the recorded client closed
        self._channel_items: dict[str, list[ItemKey]] = defaultdict(list)
        self._channel_interactions: dict[str, list[Interaction]] = defaultdict(list)
        self._closed_by_client: set[str] = set()
        self._dependents: dict[ItemKey, list[_ServerItem]] = defaultdict(list)
        self._by_live_id: dict[Any, Interaction] = {}
        self._ready: list[_ServerItem] = []
        self._item_times: dict[ItemKey, float] = {}
        self._trigger_time = 0.0  # recorded time of the client message that released what is ready
        self._report = Report()
        # With `remember_played` (new episodes splice by it): the seqs of the recorded frames played,
        # client ones matched and server ones sent.
        self.played_frames: set[int] | None = set() if remember_played else None
        _Indexer(self).walk(frames)
        if race is Race.CANCEL_WINS:
            self._hold_responses_for_cancels()

    def _hold_responses_for_cancels(self) -> None:
        """Under cancel-wins a response must not go out before a cancel that may come: each
        response of a request the recording shows cancelled also waits for that cancel."""
        for interaction in self._interactions:
            if not interaction.cancel_items:
                continue
            cancel = interaction.cancel_items[0]
            for server_item in interaction.server_items:
                if _answers(server_item, interaction) and server_item not in self._dependents[cancel]:
                    server_item.waiting += 1
                    self._dependents[cancel].append(server_item)

    def _wait(self, server_item: _ServerItem, deps: set[ItemKey]) -> None:
        server_item.waiting = len(deps)
        for key in deps:
            self._dependents[key].append(server_item)
        if not deps:
            self._ready.append(server_item)

    # --- driving ---------------------------------------------------------------------------

    def start(self) -> list[Action]:
        """What the server sent before the client said anything."""
        return self._release()

    def receive(self, payload: bytes, message: Any = _UNPARSED) -> Reception:
        """One message (or batch) from the live client, as wire bytes; `message` is what
        `jsonrpc.parse` makes of them, when the adapter has already parsed them."""
        if message is _UNPARSED:
            message = parse(payload)
        if message is None:
            return self._receive_raw(payload)
        misses = len(self._report.unmatched)
        replies: list[Action] = []
        channel = None
        sent: list[ItemKey] = []
        for item in items(message):
            matched, reply = self._receive_item(item)
            replies += reply
            if matched is not None:
                sent.append(matched)
                channel = channel or self._item_channels[matched]
        if channel is not None and channel != STDIO:
            self._skip_unsent(channel, sent)
        return Reception(replies + self._release(), channel, len(self._report.unmatched) - misses)

    def open(self, method: str, last_event_id: str | None = None) -> Reception:
        """An HTTP request without a body (a GET stream, a DELETE): it plays the first unplayed
        recorded exchange with that method and that Last-Event-ID, if there is one."""
        recorded = self._opens.get((method, last_event_id))
        if not recorded:
            return Reception([], None)
        key = recorded.popleft()
        self._consume(key)
        return Reception(self._release(), self._item_channels[key])

    def close_stream(self, channel: str) -> None:
        """The live client closed the response stream of a recorded exchange before its end. At
        2026-07-28 that is how Streamable HTTP cancels the requests the exchange carries: nothing
        more goes out for them. Under Race.RECORDED a close the recording does not have is a miss,
        as an unrecorded notifications/cancelled is."""
        for interaction in self._channel_interactions.get(channel, ()):
            if interaction.withheld:
                continue
            interaction.withheld = True
            if self._race is Race.RECORDED and channel not in self._closed_by_client:
                self._miss(f"closing the stream of {interaction.request['method']} id {interaction.live_id!r}",
                           "the recording has no cancellation of it")

    def note_unmatched(self, summary: str, reason: str) -> None:
        """A miss an adapter found (e.g. an HTTP request no recorded exchange answers)."""
        self._miss(summary, reason)

    def end(self) -> list[Action]:
        """The live client closed its side (stdin EOF, or the end of an HTTP session)."""
        if self._end:
            self._consume(self._end.popleft())
        return self._release()

    def interactions_by_item(self) -> dict[ItemKey, Interaction]:
        """The interaction each recorded message item (frame seq, index in a batch) belongs to, on
        both sides, as this engine ties them (for views of a session)."""
        owners: dict[ItemKey, Interaction] = {}
        for interaction in self._interactions:
            for key in (*interaction.client_items, *interaction.cancel_items):
                owners[key] = interaction
            for server_item in interaction.server_items:
                for index, owner in enumerate(server_item.owners):
                    if owner is interaction:
                        owners[(server_item.frame.seq, index)] = interaction
        return owners

    @property
    def report(self) -> Report:
        self._report.unused = [i.describe() for i in self._interactions if not i.matched]
        return self._report

    def _skip_unsent(self, channel: str, sent: list[ItemKey]) -> None:
        """An HTTP exchange is answered once, to the live POST that matched it. What its recorded
        body held that this POST did not is skipped, so the answer comes now, without the
        responses to requests the live client never made."""
        for interaction in self._channel_interactions.get(channel, ()):
            if not interaction.matched and not interaction.withheld:
                interaction.withheld = True
                self._requests[self._matcher.key(interaction.request["method"], interaction.request.get("params"))].remove(interaction)
        for key in self._channel_items.get(channel, ()):
            if key not in sent:
                self._consume(key)

    def _receive_raw(self, payload: bytes) -> Reception:
        recorded = self._raw.get(payload)
        if recorded:
            key = recorded.popleft()
            self._consume(key)
            return Reception(self._release(), self._item_channels[key])
        self._miss(f"{len(payload)} bytes that are not JSON-RPC", "the recording has no such bytes from the client")
        if _is_json(payload):
            return Reception([_error_reply(None, INVALID_REQUEST, "Invalid Request")], None, missed=1)
        return Reception([_error_reply(None, PARSE_ERROR, "Parse error")], None, missed=1)

    def _receive_item(self, item: dict[str, Any]) -> tuple[ItemKey | None, list[Action]]:
        """The recorded client item this live one matched (None if none), and any reply."""
        kind = classify(item)
        if kind is MessageType.REQUEST:
            return self._receive_request(item)
        if kind in (MessageType.RESULT, MessageType.ERROR):
            recorded = self._answers.get(item["id"])
            miss = (f"response id {item['id']!r}", "no recorded server request has that id")
        elif item["method"] == "notifications/cancelled":
            live_id = (item.get("params") or {}).get("requestId")
            interaction = self._by_live_id.get(live_id)
            if interaction is not None and self._race is Race.CANCEL_WINS:
                interaction.withheld = True
                if not interaction.cancel_items:  # unrecorded, but this policy always honours a cancel
                    return None, self._release()
            recorded = interaction.cancel_items if interaction is not None else None
            miss = (f"notifications/cancelled for id {live_id!r}", "the recording has no cancellation of it")
        else:
            recorded = self._notifications.get(self._matcher.key(item["method"], item.get("params")))
            miss = (item["method"], "the recording has no such notification from the client at this point")
        if not recorded:
            self._miss(*miss)
            return None, []
        key = recorded.popleft()
        self._consume(key)
        return key, []

    def _receive_request(self, request: dict[str, Any]) -> tuple[ItemKey | None, list[Action]]:
        key = self._matcher.key(request["method"], request.get("params"))
        interaction = self._take(key, request)
        if interaction is None:
            previous = self._last_played(key, request) if self._repeats is Repeats.ALLOW else None
            if previous is not None:
                return previous.client_items[0], self._repeat(previous, request)
            reason = self._nearest(request)
            self._miss(f"{request['method']} id {request['id']!r}", reason)
            return None, [_error_reply(request["id"], NO_MATCH, f"mcp-tapes: {reason}")]
        interaction.matched = True
        self._played[key].append(interaction)
        self._go_live(interaction, request)
        self._consume(interaction.client_items[0])
        return interaction.client_items[0], []

    def _take(self, key: Hashable, request: dict[str, Any]) -> Interaction | None:
        """The recorded request this live one plays, taken off the unplayed ones."""
        unplayed = self._requests.get(key, [])
        candidates = unplayed
        if self._repeats is Repeats.STRICT:
            expected = self._next_unplayed()
            candidates = [expected] if expected is not None and expected in unplayed else []
        for interaction in candidates:
            if self._matcher.accepts(interaction.request, request):
                unplayed.remove(interaction)
                return interaction
        return None

    def _next_unplayed(self) -> Interaction | None:
        while self._next_in_order < len(self._interactions) and self._interactions[self._next_in_order].matched:
            self._next_in_order += 1
        return self._interactions[self._next_in_order] if self._next_in_order < len(self._interactions) else None

    def _last_played(self, key: Hashable, request: dict[str, Any]) -> Interaction | None:
        for interaction in reversed(self._played.get(key, [])):
            if self._matcher.accepts(interaction.request, request):
                return interaction
        return None

    def _go_live(self, interaction: Interaction, request: dict[str, Any]) -> None:
        interaction.live_id = request["id"]
        interaction.live_token = ((request.get("params") or {}).get("_meta") or {}).get("progressToken")
        self._by_live_id[request["id"]] = interaction

    def _repeat(self, interaction: Interaction, request: dict[str, Any]) -> list[Action]:
        """Answer a repeated request as its last played match was answered, under the new ids."""
        self._go_live(interaction, request)
        self._report.repeated += 1
        return [action for item in interaction.server_items if (action := self._restamp(item)) is not None]

    def _nearest(self, request: dict[str, Any]) -> str:
        """One sentence naming the closest unplayed recorded request and what differed."""
        method = request["method"]
        if self._repeats is Repeats.STRICT and (expected := self._next_unplayed()) is not None:
            shown = "; ".join(d.describe() for d in self._matcher.differences(expected.request, request)[:3])
            return f"requests must come in recorded order: the next recorded is {expected.describe()}, differing at {shown}"
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
        if self.played_frames is not None:
            self.played_frames.add(key[0])
        self._trigger_time = self._item_times.get(key, self._trigger_time)
        for server_item in self._dependents.pop(key, ()):
            server_item.waiting -= 1
            if server_item.waiting == 0:
                self._ready.append(server_item)

    def _release(self) -> list[Action]:
        ready, self._ready = self._ready, []
        ready.sort(key=lambda server_item: server_item.frame.seq)
        actions = []
        previous = self._trigger_time
        for server_item in ready:
            action = self._restamp(server_item, gap=max(0.0, server_item.frame.t - previous))
            if action is not None:
                previous = max(previous, server_item.frame.t)
                actions.append(action)
                self._report.played += 1
                if self.played_frames is not None:
                    self.played_frames.add(server_item.frame.seq)
        return actions

    def _restamp(self, server_item: _ServerItem, gap: float = 0.0) -> Action | None:
        """The frame with the live ids in place of the recorded ones; None if nothing is left to send."""
        frame = server_item.frame
        if frame.message is None:
            return Action(frame, server_item.payload, gap)
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
            return Action(frame, server_item.payload, gap)
        message = out if isinstance(frame.message, list) else out[0]
        return Action(frame, encode(message), gap)


def _answers(server_item: _ServerItem, interaction: Interaction) -> bool:
    """Whether the frame carries the response to `interaction`'s request."""
    if server_item.frame.message is None:
        return False
    return any(
        owner is interaction and classify(item) in (MessageType.RESULT, MessageType.ERROR)
        for item, owner in zip(items(server_item.frame.message), server_item.owners, strict=True)
    )


def _restamp_item(item: dict[str, Any], owner: Interaction | None) -> dict[str, Any] | None:
    if owner is None:
        return item
    if owner.withheld:
        return None
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


def _checked_payload(frame: Frame) -> bytes:
    """The frame's wire bytes; a message read from an untrusted cassette must be JSON (msgpack can
    also hold bytes), which encoding it checks."""
    try:
        return frame.payload
    except (TypeError, ValueError) as error:
        raise CassetteError(f"frame {frame.seq} holds a message that is not JSON ({error})") from None


def _is_json(payload: bytes) -> bool:
    try:
        json.loads(payload)
    except (ValueError, UnicodeDecodeError):
        return False
    return True


def _error_reply(request_id: Any, code: int, message: str) -> Action:
    return Action(None, encode({"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": message}}))
