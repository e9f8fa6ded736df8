"""The interop matrix's peers: the MCP clients that run one fixed scenario, the servers they run
it against, and `tapes record` / `tapes replay` around them.

A scenario (tests/peers/scenarios.json) is a list of steps (tools/list, tools/call, ...). Every
client sends the same requests in the same order, so a cassette recorded by one client can be
replayed to another; each client reports what it got in its own canonical JSON form, and a cell of
the matrix compares that with what the same client gets from the live server.

- "python":    the official Python SDK (`mcp` 2.x `Client`, in this process; `initialize`, not the
               2026-07-28 probe, so every client speaks the same protocol)
- "ts":        the official TypeScript SDK (tests/peers/ts_client.mjs, run with node)
- "ts2":       the same script on the TypeScript SDK's 2.x line (`@modelcontextprotocol/client`)
- "inspector": the MCP Inspector CLI, one process per step (it runs one method per invocation)
- "inspector2": the same from the Inspector's 2.x line, built on the TypeScript SDK's 2.x client
- "remote":    mcp-remote, the stdio-to-HTTP bridge of hosts that speak only stdio (Claude Desktop),
               with the Python SDK's `Client` in front of it as the host; its own TypeScript SDK
               client (bundled) speaks Streamable HTTP or SSE to the server (`--transport http-only`,
               `sse-only`)
- "gateway":   supergateway, another stdio-to-HTTP bridge (`--streamableHttp URL`, `--sse URL`), with
               the Python SDK's `Client` in front of it as the host, as for mcp-remote; its client
               is the TypeScript SDK's 1.x line (a dependency of its own)
- "raw":       a strictly sequential HTTP client: it awaits every POST's whole answer, and opens
               its GET stream only after its `initialized` notification was accepted
- "python1":   the Python SDK's 1.x line (`mcp` 1.30 `ClientSession`; tests/peers/py1_client.py, run
               with tests/peers/.venv-mcp1's interpreter, as 1.x cannot live beside 2.x)
- "fastmcp":   fastmcp's `Client` (on the SDK's 2.x line, in this process)
- "aisdk":     the Vercel AI SDK's MCP client (`@ai-sdk/mcp`: an implementation of its own, not the
               official SDK; tests/peers/aisdk_client.mjs, run with node), initializing
- "aisdk-probe": the same in its default mode, probing with server/discover first
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import warnings
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import httpx
from fastmcp import Client as FastMCPClient
from fastmcp.client.transports import SSETransport, StdioTransport, StreamableHttpTransport
from mcp import Client, StdioServerParameters
from mcp.client.sse import sse_client
from mcp.shared.exceptions import MCPDeprecationWarning

from tests.support.paths import EVERYTHING_JS, PEERS, SERVERS, TAPES
from tests.support.processes import TIMEOUT, Process, free_port

SCENARIOS: dict[str, list[dict[str, Any]]] = json.loads((PEERS / "scenarios.json").read_text())
INSPECTOR_BUILD = PEERS / "node_modules" / "@modelcontextprotocol" / "inspector-cli" / "build"
# The Inspector's 2.x line (on the TypeScript SDK's 2.x client): its CLI is a mode of the launcher.
TS2_CLIENT = PEERS / "node_modules" / "@modelcontextprotocol" / "client"
AISDK_CLIENT = PEERS / "node_modules" / "@ai-sdk" / "mcp"
INSPECTOR2_LAUNCHER = PEERS / "node_modules" / "@modelcontextprotocol" / "inspector" / "clients" / "launcher" / "build" / "index.js"
NOTES_SERVER = SERVERS / "notes_server.py"
MCP_REMOTE = PEERS / "node_modules" / "mcp-remote" / "dist" / "proxy.js"
SUPERGATEWAY = PEERS / "node_modules" / "supergateway" / "dist" / "index.js"
# The Python SDK's 1.x line, in a venv of its own (.ci/run makes it)
PYTHON1 = PEERS / ".venv-mcp1" / "bin" / "python"

STDIO, HTTP, SSE = "stdio", "http", "sse"
TRANSPORTS: dict[str, tuple[str, ...]] = {
    "python": (STDIO, HTTP, SSE),
    "ts": (STDIO, HTTP, SSE),
    "ts2": (STDIO, HTTP, SSE),
    "inspector": (STDIO, HTTP, SSE),
    "inspector2": (STDIO, HTTP, SSE),
    "remote": (HTTP, SSE),  # a bridge from stdio to a remote server: HTTP is what it reaches
    "gateway": (HTTP, SSE),  # the same
    "raw": (HTTP,),  # a minimal Streamable HTTP client: no stdio, no legacy SSE by design
    "python1": (STDIO, HTTP, SSE),
    "fastmcp": (STDIO, HTTP, SSE),
    "aisdk": (STDIO, HTTP, SSE),
    # its SSE transport does not probe; on stdio it waits 1 s for the answer to its probe, which a
    # live Python server still starting misses (it then initializes, and fails on the late answer)
    "aisdk-probe": (HTTP,),
}
# mcp-remote's --transport for each: the one transport, no fallback (`http-first`, its default,
# is tested against an SSE-only replay in test_other_clients)
REMOTE_STRATEGY = {HTTP: "http-only", SSE: "sse-only"}
RECORDING_CLIENTS = ("python", "ts", "ts2")
# Recording clients spot-checked, their cassettes replayed to a few clients only to keep the matrix
# short: the Python SDK's 1.x line (its requests count from id 0), to the SDKs' current lines; the
# AI SDK's client, to itself (it sends neither logging/setLevel nor a progressToken, so its
# cassettes lack what the other clients ask for), over the transports both have.
SPOT_CHECK_RECORDERS = {"python1": ("python", "ts"), "aisdk": ("aisdk",), "aisdk-probe": ("aisdk-probe",)}
# The Python SDK in its default mode, probing with server/discover first: against the SDK notes
# server it records a 2026-07-28 session (no initialize), which clients of initialize must replay too.
PROBING_RECORDER = "python-probe"
# Replaying clients spot-checked the other way: given only a few recording clients' cassettes, the
# Python SDK's (the AI SDK's client also the probing one's, and probing itself only that one).
SPOT_CHECK_REPLAYERS = {"aisdk": ("python", PROBING_RECORDER), "aisdk-probe": (PROBING_RECORDER,), "gateway": ("python",)}


def node() -> str:
    found = shutil.which("node")
    if found is None or not all(path.exists() for path in (EVERYTHING_JS, INSPECTOR_BUILD, INSPECTOR2_LAUNCHER, TS2_CLIENT, AISDK_CLIENT)):
        raise AssertionError("the npm peers are not installed: run `npm install --prefix tests/peers` (.ci/run does)")
    return found


def python1() -> str:
    if not PYTHON1.exists():
        raise AssertionError("the Python SDK 1.x peer is not installed: run .ci/run's setup "
                             "(`python3.13 -m venv tests/peers/.venv-mcp1 && tests/peers/.venv-mcp1/bin/pip install mcp==1.30.0`)")
    return str(PYTHON1)


def stable(value: Any) -> Any:
    """`value` without `_meta` anywhere (per-connection stamps, not results), keys sorted."""
    if isinstance(value, dict):
        return {k: stable(value[k]) for k in sorted(value) if k != "_meta"}
    if isinstance(value, list):
        return [stable(v) for v in value]
    return value


def settled(progress: list[list[Any]]) -> list[list[Any]]:
    """The progress values a client saw before the last step: the last one races the response
    on the live server (the SDKs drop a progress notification that lands after it)."""
    return [entry for entry in progress if entry[1] is None or entry[0] < entry[1]]


# --- servers -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class ServerSpec:
    stdio: tuple[str, ...]
    http: Callable[[int], tuple[list[str], dict[str, str]]]  # port -> argv, env (Streamable HTTP)
    sse: Callable[[int], tuple[list[str], dict[str, str]]]
    listening: str  # what its stderr says once it accepts connections


def _everything(mode: str) -> Callable[[int], tuple[list[str], dict[str, str]]]:
    return lambda port: ([node(), str(EVERYTHING_JS), mode], {"PORT": str(port)})


def _notes(flag: str) -> Callable[[int], tuple[list[str], dict[str, str]]]:
    return lambda port: ([sys.executable, str(NOTES_SERVER), flag], {})


SERVERS = {
    "everything": ServerSpec(("node", str(EVERYTHING_JS), "stdio"), _everything("streamableHttp"), _everything("sse"),
                             r"listening on port|running on port"),
    "notes": ServerSpec((sys.executable, str(NOTES_SERVER)), _notes("--http"), _notes("--sse"), r"listening on"),
}


class LiveServers:
    """The HTTP servers of the matrix, each started on first use and stopped by `close`."""

    def __init__(self) -> None:
        self._running: dict[tuple[str, str], tuple[Process, str]] = {}

    def url(self, server: str, transport: str) -> str:
        if (server, transport) not in self._running:
            spec = SERVERS[server]
            port = free_port()
            argv, env = (spec.http if transport == HTTP else spec.sse)(port)
            process = Process(argv, env=env)
            process.wait_for(spec.listening)
            path = "/mcp" if transport == HTTP else "/sse"
            if server == "notes":  # it picks its own port and says where
                url = process.stderr[-1].split("listening on ", 1)[1].strip()
            else:
                url = f"http://127.0.0.1:{port}{path}"
            self._running[(server, transport)] = (process, url)
        return self._running[(server, transport)][1]

    def target(self, server: str, transport: str) -> list[str] | str:
        """Where a client finds the live server: its argv on stdio, else its URL."""
        if transport == STDIO:
            spec = SERVERS[server]
            return [node() if spec.stdio[0] == "node" else spec.stdio[0], *spec.stdio[1:]]
        return self.url(server, transport)

    def close(self) -> None:
        for process, _ in self._running.values():
            process.stop()


# --- clients -----------------------------------------------------------------------------------


def run_client(client: str, scenario: str, transport: str, target: list[str] | str, *, probe: bool = False) -> dict[str, Any]:
    """What `client` got running `scenario` over `transport` against `target` (argv or URL).
    `probe`: the Python SDK connects as it does by default, probing with server/discover first
    (else it speaks the initialize handshake, as the other clients do)."""
    if client in ("python", PROBING_RECORDER):
        return anyio.run(_python, scenario, transport, target, "auto" if probe or client == PROBING_RECORDER else "legacy")
    if client in ("ts", "ts2"):
        return _node_client("ts_client.mjs", scenario, transport, target, TS_SDK="2" if client == "ts2" else "1")
    if client in ("aisdk", "aisdk-probe"):
        probing = probe or client == "aisdk-probe"
        return _node_client("aisdk_client.mjs", scenario, transport, target, AISDK_PROBE="1" if probing else "0")
    if client in ("inspector", "inspector2"):
        return _inspector(scenario, transport, target, second=client == "inspector2")
    if client == "python1":
        return _python1(scenario, transport, target)
    if client == "fastmcp":
        return anyio.run(_fastmcp, scenario, transport, target, "auto" if probe else "legacy")
    if client.startswith("remote"):  # "remote:STRATEGY" picks mcp-remote's --transport
        assert isinstance(target, str)
        strategy = client.partition(":")[2] or REMOTE_STRATEGY[transport]
        with tempfile.TemporaryDirectory() as config:
            return run_client("python", scenario, STDIO, mcp_remote(target, strategy, config))
    if client == "gateway":
        assert isinstance(target, str)
        return run_client("python", scenario, STDIO, supergateway(target, transport))
    assert client == "raw" and transport == HTTP and isinstance(target, str)
    return RawClient(target).run(SCENARIOS[scenario])


async def _python(scenario: str, transport: str, target: list[str] | str, mode: str) -> dict[str, Any]:
    if transport == STDIO:
        assert isinstance(target, list)
        server: Any = StdioServerParameters(command=target[0], args=target[1:])
    elif transport == SSE:
        server = sse_client(str(target))
    else:
        server = target
    out: dict[str, Any] = {"steps": []}
    with anyio.fail_after(TIMEOUT * 2):
        async with Client(server, mode=mode, read_timeout_seconds=TIMEOUT, cache=None) as client:  # type: ignore[arg-type]
            info = client.server_info
            out["session"] = {"server": info.model_dump(mode="json", exclude_none=True) if info else None}
            for step in SCENARIOS[scenario]:
                out["steps"].append({"method": step["method"], "result": await _python_step(client, step)})
    return stable(out)


async def _python_step(client: Client, step: dict[str, Any]) -> Any:
    method = step["method"]
    if method == "logging/setLevel":
        with warnings.catch_warnings():  # deprecated at 2026-07-28; the matrix speaks 2025-11-25
            warnings.simplefilter("ignore", MCPDeprecationWarning)
            result: Any = await client.set_logging_level(step["level"])
    elif method == "tools/list":
        result = await client.list_tools()
    elif method == "tools/call":
        progress: list[list[Any]] = []

        async def on_progress(value: float, total: float | None, message: str | None) -> None:
            progress.append([value, total])

        result = await client.call_tool(step["name"], step["arguments"],
                                        progress_callback=on_progress if step.get("progress") else None)
        if step.get("progress"):
            return {"result": _dump(result), "progress": settled(progress)}
    elif method == "resources/list":
        result = await client.list_resources()
    elif method == "resources/read":
        result = await client.read_resource(step["uri"])
    elif method == "prompts/list":
        result = await client.list_prompts()
    else:
        assert method == "prompts/get", method
        result = await client.get_prompt(step["name"], step["arguments"])
    return _dump(result)


def mcp_remote(url: str, strategy: str, config: str, browser: Path | None = None) -> list[str]:
    """The command of mcp-remote bridging stdio to `url` with its transport `strategy`, its OAuth
    state (tokens, client registrations, locks) kept in the directory `config`; `browser`: the
    program it opens an authorization URL with (through `open`'s xdg-open, which runs $BROWSER)."""
    if not MCP_REMOTE.exists():
        raise AssertionError("mcp-remote is not installed: run `npm install --prefix tests/peers` (.ci/run does)")
    # the Python SDK passes a server process only a few variables of its own environment
    env = [f"MCP_REMOTE_CONFIG_DIR={config}", *([f"BROWSER={browser}"] if browser else [])]
    return ["env", *env, node(), str(MCP_REMOTE), url, "--transport", strategy]


def supergateway(url: str, transport: str) -> list[str]:
    """The command of supergateway bridging stdio to `url` over `transport`."""
    if not SUPERGATEWAY.exists():
        raise AssertionError("supergateway is not installed: run `npm install --prefix tests/peers` (.ci/run does)")
    return [node(), str(SUPERGATEWAY), "--streamableHttp" if transport == HTTP else "--sse", url]


@contextmanager
def supergateway_serving(command: list[str], transport: str, *, stateful: bool = False) -> Iterator[str]:
    """supergateway serving the stdio server `command` over `transport` (stateless Streamable HTTP
    runs the command once per request); yields its URL."""
    port = free_port()
    output = ["--outputTransport", "streamableHttp", *(["--stateful"] if stateful else [])] if transport == HTTP else []
    # on an HTTP output it logs to stdout
    gateway = Process([node(), str(SUPERGATEWAY), "--stdio", shlex.join(command), *output, "--port", str(port)], read_stdout=True)
    try:
        gateway.wait_for(r"Listening on port")
        yield f"http://127.0.0.1:{port}{'/mcp' if transport == HTTP else '/sse'}"
    finally:
        gateway.stop(signal.SIGINT)


def _dump(model: Any) -> Any:
    return model.model_dump(mode="json", by_alias=True, exclude_none=True)


def _node_client(script: str, scenario: str, transport: str, target: list[str] | str, **env: str) -> dict[str, Any]:
    """A client peer in tests/peers run with node (`env`: its options)."""
    where = target if isinstance(target, list) else [target]
    done = subprocess.run([node(), str(PEERS / script), scenario, transport, *where],
                          capture_output=True, timeout=TIMEOUT * 2, stdin=subprocess.DEVNULL, env={**os.environ, **env})
    assert done.returncode == 0, f"{script} failed ({done.returncode}): {done.stderr.decode(errors='replace')[-2000:]}"
    return json.loads(done.stdout)


def _python1(scenario: str, transport: str, target: list[str] | str) -> dict[str, Any]:
    where = target if isinstance(target, list) else [target]
    done = subprocess.run([python1(), str(PEERS / "py1_client.py"), scenario, transport, *where],
                          capture_output=True, timeout=TIMEOUT * 2, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, f"the Python SDK 1.x client failed ({done.returncode}): {done.stderr.decode(errors='replace')[-2000:]}"
    return stable(json.loads(done.stdout))


async def _fastmcp(scenario: str, transport: str, target: list[str] | str, mode: str) -> dict[str, Any]:
    """fastmcp's `Client`, through its high-level calls (lists of every page, parsed tool results);
    `mode` as for the Python SDK (on legacy SSE fastmcp initializes, whatever the mode)."""
    if transport == STDIO:
        assert isinstance(target, list)
        # closed with the session, so a replay's report is there once the client is done (by
        # default fastmcp keeps the process until the event loop ends)
        server: Any = StdioTransport(target[0], target[1:], keep_alive=False)
    else:
        assert isinstance(target, str)
        server = SSETransport(target) if transport == SSE else StreamableHttpTransport(target)
    out: dict[str, Any] = {"steps": []}
    with anyio.fail_after(TIMEOUT * 2):
        async with FastMCPClient(server, mode=mode, timeout=TIMEOUT) as client:  # type: ignore[arg-type]
            info = client.server_info
            out["session"] = {"server": info.model_dump(mode="json", exclude_none=True) if info else None}
            for step in SCENARIOS[scenario]:
                out["steps"].append({"method": step["method"], "result": await _fastmcp_step(client, step)})
    return stable(out)


async def _fastmcp_step(client: FastMCPClient[Any], step: dict[str, Any]) -> Any:
    method = step["method"]
    if method == "logging/setLevel":
        with warnings.catch_warnings():  # deprecated at 2026-07-28; the matrix speaks 2025-11-25
            warnings.simplefilter("ignore", MCPDeprecationWarning)
            await client.set_logging_level(step["level"])
        return {}
    if method == "tools/list":
        return {"tools": [_dump(tool) for tool in await client.list_tools()]}
    if method == "tools/call":
        progress: list[list[Any]] = []

        async def on_progress(value: float, total: float | None, message: str | None) -> None:
            progress.append([value, total])

        called = await client.call_tool(step["name"], step["arguments"],
                                        progress_handler=on_progress if step.get("progress") else None)
        result = {"content": [_dump(block) for block in called.content], "isError": called.is_error,
                  "structuredContent": called.structured_content}
        return {"result": result, "progress": settled(progress)} if step.get("progress") else result
    if method == "resources/list":
        return {"resources": [_dump(resource) for resource in await client.list_resources()]}
    if method == "resources/read":
        return {"contents": [_dump(contents) for contents in await client.read_resource(step["uri"])]}
    if method == "prompts/list":
        return {"prompts": [_dump(prompt) for prompt in await client.list_prompts()]}
    assert method == "prompts/get", method
    return _dump(await client.get_prompt(step["name"], step["arguments"]))


def _inspector(scenario: str, transport: str, target: list[str] | str, *, second: bool = False) -> dict[str, Any]:
    """The Inspector CLI runs one method per process, so one session per step: it runs the steps
    marked `alone` (they need nothing an earlier step did; each process costs a second). The 1.x
    CLI must run in its build/ folder (it reads ../package.json from the working directory); the
    2.x one (`second`) is the launcher's --cli mode, kept off the user's catalog file."""
    # the 1.x CLI takes the target's first word, the options, then the rest of the target; the 2.x
    # one takes every option first
    if isinstance(target, str):
        first, rest, whole = [target], ["--transport", transport], ["--transport", transport, target]
    else:
        first, rest, whole = target[:1], ["--", *target[1:]], ["--", *target]
    launcher, cwd = ([node(), str(INSPECTOR2_LAUNCHER), "--cli"], None) if second else ([node(), "index.js"], INSPECTOR_BUILD)
    steps = []
    with tempfile.TemporaryDirectory() as home:
        for step in (step for step in SCENARIOS[scenario] if step.get("alone")):
            options = ["--method", step["method"]]
            if step["method"] == "tools/call":
                options += ["--tool-name", step["name"], "--tool-arg", *(f"{k}={json.dumps(v)}" for k, v in step["arguments"].items())]
            elif step["method"] == "resources/read":
                options += ["--uri", step["uri"]]
            elif step["method"] == "prompts/get":
                options += ["--prompt-name", step["name"], "--prompt-args", *(f"{k}={v}" for k, v in step["arguments"].items())]
            argv = [*launcher, *options, *whole] if second else [*launcher, *first, *options, *rest]
            done = subprocess.run(argv, cwd=cwd, capture_output=True, timeout=TIMEOUT * 2, stdin=subprocess.DEVNULL,
                                  env={**os.environ, "MCP_CATALOG_PATH": str(Path(home) / "mcp.json")})
            assert done.returncode == 0, f"the Inspector CLI failed ({done.returncode}) on {step}: {done.stderr.decode(errors='replace')[-2000:]}"
            steps.append({"method": step["method"], "result": stable(json.loads(done.stdout))})
    return {"steps": steps}


class RawClient:
    """A minimal Streamable HTTP client, strictly sequential: every POST's whole answer is read
    before the next POST, and the standalone GET stream is opened only once the server accepted
    `notifications/initialized` (as the TypeScript SDK does; `run(eager_get=True)` opens it
    before, as the Python SDK may). It reports the results of its requests; what arrived on the
    GET stream is kept in `on_get`."""

    VERSION = "2025-11-25"

    def __init__(self, url: str, name: str = "mcp-tapes-raw-client") -> None:
        self.url = url
        self.name = name
        self.http = httpx.Client(timeout=TIMEOUT)
        self.session: str | None = None
        self.next_id = 0
        self.on_get: list[Any] = []

    def run(self, steps: Sequence[dict[str, Any]], *, eager_get: bool = False) -> dict[str, Any]:
        """Run `steps`; with `eager_get` the GET stream is opened right after the initialize
        result, before `notifications/initialized` is sent (as the Python SDK may do)."""
        try:
            if eager_get:
                init = self.request("initialize", self.initialize_params())["result"]
                with self.get_stream():
                    self.initialized()
                    return self.steps(init, steps)
            init = self.open()
            with self.get_stream():
                return self.steps(init, steps)
        finally:
            self.http.close()

    def steps(self, init: dict[str, Any], steps: Sequence[dict[str, Any]]) -> dict[str, Any]:
        out = {"session": {"server": init["serverInfo"]}, "steps": []}
        for step in steps:
            out["steps"].append({"method": step["method"], "result": self.step(step)})
        return stable(out)

    def initialize_params(self) -> dict[str, Any]:
        return {"protocolVersion": self.VERSION, "capabilities": {}, "clientInfo": {"name": self.name, "version": "1.0.0"}}

    def initialized(self) -> None:
        accepted = self.post({"jsonrpc": "2.0", "method": "notifications/initialized"})
        assert accepted.status_code == 202, f"initialized got {accepted.status_code}: {accepted.text}"

    def open(self) -> dict[str, Any]:
        """initialize, then notifications/initialized; the initialize result."""
        init = self.request("initialize", self.initialize_params())
        assert "result" in init, init["error"]["message"]
        self.initialized()
        return init["result"]

    def step(self, step: dict[str, Any]) -> Any:
        params = {key: step[key] for key in ("name", "arguments", "uri", "level") if key in step}
        if step.get("progress"):
            params["_meta"] = {"progressToken": f"raw-{self.next_id}"}
        answer = self.request(step["method"], params)
        result = answer.get("result", answer.get("error"))
        if step.get("progress"):
            progress = [[n["params"]["progress"], n["params"].get("total")] for n in answer["notifications"]
                        if n.get("method") == "notifications/progress"]
            return {"result": result, "progress": settled(progress)}
        return result

    def headers(self) -> dict[str, str]:
        headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json",
                   "MCP-Protocol-Version": self.VERSION}
        if self.session:
            headers["Mcp-Session-Id"] = self.session
        return headers

    def post(self, message: dict[str, Any]) -> httpx.Response:
        response = self.http.post(self.url, json=message, headers=self.headers())
        self.session = response.headers.get("mcp-session-id", self.session)
        return response

    def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        self.next_id += 1
        return self.answer(self.post({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params}), self.next_id)

    @staticmethod
    def answer(response: httpx.Response, request_id: int) -> dict[str, Any]:
        """The response to request `request_id` in a POST's whole answer (JSON, or an SSE stream),
        with the notifications the stream carried before it."""
        assert response.status_code == 200, f"request {request_id} got {response.status_code}: {response.text}"
        if response.headers.get("content-type", "").startswith("application/json"):
            return {**response.json(), "notifications": []}
        messages = [json.loads(data) for data in sse_data(response.text)]
        answers = [m for m in messages if "method" not in m]
        assert [m.get("id") for m in answers] == [request_id], f"request {request_id} was answered as {answers}"
        return {**answers[0], "notifications": [m for m in messages if "id" not in m]}

    @contextmanager
    def get_stream(self) -> Iterator[None]:
        """The standalone GET stream, read on a thread while the block runs (a 405: the server has none)."""
        opened = threading.Event()
        sockets: list[socket.socket] = []

        def read() -> None:
            try:
                with httpx.Client(timeout=httpx.Timeout(TIMEOUT, read=None)) as http, http.stream(
                    "GET", self.url, headers={**self.headers(), "Accept": "text/event-stream"}
                ) as response:
                    sockets.append(response.extensions["network_stream"].get_extra_info("socket"))
                    opened.set()
                    if response.status_code == 200:
                        for data in sse_data_stream(response.iter_text()):
                            self.on_get.append(json.loads(data))
            except httpx.HTTPError:
                pass  # shut under it when the scenario is over
            finally:
                opened.set()

        thread = threading.Thread(target=read, daemon=True)
        thread.start()
        opened.wait(TIMEOUT)
        try:
            yield
        finally:
            for sock in sockets:
                with suppress(OSError):  # already closed: the stream ended by itself
                    sock.shutdown(socket.SHUT_RDWR)  # a live GET stream never ends by itself
            thread.join(TIMEOUT)


def sse_data_stream(chunks: Iterator[str]) -> Iterator[str]:
    """The data of each complete event, as the chunks of an SSE body arrive."""
    buffer = ""
    for chunk in chunks:
        buffer += chunk.replace("\r\n", "\n")
        *events, buffer = buffer.split("\n\n")
        for event in events:
            yield from sse_data(event)


def sse_data(text: str) -> list[str]:
    """The data of each event in an SSE body (events without data, as a priming event, are left out)."""
    found = []
    for event in text.replace("\r\n", "\n").split("\n\n"):
        data = "\n".join(line[5:].removeprefix(" ") for line in event.split("\n") if line.startswith("data:"))
        if data:
            found.append(data)
    return found


# --- recording and replaying ------------------------------------------------------------------


def record(client: str, scenario: str, transport: str, live: LiveServers, server: str, cassette: Path) -> dict[str, Any]:
    """Record `client` running `scenario` against the live `server` into `cassette`; returns what
    the client got through the recorder."""
    if transport == STDIO:
        target = live.target(server, STDIO)
        assert isinstance(target, list)
        return run_client(client, scenario, STDIO, [*TAPES, "record", "-o", str(cassette), "--", *target])
    recorder = Process([*TAPES, "record", "-o", str(cassette), "--upstream", live.url(server, transport),
                        "--listen", "127.0.0.1:0"])
    try:
        banner = recorder.wait_for(r"tapes: recording (http://\S+)")
        return run_client(client, scenario, transport, banner[1])
    finally:
        assert recorder.stop(signal.SIGINT) == 0, recorder.rest_of_stderr()


@dataclass
class Replayed:
    result: dict[str, Any]
    exit_code: int | None  # HTTP: the replayer's; stdio: None (each client process starts its own)
    summary: str  # HTTP: the replayer's stderr; stdio: the last --report


def replay(client: str, scenario: str, transport: str, cassette: Path, *options: str, probe: bool = False,
           report: Path | None = None) -> Replayed:
    """Replay `cassette` to `client` running `scenario` over `transport` (`probe`: see `run_client`).
    On stdio the summary is the JSON report, written to `report` (by default beside the cassette)."""
    if transport == STDIO:
        report = report or cassette.with_suffix(f".{client}.report.json")
        result = run_client(client, scenario, STDIO, [*TAPES, "replay", str(cassette), "--report", str(report), *options],
                            probe=probe)
        return Replayed(result, None, report.read_text())
    replayer = Process([*TAPES, "replay", str(cassette), "--http", "--listen", "127.0.0.1:0", *options])
    try:
        url = replayer.wait_for(r"tapes: replaying at (http://\S+)")[1]
        result = run_client(client, scenario, transport, url, probe=probe)
    finally:
        code = replayer.stop(signal.SIGINT)
    return Replayed(result, code, replayer.rest_of_stderr())

