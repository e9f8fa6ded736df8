"""The causality index of a recording: one walk, front to back, that ties every frame to the
interaction it belongs to and works out what each recorded server frame waits for.

An *interaction* is a client request and all that is causally tied to it: the server's progress
notifications for its progressToken, server→client requests sent on its behalf (on HTTP: on its
exchange; on stdio: while it is the newest pending request), the client's answers to those, a
cancellation of it, and its response.

What a server frame waits for (`ServerItem.deps`):
- the client items of the interactions its messages belong to, recorded before it;
- on HTTP, the client items of its own exchange and of the requests that exchange carries, and
  nothing of any other exchange: a response head, a 202 or a POST's own SSE events never wait for
  another exchange (clients differ in when they open their GET stream, or whether they send the
  next POST before this one is answered);
- on HTTP, what a GET stream (the standalone one, or the legacy SSE stream) carries that is tied
  to no request, its end included: that stream's opening and the last JSON-RPC message the
  client had sent before it (for its end, or a later DELETE), so it goes out once the live client
  has the stream open and has said what may have caused it (the stream's head waits for its
  opening only);
- on stdio, a frame tied to no request: the last client item recorded before it.
A cancel of the request a frame answers is kept apart (`cancel_deps`): whether the response waits
for it is the race policy's call. A JSON answer (HTTP) the recording never saw end (a recorder
stopped first) ends right after its last frame, once the whole recording is indexed.

The engine adds its matching tables and live state on top. `tapes view` ties frames to requests
by these same ownership rules in a streaming pass of its own (`tapes.render.view._Links`), which
keeps only what is still open instead of every frame (a page for a million frames within 4× the
file's memory): a change to the rules here belongs there too.
"""

from __future__ import annotations

import sys
from collections import defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from itertools import islice
from typing import Any, Protocol, runtime_checkable

from tapes.cassette.frames import STDIO, Direction, Frame, Kind
from tapes.cassette.store import FrameError, gc_paused
from tapes.wire.eras import LONG_LIVED_METHODS, SUBSCRIPTION_ID_KEY
from tapes.wire.http import header
from tapes.wire.jsonrpc import MessageType, classify, encode, id_member, items, meta_of, params_of, refusal, unreadable_live, usable_id
from tapes.wire.sse import is_event_stream

ItemKey = tuple[int, int]  # (frame seq, index within a batch)


@dataclass(eq=False)  # identity: two recorded requests may be equal in every field
class Interaction:
    request: dict[str, Any]  # the recorded request
    frame_seq: int
    channel: str
    client_items: list[ItemKey] = field(default_factory=list)  # the request, then the client's answers to it
    cancel_items: list[ItemKey] = field(default_factory=list)  # recorded notifications/cancelled of it
    server_items: list[ServerItem] = field(default_factory=list)  # what the server sent for it
    # live state, set by the engine that plays it
    live_id: Any = None
    live_token: Any = None
    live_stateless: bool = False  # the live request named its version in _meta (2026-07-28), not in a handshake
    live_version: str | None = None  # the version a live initialize unlike the recorded one asked for
    answer_sent: bool = False  # its whole answer went out to the live client
    matched: bool = False
    # Nothing more goes out for it: the live client cancelled it (under Race.CANCEL_WINS, or by
    # closing its 2026-07-28 response stream), or its exchange was answered without it.
    withheld: bool = False

    @property
    def recorded_id(self) -> Any:
        return self.request["id"]

    @property
    def long_lived(self) -> bool:
        return self.request["method"] in LONG_LIVED_METHODS

    @property
    def recorded_token(self) -> Any:
        return id_member(meta_of(self.request), "progressToken")

    def describe(self) -> str:
        return f"{self.request['method']} #{self.recorded_id} (frame {self.frame_seq})"


@dataclass(eq=False)
class ServerItem:
    """A recorded server frame and what it waits for."""

    frame: Frame
    owners: list[Interaction | None]  # per batch item: the interaction it belongs to
    deps: set[ItemKey]
    cancel_deps: set[ItemKey]  # cancels of the requests it answers, recorded before it
    waiting: int = 0  # live state: how many of its dependencies the engine has yet to see
    _payload: bytes | None = field(default=None, repr=False)

    @property
    def payload(self) -> bytes:
        """The frame's wire bytes, encoded once, when first asked (most frames go out as recorded,
        many never do); raises FrameError for a message that is not JSON."""
        if self._payload is None:
            self._payload = checked_payload(self.frame)
        return self._payload

    def answers(self, interaction: Interaction) -> bool:
        """Whether the frame carries the response to `interaction`'s request."""
        if self.frame.message is None:
            return False
        return any(
            owner is interaction and classify(item) in (MessageType.RESULT, MessageType.ERROR)
            for item, owner in zip(items(self.frame.message), self.owners, strict=True)
        )


