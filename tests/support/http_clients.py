"""HTTP clients for the end-to-end tests: the SDK client pointed at a URL in place of a flow's
stdio server, and a hand-driven Streamable HTTP session."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import anyio
import httpx
import mcp.client.session
import pytest
from mcp import Client, MCPError

from tests.support import flows
from tests.support.flows import Observer
from tests.support.processes import TIMEOUT

ACCEPT = {"Accept": "application/json, text/event-stream"}


def sdk_connector(server: str | Callable[[], Any]) -> Callable[..., Client]:
    """A stand-in for `flows.connect` that reaches `server` over HTTP: a Streamable HTTP URL, or a
    factory of a transport (e.g. the legacy SSE client), whatever argv the flow passes."""
    connect = flows.connect  # the original, before a test patches it
    return lambda argv, **options: connect(server, **options)


def run_flow(monkeypatch: pytest.MonkeyPatch, flow: Callable[..., Any], server: str | Callable[[], Any], **kw: Any) -> Any:
    with monkeypatch.context() as patch:
        patch.setattr(flows, "connect", sdk_connector(server))
        return anyio.run(functools.partial(flow, [], **kw))


class RawSession:
    """A 2025-11-25 (or other era) Streamable HTTP session driven by hand with httpx."""

    def __init__(self, client: httpx.Client, url: str, version: str = "2025-11-25") -> None:
        self.client, self.url, self.version = client, url, version
        self.next_id = 1
        init = self.post(self.request("initialize", {
            "protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}))
        self.session = init.headers["mcp-session-id"]
        self.post({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        self.next_id += 1
        return {"jsonrpc": "2.0", "id": self.next_id - 1, "method": method, "params": params}

    def headers(self, **extra: str) -> dict[str, str]:
        headers = {"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": self.version, **extra}
        if hasattr(self, "session"):
            headers["Mcp-Session-Id"] = self.session
        return headers

    def post(self, body: Any) -> httpx.Response:
        response = self.client.post(self.url, json=body, headers=self.headers())
        assert response.status_code in (200, 202), response.text
        return response

    def stream(self, body: Any) -> Any:
        return self.client.stream("POST", self.url, json=body, headers=self.headers())


def speak_2024_11_05(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make the SDK client offer 2024-11-05 in `initialize` (it always offers its latest version)."""
    monkeypatch.setattr(mcp.client.session, "LATEST_HANDSHAKE_VERSION", "2024-11-05")


async def resumable_flow(argv: Any, *, mode: str = "legacy") -> dict[str, Any]:
    """ticks with progress, then poll (the server closes the POST stream mid-call; the client
    polls back with Last-Event-ID), then an echo."""
    out: dict[str, Any] = {}
    with anyio.fail_after(TIMEOUT):
        async with flows.connect(argv, mode=mode) as client:
            out["session"] = client.protocol_version
            seen: list[float] = []

            async def progress(value: float, total: float | None, message: str | None) -> None:
                seen.append(value)

            out["ticks"] = flows.dump(await client.call_tool("ticks", {"n": 3, "interval": 0.01}, progress_callback=progress))
            out["poll"] = flows.dump(await client.call_tool("poll", {"n": 3}, progress_callback=progress))
            out["echo"] = flows.dump(await client.call_tool("echo", {"text": "after"}))
            out["progress"] = sorted(seen)
    return out


async def echo_twice(url: str) -> list[str]:
    observer = Observer()  # the recorded flow's callbacks: initialize declares the same capabilities
    answers = []
    with anyio.fail_after(30):
        async with Client(url, sampling_callback=observer.sampling, list_roots_callback=observer.list_roots,
                          cache=None) as client:
            await client.list_tools()
            for _ in range(2):
                try:
                    answers.append((await client.call_tool("echo", {"message": "hello"})).content[0].text)
                except MCPError as error:
                    answers.append(f"error: {error}")
    return answers
