"""The replay engine: a state machine that is fed the live client's messages and answers with
the recorded server frames they release. Transport-agnostic and sans-IO; every replayer
adapter drives this one engine.

The model is happens-before, not global order. An *interaction* is a client request and all
that is causally tied to it: the server's progress notifications for its progressToken,
server→client requests sent while it was pending, the client's answers to those, a cancellation
of it, and its response. A recorded server frame is released once the live client has sent
every client message that preceded it within its interaction. Frames released together go out in
recorded order, so order within an interaction is always kept.

What else a frame waits for depends on the transport (`tapes.replay.index` works it out once):
on stdio, a frame tied to no request waits for the last client message recorded before it. On
HTTP, causality is per exchange: a response head, a 202 and a POST's own SSE events wait only for
what the client sent on that exchange and for the requests it carries, never for another
exchange; a server message tied to no request goes out on the standalone GET stream (or the
legacy SSE stream) once the live client has that stream open, and never holds a POST.
"""

from __future__ import annotations

import dataclasses
import sys
from collections import Counter, defaultdict, deque
from collections.abc import Callable, Hashable, Iterable, Iterator, Sequence
from itertools import islice
from enum import StrEnum
from typing import Any, TypeVar

from tapes.cassette.frames import STDIO, STOPPING_SIGNALS, Frame, Kind
from tapes.cassette.store import gc_paused
from tapes.replay.index import FrameFeed, Interaction, ItemKey, RecordingIndex, ServerItem, checked_payload
from tapes.replay.matching import Difference, Matcher
from tapes.replay.outcomes import NO_MATCH, Action, Reception, Reply, Report, Unmatched
from tapes.replay.polls import TASK_STATUS, Polls, is_poll, subject
from tapes.replay.streams import as_stream_message, stream_end
from tapes.wire.eras import (
    CAPABILITY_OF, CLIENT_CAPABILITY_OF, DISCOVER_METHOD, HANDSHAKE_DONE, HANDSHAKE_METHOD, LATEST_HANDSHAKE_VERSION, LIST_CHANGED, LISTENED_FLAGS, LOG_LEVELS,
    SERVER_INFO_KEY, STATELESS_ERAS, STATELESS_RESULT_MEMBERS, STATELESS_VERSION_KEY, SUBSCRIPTION_ID_KEY, VERSIONS,
)
from tapes.wire.http import header
from tapes.wire.jsonrpc import (
    METHOD_NOT_FOUND, PARSE_ERROR, Incoming, MessageType, Refusal, classify, items, meta_of, params_of, read_client,
    request_label, usable_id, wire_form,
)  # fmt: skip


PING = "ping"
SET_LEVEL = "logging/setLevel"
NEAREST_CANDIDATES = 16
"""How many unplayed recorded requests of the same method a miss is compared with (the first ones
in recorded order): naming the nearest must not cost a search of the whole recording."""
DEEP_DIFF_SIZE = 64 * 1024
"""Bytes past which a miss and a candidate are compared member by member of their params, not in depth."""
Found = TypeVar("Found")


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


INDEX_STEP = 4096
"""Frames indexed at a time when a recording is read as it is replayed: at the start, and in each
step of `advance` (so a client is kept waiting by one step at most)."""


class _Queue:
    """The unplayed part of one of the index's lists, taken from the front; it sees what the
    index appends to the list later."""

    __slots__ = ("_items", "_taken")

    def __init__(self, items: list[ItemKey]) -> None:
        self._items = items
        self._taken = 0

    def __bool__(self) -> bool:
        return self._taken < len(self._items)

    def __getitem__(self, position: int) -> ItemKey:
        return self._items[self._taken + position]

    def popleft(self) -> ItemKey:
        self._taken += 1
        return self._items[self._taken - 1]