@dataclass
class RecordingIndex:
    """Every recorded frame placed: client items by what they are, server frames with their
    dependencies. Built at once by `RecordingIndex.of(frames)`, or as far as needed by `reading`
    and `extend`."""

    item_frames: dict[ItemKey, Frame] = field(default_factory=dict)  # every client item's frame
    interactions: list[Interaction] = field(default_factory=list)
    notifications: list[tuple[ItemKey, dict[str, Any]]] = field(default_factory=list)  # client notifications
    answers: dict[Any, list[ItemKey]] = field(default_factory=lambda: defaultdict(list))  # server request id -> client answers
    raw: dict[bytes, list[ItemKey]] = field(default_factory=lambda: defaultdict(list))  # client bytes that are not JSON-RPC
    opens: list[ItemKey] = field(default_factory=list)  # HTTP requests without a body to match (GET, DELETE)
    ends: list[ItemKey] = field(default_factory=list)  # the client closing its side
    server_items: list[ServerItem] = field(default_factory=list)
    # HTTP: what the client sent on each exchange (its body's items, or a bodiless request head),
    # the requests among it, and the exchanges whose stream the recorded client closed while a
    # request it carried was unanswered (a cancellation at 2026-07-28; a close after every answer
    # is the client tearing down, and the replayed stream ends as a served one does), and the GET
    # streams it closed (no server ends one its client still reads)
    channel_items: dict[str, list[ItemKey]] = field(default_factory=lambda: defaultdict(list))
    channel_interactions: dict[str, list[Interaction]] = field(default_factory=lambda: defaultdict(list))
    post_paths: dict[str, str] = field(default_factory=dict)  # each POST exchange's path (no query), as recorded
    closed_by_client: set[str] = field(default_factory=set)
    # Known once complete: the requests a recording cut short (a killed recorder, a truncated file)
    # left unanswered, which no live client would ever get an answer to (see `_Walk.cut_off`).
    cut_off: set[Interaction] = field(default_factory=set)
    headless: set[str] = field(default_factory=set)  # ... and the HTTP exchanges of those cut before their response head
    cut_streams: set[str] = field(default_factory=set)  # ... and those cut inside their event stream

    complete: bool = field(default=False, init=False)  # every frame of the recording is indexed
    _walk: _Walk = field(init=False, repr=False)
    _frames: Iterator[Frame] | FrameFeed = field(init=False, repr=False)  # the frames not indexed yet

    @classmethod
    def of(cls, frames: Iterable[Frame]) -> RecordingIndex:
        """The whole recording indexed and checked (`check_payloads`)."""
        index = cls.reading(frames)
        while index.extend(sys.maxsize):
            pass
        index.check_payloads()
        return index

    @classmethod
    def reading(cls, frames: Iterable[Frame] | FrameFeed, exits_recorded: bool = True) -> RecordingIndex:
        """An index of nothing yet, which `extend` grows along `frames` (read no further than it goes):
        the walk is sequential, so what it has indexed is what the whole recording's index has up
        to that frame, and the lists here only grow, at their ends. `exits_recorded`: a stdio
        recording ends with the server's exit, unless cut short (false for an HTTP recording's
        messages served over stdio, which have none)."""
        index = cls()
        index._walk = _Walk(index, exits_recorded)
        index._frames = frames if isinstance(frames, FrameFeed) else iter(frames)
        return index

    def check_payloads(self) -> None:
        """Encode every server frame indexed so far, so that a message that is not JSON is reported
        now rather than when it is sent (a client frame's is checked as it is indexed)."""
        for server_item in self.server_items:
            server_item.payload  # encoded for its check, and kept

    def extend(self, count: int) -> bool:
        """Index up to `count` more frames; whether there were any. Raises FrameError for a frame
        that cannot be replayed (and a frames iterator's own, a damaged cassette's, as it reads)."""
        if self.complete:
            return False
        frames = self._frames
        with gc_paused():  # as for loading: millions of new containers, none of them garbage
            walked = self._walk.walk(frames.take(count) if isinstance(frames, FrameFeed) else islice(frames, count))
        ended = 0
        if frames.exhausted if isinstance(frames, FrameFeed) else walked < count:
            self.complete = True
            self._frames = iter(())
            self.cut_off = self._walk.cut_off()  # before the unended JSON answers are ended, as they were not
            ended = self._walk.end_unended()
            cut = {interaction.channel for interaction in self.cut_off}
            self.headless = cut - self._walk.headed
            self.cut_streams = cut - self.headless - self._walk.ended
        return walked > 0 or ended > 0

    @property
    def waiting(self) -> bool:
        """Whether frames that need no more reading wait to be indexed (a `FrameFeed`'s)."""
        return isinstance(self._frames, FrameFeed) and self._frames.waiting > 0

    def has_end(self, channel: str) -> bool:
        """Whether the recorded end of this HTTP exchange is indexed (what is known of an exchange
        at its end stays so)."""
        return channel in self._walk.ended

    def interactions_by_item(self) -> dict[ItemKey, Interaction]:
        """The interaction each recorded message item belongs to, on both sides."""
        owners: dict[ItemKey, Interaction] = {}
        for interaction in self.interactions:
            for key in (*interaction.client_items, *interaction.cancel_items):
                owners[key] = interaction
            for server_item in interaction.server_items:
                for position, owner in enumerate(server_item.owners):
                    if owner is interaction:
                        owners[(server_item.frame.seq, position)] = interaction
        return owners


