"""Be the recorded server inside the test process, for the official Python SDK client: a transport
(`Client(ReplayTransport(cassette))`) whose other end is the replay engine. No process, no socket:
the cheapest replay there is, for Python test suites.

The same `ReplaySession` as the stdio replayer, over the SDK's in-memory streams: each message the
client writes goes into the session, and what the session releases goes back as the SDK's
messages. What only a process has (stderr, an exit code) has nowhere to go and is dropped; the
recorded server closing its stdout, or exiting, ends the stream the client reads.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from types import TracebackType
from typing import Any

import anyio
from anyio.abc import TaskGroup
from mcp import types
from mcp.client._transport import TransportStreams
from mcp.shared.memory import create_client_server_memory_streams
from mcp.shared.message import SessionMessage

from tapes.cassette.frames import Kind
from tapes.cassette.store import Cassette
from tapes.replay.control import ReplayControl
from tapes.replay.outcomes import Action, Reception
from tapes.replay.session import ReplaySession
from tapes.replay.sessions import served_over_stdio


class ReplayTransport:
    """An SDK client transport served from `cassette` (of an HTTP recording, the messages of its
    first session, as a stdio replay serves them). `session.report` is the replay's summary once
    the client has closed it; with `report_path` it is also written there as JSON (the pytest
    plugin judges the test by it)."""

    def __init__(self, cassette: Cassette, control: ReplayControl | None = None, report_path: Path | None = None) -> None:
        cassette = served_over_stdio(cassette, "the cassette")
        self.control = (control or ReplayControl()).for_cassette(cassette.header)
        self.session = ReplaySession(cassette.frames, self.control)
        self._report_path = report_path
        self._stack: AsyncExitStack | None = None
        self._tasks: TaskGroup | None = None  # where held answers wait (a delay fault)

    async def __aenter__(self) -> TransportStreams:
        self._stack = AsyncExitStack()
        return await self._stack.enter_async_context(self._serve())

    async def __aexit__(self, kind: type[BaseException] | None, error: BaseException | None,
                        traceback: TracebackType | None) -> bool | None:
        assert self._stack is not None
        try:
            return await self._stack.__aexit__(kind, error, traceback)
        finally:
            if self._report_path is not None:
                self._report_path.write_text(json.dumps(self.session.report.as_json()))

    @asynccontextmanager
    async def _serve(self) -> AsyncIterator[TransportStreams]:
        async with create_client_server_memory_streams() as (client_streams, (from_client, to_client)):
            async with anyio.create_task_group() as tasks:
                self._tasks = tasks
                tasks.start_soon(self._pump, from_client, to_client)
                try:
                    yield client_streams
                finally:
                    tasks.cancel_scope.cancel()

    async def _pump(self, from_client: Any, to_client: Any) -> None:
        if not await self._deliver(self.session.start(), to_client):
            return
        async for message in from_client:
            if isinstance(message, Exception):
                continue
            wire = message.message.model_dump_json(by_alias=True, exclude_unset=True).encode()
            if not await self._deliver(self.session.receive(wire), to_client):
                return
        await self._deliver(self.session.end(), to_client)

    async def _deliver(self, reception: Reception, to_client: Any) -> bool:
        """Send what the session released; False once the recorded server has closed its side."""
        for reply in reception.replies:
            await to_client.send(SessionMessage(types.jsonrpc_message_adapter.validate_python(reply.message)))
        for action in reception.actions:
            if delay := self.control.delay(action.gap):
                await anyio.sleep(delay)
            if action.hold:  # a delay fault: this answer goes later, the rest of the session does not wait
                assert self._tasks is not None
                self._tasks.start_soon(self._carry_out_later, action, to_client)
            elif not await self._carry_out(action, to_client):
                return False
        return True

    async def _carry_out_later(self, action: Action, to_client: Any) -> None:
        await anyio.sleep(action.hold)
        try:
            await self._carry_out(action, to_client)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            pass  # the session ended meanwhile (the recorded server's exit, or the client went away)

    async def _carry_out(self, action: Action, to_client: Any) -> bool:
        """Send one released frame; False once the recorded server has closed its side."""
        frame = action.frame
        if frame.kind is Kind.MESSAGE:
            try:
                parsed = types.jsonrpc_message_adapter.validate_json(action.payload, by_name=False)
            except ValueError as error:  # a malformed fault, or a recorded line that is no message
                await to_client.send(error)
                return True
            await to_client.send(SessionMessage(parsed))
        elif frame.kind is Kind.RAW:
            await to_client.send(ValueError(f"the recorded server wrote a line that is not JSON-RPC: {action.payload[:80]!r}"))
        elif frame.kind in (Kind.STREAM_END, Kind.EXIT):
            await to_client.aclose()
            return False
        return True