class ReplayEngine:
    def __init__(
        self,
        frames: Iterable[Frame] | FrameFeed,
        matcher: Matcher | None = None,
        *,
        race: Race = Race.RECORDED,
        repeats: Repeats = Repeats.IN_ORDER,
        remember_played: bool = False,
        polls: Polls = Polls.LATEST,
        clock: Callable[[], float] | None = None,
        exits_recorded: bool = True,
    ) -> None:
        """`frames`: a sequence is indexed at once; any other iterable (a `CassetteStream`) is read
        as the replay needs it: INDEX_STEP frames at the start, more when a live message matches
        nothing indexed yet (until it matches or the recording is exhausted), when `advance` is
        called while the client is idle, and all of it for whatever needs the whole recording
        (`end`, `report`, a miss's nearest request, Race.CANCEL_WINS). A server frame found later
        whose dependencies the live client already sent is released then, so with `advance` the
        replay converges to what the whole recording's index does.

        `clock`: the live time in recorded seconds (the timing's speed applied), when the replay
        follows the recorded clock; polls then advance on it (tapes.replay.polls). `exits_recorded`:
        whether a stdio recording without the server's exit was cut short (see RecordingIndex)."""
        self._polls = polls
        self._clock = clock
        self._build(frames, matcher, race, repeats, remember_played, exits_recorded)
        self._played_opens: dict[tuple[Any, Any, str | None], ItemKey] = {}  # resumptions played, by (method, target, Last-Event-ID)
        self._channel_server_items: dict[str, list[ServerItem]] = {}  # ... and what their exchange carried, once asked again
        self._poll_anchors: dict[Hashable, tuple[float, float]] = {}  # poll key -> (live clock, recorded time) of its first poll
        # Tasks the client runs for the server (a task-augmented sampling/createMessage): the live
        # client names them afresh, and the server's tasks/get and tasks/result carry the live name.
        self._client_tasks: dict[Any, Any] = {}  # recorded task id -> the live one
        # A recorded input_required result asked of a client that opened with initialize: its
        # input requests go out one at a time as requests of the server's (see `_asked_of_client`).
        self._input_asked: dict[str, _InputRound] = {}  # our request id -> its round
        self._input_requests_sent = 0
        # Over HTTP the live client reads the answer on the exchange of its first request, which
        # stays open (its recorded end held back) until the recorded retry's answer comes, moved
        # there from the retry's own exchange (see `_on_live_stream`).
        self._input_streams: dict[str, str] = {}  # a recorded retry's exchange -> the exchange it is answered on
        self._held_ends: set[str] = set()  # exchanges whose answer waits for an input round
        self._asking: set[str] = set()  # recorded exchanges whose input_required ends them: their own end is not sent
        self._input_actions: list[Action] = []  # the next input request, or an input round's end, to send
        self._client_capabilities: dict[str, Any] | None = None  # what the live client declared in its initialize
        self._unasked_tasks: set[Any] = set()  # tasks of server requests not sent to the live client (`_not_asked`)
        self._waited_in_vain: set[Interaction] = set()  # requests the recorded client cancelled, said unanswered at the end

    def _build(self, frames: Iterable[Frame] | FrameFeed, matcher: Matcher | None, race: Race, repeats: Repeats, remember_played: bool,
               exits_recorded: bool) -> None:
        self._matcher = matcher or Matcher()
        self._race = race
        self._repeats = repeats
        index = self._index = RecordingIndex.reading(frames, exits_recorded)
        self._interactions = index.interactions
        self._item_frames = index.item_frames
        self._channel_items = index.channel_items
        self._channel_interactions = index.channel_interactions
        self._closed_by_client = index.closed_by_client
        # what live messages are matched against, each in recorded order, unplayed first
        self._requests: dict[Hashable, list[Interaction]] = defaultdict(list)
        # ... and what a miss is compared with: per method, the unplayed ones in recorded order (a
        # dict as an ordered set: taking one out costs nothing)
        self._unplayed_by_method: dict[str | None, dict[Interaction, None]] = defaultdict(dict)  # None: any method
        self._polls_about: dict[Any, list[Interaction]] = defaultdict(list)  # task id -> its recorded polls
        self._sizes: dict[Interaction, int] = {}  # encoded size of the recorded requests compared so far
        self._notifications: dict[Hashable, deque[ItemKey]] = defaultdict(deque)
        # the client's status notifications about tasks it runs: when it sends them is its clock's
        # business, so they are taken in order, and one more than recorded is no miss
        self._task_statuses: deque[ItemKey] = deque()
        self._answers: dict[Any, _Queue] = {}  # server request id -> the client's recorded answers
        self._raw: dict[bytes, _Queue] = {}  # client bytes that are not JSON-RPC
        # bodiless HTTP requests by (method, path with query, Last-Event-ID)
        self._opens: dict[tuple[Any, Any, str | None], deque[ItemKey]] = defaultdict(deque)
        self._end: deque[ItemKey] = deque()
        self._cancels: dict[Interaction, _Queue] = {}
        self._resent: list[Action] = []  # Repeats.ALLOW: answers sent again, ahead of what is released
        # replies found after the live message they answer: errors for matched requests found cut off
        # as the recording was read; the answer to a request whose input round had nothing to ask
        self._later_replies: list[Reply] = []
        self._cut_checked = False
        self._excused: set[Any] = set()  # live ids whose unrecorded cancel is no miss (excuse_cancel)
        self._played: dict[Hashable, list[Interaction]] = defaultdict(list)
        self._next_in_order = 0  # Repeats.STRICT: index of the next recorded request
        self._dependents: dict[ItemKey, list[ServerItem]] = defaultdict(list)
        self._consumed: set[ItemKey] = set()  # what a server frame indexed later no longer waits for
        self._by_live_id: dict[Any, Interaction] = {}
        self._ready: list[ServerItem] = []
        self._asked: Counter[Any] = Counter()  # server request ids sent (or ready to be) and not answered yet
        self._trigger_time = 0.0  # recorded time of the client message that released what is ready
        self._report = Report()
        self._adapted: list[str] = []  # what a client unlike the recorded one got by the protocol, one line each
        self._live_path: str | None = None  # where the live message being received was POSTed (HTTP)
        self._listed_again_count: Counter[str] = Counter()  # list requests answered again (see _listed_again)
        self._list_changes: dict[str, int] | None = None  # list_changed notification -> the seq of its last one
        self._empty_answers: Counter[str] = Counter()  # ... and the pings (and log levels) it got, counted per method
        self._not_found: Counter[str] = Counter()  # ... and its requests for what the recorded server did not declare
        self._handshake_done_taken = False  # ... and whether it got an unrecorded notifications/initialized past
        self._initialize_from_discover = False  # whether an initialize was answered from a recorded server/discover
        self._handshake_dones_owed = 0  # ... one notifications/initialized for each such answer
        self._handshakes: list[Interaction] | None = None  # the recorded initialize and server/discover requests, once all indexed
        # With `remember_played` (new episodes splice by it): the seqs of the recorded frames played,
        # client ones matched and server ones sent.
        self.played_frames: set[int] | None = set() if remember_played else None
        self._taken: dict[str, int] = {}  # how much of each of the index's lists is in the tables above
        if isinstance(frames, Sequence):  # all there: checked whole before anything is served, as load checks it
            self._extend(sys.maxsize)
            index.check_payloads()
        else:  # read as it goes: a message that is not JSON is reported when it is sent
            self._extend(INDEX_STEP)
        if race is Race.CANCEL_WINS:
            self.index_all()  # a response waits for a cancel that may be recorded after it
            self._hold_responses_for_cancels()

    @property
    def indexed(self) -> bool:
        """Whether the whole recording is indexed."""
        return self._index.complete

    @property
    def waiting(self) -> bool:
        """Whether frames read for it wait to be indexed (`advance`): a recording fed as it is read."""
        return self._index.waiting

    def advance(self) -> Reception:
        """Index one more step of a recording read as it is replayed (for an adapter to call while
        the client is idle): what that released, and the errors for live requests whose recorded
        answer turned out to be past the recording's end."""
        self._extend(INDEX_STEP)
        released = self._release()  # (which may find replies, and an input round's end)
        asked, self._input_actions = self._input_actions, []
        replies, self._later_replies = self._later_replies, []
        return Reception(asked + released, replies)

    def _extend(self, count: int) -> bool:
        """Index up to `count` more frames and take them into the tables; whether there were any."""
        extended = self._index.extend(count)
        if self._index.complete and not self._cut_checked:  # requests matched before their answer was known missing
            self._cut_checked = True
            self._later_replies += [self._cut_short(interaction) for interaction in self._index.cut_off
                                  if interaction.matched and not interaction.withheld]
        if not extended:
            return False
        with gc_paused():  # millions of new containers for a big recording, none of them garbage
            for interaction in self._added("interactions"):
                method = interaction.request["method"]
                self._requests[self._key(interaction.request)].append(interaction)
                self._unplayed_by_method[method][interaction] = None
                self._unplayed_by_method[None][interaction] = None
                if is_poll(method) and (task := subject(method, interaction.request.get("params"))) is not None:
                    self._polls_about[task].append(interaction)
            for key, item in self._added("notifications"):
                self._notifications[self._key(item)].append(key)
                if item["method"] == TASK_STATUS:
                    self._task_statuses.append(key)
            for key in self._added("opens"):
                info = self._item_frames[key].info or {}
                self._opens[(info.get("method"), info.get("path"), header(info.get("headers"), "last-event-id"))].append(key)
            self._end += self._added("ends")
            for server_item in self._added("server_items"):
                # under response-wins a recorded cancel holds nothing back
                deps = server_item.deps if self._race is Race.RESPONSE_WINS else server_item.deps | server_item.cancel_deps
                self._wait(server_item, deps - self._consumed if self._consumed else deps)
        return True

    def _added(self, name: str) -> list[Any]:
        """What the index's list `name` gained since it was last asked."""
        added = getattr(self._index, name)
        start, self._taken[name] = self._taken.get(name, 0), len(added)
        return added[start:] if start else added

    def index_all(self) -> None:
        """Index the rest of the recording (what it releases goes out with the next reception)."""
        while self._extend(sys.maxsize):
            pass

    def _until(self, found: Callable[[], Found]) -> Found:
        """`found()`, indexing more of the recording until it finds something or the recording is exhausted."""
        while not (result := found()) and self._extend(INDEX_STEP):
            pass
        return result

    def _queue(self, queues: dict[Hashable, _Queue], recorded: dict[Any, list[ItemKey]], key: Hashable) -> _Queue | None:
        """The unplayed part of `recorded[key]` (None while the index has none)."""
        queue = queues.get(key)
        if queue is None and (keys := recorded.get(key)) is not None:
            queue = queues[key] = _Queue(keys)
        return queue

    def _cancels_of(self, interaction: Interaction) -> _Queue:
        if interaction not in self._cancels:
            self._cancels[interaction] = _Queue(interaction.cancel_items)
        return self._cancels[interaction]

    def _key(self, message: dict[str, Any]) -> Hashable:
        return self._matcher.key(message["method"], message.get("params"))

    def _hold_responses_for_cancels(self) -> None:
        """Under cancel-wins a response must not go out before a cancel that may come: each
        response of a request the recording shows cancelled also waits for that cancel."""
        for interaction in self._interactions:
            if not interaction.cancel_items:
                continue
            cancel = interaction.cancel_items[0]
            for server_item in interaction.server_items:
                if server_item.answers(interaction) and server_item not in self._dependents[cancel]:
                    server_item.waiting += 1
                    self._dependents[cancel].append(server_item)

    def _wait(self, server_item: ServerItem, deps: set[ItemKey]) -> None:
        server_item.waiting = len(deps)
        for key in deps:
            self._dependents[key].append(server_item)
        if not deps:
            self._make_ready(server_item)

    def _make_ready(self, server_item: ServerItem) -> None:
        """It goes out with the next release: a request of the server's among it may be answered."""
        self._ready.append(server_item)
        if server_item.frame.message is not None:
            for item in items(server_item.frame.message):
                if isinstance(item, dict) and "method" in item and usable_id(item.get("id")):
                    self._asked[item["id"]] += 1

    # --- driving ---------------------------------------------------------------------------

    def start(self) -> list[Action]:
        """What the server sent before the client said anything."""
        return self._release()

    def receive(self, payload: bytes, incoming: Incoming | None = None, *, line: bool = False,
                path: str | None = None) -> Reception:
        """One message (or batch) from the live client, as wire bytes; `incoming` is what
        `jsonrpc.read_client` makes of them, when the adapter has already read them. `line`: it
        came as a line of newline-delimited JSON (stdio), where a blank line is no message: it is
        skipped, as SDK servers skip it, unless the recorded client sent one there too. `path`:
        the path an HTTP POST carrying it went to (a request plays only one recorded there).

        This is where live input is checked, once: whatever is not well-formed JSON-RPC (not
        JSON, too deep, an id that is an array, params that are a string, ...) gets its JSON-RPC
        error (-32700 or -32600, with the live id when it had a usable one) and counts as a miss,
        and everything after this point can trust the shape of what it is handed."""
        if incoming is None:
            incoming = read_client(payload)
        self._live_path = path
        if incoming.message is None and (recorded := self._until(lambda: self._queue(self._raw, self._index.raw, payload))):
            key = recorded.popleft()  # bytes that are not JSON-RPC, sent by the recorded client too
            self._consume(key)
            return Reception(self._release(), channel=self._item_frames[key].channel)
        if line and incoming.message is None and not payload.strip():
            return Reception([])
        misses = len(self._report.unmatched)
        replies = [self._refused(payload, refusal) for refusal in incoming.refusals]
        channel = None
        sent: list[ItemKey] = []
        for item in items(incoming.message) if incoming.message is not None else ():
            matched, reply = self._receive_item(item, len(payload))
            replies += reply
            if matched is not None:
                sent.append(matched)
                channel = channel or self._item_frames[matched].channel
        if channel is not None and channel != STDIO:
            self._skip_unsent(channel, sent)
        released = self._release()  # (which may find replies, and an input round's end)
        resent, self._resent = self._resent, []
        asked, self._input_actions = self._input_actions, []
        replies, self._later_replies = self._later_replies + replies, []
        return Reception(resent + asked + released, replies, channel, len(self._report.unmatched) - misses, len(resent),
                         incoming.batch)

    def open(self, method: str, target: str, last_event_id: str | None = None) -> Reception:
        """An HTTP request without a body (a GET stream, a DELETE) to `target` (path and query):
        it plays the first unplayed recorded exchange with that method, target and Last-Event-ID,
        if there is one."""
        opening = (method, target, last_event_id)
        recorded = self._until(lambda: self._opens.get(opening))
        if not recorded:
            return self._poll_back_again(opening)
        key = recorded.popleft()
        self._consume(key)
        if last_event_id is not None:
            self._played_opens[opening] = key
        return Reception(self._release(), channel=self._item_frames[key].channel)

    def _poll_back_again(self, opening: tuple[Any, Any, str | None]) -> Reception:
        """A resumption by Last-Event-ID the recording has fewer of (2025-11-25 SSE polling: the live
        client polls back more often): under Polls.LATEST it is answered as the last recorded one
        from that event was, on a fresh copy of its exchange."""
        again = self._played_opens.get(opening) if self._polls is Polls.LATEST else None
        if again is None:
            return Reception([])
        self.index_all()
        channel = self._item_frames[again].channel
        if channel not in self._channel_server_items:
            self._channel_server_items[channel] = [item for item in self._index.server_items if item.frame.channel == channel]
        actions = [action for item in self._channel_server_items[channel] if (action := self._restamp(item)) is not None]
        self._report.repeated += 1
        return Reception(actions, channel=channel, repeated=len(actions))

    def close_stream(self, channel: str) -> None:
        """The live client closed the response stream of a recorded exchange before its end. At
        2026-07-28 that is how Streamable HTTP cancels the requests the exchange carries: nothing
        more goes out for them. Under Race.RECORDED a close the recording does not have is a miss,
        as an unrecorded notifications/cancelled is; a long-lived request's stream (subscriptions/listen)
        is the client's to close whenever it likes."""
        self.index_all()
        for interaction in self._channel_interactions.get(channel, ()):
            if interaction.withheld:
                continue
            interaction.withheld = True
            if self._race is Race.RECORDED and channel not in self._closed_by_client and not interaction.long_lived \
                    and interaction.live_id not in self._excused:
                self._miss(f"closing the stream of {request_label(interaction.request['method'], interaction.live_id)}",
                           "the recording has no cancellation of it")

    def excuse_cancel(self, live_id: Any) -> None:
        """The live client may cancel this request though the recording does not (a fault holds or
        breaks its answer): its cancel, or its stream's close, is then no miss."""
        self._excused.add(live_id)

    def cut_before_its_head(self, channel: str) -> bool:
        """Whether the recording stops inside this HTTP exchange before its response head: no
        head will ever come, and its requests get errors saying so (`_cut_short`)."""
        return channel in self._index.headless

    def cut_inside(self, channel: str) -> bool:
        """Whether the recording stops inside this HTTP exchange's event stream, before it answered
        a request it carried: once what it has is sent, with the error saying so, the stream ends."""
        self._until(lambda: self._index.has_end(channel))  # one with its end is not cut (else the whole recording is read)
        return channel in self._index.cut_streams

    def held_open(self, channel: str) -> bool:
        """Whether the recorded client closed this exchange's stream before the server answered
        what it carried, or closed its GET stream (the standalone one, a legacy session's): the
        replay keeps it open, as that server did, until the live client closes it."""
        self._until(lambda: self._index.has_end(channel))  # known at its end
        return channel in self._closed_by_client

    def opens_to(self, method: str, target: str) -> bool:
        """Whether the recording has a bodiless `method` request to `target` at all (played or not)."""
        self.index_all()
        return any(key[:2] == (method, target) for key in self._opens)

    def unplayed_like(self, request: dict[str, Any]) -> bool:
        """Whether an unplayed recorded request matches this live one (indexed as far as it takes to
        say). A server/discover that answered an initialize has played, though a probe may still get it."""
        return self._until(lambda: any(not interaction.matched and self._matcher.accepts(interaction.request, request)
                                       for interaction in self._requests.get(self._key(request), ())))

    def note_unmatched(self, summary: str, reason: str) -> None:
        """A miss an adapter found (e.g. an HTTP request no recorded exchange answers)."""
        self._miss(summary, reason)

    def withdraw_misses(self, count: int) -> None:
        """Forget the last `count` misses: another recorded session played what missed here."""
        del self._report.unmatched[len(self._report.unmatched) - count :]

    def end(self) -> list[Action]:
        """The live client closed its side (stdin EOF, or the end of an HTTP session)."""
        self.index_all()
        if self._end:
            self._consume(self._end.popleft())
        for interaction in self._interactions:  # a request the recorded client cancelled and the live one waited for
            if interaction.matched and interaction.cancel_items and not interaction.withheld \
                    and interaction not in self._waited_in_vain \
                    and not any(key in self._consumed for key in interaction.cancel_items) \
                    and not any(item.waiting == 0 and item.answers(interaction) for item in interaction.server_items):
                self._waited_in_vain.add(interaction)
                self._miss(request_label(interaction.request['method'], interaction.live_id),
                           f"the recorded client cancelled {interaction.describe()}, so the recording has no answer to "
                           "it; this client did not cancel it, and got none")
        return self._stopped_by_its_client(self._release())

    def _stopped_by_its_client(self, actions: list[Action]) -> list[Action]:
        """What the client's end released, with a recorded exit by a signal that stops a server (the
        recorded client killed a server that outlived its stdin, as SDK clients do) made an exit 0:
        it is no status of the server's own, and the replay ends when the live client closes stdin.
        The ends of the server's streams and its exit then come at once: the recorded gap before
        them was how long that client waited before the kill."""
        exit_info = next((action.frame.info or {} for action in actions if action.frame.kind is Kind.EXIT), {})
        if exit_info.get("signal") not in STOPPING_SIGNALS:
            return actions
        self._adapted.append(f"exit: the recorded server was stopped by signal {exit_info['signal']} after its client "
                             "closed stdin; the replay exits 0 as the live client closes stdin")
        stopped = {**exit_info, "code": 0, "signal": None}
        return [dataclasses.replace(action, gap=0.0, frame=action.frame._replace(info=stopped) if action.frame.kind is Kind.EXIT
                                    else action.frame) if action.frame.kind in (Kind.EXIT, Kind.STREAM_END) else action
                for action in actions]

    @property
    def report(self) -> Report:
        self.index_all()
        self._report.unused = [i.describe() for i in self._interactions if not i.matched]
        self._report.adapted = self._adapted + [
            f"{method} ×{count}: answered with an empty result (the recording had no unplayed {method} left)"
            for method, count in self._empty_answers.items()] + [
            f"{method} ×{count}: answered again as last recorded (the recording had no unplayed {method} left, "
            "and shows no change of the list after it)" for method, count in self._listed_again_count.items()] + [
            f"{method} ×{count}: answered Method not found (the recorded server did not declare {CAPABILITY_OF[method]})"
            for method, count in self._not_found.items()]
        return self._report

    def _skip_unsent(self, channel: str, sent: list[ItemKey]) -> None:
        """An HTTP exchange is answered once, to the live POST that matched it. What its recorded
        body held that this POST did not is skipped, so the answer comes now, without the
        responses to requests the live client never made."""
        self._until(lambda: self._index.has_end(channel))  # (what its client sent on it is known by then)
        for interaction in self._channel_interactions.get(channel, ()):
            if not interaction.matched and not interaction.withheld:
                interaction.withheld = True
                self._requests[self._key(interaction.request)].remove(interaction)
                self._played_out(interaction)
        for key in self._channel_items.get(channel, ()):
            if key not in sent:
                self._consume(key)

    def _refused(self, payload: bytes, refusal: Refusal) -> Reply:
        if refusal.code == PARSE_ERROR:
            what = f"{len(payload)} bytes that are not JSON"
        elif refusal.id is None:
            what = f"a message of {len(payload)} bytes that is not JSON-RPC"
        else:
            what = f"a message with id {refusal.id!r} that is not JSON-RPC"
        self._miss(what, refusal.reason)
        return Reply(refusal.reply())

    def _receive_item(self, item: dict[str, Any], size: int) -> tuple[ItemKey | None, list[Reply]]:
        """The recorded client item this live one matched (None if none), and any reply. `size`:
        the bytes it came in (its batch's, for an item of one)."""
        kind = classify(item)
        if kind is MessageType.REQUEST:
            return self._receive_request(item, size)
        if kind in (MessageType.RESULT, MessageType.ERROR):
            if isinstance(item["id"], str) and item["id"] in self._input_asked:
                return None, self._input_answered(item)
            recorded = self._until(lambda: self._queue(self._answers, self._index.answers, item["id"]))
            miss = (f"response id {item['id']!r}", "no recorded server request has that id")
            if recorded and not self._asked[item["id"]]:
                # what the recorded server did next waits for an answer to what it has not asked yet
                self._miss(miss[0], "the server has not sent a request with that id yet")
                return None, []
            if recorded:
                self._asked[item["id"]] -= 1
                recorded_answer = items(self._item_frames[recorded[0]].message)[recorded[0][1]]
                self._learn_client_task(recorded_answer, item)
                if (otherwise := _answered_otherwise(recorded_answer, item)) is not None:
                    # played on (what the server did next came of the recorded answer), but a miss
                    self._miss(f"response id {item['id']!r}", otherwise)
        elif item["method"] == TASK_STATUS:
            if not self._until(lambda: self._task_statuses):
                return None, []  # sent on the client's clock: one more than recorded is no miss
            key = self._task_statuses.popleft()
            self._consume(key)
            return key, []
        elif item["method"] == "notifications/cancelled":
            live_id = params_of(item)["requestId"]
            interaction = self._by_live_id.get(live_id)
            if interaction is not None and (self._race is Race.CANCEL_WINS or interaction.long_lived or live_id in self._excused):
                interaction.withheld = True
                if not self._until(lambda: interaction.cancel_items):  # unrecorded, but this policy (or a stream's end) is always honoured
                    return None, []
            recorded = self._until(lambda: self._cancels_of(interaction)) if interaction is not None else None
            if not recorded and interaction is not None and interaction.answer_sent:
                # a client that gave up as the answer came: the spec lets a server ignore it, and any does
                self._adapted.append(f"notifications/cancelled for id {live_id!r}: taken silently, as any server "
                                     "takes it (its request was answered already)")
                return None, []
            miss = (f"notifications/cancelled for id {live_id!r}", "the recording has no cancellation of it")
        else:
            notification = self._matcher.key(item["method"], item.get("params"))
            recorded = self._until(lambda: self._notifications.get(notification))
            if not recorded and self._handshake_done_unrecorded(item):
                return None, []
            miss = (item["method"], "the recording has no such notification from the client at this point")
        if not recorded:
            self._miss(*miss)
            return None, []
        key = recorded.popleft()
        self._consume(key)
        return key, []

    def _learn_client_task(self, recorded: dict[str, Any], live: dict[str, Any]) -> None:
        """The client answered a server request with a task: the recorded task is the live one now."""
        recorded_task, live_task = _task_id(recorded), _task_id(live)
        if recorded_task is not None and live_task is not None and recorded_task != live_task:
            self._client_tasks[recorded_task] = live_task

    def _receive_request(self, request: dict[str, Any], size: int) -> tuple[ItemKey | None, list[Reply]]:
        if request["method"] == HANDSHAKE_METHOD and type(declared := params_of(request).get("capabilities")) is dict:
            self._client_capabilities = declared
        key = self._matcher.key(request["method"], request.get("params"))
        polled = self._polls is Polls.LATEST and is_poll(request["method"])
        if polled and self._clock is not None:
            self.index_all()  # the newest poll the recorded clock has reached may be anywhere
        interaction = self._until(lambda: self._take_poll(key, request) if polled else (
            self._take(key, request) or self._take_handshake(request)))
        if interaction is None:
            again = self._last_played(key, request) if polled or self._repeats is Repeats.ALLOW else None
            if again is not None and again.long_lived and not polled:
                again = None  # its stream's events came of what the client did after it: not to be sent at once
            if again is not None:
                self._report.repeated += 1
            else:
                again = self._listed_again(key, request)
            if again is not None:
                self._resent += self._answer_again(again, request)
                return again.client_items[0], []
            if (reply := self._by_protocol(request)) is not None:
                return None, [reply]
            reason = self._nearest(request, size)
            self._miss(request_label(request['method'], request['id']), reason)
            return None, [Reply.error(request["id"], NO_MATCH, f"mcp-tapes: {reason}")]
        interaction.matched = True
        self._retry_inputs_otherwise(interaction, request)
        self._played_out(interaction)
        self._played[key].append(interaction)
        self._go_live(interaction, request)
        self._consume(interaction.client_items[0])
        if self._polls is Polls.LATEST:
            self._skip_polls_before(interaction)
        if interaction.request["method"] == HANDSHAKE_METHOD:
            self._skip_probes_before(interaction, request["id"])
        return interaction.client_items[0], [self._cut_short(interaction)] if interaction in self._index.cut_off else []

    def _retry_inputs_otherwise(self, interaction: Interaction, request: dict[str, Any]) -> None:
        """A 2026-07-28 retry whose answers to the server's input requests are of another kind
        than the recorded ones (another elicitation action, an error): played on, but a miss, as
        for an answer to a server request (`_answered_otherwise`)."""
        recorded, live = params_of(interaction.request).get("inputResponses"), params_of(request).get("inputResponses")
        if not (isinstance(recorded, dict) and isinstance(live, dict)):
            return
        for key in recorded.keys() & live.keys():
            if otherwise := _input_answered_otherwise(recorded, key, {"jsonrpc": "2.0", "id": 0, "result": live[key]}):
                self._miss(f"{request_label(request['method'], request['id'])}: its input {key!r}", otherwise)

    def _cut_short(self, interaction: Interaction) -> Reply:
        """The error for a live request whose recorded match the recording stops short of
        answering: it was cut (its recorder killed, its file truncated), and without this answer
        the live client would wait for ever. A miss: the cassette lacks what it asked for."""
        reason = (f"the recording stops before the answer to {interaction.describe()} "
                  "(it was cut short: its recorder was stopped, or the cassette truncated)")
        self._miss(request_label(interaction.request['method'], interaction.live_id), reason)
        return Reply.error(interaction.live_id, NO_MATCH, f"mcp-tapes: {reason}")

    def _take_poll(self, key: Hashable, request: dict[str, Any]) -> Interaction | None:
        """The recorded poll this live one plays: the next one, or on the recorded clock the newest
        one it has reached; None when the last played one is to be answered again (the live
        client polls more often). The unplayed polls before the one taken are skipped."""
        unplayed = [i for i in self._requests.get(key, []) if self._matcher.accepts(i.request, request)]
        if not unplayed:
            return None
        chosen = unplayed[0]
        if self._clock is not None:
            now = self._clock()
            live_start, recorded_start = self._poll_anchors.setdefault(key, (now, self._recorded_time(chosen)))
            reached = [i for i in unplayed if self._recorded_time(i) <= recorded_start + now - live_start]
            if not reached and self._played.get(key):
                return None
            chosen = reached[-1] if reached else chosen
        for skipped in unplayed[: unplayed.index(chosen)]:
            self._skip_poll(skipped)
        self._requests[key].remove(chosen)
        return chosen

    def _skip_polls_before(self, interaction: Interaction) -> None:
        """A live message about a task (its tasks/result, another poll) moves the recording past
        the polls of that task recorded before it, which the live client never made."""
        task = subject(interaction.request["method"], interaction.request.get("params"))
        for poll in self._polls_about.get(task, ()) if task is not None else ():
            if poll.frame_seq >= interaction.frame_seq:
                break
            if not poll.matched:
                self._skip_poll(poll)

    def _skip_poll(self, poll: Interaction) -> None:
        """A recorded poll the live client did not make: skipped (a later poll may be answered with
        its state)."""
        self._skip(poll)
        self._report.skipped += 1

    def _skip_probes_before(self, handshake: Interaction, live_id: Any) -> None:
        """A live initialize moves the recording past the server/discover probes its recorded client
        sent first, which a client that opens with initialize at once never sends: what waited for
        them (the server's stderr at start) goes out."""
        for probe in list(self._unplayed_by_method.get(DISCOVER_METHOD, ())):
            if probe.frame_seq < handshake.frame_seq:
                self._skip(probe)
                self._adapted.append(f"initialize id {live_id!r}: the live client did not probe first; the recorded "
                                     f"{probe.describe()} before it was skipped")

    def _skip(self, interaction: Interaction) -> None:
        """A recorded request the live client did not make and need not: nothing of it goes out,
        what waited for it does, and it is not reported unused."""
        interaction.matched = interaction.withheld = True
        key = self._key(interaction.request)
        self._requests[key].remove(interaction)
        self._played[key].append(interaction)  # a state the recording reached: a later poll may get it again
        self._played_out(interaction)
        self._consume(interaction.client_items[0])

    def _on_live_path(self, interaction: Interaction) -> bool:
        """Whether the recorded request went where the live one goes (always, off HTTP)."""
        recorded = self._index.post_paths.get(interaction.channel)
        return recorded is None or self._live_path is None or recorded == self._live_path

    def _recorded_time(self, interaction: Interaction) -> float:
        return self._item_frames[interaction.client_items[0]].t

    def _take(self, key: Hashable, request: dict[str, Any]) -> Interaction | None:
        """The recorded request this live one plays, taken off the unplayed ones."""
        unplayed = self._requests.get(key, [])
        candidates = unplayed
        if self._repeats is Repeats.STRICT:
            expected = self._next_unplayed()
            candidates = [expected] if expected is not None and expected in unplayed else []
        for interaction in candidates:
            if self._matcher.accepts(interaction.request, request) and self._on_live_path(interaction):
                unplayed.remove(interaction)
                return interaction
        return None

    def _by_protocol(self, request: dict[str, Any]) -> Reply | None:
        """The answer the recorded server gives any client, for a request the recording has none
        left of, where the protocol leaves it one answer: an empty result to a ping, and to a
        logging/setLevel when it declared logging (clients such as the Inspector set a level on
        connecting; the log messages stay as recorded); Method not found to a request for a
        capability it did not declare (clients that list prompts and resources of every server),
        and to the server/discover probe of a 2026-07-28 client from a server of an initialize era,
        which is what tells that client to fall back to initialize; the other way round, an
        initialize to a recording of the stateless era gets its result from the recorded
        server/discover. (The whole recording is indexed by now.)"""
        method, request_id, params = request["method"], request["id"], params_of(request)
        capabilities = self._recorded_capabilities()
        needed = CAPABILITY_OF.get(method)
        level = params.get("level")
        if method == PING or (method == SET_LEVEL and isinstance(level, str) and level in LOG_LEVELS
                              and capabilities is not None and needed in capabilities):
            self._empty_answers[method] += 1  # counted, not listed: a client may ping all day
            return Reply.result(request_id, {})
        if capabilities is not None and needed is not None and needed not in capabilities:
            self._not_found[method] += 1
            return Reply.error(request_id, METHOD_NOT_FOUND, "Method not found")
        if method == HANDSHAKE_METHOD:
            return self._initialize_answered_from_discover(request)
        if method == DISCOVER_METHOD and any(i.request["method"] == HANDSHAKE_METHOD for i in self._recorded_handshakes()):
            self._adapted.append(f"server/discover id {request_id!r}: answered Method not found, as the recorded "
                                 "server (of an initialize era) would")
            return Reply.error(request_id, METHOD_NOT_FOUND, "Method not found")
        return None

    def _recorded_handshakes(self) -> list[Interaction]:
        """The recorded initialize and server/discover requests (asked once the whole recording is
        indexed, by what answers a live message the recording has nothing left for)."""
        if self._handshakes is None:
            self._handshakes = [i for i in self._interactions if i.request["method"] in (HANDSHAKE_METHOD, DISCOVER_METHOD)]
        return self._handshakes

    def _recorded_handshake_result(self) -> tuple[Interaction, dict[str, Any]] | None:
        """The first recorded initialize with a result, and that result; else the first
        server/discover's (a server of an initialize era may answer the probe with anything, `{}`
        included: its initialize result is what it declared)."""
        answered = []
        for interaction in self._recorded_handshakes():
            for server_item in interaction.server_items:
                for item in items(server_item.frame.message) if server_item.frame.message is not None else ():
                    result = item.get("result")
                    if item.get("id") == interaction.recorded_id and type(result) is dict:
                        answered.append((interaction, result))
        return next((found for found in answered if found[0].request["method"] == HANDSHAKE_METHOD),
                    next(iter(answered), None))

    def _recorded_capabilities(self) -> dict[str, Any] | None:
        """The capabilities the recorded server declared (in its initialize or server/discover
        result), or None when the recording holds no such result, or one that declares none."""
        if (answered := self._recorded_handshake_result()) is None:
            return None
        capabilities = answered[1].get("capabilities")
        return capabilities if type(capabilities) is dict else None

    def _initialize_answered_from_discover(self, request: dict[str, Any]) -> Reply | None:
        """An initialize to a recording of the stateless era (server/discover, no initialize): the
        result a server of both eras gives, made of what the recorded discover said (capabilities,
        but none whose notifications came on a subscriptions/listen stream; server info,
        instructions), at the client's version when it is one that opens with
        initialize, else at the latest that does. Clients that speak only initialize (most of
        those of 2025) then go on with the recorded requests, whose _meta matching leaves out,
        and get the recorded results in their era's form (`_in_handshake_era`), while a client
        that names the stateless era in its requests' _meta still gets them whole."""
        answered = self._recorded_handshake_result()
        asked = params_of(request).get("protocolVersion")
        if (not self._matcher.negotiates_handshake or answered is None or not isinstance(asked, str)  # a server refuses that one
                or answered[0].request["method"] != DISCOVER_METHOD or any(
                    i.request["method"] == HANDSHAKE_METHOD for i in self._recorded_handshakes())):
            return None
        discover, recorded = answered
        version = asked if asked in VERSIONS and asked not in STATELESS_ERAS else LATEST_HANDSHAKE_VERSION
        meta = recorded.get("_meta")
        server_info = recorded.get("serverInfo", meta.get(SERVER_INFO_KEY) if type(meta) is dict else None)
        capabilities = recorded.get("capabilities")
        result: dict[str, Any] = {
            "protocolVersion": version, "capabilities": _unlistened(capabilities) if type(capabilities) is dict else {},
            "serverInfo": server_info if type(server_info) is dict else {"name": "mcp-tapes replay", "version": "0"},
        }
        if type(recorded.get("instructions")) is str:
            result["instructions"] = recorded["instructions"]
        self._initialize_from_discover = True
        self._handshake_dones_owed += 1
        if not discover.matched:  # it served, if not as sent: no unused probe, and new episodes keep it
            discover.matched = True
            self._played_out(discover)
            if self.played_frames is not None:
                self.played_frames.update([discover.frame_seq, *(item.frame.seq for item in discover.server_items)])
        self._adapted.append(f"initialize id {request['id']!r}: answered at {version} from the recorded "
                             f"{discover.describe()}, as a server of both eras would (the recording has no initialize)")
        return Reply.result(request["id"], result)

    def _handshake_done_unrecorded(self, notification: dict[str, Any]) -> bool:
        """A notifications/initialized that the recorded client did not send (a hand-written one
        may not) is taken as any server takes it, silently, once the handshake was played, or
        after each initialize answered from a recorded server/discover: noted in the report, not
        a miss. Matchers that opt out of handshake negotiation opt out of this."""
        if notification["method"] != HANDSHAKE_DONE or not self._matcher.negotiates_handshake:
            return False
        if self._handshake_dones_owed:
            self._handshake_dones_owed -= 1
        elif self._handshake_done_taken or not any(
                interaction.matched and interaction.request["method"] == HANDSHAKE_METHOD for interaction in self._recorded_handshakes()):
            return False
        else:
            self._handshake_done_taken = True
        self._adapted.append(f"{HANDSHAKE_DONE}: taken silently, as any server takes it (the recorded client did not send it)")
        return True

    def _take_handshake(self, request: dict[str, Any]) -> Interaction | None:
        """A live initialize that equals no unplayed recorded one plays the first unplayed one, as a
        real server answers any client's handshake: with the version and capabilities it chose
        then (the live client decides whether it goes on at that version). Noted in the report."""
        if (request["method"] != HANDSHAKE_METHOD or not self._matcher.negotiates_handshake
                or not isinstance(params_of(request).get("protocolVersion"), str)):  # a server refuses that one
            return None
        recorded = next(iter(self._unplayed_by_method.get(HANDSHAKE_METHOD, ())), None)
        if recorded is None or (self._repeats is Repeats.STRICT and recorded is not self._next_unplayed()):
            return None
        self._requests[self._key(recorded.request)].remove(recorded)
        shown = _first_differences(self._matcher.differences(recorded.request, request))
        if not self._on_live_path(recorded):  # the same request, POSTed elsewhere
            path = self._index.post_paths.get(recorded.channel)
            shown = "; ".join(filter(None, [f"its path: {path!r} → {self._live_path!r}", shown]))
        if recorded not in self._index.cut_off:  # else it gets an error, not that answer (`_cut_short`)
            self._adapted.append(f"initialize id {request['id']!r}: answered as the recorded {recorded.describe()}, "
                                 f"which differed at {shown or 'nothing the matcher compares'}")
        recorded.live_version = params_of(request)["protocolVersion"]
        return recorded

    def _next_unplayed(self) -> Interaction | None:
        while True:
            while self._next_in_order < len(self._interactions) and self._interactions[self._next_in_order].matched:
                self._next_in_order += 1
            if self._next_in_order < len(self._interactions) or not self._extend(INDEX_STEP):
                break
        return self._interactions[self._next_in_order] if self._next_in_order < len(self._interactions) else None

    def _last_played(self, key: Hashable, request: dict[str, Any]) -> Interaction | None:
        for interaction in reversed(self._played.get(key, [])):
            if self._matcher.accepts(interaction.request, request) and self._on_live_path(interaction):
                return interaction
        return None

    def _go_live(self, interaction: Interaction, request: dict[str, Any], pending: bool = True) -> None:
        """`request` is played as `interaction`; `pending`: its answer is still to come, so a cancel may name it."""
        interaction.live_id = request["id"]
        interaction.live_token = params_of(request).get("_meta", {}).get("progressToken")
        interaction.live_stateless = STATELESS_VERSION_KEY in meta_of(request)
        if pending:
            self._by_live_id[request["id"]] = interaction

    def _listed_again(self, key: Hashable, request: dict[str, Any]) -> Interaction | None:
        """A list request (tools/list, ...) the recording has no unplayed one of, from a client that
        lists more often than the recorded one: the last played one, whose answer the server gives
        again, unless the recording shows the list changed after that answer (its list_changed
        notification). Not under --repeats strict-order, nor allow (which repeats anything)."""
        method = request["method"]
        if method not in LIST_CHANGED or self._repeats is not Repeats.IN_ORDER:
            return None
        previous = self._last_played(key, request)
        if previous is None:
            return None
        # a change notified before the answer is in it (server-everything notifies as it starts)
        answer = next((item for item in previous.server_items if item.answers(previous)), None)
        if self._last_list_change(LIST_CHANGED[method]) > (answer.frame.seq if answer else previous.frame_seq):
            return None
        self._listed_again_count[method] += 1
        return previous

    def _last_list_change(self, notification: str) -> int:
        """The seq of the last recorded server notification of this name (-1: none); asked once the
        whole recording is indexed."""
        if self._list_changes is None:
            self._list_changes = {}
            for item in self._index.server_items:
                for message in items(item.frame.message) if item.frame.message is not None else ():
                    if isinstance(message, dict) and message.get("method") in LIST_CHANGED.values():
                        self._list_changes[message["method"]] = item.frame.seq
        return self._list_changes.get(notification, -1)

    def _answer_again(self, interaction: Interaction, request: dict[str, Any]) -> list[Action]:
        """Answer a repeated request as its last played match was answered, under the new ids;
        without the requests the server sent for it (the client answered them once: asked again
        under the same ids, their answers would be answers to nothing)."""
        # Answered in full here, so its live id is not kept for a cancel (a client may repeat all
        # session long), unless a fault takes the answer and the client may give up on it.
        repeated = (interaction.live_id, interaction.live_token, interaction.live_stateless)
        answered = any(item.answers(interaction) for item in interaction.server_items)
        self._go_live(interaction, request, pending=not answered or request["id"] in self._excused)
        interaction.withheld = False  # a skipped poll's state, now asked for
        sent = [(item, action) for item in interaction.server_items
                if not _only_requests(item.frame.message) and (action := self._restamp(item)) is not None]
        if any(owner is interaction for item, _ in sent for owner in _answered_whole(item)):
            # what is still to come of the request it repeats (held for a cancel, say) goes out under that one's ids
            interaction.live_id, interaction.live_token, interaction.live_stateless = repeated
        return [action for _, action in sent]

    def _nearest(self, request: dict[str, Any], size: int) -> str:
        """One sentence naming the closest recorded request and what differed. Bounded whatever the
        recording: only the first NEAREST_CANDIDATES unplayed requests of the same method (the
        played ones when none is left; of any method when the recording has none) are compared,
        and large ones only member by member of their params."""
        method = request["method"]
        if self._repeats is Repeats.STRICT and (expected := self._next_unplayed()) is not None:
            found = self._differences(expected, request, size)
            shown = _first_differences(found)
            return f"requests must come in recorded order: the next recorded is {expected.describe()}, differing at {shown}"
        if (played := self._last_played(self._key(request), request)) is not None:  # not under --repeats allow
            if played.long_lived:
                return (f"no recorded request matches {method}: it repeats {played.describe()}, which was already "
                        "played, and whose stream is not served again (its events came of what the client did after "
                        "it, even under --repeats allow)")
            return (f"no recorded request matches {method}: it repeats {played.describe()}, which was already played "
                    "and the recording has no other like it (--repeats allow answers a repeat again)")
        # the first unplayed requests of the same method; else the played ones of that method (what
        # differed still says most); of any method when the recording has none of it
        candidates = list(islice(self._unplayed_by_method.get(method) or (), NEAREST_CANDIDATES))
        played_only = not candidates
        if played_only:
            candidates = list(islice((i for i in self._interactions if i.matched and i.request["method"] == method),
                                     NEAREST_CANDIDATES))
        if not candidates:
            candidates = list(islice(self._unplayed_by_method[None], NEAREST_CANDIDATES))
            played_only = False
        if not candidates:
            return f"no recorded request matches {method}: the recording has none, and every request it has was already played"
        scored = [(interaction.request["method"] != method, len(found) + (not self._on_live_path(interaction)),
                   interaction.frame_seq, interaction, found)
                  for interaction in candidates for found in [self._differences(interaction, request, size)]]
        *_, nearest, found = min(scored, key=lambda entry: entry[:3])
        shown = _first_differences(found)
        if not self._on_live_path(nearest):
            moved = f"its path: {self._index.post_paths[nearest.channel]!r} → {self._live_path!r}"
            shown = f"{moved}; {shown}" if shown else moved
        played = ", already played," if played_only else ","
        return f"no recorded request matches {method}; nearest recorded is {nearest.describe()}{played} differing at {shown}"

    def _played_out(self, interaction: Interaction) -> None:
        """It can no longer be matched: no miss is compared with it any more."""
        self._unplayed_by_method[interaction.request["method"]].pop(interaction, None)
        self._unplayed_by_method[None].pop(interaction, None)

    def _differences(self, interaction: Interaction, request: dict[str, Any], size: int) -> list[Difference]:
        if interaction not in self._sizes:
            self._sizes[interaction] = len(wire_form(interaction.request))  # a recorded request may have no JSON form
        deep = max(size, self._sizes[interaction]) <= DEEP_DIFF_SIZE
        return self._matcher.differences(interaction.request, request, deep=deep)

    def _miss(self, summary: str, reason: str) -> None:
        self._report.unmatched.append(Unmatched(summary, reason))

    def _undeclared(self, item: dict[str, Any]) -> str | None:
        """Why a recorded server request is not for the live client: it needs a capability the live
        client did not declare in its initialize (the recorded one did: its server asked), or it is
        about a task of a request the live client was not sent. None when it is."""
        if classify(item) is not MessageType.REQUEST or self._client_capabilities is None:
            return None
        params = params_of(item)
        if item["method"].startswith("tasks/") and isinstance(task := params.get("taskId"), str) and task in self._unasked_tasks:
            return "it is about a task of a request the live client was not sent"
        missing = _missing_capability(item["method"], params, self._client_capabilities)
        return None if missing is None else f"the live client did not declare {missing}"

    def _not_asked(self, request: dict[str, Any], why: str, frame: Frame) -> None:
        """A server request that is not for the live client (`_undeclared`) is not sent, as a server
        does not ask such a client; the recorded client's answer stands in for the live one's, so
        what the server did next plays on (and a task it created is asked about no more)."""
        answer = self._until(lambda: self._queue(self._answers, self._index.answers, request["id"]))
        if answer:
            key = answer.popleft()
            self._consume(key)
            if (task := _task_id(items(self._item_frames[key].message)[key[1]])) is not None:
                self._unasked_tasks.add(task)
        self._adapted.append(f"{request['method']} #{request['id']!r} (frame {frame.seq}): not sent, as {why}; "
                             "the recorded client's answer stood in for its own")

    # --- input asked of a client of the initialize eras ------------------------------------

    def _asked_of_client(self, item: dict[str, Any], owner: Interaction, frame: Frame) -> dict[str, Any] | None:
        """A recorded input_required result (2026-07-28) to a client that opened with initialize,
        which has no such result: a server of both eras asks it for the input with requests of
        its own, then goes on as if the client had retried with the answers. Here: the first
        input request, under an id of the replay's; the next go out as each is answered, and
        then the recorded retry is played (`_input_answered`)."""
        result = item["result"]
        if frame.channel != STDIO:
            self._asking.add(frame.channel)
            self._held_ends.add(self._input_streams.get(frame.channel, frame.channel))
        asked = list(result["inputRequests"].items())  # (the keys name the recorded client's answers in its retry)
        methods = ", ".join(sorted({request.get("method", "?") for _, request in asked}))
        self._adapted.append(f"{request_label(owner.request['method'], owner.live_id)}: the recorded input_required result sent as "
                             f"{methods} requests, as a server of both eras asks a client that opened with initialize")
        input_round = _InputRound(owner, frame, asked, result.get("requestState"))
        asking = self._ask(input_round)
        if asking is None:  # nothing the live client can be asked: the retry goes on at once
            self._later_replies += self._retry(input_round)
        return asking

    def _asks_for_input(self, channel: str) -> bool:
        """Whether a recorded HTTP exchange answers with an input_required result that is asked of
        the live client: its JSON answer then goes as an event stream, which can carry requests."""
        for interaction in self._channel_interactions.get(channel, ()):
            if interaction.live_stateless or not interaction.matched:
                continue
            response = self._until(lambda asked=interaction: next((si for si in asked.server_items if si.answers(asked)), None))
            if response is not None and any(owner is interaction and _input_required(item)
                                            for item, owner in zip(items(response.frame.message), response.owners, strict=True)):
                return True
        return False

    def _on_live_stream(self, action: Action) -> Action | None:
        """`action` where the live client reads it, while an input round is asked over HTTP: the
        asking exchange carries the input requests, as events, and its recorded end is held back;
        the recorded retry's exchange is answered on it (its head is not sent again)."""
        frame = action.frame
        if frame.channel == STDIO or not (self._input_streams or self._held_ends or self._asking):
            return action
        live = self._input_streams.get(frame.channel, frame.channel)
        if frame.kind is Kind.STREAM_END:
            if frame.channel in self._asking or live in self._held_ends:  # the stream ends with the retry's answer
                return None
            return Action(frame._replace(channel=live), action.payload, action.gap)
        if live == frame.channel and live not in self._held_ends:
            return action
        if frame.kind is Kind.HTTP_RESPONSE:
            return None
        if frame.kind is Kind.MESSAGE:  # a JSON answer's body, as an event of the stream
            return dataclasses.replace(as_stream_message(live, action.payload), gap=action.gap)
        return Action(frame._replace(channel=live), action.payload, action.gap)

    def _ask(self, input_round: _InputRound) -> dict[str, Any] | None:
        """The round's next input request, as a request of the server's under an id of the
        replay's. One the live client has not the capability for is not asked (the recorded
        client's answer, in the retry, stands in). None when none is left to ask."""
        while input_round.asked:
            key, request = input_round.asked.pop(0)
            asking = {"jsonrpc": "2.0", "id": f"mcp-tapes-input-{self._input_requests_sent + 1}", "method": request.get("method")}
            if "params" in request:
                asking["params"] = request["params"]
            if (why := self._undeclared(asking)) is not None:
                owner = input_round.owner
                self._adapted.append(f"{asking['method']} for {request_label(owner.request['method'], owner.live_id)}: not asked, as "
                                     f"{why}; the recorded client's answer stood in for its own")
                continue
            self._input_requests_sent += 1
            self._input_asked[asking["id"]] = input_round
            input_round.answers.append((key, None))
            return asking
        return None

    def _input_answered(self, answer: dict[str, Any]) -> list[Reply]:
        """The live client answered an input request: the next one is asked, or, all answered,
        the recorded retry that carried the recorded client's answers is played for the request
        that got input_required, under its live id."""
        input_round = self._input_asked.pop(answer["id"])
        input_round.answers[-1] = (input_round.answers[-1][0], answer)
        asking = self._ask(input_round)
        if asking is None:
            return self._retry(input_round)
        if (action := self._on_live_stream(Action(input_round.frame, checked_payload(input_round.frame, asking)))) is not None:
            self._input_actions.append(action)
        return []

    def _retry(self, input_round: _InputRound) -> list[Reply]:
        """The recorded retry that carried the recorded client's answers, played for the request
        that got input_required, under its live id (one played already, again under --repeats
        allow); the error saying the recording has none."""
        owner = input_round.owner
        same_state = (lambda i: i.request["method"] == owner.request["method"]
                      and params_of(i.request).get("requestState") == input_round.state)
        retry = self._until(lambda: next((i for i in self._unplayed_by_method[owner.request["method"]] if same_state(i)), None))
        if retry is None and self._repeats is Repeats.ALLOW:
            retry = next((i for i in self._interactions if i.matched and same_state(i)), None)
        if retry is None or input_round.state is None:
            reason = (f"the recording has no retry of {owner.describe()} with the input its server asked for "
                      "(the recorded client stopped there)")
            self._miss(request_label(owner.request['method'], owner.live_id), reason)
            return self._on_asking_stream(input_round, [Reply.error(owner.live_id, NO_MATCH, f"mcp-tapes: {reason}")])
        recorded = params_of(retry.request).get("inputResponses")
        for key, live in input_round.answers:  # played on (what the server did next came of the recorded ones), but a miss
            if isinstance(recorded, dict) and live is not None and (otherwise := _input_answered_otherwise(recorded, key, live)):
                self._miss(f"response id {live['id']!r}", otherwise)
        # as the live client's: under its id, and of its era (the recorded retry named 2026-07-28 in its _meta)
        params = params_of(retry.request)
        meta = {key: value for key, value in meta_of(retry.request).items() if key != STATELESS_VERSION_KEY}
        request = {**retry.request, "id": owner.live_id, "params": {**params, "_meta": meta} if meta else
                   {key: value for key, value in params.items() if key != "_meta"}}
        matched, replies = self._receive_request(request, 0)
        if matched is not None:
            retry.live_token = owner.live_token
            if retry.channel != STDIO:  # its answer goes where the live client waits for it
                live = self._input_streams.get(input_round.frame.channel, input_round.frame.channel)
                self._input_streams[retry.channel] = live
                self._held_ends.discard(live)
        return self._on_asking_stream(input_round, replies)

    def _on_asking_stream(self, input_round: _InputRound, replies: list[Reply]) -> list[Reply]:
        """Replies to the request an input round was asked for: over HTTP, they are the end of the
        stream the live client reads its answer on (the live POST that carried the input is
        accepted); on stdio, they go out as they are."""
        channel = input_round.frame.channel
        if channel == STDIO or not replies:
            return replies
        live = self._input_streams.get(channel, channel)
        self._held_ends.discard(live)
        self._input_actions += [as_stream_message(live, reply.payload) for reply in replies] + [stream_end(live)]
        return []

    # --- releasing -------------------------------------------------------------------------

    def _consume(self, key: ItemKey) -> None:
        self._consumed.add(key)
        if self.played_frames is not None:
            self.played_frames.add(key[0])
        frame = self._item_frames.get(key)
        if frame is not None:
            self._trigger_time = frame.t
        for server_item in self._dependents.pop(key, ()):
            server_item.waiting -= 1
            if server_item.waiting == 0:
                self._make_ready(server_item)

    def _release(self) -> list[Action]:
        actions = []
        previous = self._trigger_time
        while self._ready:  # (a request not asked of the live client releases what followed its recorded answer)
            ready, self._ready = self._ready, []
            ready.sort(key=lambda server_item: server_item.frame.seq)
            for server_item in ready:
                action = self._restamp(server_item, gap=max(0.0, server_item.frame.t - previous))
                if action is not None:
                    previous = max(previous, server_item.frame.t)
                    actions.append(action)
                    for owner in _answered_whole(server_item):
                        owner.answer_sent = True
                    self._report.played += 1
                    if self.played_frames is not None:
                        self.played_frames.add(server_item.frame.seq)
        return actions

    def _restamp(self, server_item: ServerItem, gap: float = 0.0) -> Action | None:
        """The frame with the live ids in place of the recorded ones; None if nothing is left to send."""
        frame = server_item.frame
        if frame.message is None:
            if frame.kind is Kind.HTTP_RESPONSE and self._initialize_from_discover and self._asks_for_input(frame.channel):
                frame = frame._replace(info=_as_event_stream(frame.info or {}))
            return self._on_live_stream(Action(frame, server_item.payload, gap))
        changed = False
        out = []
        for item, owner in zip(items(frame.message), server_item.owners, strict=True):
            new = _restamp_item(item, owner)
            if new is not None and self._client_tasks:
                new = _with_client_task(new, self._client_tasks)
            if new is not None and owner is not None and owner.live_version is not None:
                new = self._at_asked_version(new, owner)
            if new is not None and self._initialize_from_discover and owner is not None and not owner.live_stateless:
                # an answer to a client that opened with initialize
                new = self._asked_of_client(new, owner, frame) if _input_required(new) else _in_handshake_era(new)
            if new is not None and (why := self._undeclared(new)) is not None:
                self._not_asked(new, why, frame)
                new = None
            changed = changed or new is not item
            if new is not None:
                out.append(new)
        if not out:
            return None
        if not changed:
            return self._on_live_stream(Action(frame, server_item.payload, gap))
        message = out if isinstance(frame.message, list) else out[0]
        return self._on_live_stream(Action(frame, checked_payload(frame, message), gap))

    def _at_asked_version(self, item: dict[str, Any], handshake: Interaction) -> dict[str, Any]:
        """The recorded initialize result for a live client that asked for an earlier version than
        the recorded server chose: at the client's version, as a server that speaks the earlier
        versions too (those of the SDKs do) answers it; a client that asked for a later one, or one
        this replay does not know, gets the recorded one (and decides whether it goes on)."""
        result, asked = item.get("result"), handshake.live_version
        chosen = result.get("protocolVersion") if type(result) is dict else None
        if (asked not in VERSIONS or asked in STATELESS_ERAS or chosen not in VERSIONS
                or VERSIONS.index(asked) >= VERSIONS.index(chosen)):
            return item
        noted = (f"initialize id {handshake.live_id!r}: answered at {asked}, the version the live client asked for, "
                 f"where the recorded server chose {chosen}, as a server that speaks both would")
        if noted not in self._adapted:  # a resumed stream sends it again
            self._adapted.append(noted)
        return {**item, "result": {**result, "protocolVersion": asked}}