@runtime_checkable
class FrameFeed(Protocol):
    """Frames a recording gives as they come: `take` gives up to `count` of those not taken yet,
    waiting for more only when there are none (so it gives none only once `exhausted`)."""

    @property
    def exhausted(self) -> bool: ...

    @property
    def waiting(self) -> int:
        """How many frames it has that `take` gives without reading more."""
        ...

    def take(self, count: int) -> list[Frame]: ...


class _Walk:
    """The one pass over a recording that fills an index. Holds only what the walk needs."""

    def __init__(self, index: RecordingIndex, exits_recorded: bool = True) -> None:
        self.index = index
        self.exits_recorded = exits_recorded
        self.open_by_id: dict[Any, Interaction] = {}  # recorded client request id -> awaiting its response
        self.by_id: dict[Any, Interaction] = {}  # ... -> the latest request with it, answered or not (a cancel may race the answer)
        self.by_token: dict[Any, Interaction] = {}
        self.by_server_request: dict[Any, Interaction | None] = {}
        self.pending: list[Interaction] = []  # open interactions, oldest first
        self.last_client_item: ItemKey | None = None
        self.last_message_item: ItemKey | None = None  # ... of those, the last JSON-RPC item
        self.last_session_item: ItemKey | None = None  # ... the last JSON-RPC item or DELETE (ends a session's streams)
        self.streams: set[str] = set()  # HTTP channels opened by a GET (the standalone or legacy SSE stream)
        self.seqs: set[int] = set()  # every frame's, to refuse one that comes twice
        # HTTP exchanges answered with a body that is no event stream (JSON), and their last frame,
        # until their end comes: one that never does ends after that frame (`end_unended`)
        self.unended: dict[str, Frame] = {}
        self.exited = False  # the recording has the server's exit (stdio)
        self.ended: set[str] = set()  # HTTP exchanges whose end the recording has
        self.headed: set[str] = set()  # ... and those whose response head it has

    def walk(self, frames: Iterable[Frame]) -> int:
        """Index `frames`, which follow those walked before; how many there were."""
        walked = 0
        for frame in frames:
            walked += 1
            if frame.seq in self.seqs:  # an item is known by its frame's seq: two would be one
                raise _twice(frame)
            self.seqs.add(frame.seq)
            if frame.from_client:
                # a client frame is never sent: its payload is only checked (and read as a live one would be)
                keys = self.client_frame(frame, checked_payload(frame) if frame.message is not None else None)
                if keys:
                    self.last_client_item = keys[-1]
                    if frame.kind is Kind.MESSAGE:
                        self.last_message_item = self.last_session_item = keys[-1]
                    elif (frame.info or {}).get("method") == "DELETE":
                        self.last_session_item = keys[-1]
                    if frame.channel != STDIO:
                        self.index.channel_items[frame.channel] += keys
            else:
                self.server_frame(frame)
        return walked

    def client_frame(self, frame: Frame, payload: bytes | None) -> list[ItemKey]:
        index = self.index
        key = (frame.seq, 0)
        if frame.kind is Kind.HTTP_REQUEST:
            info = frame.info or {}
            if info.get("method") == "POST":
                index.post_paths[frame.channel] = str(info.get("path", "/")).split("?", 1)[0]
                return []  # a POST is matched by its body (and path)
            index.opens.append(key)
            if info.get("method") == "GET":
                self.streams.add(frame.channel)
        elif frame.kind is Kind.RAW or (payload is not None and (unreadable_live(payload) or _refused_live(frame.message))):
            # a message no live client's can be read as (NaN, a BOM, an id of 3.5 or null: what a lenient
            # recorder took but the replay's reader refuses) is matched by its bytes, and gets what the server did
            index.raw[frame.payload].append(key)
        elif frame.kind is Kind.STREAM_END:
            index.ends.append(key)
        elif frame.kind is Kind.MESSAGE:
            return [self.client_item(frame, position, item) for position, item in enumerate(items(frame.message))]
        else:
            return []
        index.item_frames[key] = frame
        return [key]

    def client_item(self, frame: Frame, position: int, item: dict[str, Any]) -> ItemKey:
        index = self.index
        key = (frame.seq, position)
        index.item_frames[key] = frame
        kind = classify(item)
        if kind is MessageType.REQUEST:
            interaction = Interaction(item, frame.seq, frame.channel, [key])
            index.interactions.append(interaction)
            self.open_by_id[item["id"]] = interaction
            self.by_id[item["id"]] = interaction
            if interaction.recorded_token is not None:
                self.by_token[interaction.recorded_token] = interaction
            self.pending.append(interaction)
            if frame.channel != STDIO:
                index.channel_interactions[frame.channel].append(interaction)
        elif kind in (MessageType.RESULT, MessageType.ERROR):
            owner = self.by_server_request.get(item["id"])
            if owner is not None:
                owner.client_items.append(key)
            index.answers[item["id"]].append(key)
        elif item["method"] == "notifications/cancelled" and (
            target := self.by_id.get(id_member(params_of(item), "requestId"))
        ):
            target.cancel_items.append(key)
        else:
            index.notifications.append((key, item))
        return key

    def end_unended(self) -> int:
        """At the end of the recording: end each JSON response the recording never saw end (a
        recorder stopped before it), right after its last frame, as its server did; else a replay
        would keep the live client waiting for ever. How many there were."""
        unended, self.unended = self.unended, {}
        for channel, last in unended.items():
            self.server_frame(Frame(last.seq, last.t, Direction.SERVER_TO_CLIENT, channel, Kind.STREAM_END,
                                    info={"reason": "closed"}))
        return len(unended)

    def cut_off(self) -> set[Interaction]:
        """At the end of the recording: the requests still unanswered where it stops short, on
        stdio without the server's exit, on HTTP on an exchange that never ended. A request the
        recorded client cancelled, or a long-lived one, has no answer to miss."""
        return {interaction for interaction in self.pending
                if not interaction.cancel_items and not interaction.long_lived
                and (self.exits_recorded and not self.exited if interaction.channel == STDIO
                     else interaction.channel not in self.ended)}

    def server_frame(self, frame: Frame) -> None:
        index = self.index
        if frame.kind is Kind.EXIT:
            self.exited = True
        if frame.channel != STDIO:
            if frame.kind is Kind.HTTP_RESPONSE:
                self.headed.add(frame.channel)
            if frame.kind is Kind.STREAM_END:
                self.ended.add(frame.channel)
                self.unended.pop(frame.channel, None)
            elif frame.channel in self.unended or (
                    frame.kind is Kind.HTTP_RESPONSE and not is_event_stream(header((frame.info or {}).get("headers"), "content-type"))):
                self.unended[frame.channel] = frame
        if frame.kind is Kind.STREAM_END and (frame.info or {}).get("reason") == "client_disconnect" and (
            frame.channel in self.streams  # a GET stream: a server keeps it open as long as its client does
            or any(interaction in self.pending for interaction in index.channel_interactions.get(frame.channel, ()))
        ):
            index.closed_by_client.add(frame.channel)
        if frame.message is not None:  # a MESSAGE frame or an SSE event carrying one
            message_items = items(frame.message)
            kinds = [classify(item) for item in message_items]
            owners = [self.owner(frame, item, kind) for item, kind in zip(message_items, kinds, strict=True)]
            for item, kind, owner in zip(message_items, kinds, owners, strict=True):
                if owner is not None and kind in (MessageType.RESULT, MessageType.ERROR):
                    self.open_by_id.pop(item["id"], None)
                    if owner in self.pending:
                        self.pending.remove(owner)
        else:
            owners = [None]
        deps: set[ItemKey] = set()
        cancel_deps: set[ItemKey] = set()
        for owner in owners:
            if owner is not None:
                deps.update(owner.client_items)
                cancel_deps.update(owner.cancel_items)
        exchange = index.channel_interactions.get(frame.channel, [])
        if self.last_message_item is not None and frame.kind is not Kind.HTTP_RESPONSE and any(
                interaction is not None and interaction.long_lived
                for interaction in (*owners, *(exchange if frame.channel != STDIO else ()))):
            # what a long-lived request's stream carries (its events, its close) is caused by what
            # the client did after opening it: it waits for the last message the client had sent
            deps.add(self.last_message_item)
        if frame.channel == STDIO:
            if None in owners and self.last_client_item is not None:
                deps.add(self.last_client_item)  # tied to no request: after the last thing the client said
        else:
            # On HTTP a frame goes out on its exchange: after what the client sent on it, and
            # after all that was tied to the requests it carries (answers, cancels) before it;
            # never after what another exchange carried (clients differ in what they await).
            deps.update(index.channel_items[frame.channel])
            for interaction in exchange:
                deps.update(interaction.client_items)
                cancel_deps.update(interaction.cancel_items)
            cause = self.last_session_item if frame.kind is Kind.STREAM_END else self.last_message_item
            if frame.channel in self.streams and frame.kind is not Kind.HTTP_RESPONSE and None in owners \
                    and cause is not None:
                # what a GET stream carries that is tied to no request (a notification, its end):
                # also after the last message the client had sent, which may be what caused it; its
                # end after a DELETE that came later (else a client still busy reopens the stream)
                deps.add(cause)
        server_item = ServerItem(frame, owners, deps, cancel_deps)
        index.server_items.append(server_item)
        related = [interaction for interaction in (*owners, *exchange) if interaction is not None]
        for interaction in {id(i): i for i in related}.values() if len(related) > 1 else related:
            interaction.server_items.append(server_item)

    def owner(self, frame: Frame, item: dict[str, Any], kind: MessageType) -> Interaction | None:
        """The interaction a server message item (classified as `kind`) belongs to, if any."""
        if kind in (MessageType.RESULT, MessageType.ERROR):
            # An answer sent again (a server's event store replaying a resumed stream) answers the
            # same request: the live client gets it under that request's live id too.
            return self.open_by_id.get(item["id"]) or self.by_id.get(item["id"])
        if kind is MessageType.REQUEST:
            # On HTTP a server→client request travels on the stream of the request it serves. On
            # stdio nothing says which; the newest pending request is the one the server is busy with.
            on_channel = self.index.channel_interactions.get(frame.channel)
            candidates = on_channel if on_channel else self.pending
            owner = candidates[-1] if candidates else None
            self.by_server_request[item["id"]] = owner
            return owner
        subscription = id_member(meta_of(item), SUBSCRIPTION_ID_KEY)
        if subscription is not None and (listen := self.by_id.get(subscription)) is not None and listen.long_lived:
            return listen  # an acknowledgment or event of a subscriptions/listen stream
        if item["method"] == "notifications/progress":
            return self.by_token.get(id_member(params_of(item), "progressToken"))
        if item["method"] == "notifications/cancelled":
            return self.by_server_request.get(id_member(params_of(item), "requestId"))
        return None


