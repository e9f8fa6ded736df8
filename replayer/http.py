"""Be the recorded server over HTTP: Streamable HTTP (POST / GET / DELETE on one endpoint) and the
legacy HTTP+SSE transport, as a starlette app served by uvicorn.

A thin adapter. Each recorded session (`tapes.replay.sessions`) gets its own replay engine; a live
request is routed to a session, handed to its engine, and answered on the recorded exchange the
engine matched it to, with that exchange's framing (status, headers that matter, a JSON body or an
SSE stream with the recorded event ids). What the engine releases is filed per recorded channel
(`tapes.replay.streams`), because frames are often released before the live request of their exchange
arrives (the standalone GET stream) or after its connection is gone (a resumable stream). Header
rules and the legacy endpoint rewrite live in `tapes.replay.http_rules`.

    with replay_server("session.tape") as server:   # in-process, on a free port of 127.0.0.1
        client = Client(server.url)
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import ipaddress
import logging
import os
import signal
import socket
import sys
import threading
from collections import Counter
from collections.abc import AsyncIterator, Callable, Collection, Iterator, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import anyio
import uvicorn
from starlette.applications import Starlette
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from replayer.console import print_summary, print_warnings, stderr_console, write_report
from replayer.http_guard import ConnectionLimits, guarded_protocol
from tapes.cassette.frames import STDIO, Frame, Kind
from tapes.cassette.store import Cassette, CassetteStream, gc_paused, load, replace_file
from tapes.errors import UserError
from tapes.interrupts import ctrl_c_dropped
from tapes.replay.control import ReplayControl
from tapes.replay.episodes import HandoverFailed, NewEpisodes, last_exchange, splice
from tapes.replay.http_rules import (
    LOCAL_HOSTS,
    batch_problem,
    header_mismatch,
    host_allowed,
    mismatch_reply,
    missing_cors,
    origin_allowed,
    preflight_headers,
    replayed_headers,
    stream_only_refusal,
    version_problem,
)
from tapes.replay.engine import Race, ReplayEngine, Repeats
from tapes.replay.http_reading import CassetteReading
from tapes.replay.index import check_replayable
from tapes.replay.outcomes import NO_MATCH, Action, Reception, Reply, Report, Unmatched, answer_payload
from tapes.replay.session import EndedSession, ReplaySession, merged_report, summary
from tapes.replay.sessions import RecordedSession, SessionFeed, does_work, messages_before, only_opened
from tapes.replay.streams import (
    MALFORMED_EVENT,
    ChannelLog,
    Cursor,
    FaultPlan,
    Faults,
    StreamBook,
    as_stream_message,
    sse_bytes,
)
from tapes.wire.eras import DISCOVER_METHOD, HANDSHAKE_METHOD, KNOWN_VERSIONS, STATELESS_VERSION
from tapes.wire.http import header, legacy_session_id, moved_to_origin, utf8_header
from tapes.wire.jsonrpc import INVALID_REQUEST, MessageType, classify, encode, items, parse, read_client, request_label, wire_form, without_meta
from tapes.wire.oauth import redact_url
from tapes.wire.sse import is_event_stream
from tapes.wire.text import is_digits

if TYPE_CHECKING:
    from replayer.handover import Handover

T = TypeVar("T")

MAX_BODY = 4 * 1024 * 1024
"""Largest request body accepted (413 beyond), in bytes."""


class _Drop(Exception):
    """Cut the live connection here, mid-body, as a recorded upstream failure or a fault does."""


class _QuietDrops(logging.Filter):
    """uvicorn logs every exception that ends a started response; a drop is intended, not an error,
    and so is a request cut because the server is shutting down."""

    def filter(self, record: logging.LogRecord) -> bool:
        error = record.exc_info[1] if record.exc_info else None
        return not isinstance(error, _Drop | asyncio.CancelledError) and not (
            isinstance(error, BaseExceptionGroup) and error.subgroup(_Drop) is not None
        )


class _Session:
    """One live session played from one recorded session: its replay session, and the stream logs
    of its exchanges. `live_id` is the session id the live client uses: the recorded one, or, for
    a recorded session served again (every one opened alike was played) or one played on from another live session
    (see `continue_in`), another that stays unique."""

    def __init__(self, recorded: RecordedSession, control: ReplayControl, reading: CassetteReading, may_hand_over: bool = False,
                 live_id: str | None = None) -> None:
        self.live_id = live_id or recorded.session_id
        self._reading = reading
        self.book = StreamBook()
        self.claimed = False  # a live client has opened it
        self.deleted = False
        self.stream_closed = False  # legacy: the live client closed its SSE stream, the session's end
        self._changed = asyncio.Event()
        self.closing = False
        self.handover: Handover | None = None  # the real server, once the session is handed over to it
        self.standalone_stream: str | None = None  # the recorded GET stream the live client opened
        self._aliases: dict[str, str] = {}  # a recorded stream -> the one the live client reads it on
        self._copies = 0  # exchanges answered again under --repeats allow
        self.in_flight = 0  # live requests of the session not answered in full yet
        self.ended: EndedSession | None = None  # what the summary keeps, once the session is let go (`end`)
        self._control, self._may_hand_over = control, may_hand_over
        self._play(recorded, name=self.live_id)

    def _play(self, recorded: RecordedSession, replay: ReplaySession | None = None, name: str | None = None) -> None:
        """Play `recorded`: from its start (its replay named `name` in the summary), or on with
        `replay`, its replay so far."""
        self.recorded = recorded
        self.recorded_id = recorded.session_id
        self._replay, self._name = replay, name
        self.done: list[Any] = []  # the live client's work (see `does_work`) this recording played, in order

    @property
    def replay(self) -> ReplaySession:
        """The session's replay, made when first needed: a cassette of thousands of sessions is
        served as soon as it is read (and checked: `check_replayable`), and each session is
        indexed when a client opens it, or for the summary."""
        if self._replay is None:
            frames: list[Frame] | SessionFeed = self.recorded.frames
            if not self._reading.complete:  # indexed as the cassette is read (`advance`)
                frames = SessionFeed(self.recorded, self._reading.read_more)
            self._replay = ReplaySession(frames, self._control, may_hand_over=self._may_hand_over, name=self._name)
            self.perform(self._replay.start())
        return self._replay

    # what tells the recording apart (see RecordedSession: it grows as a big cassette is read)

    @property
    def first_request(self) -> dict[str, Any] | None:
        """What a live session is matched by: the first request the recorded client sent (initialize)."""
        return self.recorded.first_request

    @property
    def http_methods(self) -> set[str]:
        return self.recorded.http_methods

    @property
    def rpc_methods(self) -> set[str | None]:
        return self.recorded.rpc_methods

    @property
    def work(self) -> list[Any]:
        return self.recorded.work

    @property
    def _opening(self) -> dict[str, Any]:
        return (self.recorded.opening.info or {}) if self.recorded.opening is not None else {}

    @property
    def opening_method(self) -> str | None:
        return self._opening.get("method")

    @property
    def user_agent(self) -> str | None:
        """Of the client that opened it."""
        return header(self._opening.get("headers"), "user-agent")

    @property
    def legacy_stream(self) -> str | None:
        """A legacy HTTP+SSE session opens with its GET of the SSE stream, which carries every answer."""
        opening = self.recorded.opening
        return opening.channel if opening is not None and self.opening_method == "GET" else None

    @property
    def legacy_path(self) -> str | None:
        return self._opening.get("path", "/").split("?", 1)[0] if self.legacy_stream is not None else None

    def end(self) -> None:
        """Keep what the summary says of it, and let go of its replay's index and streams: its live
        session ended, and nothing of it is in flight."""
        self.ended = EndedSession.of(self.replay)
        self._replay, self.book = None, StreamBook()

    @property
    def summarized(self) -> ReplaySession | EndedSession:
        return self.ended or self.replay

    def advance(self) -> bool:
        """Index what more of the recording was read for it, if its replay has begun: what that
        releases goes out (a JSON answer's body, an event that waited for its frame to be read).
        Whether there was any."""
        if self._replay is None or not self._replay.engine.waiting:
            return False
        self.perform(self._replay.advance())
        return True

    @property
    def engine(self) -> ReplayEngine:
        return self.replay.engine

    @property
    def allowed_methods(self) -> set[str]:
        """The HTTP methods a 405 names for this session: those its recorded client used, and POST."""
        return self.http_methods | {"POST"}

    def opens_like(self, message: Any, control: ReplayControl, exactly: bool = False) -> bool:
        """Whether the live opening request `message` matches the recorded one (by the matcher;
        `exactly`: equal params but for `_meta`, the client's self-description included)."""
        recorded = self.first_request
        if recorded is None or not isinstance(message, dict) or recorded.get("method") != message.get("method"):
            return False
        if exactly:
            return without_meta(recorded.get("params")) == without_meta(message.get("params"))
        return control.matcher.matches(recorded, message)

    def started_over_by(self, message: Any, control: ReplayControl) -> bool:
        """Whether the live request `message`, outside any session, is another client starting
        these exchanges over: it opens them as recorded (a server/discover probe, a stateless
        client's first request) and what it matches was played, or it is the initialize of a
        client that does not probe, and the recorded server/discover that answers it was played."""
        if self.opens_like(message, control):
            return not self.engine.unplayed_like(message)
        opening = self.first_request
        return (classify(message) is MessageType.REQUEST and message["method"] == HANDSHAKE_METHOD
                and opening is not None and opening.get("method") == DISCOVER_METHOD
                and not self.engine.unplayed_like(opening))

    def takes_on(self, request: dict[str, Any], control: ReplayControl) -> bool:
        """Whether the recorded client sent a request like this live one past its opening."""
        return any(isinstance(recorded, dict) and control.matcher.matches(recorded, request) for recorded in self.work)

    def goes_on_with(self, done: Sequence[Any], request: dict[str, Any], control: ReplayControl) -> bool:
        """Whether the recorded client did, past its opening, what a live one did (`done`), then
        sent a request like this one: the recording a live session that went on another way
        belongs to (clients that opened alike arrived in another order)."""
        return len(self.work) > len(done) and all(
            _alike(recorded, live, control) for recorded, live in zip([*self.work[: len(done)], self.work[len(done)]], [*done, request],
                                                                     strict=True))

    def continue_in(self, other: _Session, path: str, done: int = 0) -> None:
        """Go on in `other`'s recording, a session its client opened the same way, for a live
        request this recording lacks. With `done` > 0, `other`'s client did first what the live
        one did here (clients opened alike and arrived in another order): what `other`'s client
        sent up to there is played again, silently (the live client had the answers), and this
        recording is left afresh for another client. With none, the live client runs in one
        session what `other`'s client ran in another (a client that runs one session per step
        recorded it, as the Inspector does): `other`'s opening is played as recorded, and this
        recording keeps what it played (afresh, if the live client only opened it). Either way the
        live GET stream carries what `other`'s GET stream carries from there."""
        left, played, history = self.recorded, self.replay, self.done
        self._play(other.recorded, name=other.recorded_id)
        for frame in messages_before(other.recorded.frames, done):
            self.perform(self.replay.receive(frame.payload))
        if self.standalone_stream is not None:
            opened = self.replay.open("GET", path)
            if opened.channel is not None:
                if done:  # what it carried for what was played again, the live client had from this recording
                    self.perform(opened)
                self._aliases[opened.channel] = self.standalone_stream
            if not done:
                self.perform(opened)
        other.book = StreamBook()
        keeps = bool(history) and not done
        if keeps:
            other._play(left, played)
        else:
            other._play(left, name=left.session_id)
        other.claimed = keeps
        self.done = history if done else []

    def perform(self, reception: Reception) -> list[Reply]:
        """File released frames under their channels and wake the connections reading them;
        returns the replies the engine made up, which answer the live request itself."""
        self.deliver(reception.actions)
        return reception.replies

    def deliver(self, actions: list[Action]) -> None:
        if self._aliases:
            actions = self._on_live_streams(actions)
        self.book.add(actions)
        changed, self._changed = self._changed, asyncio.Event()
        changed.set()

    async def changed(self) -> None:
        await self._changed.wait()

    async def wait(self, seconds: float) -> bool:
        """Wait `seconds` (a timing's gap, a delay), unless the session closes first (a DELETE, the
        replayer stopping): whether it is still open."""
        deadline = asyncio.get_running_loop().time() + seconds
        while not self.closing and (left := deadline - asyncio.get_running_loop().time()) > 0:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.changed(), left)
        return not self.closing

    def _on_live_streams(self, actions: list[Action]) -> list[Action]:
        """`actions` with those of a recorded stream the live client reads on another moved there
        (that stream has its head already)."""
        moved = []
        for action in actions:
            alias = self._aliases.get(action.frame.channel)
            if alias is None:
                moved.append(action)
            elif action.frame.kind is not Kind.HTTP_RESPONSE:
                moved.append(replace(action, frame=action.frame._replace(channel=alias)))
        return moved

    def repeat_copy(self, reception: Reception) -> tuple[str, Reception]:
        """A repeated request's answer (`--repeats allow`) filed on a fresh copy of its exchange,
        whose log the first answer already filled: the channel the live POST reads, and the
        reception with the repeated frames of the exchange moved to it. What went out on another
        channel (a legacy SSE stream) stays there."""
        assert reception.channel is not None
        self._copies += 1
        copy = f"{reception.channel}~{self._copies}"
        self.book.add_copy(copy, of=reception.channel)
        moved = [
            replace(action, frame=action.frame._replace(channel=copy)) if action.frame.channel == reception.channel else action
            for action in reception.actions[: reception.repeated]
        ]
        return copy, replace(reception, actions=moved + reception.actions[reception.repeated :])

    @property
    def open_stream(self) -> str | None:
        """The recorded stream the live client has open for what is tied to no request."""
        return self.legacy_stream or self.standalone_stream

    def close(self) -> None:
        self.closing = True
        self.deliver([])


@dataclass
class ReplayOptions:
    faults: Faults = field(default_factory=Faults)
    allowed_hosts: Sequence[str] = ()  # hosts allowed in Origin and Host besides the local ones
    max_body: int = MAX_BODY
    control: ReplayControl = field(default_factory=ReplayControl)  # matcher, race and repeats policies
    new_episodes: NewEpisodes | None = None  # hand a session over to the real server at its first miss
    limits: ConnectionLimits = field(default_factory=ConnectionLimits)  # request heads, slow and idle connections


class HttpReplayer:
    """The replay state of one cassette and the starlette app that serves it."""

    def __init__(self, cassette: Cassette | CassetteStream, options: ReplayOptions | None = None) -> None:
        self.options = options or ReplayOptions()
        self._cassette = cassette  # (new episodes splice it: then it is loaded whole)
        self._faults = FaultPlan(self.options.faults)
        # the control each session is played with: the cassette's redacted params left out of matching
        self._control = self.options.control.for_cassette(cassette.header)
        self._sessions: list[_Session] = []
        # The pool: for each recorded session, in recorded order, the session object that holds it
        # (a live session goes on in another recording by trading recordings: `_continue`).
        self._slots: list[_Session] = []
        self._position: dict[int, int] = {}
        self._live: dict[str, _Session] = {}  # by the id live clients use
        self._sessionless: _Session | None = None
        with gc_paused():  # a big cassette's exchanges and sessions: containers kept as long as the replay
            # what needs all of the recording at once reads it whole; else a big one is read as it is served
            self._reading = CassetteReading(cassette, self._recorded_session)
            self._reading.begin(read_whole=bool(self.options.faults or self.options.new_episodes is not None
                                                or self._control.race is Race.CANCEL_WINS))
        self.auth = self._reading.auth  # an authorization flow's exchanges are served apart from the MCP sessions
        if self.auth and len(self.auth.mcp_origins) > 1:
            raise UserError(f"the cassette holds MCP traffic to several servers ({', '.join(self.auth.mcp_origins)}) "
                            "and an authorization flow: a replay serves one server")
        if self._reading.complete:
            for session in self._slots:  # what indexing a session would refuse, refused now
                check_replayable(session.recorded.frames)
            flow = {exchange.channel for exchange in self.auth.exchanges}
            self.options.faults.check(Counter(f.channel for f in self._reading.frames
                                              if f.kind is Kind.SSE_EVENT and f.channel not in flow),
                                      (s.recorded_id for s in self._sessions if s.recorded_id is not None))
        self._served_again_count = 0  # recorded sessions served again, for their copies' ids
        self._turns: Counter[tuple[int, ...]] = Counter()  # copies served of the sessions opened alike, by those sessions
        self._unrouted: list[Unmatched] = []  # requests to a path the recording never saw
        self._adapted: list[str] = []  # requests the recording lacks, answered as its server would have
        if not self._reading.facts.paths:
            raise UserError("the cassette was recorded over stdio: replay it without --http"
                            if self._reading.header.transport == STDIO
                            else "the cassette has no HTTP requests to replay (its recording holds none)")
        self._allowed_hosts = LOCAL_HOSTS | set(self.options.allowed_hosts)
        self._reading_tasks: set[asyncio.Task[Any]] = set()  # requests waiting for the rest of their body
        self._reader: asyncio.Task[None] | None = None  # reads the rest of a big cassette while clients are idle
        self._failure: str | None = None  # the user's code (a matcher) failed on a request: the replay fails
        self._let_go_frames = 0  # frames of the copies let go since the collector last ran (see `_let_go_if_done`)
        self.app = Starlette(routes=[Route("/{path:path}", self._handle, methods=["GET", "POST", "DELETE", "OPTIONS"])],
                             exception_handlers={405: _other_method})

    def _recorded_session(self, recorded: RecordedSession) -> None:
        """A recorded session the reading found: in the pool, in recorded order."""
        session = _Session(recorded, self._control, self._reading, self.options.new_episodes is not None)
        self._position[id(recorded)] = len(self._slots)
        self._slots.append(session)
        self._sessions.append(session)
        if session.live_id is not None:
            self._live[session.live_id] = session
        elif self._sessionless is None:
            self._sessionless = session

    def _read_all(self) -> bool:
        """Read the rest of the cassette, for a decision the whole recording makes; whether there was
        any (what the sessions playing get of it, `_read_rest` gives them)."""
        if self._reading.complete:
            return False
        self._reading.read_all()
        return True

    async def _read_rest(self) -> None:
        """Read the rest of a big cassette a step at a time, letting requests in between, and give
        each session playing what was read for it (an answer may wait for its frames)."""
        while True:
            await asyncio.sleep(0)
            read = self._reading.read_more()
            advanced = [session.advance() for session in list(self._sessions)]
            if not read and not any(advanced):
                break

    @property
    def failure(self) -> str | None:
        """What failed the replay: the user's code (a matcher), or damage found in a cassette read as it was served."""
        return self._failure or self._reading.failure

    @failure.setter
    def failure(self, failure: str | None) -> None:
        self._failure = failure

    # the server as the whole recording tells it (read all of it first where a part could mislead)

    @property
    def paths(self) -> list[str]:
        """The MCP endpoints (a recording of nothing but a refused login still has its paths)."""
        return self._reading.facts.paths

    @property
    def _legacy_paths(self) -> set[str]:
        return {s.legacy_path for s in self._slots if s.legacy_path is not None}

    @property
    def read_through(self) -> bool:
        """Whether the whole cassette is read (a big one is read as it is served)."""
        return self._reading.complete

    @property
    def endpoint(self) -> str:
        """The path a client starts from: the recorded Streamable HTTP endpoint or legacy SSE path."""
        return self.paths[0]

    @property
    def replays(self) -> list[ReplaySession | EndedSession]:
        self._read_all()  # every recorded session is in the summary
        return [session.summarized for session in self._sessions]

    def report_lines(self) -> list[str]:
        """The replay summary, one block per live session (named when there are several), then
        the requests no session could take, then the authorization flow's."""
        return (summary(self.replays)[0] + [f"unmatched {miss.summary}: {miss.reason}" for miss in self._unrouted]
                + [f"adapted {line}" for line in self._adapted_lines] + self.auth.report_lines()
                + [f"fault never fired: {spec}" for spec in self._faults.unfired()]
                + ([f"failed: {self.failure}"] if self.failure else []))

    @property
    def _adapted_lines(self) -> list[str]:
        """What the replay answered otherwise than recorded: requests the recording lacks, and an
        authorization flow found only as the cassette was read (once all of it is)."""
        if (late := self._reading.late_flow) is None:
            return self._adapted
        return [*self._adapted, (f"the recording's authorization flow begins at {late}, past what was read before "
                                 "serving began: its exchanges were replayed as the sessions'")]

    @property
    def clean(self) -> bool:
        return summary(self.replays)[1] and not self._unrouted and self.auth.clean and self.failure is None

    def report(self) -> Report:
        """The sessions' reports as one."""
        merged = merged_report(self.replays)
        merged.unmatched += self._unrouted + self.auth.misses
        merged.adapted += self._adapted_lines + self.auth.adapted
        merged.unfired_faults += self._faults.unfired()
        return merged

    async def close(self) -> None:
        """End every open stream, and cut requests whose client is still sending the body (the
        server is shutting down: it would wait for them)."""
        for task in self._reading_tasks:
            task.cancel()
        if self._reader is not None:
            self._reader.cancel()
        self._reading.close()
        for session in self._sessions:
            session.close()
            if session.handover is not None:
                await session.handover.close()

    def add_new_episodes(self) -> int:
        """After serving: put what the real server said to handed-over sessions into the cassette
        file (replaced atomically); the number of frames added."""
        handed_over = [session for session in self._sessions if session.handover is not None]
        if not handed_over or self.options.new_episodes is None:
            return 0
        assert isinstance(self._cassette, Cassette)  # (loaded whole, to be spliced)
        episode: list[Frame] = []
        for session in handed_over:
            assert session.handover is not None
            frames = session.handover.finish(last_exchange([*self._cassette.frames, *episode]) + 1, session.open_stream)
            episode += frames
            session.replay.episode_recorded(len(frames))
        played = set().union(*(session.replay.played_frames for session in self._sessions))
        replaced = {frame.seq for session in handed_over for frame in session.recorded.frames}
        replace_file(splice(self._cassette, played, episode, replaced), self.options.new_episodes.cassette)
        return len(episode)

    def refused_at_connection(self, what: str, reason: str) -> None:
        """A request the connection's limits refused before it reached the app (see http_guard)."""
        method, _, target = what.partition(" ")
        self._unrouted.append(Unmatched(_named(method, target).rstrip(), reason))

    # --- requests --------------------------------------------------------------------------

    async def _handle(self, request: Request) -> Response:
        if self._reader is None and not self._reading.complete:
            self._reader = asyncio.create_task(self._read_rest())
        try:
            response = await self._answer(request)
        except UserError as error:  # said in the answer and at the end (a traceback per request otherwise)
            self.failure = self.failure or str(error)
            return self._then_answered(request, _error(500, f"Internal Server Error: {error}"))
        except BaseException:
            self._answered(request)
            raise
        if "origin" in request.headers:
            self._read_all_unless(lambda: self._reading.facts.cors)  # the first response that allowed an origin may be unread
            for name, value in missing_cors(response.headers.items(), self._reading.facts.cors):
                response.headers.append(name, value)
        return self._then_answered(request, response)

    def _serving(self, request: Request, session: _Session) -> None:
        """`request` belongs to `session` (see `_answered`)."""
        request.scope[_SESSION_KEY] = session
        session.in_flight += 1

    def _then_answered(self, request: Request, response: Response) -> Response:
        """`response`, then `_answered` once it is sent in full or its client went away."""
        return _Then(response, partial(self._answered, request)) if _SESSION_KEY in request.scope else response

    def _answered(self, request: Request) -> None:
        """A request of a session is answered."""
        session = request.scope.pop(_SESSION_KEY, None)
        if session is not None:
            session.in_flight -= 1
            self._let_go_if_done(session)

    def _let_go_if_done(self, session: _Session) -> None:
        """A copy of a recorded session no request can reach any more (its client ended it; the
        exchanges outside a session served afresh to a client that started over) is let go once
        nothing of it is in flight: a replay that serves a suite again and again would otherwise
        keep every copy's index. (The pool's sessions stay: clients may be served from them again,
        and they are as many as the recording has.)"""
        reachable = not session.deleted if session.live_id is not None else session is self._sessionless
        if (reachable or session.in_flight or session.ended is not None or session in self._slots
                or session.handover is not None or self.options.new_episodes is not None):
            return
        session.end()
        if session.live_id is not None and self._live.get(session.live_id) is session:
            del self._live[session.live_id]
        # An index is built with the collector paused and lands in its oldest generation, which
        # Python then never collects by itself: collected here once as much was let go as the
        # replay keeps (so the collections cost, in all, about what the indexing did).
        self._let_go_frames += len(session.recorded.frames)
        if self._let_go_frames >= len(self._reading.frames):
            self._let_go_frames = 0
            gc.collect()

    def _read_all_unless(self, known: Callable[[], object]) -> None:
        """Read the rest of the cassette unless what was read already tells `known()` (a fact found)."""
        if not known():
            self._read_all()

    def _settled(self, answer: Callable[[], T]) -> T:
        """`answer()` as the recording tells it: asked of what was read, and when that says no (a
        truthy answer: a refusal, a fact not found) while part of it is unread, asked of all of it."""
        found = answer()
        return answer() if found and self._read_all() else found

    async def _answer(self, request: Request) -> Response:
        if not origin_allowed(request.headers.get("origin"), self._allowed_hosts):
            return _error(403, "Forbidden: Origin not allowed")
        # the address the client reached this replayer at is one of its names too
        local = request.scope.get("server")
        if not host_allowed(request.headers.get("host"), self._allowed_hosts | {local[0]} if local else self._allowed_hosts):
            return _error(421, "Misdirected Request: Host not allowed")
        path = _path(request)
        self._read_all_unless(lambda: path in self.paths)  # (the checks below then see every recorded path)
        body: bytes | None = None
        if self.auth.claims(request.method, path):
            read = await self._body(request) if request.method == "POST" else b""
            if isinstance(read, Response):
                return read
            body = read
            origin = f"{request.url.scheme}://{request.url.netloc}"
            answer = self.auth.answer(request.method, _target(request), list(request.headers.items()), body, origin)
            if answer is not None:
                return _with_headers(Response(answer.body, answer.status), answer.headers)
        if (unprotected := self.auth.unprotected_discovery(request.method, path)) is not None:
            self._adapted.append(unprotected)
            return _error(404, "Not Found: the recorded server asked for no authorization")
        if path not in self.paths and (allowed := self.auth.methods_at(path)):
            self._unrouted.append(Unmatched(_what(request, None), f"the recording has only {', '.join(sorted(allowed))} requests to that path"))
            return _error(405, "Method Not Allowed", allow=allowed)
        if path not in self.paths:
            self._unrouted.append(Unmatched(_what(request, None), "the recording has no request to that path"))
            return _error(404, f"Not Found: the recording has no endpoint {path}")
        if request.method in ("POST", "DELETE") and self._settled(lambda: path in self._reading.facts.stream_only):
            self._adapted.append(stream_only_refusal(request.method, path))
            return _error(405, "Method Not Allowed: the recorded server serves its SSE stream here", allow={"GET"})
        if request.method == "HEAD":  # starlette routes it with GET: it must neither open a stream nor end the session
            return _other_method(request)
        if request.method == "OPTIONS":  # a browser's CORS preflight (the Origin passed above)
            self._read_all_unless(lambda: self._reading.facts.cors)
            preflight = preflight_headers(self._reading.facts.cors, request.headers.get("access-control-request-headers"))
            if preflight is None:
                return _error(405, "Method Not Allowed: the recorded server allowed no cross-origin requests")
            return _with_headers(Response(status_code=204), preflight)
        if problem := self._settled(lambda: version_problem(request.headers.get("mcp-protocol-version"),
                                                            KNOWN_VERSIONS | self._reading.facts.versions)):
            self._miss(request, None, problem)  # a version the recorded server did not speak
            return _error(400, problem)
        if request.method == "POST":
            return await self._post(request, body)
        session = self._session_for(request, None)
        if isinstance(session, Response):
            return session
        self._serving(request, session)
        if session.handover is not None:
            return await session.handover.forward(request, None)
        if request.method == "GET":
            return await self._get(request, session)
        return await self._delete(request, session)

    async def _body(self, request: Request) -> bytes | Response:
        task = asyncio.current_task()
        assert task is not None
        self._reading_tasks.add(task)
        try:
            read = await _body(request, self.options.max_body)
        finally:
            self._reading_tasks.discard(task)
        if isinstance(read, Response):  # past the limit: the client wanted an answer the replay does not give
            self._unrouted.append(Unmatched(_what(request, None), f"its body is past the {self.options.max_body}-byte "
                                                                  "limit (413)"))
        return read

    async def _post(self, request: Request, read: bytes | None = None) -> Response:
        body = read if read is not None else await self._body(request)
        if isinstance(body, Response):
            return body
        incoming = read_client(body)  # checked once: only well-formed JSON-RPC goes on as a message
        message = incoming.message
        if problem := self._settled(lambda: batch_problem(message, request.headers.get("mcp-protocol-version"),
                                                          self._reading.facts.batches)):
            self._miss(request, None, problem)
            return _made_up([Reply.error(None, INVALID_REQUEST, problem)])  # a 400
        session = self._session_for(request, message)
        if isinstance(session, Response):
            return session
        self._serving(request, session)
        stateless = request.headers.get("mcp-protocol-version") == STATELESS_VERSION
        if stateless:
            if isinstance(message, dict) and message.get("method") == "tools/call":
                self._read_all()  # what a tool mirrors in headers is what the last recorded tools/list said
            if problem := header_mismatch(list(request.headers.items()), message, self._reading.facts.mirrored):
                self._miss(request, message, problem)
                return Response(mismatch_reply(message, problem), 400, media_type="application/json")
        if session.handover is not None:
            return await session.handover.forward(request, body)
        reception = session.replay.receive(body, incoming, list(request.headers.items()), path=_path(request))
        if reception.missed and (found := self._continuation(session, message)) is not None:
            session.replay.withdraw_misses(reception.missed)
            self._continue(session, *found, message, _path(request))
            reception = session.replay.receive(body, incoming, list(request.headers.items()), path=_path(request))
        if does_work(message) and reception.channel is not None and not reception.missed and not reception.repeated:
            session.done.append(message)
        if reception.missed and session.replay.may_hand_over:
            if (handed_over := await self._hand_over(request, session, body, reception.missed)) is not None:
                return handed_over
        channel = reception.channel
        if reception.repeated:
            channel, reception = session.repeat_copy(reception)
        made_up = session.perform(reception)
        if session.legacy_stream is not None and made_up:
            if any(reply.malformed for reply in made_up):
                return _made_up(made_up, reception.batch)  # a 400, as the SDK servers answer a body they cannot parse
            # a legacy client reads answers from its SSE stream only: the POST just gets its 202
            session.deliver([as_stream_message(session.legacy_stream, answer_payload(made_up, reception.batch))])
            made_up = []
        if channel is None or (made_up and session.engine.cut_before_its_head(channel)):
            return _made_up(made_up, reception.batch)
        # At 2026-07-28 a client cancels a request by closing its response stream.
        cancel = partial(session.engine.close_stream, reception.channel) if stateless else None
        return await self._exchange(request, session, Cursor(channel), made_up, cancel)

    async def _get(self, request: Request, session: _Session) -> Response:
        last_event_id = request.headers.get("last-event-id")
        if last_event_id is not None:
            last_event_id = utf8_header(last_event_id)
        target = _target(request)
        reception = session.replay.open("GET", target, last_event_id)
        if reception.channel is None and last_event_id is not None and session.legacy_stream is not None:
            # A legacy HTTP+SSE server resumes no stream: a GET that names an event opens a new session.
            reception = session.replay.open("GET", target)
            if reception.channel is not None:
                self._adapted.append(f"GET {target} with Last-Event-ID {last_event_id[:80]!r}: served as a new session, "
                                     "as a legacy HTTP+SSE server, which resumes no stream, does")
        channel = reception.channel
        if reception.repeated:  # polled back from the same event again: the same continuation
            channel, reception = session.repeat_copy(reception)
        session.perform(reception)
        if channel is not None:
            if last_event_id is None:
                session.standalone_stream = channel
            ended = partial(setattr, session, "stream_closed", True) if channel == session.legacy_stream else None
            return await self._exchange(request, session, Cursor(channel), on_close=ended)
        if last_event_id is not None:
            # A resumption the recording does not have (the live client lost a stream the
            # recorded one did not): continue that stream after the event, from what was released.
            cursor = session.book.resume(last_event_id)
            if cursor is not None:
                return await self._exchange(request, session, cursor)
            session.engine.note_unmatched(f"GET Last-Event-ID {last_event_id!r}", "no stream sent an event with that id")
            return _error(400, f"Bad Request: Last-Event-ID {last_event_id!r} names no event of this session")
        if "GET" not in session.http_methods:
            return _error(405, "Method Not Allowed: the recorded server had no GET stream", allow=session.allowed_methods)
        if not session.engine.opens_to("GET", target):
            session.engine.note_unmatched(f"GET {target}", "the recording has no GET with that path and query")
            return _error(404, f"Not Found: the recording has no GET {target}")
        session.engine.note_unmatched(f"GET {target}", "every recorded GET stream of the session was already opened")
        return _error(409, "Conflict: the recording has no further GET stream for this session")

    async def _delete(self, request: Request, session: _Session) -> Response:
        reception = session.replay.open("DELETE", _target(request))
        session.perform(reception)
        if reception.channel is None:
            return _error(405, "Method Not Allowed: the recorded server was not asked to end the session",
                          allow=session.allowed_methods)
        response = await self._exchange(request, session, Cursor(reception.channel))
        session.deleted = True
        session.close()  # as a server ending the session does, end the streams still open on it
        return response

    def _session_for(self, request: Request, message: Any) -> _Session | Response:
        """The live session a request belongs to, or the error response that says why none (see `_refused`)."""
        session_id = request.headers.get("mcp-session-id") or legacy_session_id(str(request.url))
        if session_id is not None:
            session = self._live.get(session_id)
            # Not issued to a live client yet (its opening request has not come) is unknown too; a
            # legacy session lives as long as its SSE stream, the only place its answers go.
            if (session is None or not session.claimed or session.deleted or session.stream_closed
                    or self._faults.refuses(session_id)):
                return self._refused(request, message, 404, "Not Found: session not found",
                                     f"no live session has the id {session_id[:80]!r}")
            return session
        # A new session is opened the way the recorded one was: initialize, or a legacy GET.
        opening = classify(message) is MessageType.REQUEST and message["method"] == "initialize"
        if opening or (request.method == "GET" and _path(request) in self._legacy_paths):
            found = self._open_session(request.method, message if opening else None, request.headers.get("user-agent"))
            if found is not None:
                return found
        sessionless = self._sessionless
        asked = message.get("method") if isinstance(message, dict) else request.method
        if (sessionless is None or asked not in sessionless.rpc_methods | sessionless.http_methods) and self._read_all():
            return self._session_for(request, message)  # what was read has no session for it: the rest may
        if sessionless is not None and (not self._live or asked in sessionless.rpc_methods | sessionless.http_methods):
            if self._control.repeats is not Repeats.STRICT and sessionless.started_over_by(message, self._control):
                left, sessionless = sessionless, self._served_again(
                    sessionless, f"{_what(request, message)}: served the recorded exchanges outside a session again "
                    "from their start (a client started over)")
                self._sessionless = sessionless
                self._let_go_if_done(left)
            return sessionless
        if not self._legacy_paths or any(s.legacy_path is None and s.recorded_id for s in self._slots):
            return self._refused(request, message, 400, "Bad Request: Mcp-Session-Id header is required",
                                 "it names no session, and opens none (the recorded sessions open with initialize)")
        return self._refused(request, message, 400,
                             "Bad Request: no session named: a legacy HTTP+SSE client posts to the URL its SSE "
                             "stream's endpoint event gave, which carries the session id",
                             "it names no session (a legacy HTTP+SSE client posts to its SSE stream's endpoint URL)")

    def _refused(self, request: Request, message: Any, status: int, answer: str, reason: str) -> Response:
        """A request no session takes, answered with its error. A JSON-RPC request is a miss: its
        client wanted an answer the recording does not have. What the protocol has clients send
        and get refused is noted as adapted: a GET stream asked for outside a session, a
        notification, a 2026-07-28 client's server/discover probe (refused by a server of an
        initialize era, it initializes)."""
        if classify(message) is MessageType.REQUEST and message["method"] != DISCOVER_METHOD:
            self._miss(request, message, reason)
        else:
            self._adapted.append(f"{_what(request, message)}: refused ({status}), as the recorded server would: {reason}")
        return _error(status, answer)

    def _miss(self, request: Request, message: Any, reason: str) -> None:
        """A live request refused before any session's engine saw it: the recording has no answer to it."""
        self._unrouted.append(Unmatched(_what(request, message), reason))

    def _continuation(self, session: _Session, message: Any) -> tuple[_Session, int] | None:
        """For a live request its Streamable HTTP session's recording lacks: another recorded
        session opened the way this one was, and how much of it the live client did already. One
        whose client did what the live one did so far, then this request, first (clients that
        opened alike arrived in another order); else one whose client sent such a request at all
        (a client that ran one session per step). One no live client plays first; else it is
        served again, from a copy."""
        if (session.legacy_stream is not None or session.recorded_id is None or session.first_request is None
                or classify(message) is not MessageType.REQUEST):
            return None
        self._read_all()  # which recordings the live client could go on in: all of them
        control = self._control
        alike = [other for other in self._slots
                 if other.recorded is not session.recorded and other.recorded_id is not None and other.legacy_stream is None
                 and other.opens_like(session.first_request, control)]
        found = ([(other, len(session.done)) for other in alike if other.goes_on_with(session.done, message, control)]
                 + [(other, 0) for other in alike if other.takes_on(message, control)])
        return next((choice for choice in found if not choice[0].claimed), next(iter(found), None))

    def _continue(self, session: _Session, other: _Session, done: int, message: dict[str, Any], path: str) -> None:
        """`session` goes on in `other`'s recording (see `_Session.continue_in`); the pool keeps
        each recording once, in the slot of its recorded order."""
        again = other.claimed
        if again:  # another live session plays it: a fresh copy
            other = self._copy(other)
        if done:
            how = "whose client did what this one did before it (clients that opened alike came in another order)"
        elif session.done:
            how = "which its client opened for it (the live client went on in one session)"
        else:  # either may be so: a first request tells them apart no better
            how = ("whose client sent it, at the live session's first request past its opening (clients that opened alike "
                   "came in another order, or a client runs a session per step)")
        self._adapted.append(f"{request_label(message['method'], message['id'])}: played from recorded session {other.recorded_id}"
                             f"{' again, from a copy' if again else ''}, {how}")
        left, right = self._position[id(session.recorded)], self._position[id(other.recorded)]
        session.continue_in(other, path, done)  # `other` now holds the recording `session` left
        if self._slots[right] is other:
            self._slots[right] = session
        if self._slots[left] is session:
            # a live session that plays a copy of the recording left takes its place; else `other`, afresh
            player = next((s for s in self._sessions if s.claimed and s.recorded is other.recorded and s not in self._slots),
                          None) if not other.claimed else None
            self._slots[left] = player or other
            if player is not None:
                self._sessions.remove(other)
        elif not other.claimed:  # a copy the live session left, played by none
            self._sessions.remove(other)

    def _open_session(self, method: str, opening: dict[str, Any] | None, user_agent: str | None) -> _Session | Response | None:
        """The recorded session a new live session plays: an unclaimed one whose opening request
        matches the live one (equal params first, then by the matcher, a session that did more
        than open before one that did not; recorded order breaks ties), else the first unclaimed
        one opened the same way (its engine names what differed). A legacy session opens with a
        GET, whose head is all it says: the recorded sessions the same client program (User-Agent)
        opened go in recorded order, then the others, those that did more than open first.
        When all of them are taken, a fresh copy of the best one, served from its start (a client
        may open a session per step, or a throwaway one first), reported as adapted; under
        --repeats strict-order an error naming it, counted as unmatched. None: no recorded session
        opens this way."""
        control = self._control
        recorded = [s for s in self._slots if s.recorded_id and s.opening_method == method]
        first = ([s for s in recorded if s.opens_like(opening, control, exactly=True)] if opening is not None
                 else [s for s in recorded if s.user_agent == user_agent])
        free = next((s for s in first if not s.claimed), None)
        if free is None and self._read_all():  # a first choice free in what was read is the first of all
            return self._open_session(method, opening, user_agent)
        # past the first choices, a session that did more than open goes first (see `only_opened`)
        worked_first = sorted(recorded, key=lambda s: only_opened(s.rpc_methods))
        if opening is not None:
            matching = first + [s for s in worked_first if s not in first and s.opens_like(opening, control)]
            pool = matching or worked_first
        else:
            pool = first + [s for s in worked_first if s not in first]
        if not pool:
            return None
        free = next((s for s in pool if not s.claimed), None)
        if free is not None:
            free.claimed = True
            return free
        best = pool[0]
        summary = request_label(opening['method'], opening['id']) if opening is not None else f"{method} (a new session)"
        if control.repeats is not Repeats.STRICT:
            # in turn, in recorded order: a suite run again as it was recorded gets each session again
            turns = tuple(id(s.recorded) for s in pool)
            best = pool[self._turns[turns] % len(pool)]
            self._turns[turns] += 1
            return self._served_again(best, f"{summary}: served recorded session {best.recorded_id} again from its start "
                                            "(every recorded session opened this way was already played)")
        reason = (f"every recorded session that opens this way was already played (session {best.recorded_id}); "
                  "without --repeats strict-order it is served again from its start")
        best.engine.note_unmatched(summary, reason)
        if opening is None:
            return _error(409, f"Conflict: {reason}")
        return _made_up([Reply.error(opening["id"], NO_MATCH, f"mcp-tapes: {reason}")])

    def _served_again(self, played: _Session, noted: str) -> _Session:
        """A fresh copy of a recorded session already played, served from its start; `noted` as adapted."""
        copy = self._copy(played)
        copy.claimed = True
        self._adapted.append(noted)
        return copy

    def _copy(self, played: _Session) -> _Session:
        """A fresh copy of a recorded session, under a live id of its own."""
        self._served_again_count += 1
        copy = _Session(played.recorded, self._control, self._reading, self.options.new_episodes is not None,
                        live_id=f"{played.recorded_id}-again-{self._served_again_count}" if played.recorded_id else None)
        self._sessions.append(copy)
        if copy.live_id is not None:
            self._live[copy.live_id] = copy
        return copy

    async def _hand_over(self, request: Request, session: _Session, body: bytes, misses: int) -> Response | None:
        """The session's first miss: the real server takes the session over from here, and answers
        this request. None when it could not: the session goes on from the cassette alone."""
        assert self.options.new_episodes is not None
        from replayer.handover import (
            Handover,  # with httpx: loaded only for a hand-over
        )

        handover = Handover(self.options.new_episodes, session.recorded_id, session.legacy_path)
        # what the real server says on its stream goes out on the one the client has open
        on_message = (lambda message: session.deliver([as_stream_message(stream, message)])) if (
            stream := session.open_stream) is not None else None
        try:
            await handover.start(session.replay.sent, session.replay.replayed, _path(request), on_message)
        except HandoverFailed as failure:
            await handover.close()
            await anyio.to_thread.run_sync(handover.discard)
            print(failure.notice(), file=sys.stderr, flush=True)
            session.replay.may_hand_over = False
            return None
        session.handover = handover
        session.replay.handed_over(misses)
        return await handover.forward(request, body)

    # --- answers ---------------------------------------------------------------------------

    async def _exchange(self, request: Request, session: _Session, cursor: Cursor, made_up: Sequence[Reply] = (),
                        on_close: Callable[[], None] | None = None) -> Response:
        """The answer on a recorded exchange: its head as recorded, then its body as released, with
        the engine's errors for what the live request had besides (a batch's unmatched items).
        `on_close` is called if the live client closes an SSE body before its end."""
        log = session.book.log(cursor.channel)
        while log.head is None and not log.ended and not session.closing:
            await session.changed()
        if log.head is None:
            if session.deleted:  # the session ended before this request's answer began
                return _error(404, "Not Found: session not found")
            if session.legacy_stream is not None and cursor.channel != session.legacy_stream:
                # The recorded client left before its POST's answer came; a legacy HTTP+SSE server
                # answers every message it takes with 202 (the JSON-RPC answer is on the stream).
                return Response(b"Accepted", 202)
            if _end_reason(log) == "client_disconnect":  # the recorded client gave up waiting: this one will too
                while not session.closing and not await request.is_disconnected():
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(session.changed(), 1.0)
                raise _Drop
            # the upstream could not be reached, or failed before it answered: what the recorder's
            # proxy answered the recorded client (mitmproxy's 502), not a crash of the replay's
            return _error(502, "Bad Gateway: the recorded server did not answer this request")
        if cursor.position == 0 and (wait := self.options.control.delay(log.head.gap) + log.head.hold):
            await session.wait(wait)  # --timing: the head comes when the recorded one came (a slow server's)
        info = log.head.frame.info or {}
        headers = replayed_headers(info.get("headers") or ())
        if session.live_id != session.recorded_id:  # a recorded session served again, under its own id
            headers = [(k, session.live_id if k.lower() == "mcp-session-id" else v) for k, v in headers]
        # a redirect to the recorded server leads to the replay (not to a recorder long gone, nor the real server)
        headers = [(k, self._moved(v, request) if k.lower() in ("location", "content-location") else v) for k, v in headers]
        if is_event_stream(header(headers, "content-type")):
            status = info.get("status", 200)
            events = self._events(session, cursor, request, made_up)
            if _all_at_once(log) and not session.engine.held_open(cursor.channel) and not self._faults.any_on(cursor.channel) \
                    and self.options.control.speed is None:
                # The whole stream is released already (the common case): write it in one go.
                return _with_headers(Response(b"".join([chunk async for chunk in events]), status), headers)
            return _Stream(events, status, headers, on_close)
        while not log.ended and not session.closing:
            await session.changed()
        if wait := sum(self.options.control.delay(d.action.gap) + d.action.hold for d in log.since(cursor.position)):
            await session.wait(wait)  # --timing, or a delay fault: the body comes when the recorded one came
        body = b"".join(d.action.payload for d in log.since(cursor.position) if d.action.frame.kind is not Kind.STREAM_END)
        session.book.sent_whole(cursor.channel)
        if _cut(log):  # an upstream failure, or a drop fault: the head and what of the body came, then the cut
            if (length := header(info.get("headers"), "content-length")) is not None:
                headers.append(("content-length", length))  # the length promised, as the recorded client was
            return _Stream(_cut_after(body), info.get("status", 200), headers)
        if made_up:  # (a body cut before it began has only them)
            body = _with_replies(body, made_up) if body.strip() else answer_payload(made_up, len(made_up) > 1)
        return _with_headers(Response(body, info.get("status", 200)), headers)

    async def _events(self, session: _Session, cursor: Cursor, request: Request, made_up: Sequence[Reply]) -> AsyncIterator[bytes]:
        book, position, channel = session.book, cursor.position, cursor.channel
        log = book.log(channel)
        cut = bool(made_up) and session.engine.cut_inside(channel)
        for reply in () if cut else made_up:
            yield sse_bytes(as_stream_message(channel, reply.payload))
        while True:
            while position >= log.released:
                if cut:  # the recording stops here: what it has, then the errors that say so, and the end
                    for reply in made_up:
                        yield sse_bytes(as_stream_message(channel, reply.payload))
                    return
                if session.closing:
                    return
                await session.changed()
            delivery = log.at(position)
            position += 1
            frame = delivery.action.frame
            if frame.kind is Kind.STREAM_END:
                reason = (frame.info or {}).get("reason")
                if reason == "upstream_error":
                    raise _Drop
                if session.engine.held_open(channel):
                    # The recorded client went away here (and the server never finished, or it was
                    # a GET stream): keep the stream open, as that server did, until the live client
                    # goes away too or the session ends, with what is still sent on it (an error for
                    # what this client asks that the recorded one did not).
                    continue
                book.sent_whole(channel)  # (a reader asks past the last event once it was written, or joined to be)
                return
            if channel == session.legacy_stream:
                log.forget_before(position)
            if delivery.event is None:  # bytes of an unterminated last event, kept verbatim
                yield delivery.action.payload
                continue
            if (delay := (self._faults.delay_before(channel, delivery.event) + self.options.control.delay(delivery.action.gap)
                          + delivery.action.hold)) and not await session.wait(delay):
                return
            yield self._event_bytes(delivery.action, request, session)
            if self._faults.malformed_after(channel, delivery.event):
                yield MALFORMED_EVENT
            if self._faults.drop_after(channel, delivery.event):
                raise _Drop

    def _moved(self, url: str, request: Request) -> str:
        """`url` on the replay's origin where it named the recorded server's (as its client saw it,
        or as the recorder reached it); any other URL as it is."""
        origin = f"{request.url.scheme}://{request.url.netloc}"
        for recorded in (self.auth.recorded_origin, self._reading.header.server.get("url")):
            if (moved := moved_to_origin(url, recorded, origin)) != url:
                return moved
        return url

    def _event_bytes(self, action: Action, request: Request, session: _Session) -> bytes:
        info = action.frame.info or {}
        if info.get("event") != "endpoint":
            return sse_bytes(action)
        data = self._moved(action.payload.decode("utf-8", "replace"), request)
        if session.live_id != session.recorded_id and session.recorded_id:
            data = data.replace(f"={session.recorded_id}", f"={session.live_id}")  # the endpoint names the live session
        return sse_bytes(Action(action.frame, data.encode()))


_SESSION_KEY = "tapes.session"  # in a request's ASGI scope: the live session it belongs to


class _Then(Response):
    """A response, then `done` once it is sent in full, cut, or its client went away."""

    def __init__(self, response: Response, done: Callable[[], None]) -> None:
        self._response, self._done = response, done

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await self._response(scope, receive, send)
        finally:
            self._done()


class _Stream(Response):
    """An SSE body written as it is released. The client going away ends it (so a reader waiting
    for the next event does not outlive its connection) and calls `on_close` if the body was not
    finished; `_Drop` cuts the connection mid-body."""

    def __init__(self, chunks: AsyncIterator[bytes], status: int, headers: list[tuple[str, str]],
                 on_close: Callable[[], None] | None = None) -> None:
        self._chunks = chunks
        self._on_close = on_close
        self.status_code = status
        self.raw_headers = [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in headers]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        finished = False
        async with anyio.create_task_group() as tasks:

            async def watch_disconnect() -> None:
                while (await receive())["type"] != "http.disconnect":
                    pass
                if not finished and self._on_close is not None:
                    self._on_close()
                tasks.cancel_scope.cancel()

            tasks.start_soon(watch_disconnect)
            await send({"type": "http.response.start", "status": self.status_code, "headers": self.raw_headers})
            async for chunk in self._chunks:
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
            finished = True
            await send({"type": "http.response.body", "body": b"", "more_body": False})
            tasks.cancel_scope.cancel()


async def _body(request: Request, limit: int) -> bytes | Response:
    declared = request.headers.get("content-length")
    if declared is not None and is_digits(declared) and int(declared) > limit:
        return _too_large(limit)
    chunks, size = [], 0
    try:
        async for chunk in request.stream():
            size += len(chunk)
            if size > limit:
                return _too_large(limit)
            chunks.append(chunk)
    except ClientDisconnect:
        raise _Drop from None
    return b"".join(chunks)


def _end_reason(log: ChannelLog) -> str | None:
    return (log.body[-1].action.frame.info or {}).get("reason") if log.ended else None


def _cut(log: ChannelLog) -> bool:
    """Whether the stream ends with the connection cut (a recorded upstream failure, a drop fault)."""
    return _end_reason(log) == "upstream_error"


def _all_at_once(log: ChannelLog) -> bool:
    """Whether a released SSE stream can be written in one go: it has ended, is not cut, and
    nothing is held back (the caller checks it is not held open either)."""
    return log.ended and _end_reason(log) != "upstream_error" and not any(delivery.action.hold for delivery in log.body)


async def _cut_after(body: bytes) -> AsyncIterator[bytes]:
    """`body`, then the connection cut."""
    if body:
        yield body
    raise _Drop


def _with_replies(body: bytes, replies: Sequence[Reply]) -> bytes:
    """A recorded JSON answer with the engine's errors added, as one batch."""
    return wire_form([*items(parse(body)), *(reply.message for reply in replies)])


def _alike(recorded: Any, live: Any, control: ReplayControl) -> bool:
    """Whether a live message (`does_work`) is like a recorded one: a request by the matcher, a
    batch by the methods of its items."""
    if isinstance(recorded, dict) and isinstance(live, dict):
        return control.matcher.matches(recorded, live)
    methods = [[item.get("method") if isinstance(item, dict) else None for item in message]
               for message in (recorded, live) if isinstance(message, list)]
    return len(methods) == 2 and methods[0] == methods[1]


def _what(request: Request, message: Any) -> str:
    """A live request as a summary names it."""
    if classify(message) is MessageType.REQUEST:
        return request_label(message['method'], message['id'])
    return _named(request.method, _target(request))


def _named(method: str, target: str) -> str:
    """A request as a summary names it by its method and target (a client_secret in a query stays off logs)."""
    return f"{method} {redact_url(target, lambda _: '<hidden>')}"


def _path(request: Request) -> str:
    """The request's path as the client sent it, escapes and all (as recorded)."""
    return request.scope.get("raw_path", request.scope["path"].encode()).decode("latin-1")


def _target(request: Request) -> str:
    """The request's path and query as the client sent them (as recorded)."""
    query = request.scope.get("query_string", b"")
    return _path(request) + (f"?{query.decode('latin-1')}" if query else "")


def _with_headers(response: Response, headers: Sequence[tuple[str, str]]) -> Response:
    """`response` with recorded `headers`, one that came twice (two WWW-Authenticate challenges,
    two Set-Cookie) as often as it came."""
    for name, value in headers:
        response.headers.append(name, value)
    return response


def _too_large(limit: int) -> Response:
    return _error(413, f"Payload Too Large: request bodies are limited to {limit} bytes")


def _made_up(replies: list[Reply], batch: bool = False) -> Response:
    """The answer to a POST that matched no recorded exchange: the engine's errors as JSON (400
    for a body that is not JSON-RPC; an array for a batch), or 202 when it was a notification or response."""
    if not replies:
        return Response(status_code=202)
    status = 400 if any(reply.malformed for reply in replies) else 200
    return Response(answer_payload(replies, batch), status, media_type="application/json")


def _other_method(request: Request, *_: Any) -> Response:
    """A method the transport has no use for (PUT, PATCH, HEAD, ...): its 405, with a JSON-RPC body as every refusal."""
    return _error(405, f"Method Not Allowed: {request.method}")


def _error(status: int, message: str, allow: Collection[str] | None = None) -> Response:
    """An HTTP error with a JSON-RPC error body without id, as the SDK servers send them; a 405
    names the methods `allow`ed there, every one of the transport's without it."""
    body = encode({"jsonrpc": "2.0", "id": None, "error": {"code": -32000, "message": message}})
    headers = {}
    if status == 405:
        methods = allow if allow is not None else {"GET", "POST", "DELETE"}
        headers["Allow"] = ", ".join(m for m in ("GET", "POST", "DELETE") if m in methods)
    return Response(body, status, headers=headers, media_type="application/json")


# --- serving -------------------------------------------------------------------------------------


class _Server(uvicorn.Server):
    """uvicorn, ending the replayer's open streams first when it shuts down (it would otherwise
    wait for them: a GET stream never ends by itself), and stopping as soon as it is asked to
    (uvicorn looks for that ten times a second; a test suite pays it on every test)."""

    def __init__(self, replayer: HttpReplayer, config: uvicorn.Config) -> None:
        super().__init__(config)
        self.replayer = replayer
        self._loop: asyncio.AbstractEventLoop | None = None
        self._wake: asyncio.Event | None = None
        self.on_serving: Callable[[], None] | None = None  # called once it serves and handles signals

    async def main_loop(self) -> None:
        self._loop, self._wake = asyncio.get_running_loop(), asyncio.Event()
        if self.on_serving is not None:
            self.on_serving()
        counter = 0
        while not await self.on_tick(counter):
            counter = (counter + 10) % 864000  # a tick a second: on_tick refreshes the Date header every 10
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), 1.0)

    def stop_soon(self) -> None:
        """Ask the server to stop, from any thread."""
        self.should_exit = True
        if self._loop is not None and self._wake is not None:
            with contextlib.suppress(RuntimeError):  # its loop is closed: it has stopped already
                self._loop.call_soon_threadsafe(self._wake.set)

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        """uvicorn's shutdown (no lifespan here), with its fixed 0.1 s pauses turned into a short
        poll: every replayed stream is ended first, so connections close at once."""
        await self.replayer.close()
        for server in self.servers:
            server.close()
        for sock in sockets or []:
            sock.close()
        for connection in list(self.server_state.connections):
            connection.shutdown()
        deadline = asyncio.get_running_loop().time() + (self.config.timeout_graceful_shutdown or 5.0)
        while (self.server_state.connections or self.server_state.tasks) and asyncio.get_running_loop().time() < deadline:
            await asyncio.sleep(0.002)
        for task in self.server_state.tasks:
            task.cancel()
        for server in self.servers:
            await server.wait_closed()