def _answered_otherwise(recorded: dict[str, Any], live: dict[str, Any]) -> str | None:
    """How the live client's answer to a server request differs from the recorded client's in what
    the server goes on from: an error for a result (a declined sampling, a failed roots list), or
    another elicitation action (decline for accept). Content (a model's text) may differ freely."""
    recorded_kind, live_kind = classify(recorded), classify(live)
    if recorded_kind is not live_kind:
        said = {kind: "a result" if kind is MessageType.RESULT else "an error" for kind in (recorded_kind, live_kind)}
        error = live.get("error") if live_kind is MessageType.ERROR else None
        detail = f" ({error.get('code')}: {error.get('message')})" if isinstance(error, dict) else ""
        return (f"the recorded client answered with {said[recorded_kind]}, this one with {said[live_kind]}{detail}: "
                "what the recorded server did next came of the recorded answer")
    before, after = recorded.get("result"), live.get("result")
    if isinstance(before, dict) and isinstance(after, dict) and "action" in before and before["action"] != after.get("action"):
        return (f"the recorded client's answer has action {before['action']!r}, this one's {after.get('action')!r}: "
                "what the recorded server did next came of the recorded answer")
    return None


def _input_answered_otherwise(recorded: dict[str, Any], key: str, live: dict[str, Any]) -> str | None:
    """How a live answer to an input request differs in kind from the recorded client's, which its
    retry's `inputResponses` carried under `key` (see `_answered_otherwise`)."""
    return _answered_otherwise({"jsonrpc": "2.0", "id": live["id"], "result": recorded.get(key)}, live)


