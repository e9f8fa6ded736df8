"""New episodes over HTTP: a replayed session handed over to the real server at its first miss.

The real server is reached through `tapes record --upstream`, so what it says is recorded. It is
first warmed up with the live client's POSTs so far (`tapes.replay.episodes.WarmUp`: in order, a client
answer under the id of the real server's own request; the server's answers are not forwarded);
from then on every request of the session is forwarded with the real server's session id in place
of the replayed one, and the answer streamed back as it comes. What the real server sends on a
stream the live client has open on the replay (the standalone GET stream; a legacy session's SSE
stream, where all its answers go) is handed to the replayer for that stream. At the end the
recording, minus its warm-up, becomes frames of the replayed session (`tapes.replay.episodes.http_episode`).
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
from collections.abc import AsyncIterator, Callable, Coroutine
from pathlib import Path
from typing import Any
from urllib.parse import urljoin, urlsplit

import anyio
import httpx
from starlette.background import BackgroundTask
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from recorder.process import HttpRecorderProcess
from tapes.cassette.frames import Frame
from tapes.cassette.store import load
from tapes.replay.episodes import (
    WARM_UP_TIMEOUT,
    HandoverFailed,
    NewEpisodes,
    WarmUp,
    http_episode,
)
from tapes.replay.http_rules import replayed_headers
from tapes.replay.sessions import SESSION_HEADER
from tapes.wire.http import moved_to_origin
from tapes.wire.jsonrpc import decode, encode, items
from tapes.wire.sse import SSEEvent, SSEParser, is_event_stream

_NOT_FORWARDED = frozenset({"host", "content-length", "connection", "transfer-encoding", "keep-alive"})

Headers = list[tuple[str, str]]
OnMessage = Callable[[bytes], object]


class Handover:
    """One replayed session, taken over by the real server. `legacy_path`: the SSE path of a
    legacy HTTP+SSE session (its answers come on that stream, its POSTs go to the endpoint the
    stream names)."""

    def __init__(self, plan: NewEpisodes, recorded_session: str | None, legacy_path: str | None = None) -> None:
        self._recorded_session = recorded_session
        self._legacy_path = legacy_path
        self._scratch = tempfile.TemporaryDirectory(prefix="tapes-episode-")
        self._recording = Path(self._scratch.name) / "episode.tape"
        self._plan = plan
        self._recorder: HttpRecorderProcess | None = None
        self._client = httpx.AsyncClient(timeout=None)
        self._origin = ""  # the recorder's
        self._endpoint: str | None = None  # a legacy session's POST URL, on the recorder
        self._live_session: str | None = None  # the id the real server issued
        self._warm_up = WarmUp([])
        self._warming = True
        self._changed = asyncio.Event()  # the warm-up heard from the server
        self._background: set[asyncio.Task[None]] = set()
        self._stream_headers: Headers = []

    async def start(self, sent: list[tuple[bytes, Headers]], replayed: list[bytes], path: str,
                    on_stream_message: OnMessage | None) -> None:
        """Start the recorder in front of the real server and bring it to the live session's state.
        `on_stream_message` gets what the server then sends on the stream the client has open (if
        it has one: a legacy session always has)."""
        self._recorder = await anyio.to_thread.run_sync(
            HttpRecorderProcess, self._recording, str(self._plan.real_server), self._plan.record_flags)
        recorder = urlsplit(self._recorder.url)
        self._origin = f"{recorder.scheme}://{recorder.netloc}"
        self._warm_up = WarmUp((body for body, _ in sent), replayed)
        # what a GET of the session carries: its id, mapped in `_send`, and the protocol version
        self._stream_headers = [(name, value) for name, value in (sent[-1][1] if sent else ())
                                if name.lower() in (SESSION_HEADER, "mcp-protocol-version")]
        if self._legacy_path is not None:
            await self._open_legacy_stream(on_stream_message)
        await self._warm(sent, path)
        self._warming = False
        if self._legacy_path is None and on_stream_message is not None:
            self._spawn(self._listen(path, on_stream_message))

    async def _warm(self, sent: list[tuple[bytes, Headers]], path: str) -> None:
        deadline = anyio.current_time() + WARM_UP_TIMEOUT
        index = 0
        while True:
            self._changed.clear()  # before looking: what the server says while we send wakes the wait below
            for body in self._warm_up.lines_to_send():
                try:
                    response = await self._send("POST", self._endpoint or path, sent[index][1], body)
                except httpx.HTTPError as error:
                    raise HandoverFailed(f"the recorder in front of it failed: {error}") from None
                if response.status_code >= 500:
                    await response.aclose()
                    raise HandoverFailed(f"it answered HTTP {response.status_code} during the warm-up")
                index += 1
                self._live_session = self._live_session or response.headers.get(SESSION_HEADER)
                self._spawn(self._swallow(response))
            if self._warm_up.done:
                return
            if anyio.current_time() >= deadline:
                print(self._warm_up.unfinished(), file=sys.stderr, flush=True)
                return
            with anyio.move_on_after(deadline - anyio.current_time()):
                await self._changed.wait()

    def _heard(self, message: bytes, on_stream_message: OnMessage | None = None) -> None:
        """A message from the server: the warm-up's while it lasts, then the live stream's."""
        if self._warming:
            self._warm_up.server_line(message)
            self._changed.set()
        elif on_stream_message is not None:
            on_stream_message(message)

    async def _swallow(self, response: httpx.Response) -> None:
        """Read a warm-up answer to its end, telling the warm-up every message in it."""
        try:
            if is_event_stream(response.headers.get("content-type")):
                async for event in _events(response):
                    self._heard(event.data.encode())
            elif (body := await response.aread()) and (message := decode(body).message) is not None:
                for item in items(message):
                    self._heard(encode(item))
        except httpx.HTTPError:
            pass  # a warm-up stream cut short: what it had was taken
        finally:
            await response.aclose()

    async def _open_legacy_stream(self, on_stream_message: OnMessage | None) -> None:
        """GET the real server's SSE stream; wait for the endpoint it names."""
        assert self._legacy_path is not None
        stream_url = self._origin + self._legacy_path
        response = await self._send("GET", self._legacy_path, [("accept", "text/event-stream")], None)
        if response.status_code != 200:
            await response.aclose()
            raise HandoverFailed(f"it answered HTTP {response.status_code} to GET {self._legacy_path}")
        named = asyncio.Event()

        async def read() -> None:
            try:
                async for event in _events(response):
                    if event.event == "endpoint" and self._endpoint is None:
                        self._endpoint = urljoin(stream_url, moved_to_origin(event.data, str(self._plan.real_server), self._origin))
                        named.set()
                    else:
                        self._heard(event.data.encode(), on_stream_message)
            except httpx.HTTPError:
                pass  # the stream ended with the session
            finally:
                await response.aclose()

        self._spawn(read())
        with anyio.move_on_after(WARM_UP_TIMEOUT):
            await named.wait()
        if self._endpoint is None:
            raise HandoverFailed(f"its SSE stream named no endpoint within {WARM_UP_TIMEOUT:g} s")

    async def _listen(self, path: str, on_stream_message: OnMessage) -> None:
        """The real server's standalone GET stream, if it has one, for the one the client has open."""
        response = await self._send("GET", path, [("accept", "text/event-stream"), *self._stream_headers], None)
        try:
            if response.status_code == 200:
                async for event in _events(response):
                    on_stream_message(event.data.encode())
        except httpx.HTTPError:
            pass  # the stream ended with the session
        finally:
            await response.aclose()

    async def forward(self, request: Request, body: bytes | None) -> Response:
        """The live request sent to the real server; its answer streamed back as it comes."""
        target = self._endpoint if self._endpoint and request.method == "POST" else request.url.path
        response = await self._send(request.method, target, list(request.headers.items()), body, request.url.query)
        headers = [(name, self._recorded_session or value) if name.lower() == SESSION_HEADER else (name, value)
                   for name, value in replayed_headers(response.headers.multi_items())]
        return StreamingResponse(response.aiter_raw(), response.status_code, headers=dict(headers),
                                 background=BackgroundTask(response.aclose))

    async def _send(self, method: str, target: str, headers: Headers, body: bytes | None, query: str = "") -> httpx.Response:
        """Send to the recorder: `target` is a path on it, or a whole URL (a legacy endpoint)."""
        forwarded = [(name, self._live_session if name.lower() == SESSION_HEADER and self._live_session else value)
                     for name, value in headers if name.lower() not in _NOT_FORWARDED]
        url = target if "://" in target else self._origin + target + (f"?{query}" if query else "")
        request = self._client.build_request(method, url, headers=forwarded, content=body)
        return await self._client.send(request, stream=True)

    def _spawn(self, work: Coroutine[Any, Any, None]) -> None:
        task = asyncio.ensure_future(work)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def close(self) -> None:
        for task in list(self._background):
            task.cancel()
        await self._client.aclose()

    def discard(self) -> None:
        """Stop the recorder and forget what it recorded."""
        if self._recorder is not None:
            self._recorder.stop()
        self._scratch.cleanup()

    def finish(self, first_exchange: int, open_stream: str | None) -> list[Frame]:
        """Stop the recorder; what it recorded after the warm-up, as frames of the replayed session
        (`open_stream`: the recorded stream the live client had open, which the real one's joins)."""
        assert self._recorder is not None
        self._recorder.stop()
        try:
            recording = load(self._recording)
        finally:
            self._scratch.cleanup()
        # a legacy stream's events before the hand-over were its endpoint and the warm-up's answers
        skipped = 1 + self._warm_up.swallowed if self._legacy_path is not None else 0
        return http_episode(recording, self._warm_up.sent, self._recorded_session, first_exchange, open_stream, skipped)


async def _events(response: httpx.Response) -> AsyncIterator[SSEEvent]:
    """The SSE events of a response that carry data (or name a legacy endpoint)."""
    parser = SSEParser()
    async for chunk in response.aiter_raw():
        for event in parser.feed(chunk):
            if event.data or event.event == "endpoint":
                yield event
