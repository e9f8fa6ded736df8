"""New episodes over HTTP: a replayed session handed over to the real server at its first miss.

The real server is reached through `tapes record --upstream`, so what it says is recorded. It is
first warmed up with the live client's POSTs so far (`tapes.episodes.WarmUp`: in order, a client
answer under the id of the real server's own request; the server's answers are not forwarded);
from then on every request of the session is forwarded with the real server's session id in place
of the replayed one, and the answer streamed back as it comes. At the end the recording, minus its
warm-up, becomes frames of the replayed session (`tapes.episodes.http_episode`).
"""

from __future__ import annotations

import asyncio
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

import anyio
import httpx
from starlette.background import BackgroundTask
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from recorder.process import HttpRecorderProcess
from tapes.cassette import load
from tapes.episodes import WarmUp, http_episode
from tapes.frames import Frame
from tapes.http_rules import replayed_headers
from tapes.jsonrpc import decode, encode, items
from tapes.sessions import SESSION_HEADER
from tapes.sse import SSEParser, is_event_stream

WARM_UP_TIMEOUT = 30.0
"""Seconds the real server gets to answer the warm-up before the hand-over goes ahead anyway."""

_NOT_FORWARDED = frozenset({"host", "content-length", "connection", "transfer-encoding", "keep-alive"})

Headers = list[tuple[str, str]]


class HandoverFailed(Exception):
    """The real server could not be brought to the live session's state."""


@dataclass
class HttpNewEpisodes:
    """Where an HTTP replay hands a session over on its first miss: the real server's URL, and the
    flags its recorder gets (e.g. --before-record). The cassette to add to is the replayed one."""

    upstream: str
    cassette: Path
    record_flags: list[str] = field(default_factory=list)


class Handover:
    """One replayed session, taken over by the real server."""

    def __init__(self, plan: HttpNewEpisodes, recorded_session: str | None) -> None:
        self._recorded_session = recorded_session
        self._scratch = tempfile.TemporaryDirectory(prefix="tapes-episode-")
        self._recording = Path(self._scratch.name) / "episode.tape"
        self._plan = plan
        self._recorder: HttpRecorderProcess | None = None
        self._client = httpx.AsyncClient(timeout=None)
        self._live_session: str | None = None  # the id the real server issued
        self._warm_up = WarmUp([])
        self._background: set[asyncio.Task[None]] = set()
        self._stream_headers: Headers = []

    async def start(self, sent: list[tuple[bytes, Headers]], replayed: list[bytes], path: str) -> None:
        """Start the recorder in front of the real server and bring it to the live session's state."""
        self._recorder = await anyio.to_thread.run_sync(
            HttpRecorderProcess, self._recording, self._plan.upstream, self._plan.record_flags)
        recorder = urlsplit(self._recorder.url)
        self._origin = f"{recorder.scheme}://{recorder.netloc}"
        self._warm_up = WarmUp((body for body, _ in sent), replayed)
        # what a GET of the session carries: its id, mapped in `_send`, and the protocol version
        self._stream_headers = [(name, value) for name, value in (sent[-1][1] if sent else ())
                                if name.lower() in (SESSION_HEADER, "mcp-protocol-version")]
        changed = asyncio.Event()
        deadline = anyio.current_time() + WARM_UP_TIMEOUT
        index = 0
        while True:
            for body in self._warm_up.lines_to_send():
                try:
                    response = await self._send("POST", path, sent[index][1], body)
                except httpx.HTTPError as error:
                    raise HandoverFailed(f"the recorder in front of it failed: {error}") from None
                if response.status_code >= 500:
                    await response.aclose()
                    raise HandoverFailed(f"it answered HTTP {response.status_code} during the warm-up")
                index += 1
                self._live_session = self._live_session or response.headers.get(SESSION_HEADER)
                self._spawn(self._swallow(response, changed))
            if self._warm_up.done or anyio.current_time() >= deadline:
                return
            changed.clear()
            with anyio.move_on_after(deadline - anyio.current_time()):
                await changed.wait()

    async def _swallow(self, response: httpx.Response, changed: asyncio.Event) -> None:
        """Read a warm-up answer to its end, telling the warm-up every message in it."""
        try:
            if is_event_stream(response.headers.get("content-type")):
                parser = SSEParser()
                async for chunk in response.aiter_raw():
                    for event in parser.feed(chunk):
                        if event.data:
                            self._warm_up.server_line(event.data.encode())
                            changed.set()
            else:
                body = await response.aread()
                if body and (message := decode(body).message) is not None:
                    for item in items(message):
                        self._warm_up.server_line(encode(item))
                    changed.set()
        except httpx.HTTPError:
            pass  # a warm-up stream cut short: what it had was taken
        finally:
            await response.aclose()

    async def forward(self, request: Request, body: bytes | None) -> Response:
        """The live request sent to the real server; its answer streamed back as it comes."""
        response = await self._send(request.method, request.url.path, list(request.headers.items()), body,
                                    request.url.query)
        headers = [(name, self._recorded_session or value) if name.lower() == SESSION_HEADER else (name, value)
                   for name, value in replayed_headers(response.headers.multi_items())]
        return StreamingResponse(response.aiter_raw(), response.status_code, headers=dict(headers),
                                 background=BackgroundTask(response.aclose))

    async def _send(self, method: str, path: str, headers: Headers, body: bytes | None, query: str = "") -> httpx.Response:
        forwarded = [(name, self._live_session if name.lower() == SESSION_HEADER and self._live_session else value)
                     for name, value in headers if name.lower() not in _NOT_FORWARDED]
        url = self._origin + path + (f"?{query}" if query else "")
        request = self._client.build_request(method, url, headers=forwarded, content=body)
        return await self._client.send(request, stream=True)

    def listen(self, path: str, on_message: Callable[[bytes], object]) -> None:
        """Open the real server's standalone GET stream and hand each message on it to `on_message`."""

        async def read() -> None:
            response = await self._send("GET", path, [("accept", "text/event-stream"), *self._stream_headers], None)
            try:
                if response.status_code == 200:
                    parser = SSEParser()
                    async for chunk in response.aiter_raw():
                        for event in parser.feed(chunk):
                            if event.data:
                                on_message(event.data.encode())
            except httpx.HTTPError:
                pass  # the stream ended with the session
            finally:
                await response.aclose()

        self._spawn(read())

    def _spawn(self, work: object) -> None:
        task = asyncio.ensure_future(work)  # type: ignore[arg-type]
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

    def finish(self, first_exchange: int, standalone: str | None) -> list[Frame]:
        """Stop the recorder; what it recorded after the warm-up, as frames of the replayed session."""
        assert self._recorder is not None
        self._recorder.stop()
        try:
            recording = load(self._recording)
        finally:
            self._scratch.cleanup()
        return http_episode(recording, self._warm_up.sent, self._recorded_session, first_exchange, standalone)