def _task_id(answer: dict[str, Any]) -> Any:
    """The id of the task an answer created (a CreateTaskResult), if it created one."""
    result = answer.get("result")
    task = result.get("task") if isinstance(result, dict) else None
    task_id = task.get("taskId") if isinstance(task, dict) else None
    return task_id if isinstance(task_id, str) else None


def _unlistened(capabilities: dict[str, Any]) -> dict[str, Any]:
    """Recorded 2026-07-28 capabilities for a client that opened with initialize: list changes and
    resource updates came on subscriptions/listen streams, which such a client never opens, so
    the replay has none to give it."""
    return {name: {k: False if k in LISTENED_FLAGS and v is True else v for k, v in value.items()} if type(value) is dict else value
            for name, value in capabilities.items()}


@dataclasses.dataclass
class _InputRound:
    """An input_required result being asked of the live client, one input request at a time."""

    owner: Interaction  # the request that got it
    frame: Frame  # the recorded result's: where the requests go out (its HTTP exchange's stream)
    asked: list[tuple[str, dict[str, Any]]]  # its input requests not asked yet, by the key its retry answers them under
    state: Any  # its requestState, which the recorded retry carried
    answers: list[tuple[str, dict[str, Any] | None]] = dataclasses.field(default_factory=list)  # the live client's, by key