def _listening_socket(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    # Accepted connections inherit it: a response head and body written apart must not wait
    # for the client's delayed ACK (40 ms per request otherwise).
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    try:
        sock.bind((host, port))
    except OSError as error:
        sock.close()
        raise UserError(f"cannot listen on {host}:{port} ({error.strerror})") from None
    sock.listen(128)
    return sock


def _uvicorn(replayer: HttpReplayer) -> _Server:
    logging.getLogger("uvicorn.error").addFilter(_QuietDrops())
    config = uvicorn.Config(replayer.app, log_level="warning", lifespan="off", access_log=False,
                            http=guarded_protocol(replayer.options.limits, replayer.refused_at_connection))
    return _Server(replayer, config)


def _exposure_warning(sock: socket.socket) -> str | None:
    """The warning for a replayer others can reach: it listens beyond the loopback interface."""
    host = sock.getsockname()[0]
    address = ipaddress.ip_address(host.split("%", 1)[0])
    if address.is_loopback:
        return None
    where = "every interface" if address.is_unspecified else "an address that is not loopback"
    return (f"tapes: WARNING: listening on {host}, {where}: other machines can reach this replayer "
            "and what the cassette holds (use --listen 127.0.0.1:PORT to keep it local)")


def _url(sock: socket.socket, path: str) -> str:
    host, port = sock.getsockname()[:2]
    return f"http://{f'[{host}]' if ':' in host else host}:{port}{path}"


class ReplayServer:
    """An HTTP replayer running in this process, on a thread of its own (see `replay_server`)."""

    def __init__(self, replayer: HttpReplayer, host: str, port: int) -> None:
        self.replayer = replayer
        self._socket = _listening_socket(host, port)
        self.url = _url(self._socket, replayer.endpoint)  # the recorded endpoint on this server
        self._server = _uvicorn(replayer)
        self._thread = threading.Thread(target=self._server.run, kwargs={"sockets": [self._socket]}, daemon=True)
        self._stopping, self._stopped = threading.Lock(), False

    def start(self) -> ReplayServer:
        # The socket already listens: connections made before uvicorn runs wait in its backlog.
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and put new episodes into the cassette; once (a second call does nothing)."""
        with self._stopping:  # stop may be asked from two threads at once
            if self._stopped:
                return
            self._stopped = True
        self._server.stop_soon()
        self._thread.join(timeout=10)
        self._socket.close()
        self.replayer.add_new_episodes()

    @property
    def report_lines(self) -> list[str]:
        return self.replayer.report_lines()

    @property
    def clean(self) -> bool:
        return self.replayer.clean


@contextlib.contextmanager
def replay_server(
    cassette: Cassette | str | os.PathLike[str],
    *,
    host: str = "127.0.0.1",
    port: int = 0,
    options: ReplayOptions | None = None,
) -> Iterator[ReplayServer]:
    """Serve `cassette` over HTTP in this process while the block runs; `server.url` is the
    recorded endpoint (e.g. http://127.0.0.1:PORT/mcp), `server.report_lines` the summary."""
    loaded = cassette if isinstance(cassette, Cassette) else load(cassette)
    server = ReplayServer(HttpReplayer(loaded, options), host, port).start()
    try:
        yield server
    finally:
        server.stop()


def replay_http(cassette: Cassette | CassetteStream, host: str, port: int, *, options: ReplayOptions, strict: bool = True,
                report_path: Path | None = None) -> int:
    """Serve `cassette` until SIGINT/SIGTERM, then print the summary on stderr (like the stdio
    replayer) and, as JSON, to `report_path` when given. Returns 1 when something did not match
    and `strict`, else 0. A stream too big to read before serving is read as it is served (its
    warnings, such as a cut last frame, are said once its end is read: with the summary)."""
    console = stderr_console()
    replayer = HttpReplayer(cassette, options)
    warned = replayer.read_through
    if warned:
        print_warnings(console, cassette)
    sock = _listening_socket(host, port)
    if warning := _exposure_warning(sock):
        console.print(warning, style="yellow", soft_wrap=True, markup=False)

    server = _uvicorn(replayer)

    def announce() -> None:  # only now: a SIGINT sent on seeing it is uvicorn's to handle
        if ctrl_c_dropped():  # while the modules loaded: as one that comes now
            server.should_exit = True
        console.print(f"tapes: replaying at {_url(sock, replayer.endpoint)}", soft_wrap=True, markup=False)
        if replayer.auth and (served := replayer.auth.served_as(_url(sock, ""))):
            console.print(f"tapes: the recorded origins are served as {served}", soft_wrap=True, markup=False)
        sys.stderr.flush()

    # uvicorn raises the signal that stopped it again once it is done: it lands on the server's own
    # handler, which a finished server ignores, so the summary below is still printed. Until uvicorn
    # takes the signals over, that handler stops the server as soon as it starts (a no-op lost them).
    # A closed terminal (SIGHUP, which uvicorn leaves alone) stops it as they do, summary and all.
    previous = {signum: signal.signal(signum, server.handle_exit) for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
                if signal.getsignal(signum) is not signal.SIG_IGN}
    try:
        server.on_serving = announce
        server.run(sockets=[sock])
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    replayer.add_new_episodes()
    if report_path is not None:
        write_report(report_path, replayer.report().as_json())
    lines = replayer.report_lines()  # (the whole cassette read)
    if not warned:
        print_warnings(console, cassette)
    clean = print_summary(console, lines, replayer.clean)
    if replayer.failure is not None:
        raise UserError(replayer.failure)
    return 1 if strict and not clean else 0