def _refused_live(message: Any) -> bool:
    """Whether the replay's reader refuses every item of this recorded client message from a live
    client (`jsonrpc.refusal`), which a lenient recorder kept as a message, for what matching
    could not look past: an id (3.5, null), or anything in a notification (params that are
    null), which has no answer to carry. The same bytes play it. (A request refused for its
    params stays a request: a live client's well-formed one may play it.)"""
    return all(isinstance(item, dict) and ("id" in item and not usable_id(item["id"])
                                            or "id" not in item and refusal(item) is not None)
               for item in items(message))


def check_replayable(frames: Iterable[Frame]) -> None:
    """Raise the FrameError that indexing `frames` would (a seq that comes twice, a message that
    is not JSON), without indexing them: a replay that indexes a session only when a client opens
    it still refuses a damaged cassette at its start."""
    seqs: set[int] = set()
    for frame in frames:
        if frame.seq in seqs:
            raise _twice(frame)
        seqs.add(frame.seq)
        if frame.message is not None:
            checked_payload(frame)


def _twice(frame: Frame) -> FrameError:
    return FrameError(f"frame {frame.seq} comes twice (two frames have that seq): a replay tells frames apart by it")


def checked_payload(frame: Frame, message: Any = None) -> bytes:
    """The frame's wire bytes, or those of `message` (its message with live ids put in); a message
    read from an untrusted cassette must be JSON (msgpack can also hold bytes), which encoding it checks."""
    try:
        return frame.payload if message is None else encode(message)
    except (TypeError, ValueError) as error:
        raise FrameError(f"frame {frame.seq} holds a message that is not JSON ({error})") from None