def _as_event_stream(info: dict[str, Any]) -> dict[str, Any]:
    """A JSON answer's recorded head as the head of an event stream (its length no longer known)."""
    fields = [[name, value] for name, value in info.get("headers") or () if name.lower() not in ("content-type", "content-length")]
    return {**info, "headers": [*fields, ["content-type", "text/event-stream"]]}


def _missing_capability(method: str, params: dict[str, Any], declared: dict[str, Any]) -> str | None:
    """The client capability (as a dotted path) a server request needs that `declared` lacks: its
    method's; for elicitation, the mode it asks in (url; form, which `{}` declares); for a
    task-augmented request, tasks.requests.<its method>."""
    needed = CLIENT_CAPABILITY_OF.get(method)
    if needed is None:
        return None
    paths = [[needed]]
    if method == "elicitation/create":
        modes = declared.get(needed)
        if params.get("mode") == "url":
            paths.append([needed, "url"])
        elif isinstance(modes, dict) and modes and "form" not in modes:
            paths.append([needed, "form"])
    if "task" in params:
        paths.append(["tasks", "requests", *method.split("/")])
    for path in paths:
        found: Any = declared
        for name in path:
            found = found.get(name) if isinstance(found, dict) else None
        if found is None:
            return ".".join(path)
    return None


