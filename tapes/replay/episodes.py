"""New episodes, sans-IO: what the `new_episodes` record mode needs besides a replayer and a
recorder. On the first client message a cassette has no answer for, the replay hands the session
over to the real server: `WarmUp` brings a fresh server to where the live session stands by sending
it what the live client has sent so far (the server's answers to that are not the client's to
see), then everything goes to the real server through a recorder. `splice` puts what was recorded
from the hand-over on into the cassette, after the recorded frames the run played and before
those it did not, so the next run replays the old interactions and the new ones.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Collection, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tapes.cassette.frames import STDIO, Frame, Kind, http_channel
from tapes.cassette.store import Cassette
from tapes.replay.sessions import SESSION_HEADER
from tapes.wire.http import header, legacy_session_id
from tapes.wire.jsonrpc import MessageType, classify, encode, items, parse

WARM_UP_TIMEOUT = 30.0
"""Seconds a real server gets to answer the warm-up before the hand-over goes ahead anyway."""


@dataclass
class NewEpisodes:
    """Where a replay hands a session over at its first miss: the real server (a stdio server's
    command, or an HTTP server's URL), the cassette the new episode goes into, and the flags the
    recorder in front of the real server gets (e.g. --before-record)."""

    real_server: list[str] | str
    cassette: Path
    record_flags: list[str] = field(default_factory=list)


class HandoverFailed(Exception):
    """The real server could not be brought to the live session's state."""

    def notice(self) -> str:
        return f"tapes replay: the real server could not take over ({self}): the session goes on from the cassette alone"


class WarmUp:
    """Feeds a real server the live client's messages so far, in order, as the real server expects
    them. A client answer to a server request goes out once the real server has asked its own,
    under that request's id. A 2026-07-28 retry carrying the `requestState` the replay handed out
    goes out once the real server has issued its own state for the same request, in its place
    (the server minted it; a recorded one means nothing to a new server). The warm-up is done when
    every request it sent has been answered.

    `replayed_lines` are what the replay sent the live client meanwhile (where its states came from)."""

    def __init__(self, client_lines: Iterable[bytes], replayed_lines: Iterable[bytes] = ()) -> None:
        self._queue = deque(client_lines)
        self._awaited: set[Any] = set()  # ids of requests sent, not answered yet
        self._server_requests: deque[Any] = deque()  # ids of the real server's requests, not answered yet
        self._replayed_states = {  # request id -> the requestState the replay answered it with
            item["id"]: state for item in _results(replayed_lines) if (state := _request_state(item.get("result"))) is not None
        }
        self._states: dict[str, str | None] = {}  # a replayed requestState -> the real server's (None: it issued none)
        self.sent = 0  # client lines sent
        self.swallowed = 0  # server lines the warm-up took (the live client never sees them)

    def lines_to_send(self) -> list[bytes]:
        """The client lines that can go to the server now."""
        out = []
        while self._queue:
            line = self._ready(self._queue[0])
            if line is None:
                break
            self._queue.popleft()
            out.append(line)
            self.sent += 1
        return out

    def _ready(self, line: bytes) -> bytes | None:
        """The line as the real server must get it, or None while it has to wait."""
        message = parse(line)
        if message is None:
            return line
        if _is_answer(message):
            if not self._server_requests:
                return None  # its server request has not come yet
            return encode({**message, "id": self._server_requests.popleft()})
        out = []
        for item in items(message):
            state = (item.get("params") or {}).get("requestState") if classify(item) is MessageType.REQUEST else None
            if state in self._replayed_states.values():
                if state not in self._states:
                    return None  # the real server has not answered the first try yet
                if self._states[state] is not None:
                    item = {**item, "params": {**item["params"], "requestState": self._states[state]}}
            out.append(item)
        self._awaited.update(item["id"] for item in out if classify(item) is MessageType.REQUEST)
        if out == items(message):
            return line
        return encode(out if isinstance(message, list) else out[0])

    def server_line(self, line: bytes) -> None:
        """A line the server wrote during the warm-up."""
        self.swallowed += 1
        for item in _results([line]):
            self._awaited.discard(item.get("id"))
            if item.get("id") in self._replayed_states:
                self._states[self._replayed_states[item["id"]]] = _request_state(item.get("result"))
        message = parse(line)
        for item in items(message) if message is not None else ():
            if classify(item) is MessageType.REQUEST:
                self._server_requests.append(item["id"])

    @property
    def done(self) -> bool:
        return not self._queue and not self._awaited

    def unfinished(self) -> str:
        """The warning for a warm-up that ran out of time: what it still waited for."""
        return (f"tapes replay: the real server's warm-up did not finish ({len(self._queue)} client messages "
                f"unsent, {len(self._awaited)} requests unanswered); handing over anyway")


def _is_answer(message: Any) -> bool:
    return isinstance(message, dict) and classify(message) in (MessageType.RESULT, MessageType.ERROR)


def _results(lines: Iterable[bytes]) -> list[dict[str, Any]]:
    """The results and errors in these lines."""
    out = []
    for line in lines:
        message = parse(line)
        for item in items(message) if message is not None else ():
            if classify(item) in (MessageType.RESULT, MessageType.ERROR):
                out.append(item)
    return out


def _request_state(result: Any) -> str | None:
    state = result.get("requestState") if isinstance(result, dict) else None
    return state if isinstance(state, str) else None


def episode_frames(recording: Cassette, warm_up: WarmUp) -> list[Frame]:
    """The frames of a recording through the hand-over that came after its warm-up: after the
    client lines the warm-up sent and the server lines it took (a line is a frame)."""
    client_seen = server_seen = cut = 0
    for index, frame in enumerate(recording.frames):
        if frame.kind not in (Kind.MESSAGE, Kind.RAW):
            continue
        if frame.from_client:
            client_seen += 1
            in_warm_up = client_seen <= warm_up.sent
        else:
            server_seen += 1
            in_warm_up = server_seen <= warm_up.swallowed
        if in_warm_up:
            cut = index + 1
    return recording.frames[cut:]


def splice(cassette: Cassette, played: set[int], episode: list[Frame], replaced: Collection[int] | None = None) -> Cassette:
    """The cassette with `episode` put in after the recorded frames this run played (`played`: their
    seqs). The unplayed frames of the sessions the episode continues (`replaced`: their seqs; None
    for all, as on stdio) are what the recorded client did after the point where the live one went
    another way: the episode replaces them, so they are dropped (kept, they would be reported
    unused on every later run, and reuse the episode's request ids). Unplayed frames of other
    sessions stay, after the episode. The recorded session's end (the client's end of input and
    what followed, less the messages it did not play) stays last; the episode's own ending is left
    out, but not the real server's answers that came after it. Frames are renumbered and the
    episode's times moved to follow the played ones."""
    frames = cassette.frames
    end = _client_end(frames)
    # the real server's answers that came after its client's end (a client that wrote everything,
    # closed its input, then read) are the episode's too; its ending is not
    episode_end = _client_end(episode)
    episode = [*episode[:episode_end], *(f for f in episode[episode_end:] if not f.from_client and f.kind is Kind.MESSAGE)]
    if not episode:
        return cassette
    # an HTTP request head is not matched itself (its body is): it was played if its exchange was
    played_exchanges = {f.channel for f in frames if f.seq in played and f.channel != STDIO}
    was_played = [frame.seq in played or (frame.kind is Kind.HTTP_REQUEST and frame.channel in played_exchanges)
                  for frame in frames[:end]]
    before = [frame for frame, is_played in zip(frames, was_played) if is_played]
    kept = [frame for frame, is_played in zip(frames, was_played)
            if not is_played and replaced is not None and frame.seq not in replaced]
    # what the recorded server said after its client's end that this run did not play answered
    # what the episode replaced: it goes with it (a client got the recorded answer after the new one)
    ending = [frame for frame in frames[end:] if frame.seq in played or frame.kind is not Kind.MESSAGE
              or (replaced is not None and frame.seq not in replaced)]
    after = kept + ending
    shift = (before[-1].t if before else 0.0) - episode[0].t
    duration = episode[-1].t - episode[0].t
    moved = [
        *before,
        *(frame._replace(t=frame.t + shift) for frame in episode),
        *(frame._replace(t=frame.t + duration) for frame in after),
    ]
    renumbered = [frame._replace(seq=seq) for seq, frame in enumerate(moved, start=1)]
    return Cassette(cassette.header, renumbered, list(cassette.warnings))


def _client_end(frames: list[Frame]) -> int:
    """The index of the client's end of input (the length when there is none)."""
    return next((i for i, f in enumerate(frames) if f.from_client and f.kind is Kind.STREAM_END), len(frames))


def http_episode(recording: Cassette, warm_up_posts: int, session_id: str | None, first_exchange: int,
                 open_stream: str | None = None, skipped_events: int = 0) -> list[Frame]:
    """The frames of an HTTP hand-over's recording after its warm-up (its first `warm_up_posts`
    POST exchanges), as frames of the replayed session: the session id the real server issued
    (in `Mcp-Session-Id`, or in a legacy endpoint's URL) is put back to the recorded `session_id`,
    and exchanges are renumbered from `first_exchange`. The real server's stream opened for the
    one the live client had open on the replay (`open_stream`: its standalone GET stream, or a
    legacy session's SSE stream) becomes the rest of that one: its events only, after the first
    `skipped_events` (those the warm-up took), on that channel."""
    heads = [f for f in recording.frames if f.kind is Kind.HTTP_REQUEST]
    posts = [f.channel for f in heads if (f.info or {}).get("method") == "POST"]
    warm_up = set(posts[:warm_up_posts])
    listened = {f.channel for f in heads if (f.info or {}).get("method") == "GET" and not _resumes(f)} if open_stream else set()
    issued = next((value for f in recording.frames if f.kind is Kind.HTTP_RESPONSE
                   if (value := header((f.info or {}).get("headers"), SESSION_HEADER)) is not None), None)
    issued_legacy = next((legacy_session_id(f.payload.decode("utf-8", "replace")) for f in recording.frames
                          if f.kind is Kind.SSE_EVENT and (f.info or {}).get("event") == "endpoint"), None)
    channels: dict[str, str] = {channel: open_stream for channel in listened if open_stream}
    events_seen: dict[str, int] = {}
    out = []
    for frame in recording.frames:
        if frame.channel in warm_up:
            continue
        if frame.channel in listened:
            if frame.kind is not Kind.SSE_EVENT:
                continue  # the live client's stream is open already, and stays open
            events_seen[frame.channel] = events_seen.get(frame.channel, 0) + 1
            if events_seen[frame.channel] <= skipped_events:
                continue
        if frame.channel not in channels:
            channels[frame.channel] = http_channel(first_exchange + len(channels) - len(listened))
        info = frame.info
        if info and session_id is not None:
            if "headers" in info and issued is not None:
                info = {**info, "headers": [[name, session_id if name.lower() == SESSION_HEADER and value == issued else value]
                                            for name, value in info["headers"]]}
            if "path" in info and issued_legacy is not None:
                info = {**info, "path": info["path"].replace(f"={issued_legacy}", f"={session_id}")}
        out.append(frame._replace(channel=channels[frame.channel], info=info))
    return out


def _resumes(head: Frame) -> bool:
    return header((head.info or {}).get("headers"), "last-event-id") is not None


def last_exchange(frames: list[Frame]) -> int:
    """The highest exchange number of an HTTP recording's channels (0 if none)."""
    return max((int(f.channel[5:]) for f in frames if f.channel.startswith("http:")), default=0)