def _only_requests(message: Any) -> bool:
    """Whether a recorded server message is requests of the server's and nothing else."""
    return message is not None and all(classify(item) is MessageType.REQUEST for item in items(message))


def _answered_whole(item: ServerItem) -> Iterator[Interaction]:
    """The requests the frame carries the final answer of (not an input_required result, which an
    input round follows), in one pass: a recorded batch may answer thousands."""
    if item.frame.message is None:
        return
    for answer, owner in zip(items(item.frame.message), item.owners, strict=True):
        if owner is not None and classify(answer) in (MessageType.RESULT, MessageType.ERROR) and not _input_required(answer):
            yield owner


def _input_required(item: dict[str, Any]) -> bool:
    """Whether a server item is a 2026-07-28 input_required result, with input requests to ask."""
    result = item.get("result")
    return (type(result) is dict and result.get("resultType") == "input_required"
            and type(requests := result.get("inputRequests")) is dict and bool(requests)
            and all(type(request) is dict for request in requests.values()))


def _in_handshake_era(item: dict[str, Any]) -> dict[str, Any]:
    """A 2026-07-28 result as a server of both eras sends it to a client that opened with
    initialize: without the members no earlier era has (resultType "complete", caching hints),
    nor the server info stamped in its `_meta` (such a client had it in the initialize result).
    (An input_required result is asked as requests: `_asked_of_client`.)"""
    result = item.get("result")
    if type(result) is not dict or result.get("resultType", "complete") != "complete":
        return item
    meta = result.get("_meta")
    stamped = type(meta) is dict and SERVER_INFO_KEY in meta
    if not stamped and not any(member in result for member in STATELESS_RESULT_MEMBERS):
        return item
    result = {k: v for k, v in result.items() if k not in STATELESS_RESULT_MEMBERS}
    if stamped:
        del result["_meta"]
        if rest := {k: v for k, v in meta.items() if k != SERVER_INFO_KEY}:
            result["_meta"] = rest
    return {**item, "result": result}


def _with_client_task(item: dict[str, Any], live_tasks: dict[Any, Any]) -> dict[str, Any]:
    """A server request about a task the client runs, naming the live task."""
    params = item.get("params")
    if "id" not in item or not isinstance(params, dict) or not isinstance(params.get("taskId"), str) \
            or params["taskId"] not in live_tasks:
        return item
    return {**item, "params": {**params, "taskId": live_tasks[params["taskId"]]}}


def _resubscribed(item: dict[str, Any], live_id: Any) -> dict[str, Any]:
    """A subscriptions/listen stream's message with the live listen id as its subscription id."""
    member = "result" if "result" in item else "params"
    body = item.get(member)
    if not isinstance(body, dict) or not isinstance(body.get("_meta"), dict) or SUBSCRIPTION_ID_KEY not in body["_meta"]:
        return item
    return {**item, member: {**body, "_meta": {**body["_meta"], SUBSCRIPTION_ID_KEY: live_id}}}


def _restamp_item(item: dict[str, Any], owner: Interaction | None) -> dict[str, Any] | None:
    if owner is None:
        return item
    if owner.withheld:
        return None
    kind = classify(item)
    if owner.long_lived and owner.live_id != owner.recorded_id:
        item = _resubscribed(item, owner.live_id)
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


def _first_differences(found: list[Difference], shown: int = 3) -> str:
    return "; ".join(d.describe() for d in found[:shown]) + ("; …" if len(found) > shown else "")
