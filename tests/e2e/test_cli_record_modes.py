"""`tapes replay --record-mode` (and TAPES_RECORD_MODE): the plugin's record modes for clients in
any language, which put `tapes replay` where they expect the server command or URL. Driven here by
the official Python SDK client over stdio and Streamable HTTP."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import anyio
from mcp import Client, StdioServerParameters

import tapes

ROOT = Path(__file__).resolve().parents[2]
WEATHER = [sys.executable, str(ROOT / "cassettes" / "example" / "weather_server.py")]
NOTES = [sys.executable, str(ROOT / "tests" / "servers" / "notes_server.py")]
INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
              "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "killed", "version": "1"}}}


async def forecast(server: StdioServerParameters | str, city: str = "Paris") -> str:
    async with Client(server, mode="legacy", cache=None) as client:
        return (await client.call_tool("get_forecast", {"city": city})).content[0].text


def stdio(cassette: Path, *flags: str, env: dict[str, str] | None = None) -> StdioServerParameters:
    return StdioServerParameters(command=sys.executable, args=["-m", "tapes", "replay", str(cassette), *flags, "--", *WEATHER],
                                 env={**os.environ, **(env or {})})


def test_once_records_a_missing_cassette_then_replays_it(tmp_path: Path) -> None:
    cassette = tmp_path / "weather.tape"
    live = anyio.run(forecast, stdio(cassette, "--record-mode", "once"))
    recorded = tapes.load(cassette)
    assert recorded.header.server["command"][-1].endswith("weather_server.py")
    # the second run replays: the cassette is left as it was
    assert anyio.run(forecast, stdio(cassette, env={"TAPES_RECORD_MODE": "once"})) == live
    assert tapes.load(cassette).header.created == recorded.header.created


def test_all_records_every_time_and_replaces_the_cassette_only_when_the_session_changed(tmp_path: Path) -> None:
    cassette = tmp_path / "weather.jsonl"
    anyio.run(forecast, stdio(cassette, "--record-mode", "once"))
    first = cassette.read_bytes()
    assert first.startswith(b'{"mcp-tapes":1')  # the name asks for JSON Lines
    anyio.run(forecast, stdio(cassette, "--record-mode", "all"))
    assert cassette.read_bytes() == first  # recorded again, the same behaviour: left as it was
    assert anyio.run(forecast, stdio(cassette, "--record-mode", "all"), "Oslo").startswith("Oslo")
    assert b"Oslo" in cassette.read_bytes()
    # new redaction rules make a new cassette, and the redacted session still replays
    anyio.run(forecast, stdio(cassette, "--record-mode", "rewrite", "--redact-path", "params.arguments.city"))
    assert tapes.load(cassette).header.redaction == ("json:params.arguments.city",)
    assert b'"city":"<redacted:1>"' in cassette.read_bytes()
    assert anyio.run(forecast, stdio(cassette, "--record-mode", "once")).startswith("Paris")  # replayed
    assert sorted(path.name for path in tmp_path.iterdir()) == ["weather.jsonl"]


def test_none_with_a_missing_cassette_is_one_sentence(tmp_path: Path) -> None:
    run = subprocess.run([sys.executable, "-m", "tapes", "replay", str(tmp_path / "nothere.tape"), "--record-mode", "none"],
                         input=b"", capture_output=True, timeout=60)
    assert run.returncode == 2 and b"no such cassette file" in run.stderr and b"Traceback" not in run.stderr


def test_once_over_http_records_through_the_upstream_then_replays(tmp_path: Path) -> None:
    cassette = tmp_path / "notes-http.tape"
    server = subprocess.Popen([*NOTES, "--http"], stderr=subprocess.PIPE, text=True)
    try:
        upstream = _announced(server)
        live = _listed_tools_over(cassette, upstream)
    finally:
        server.terminate()
        server.wait()
    assert tapes.load(cassette).header.transport == "http"
    assert sorted(path.name for path in tmp_path.iterdir()) == ["notes-http.tape"]  # recorded beside it, then moved
    assert _listed_tools_over(cassette, upstream) == live  # the upstream is gone: this is the replay


def test_once_killed_part_way_leaves_no_cassette_for_the_next_run_to_replay(tmp_path: Path) -> None:
    """A SIGKILL (a CI timeout) after the server answered left the capture at the cassette's name,
    and the next run replayed that half session as the cassette."""
    cassette = tmp_path / "weather.tape"
    argv = [sys.executable, "-m", "tapes", "replay", str(cassette), "--record-mode", "once", "--", *WEATHER]
    recorder = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert recorder.stdin is not None and recorder.stdout is not None
    recorder.stdin.write(json.dumps(INITIALIZE).encode() + b"\n")
    recorder.stdin.flush()
    assert b'"serverInfo"' in recorder.stdout.readline()  # the session is under way, and recorded
    recorder.kill()
    recorder.wait(timeout=30)
    recorder.stdin.close()
    recorder.stdout.close()
    assert not cassette.exists()
    # the next run records the whole session (over the scratch the killed one left), then moves it in place
    assert anyio.run(forecast, stdio(cassette, "--record-mode", "once")).startswith("Paris")
    assert tapes.load(cassette).warnings == []  # no raw capture of a killed recorder
    assert sorted(path.name for path in tmp_path.iterdir()) == ["weather.tape"]


def test_once_over_http_killed_part_way_leaves_no_cassette(tmp_path: Path) -> None:
    cassette = tmp_path / "notes-http.tape"
    server = subprocess.Popen([*NOTES, "--http"], stderr=subprocess.PIPE, text=True)
    port = _free_port()
    recorder = subprocess.Popen([sys.executable, "-m", "tapes", "replay", str(cassette), "--http", "--listen",
                                 f"127.0.0.1:{port}", "--upstream", _announced(server), "--record-mode", "once"])
    try:
        _wait_until_listening(port)

        async def initialize() -> None:
            async with Client(f"http://127.0.0.1:{port}/mcp", cache=None):
                pass

        anyio.run(initialize)
    finally:
        recorder.kill()
        recorder.wait(timeout=30)
        server.terminate()
        server.wait()
    assert not cassette.exists()


def test_a_rerecord_that_did_not_finish_leaves_the_cassette_and_says_where_the_recording_is(tmp_path: Path) -> None:
    """A before-record hook that fails leaves the recorder's raw capture, unscrubbed: it used to
    replace the cassette all the same."""
    cassette = tmp_path / "weather.tape"
    anyio.run(forecast, stdio(cassette, "--record-mode", "once"))
    recorded = cassette.read_bytes()
    (tmp_path / "broken.py").write_text("def raises(frame):\n    raise RuntimeError('no')\n")
    session = (ROOT / "cassettes" / "example" / "client.jsonl").read_bytes()  # another session: it would replace it
    run = subprocess.run([sys.executable, "-m", "tapes", "replay", str(cassette), "--record-mode", "all",
                          "--before-record", "broken:raises", "--", *WEATHER],
                         input=session, capture_output=True, cwd=tmp_path, timeout=60)
    assert run.returncode == 1 and b"Traceback" not in run.stderr
    scratch = tmp_path / "weather.recording.tape"
    assert cassette.read_bytes() == recorded and scratch.exists()
    assert (f"tapes: warning: the recording did not finish, so it was not put at {cassette}; what was recorded is kept "
            f"in {scratch}, which the next recording writes over") in run.stderr.decode()


def test_a_cassette_in_a_missing_folder_is_one_sentence_naming_it(tmp_path: Path) -> None:
    cassette = tmp_path / "nowhere" / "weather.tape"
    run = subprocess.run([sys.executable, "-m", "tapes", "replay", str(cassette), "--record-mode", "once", "--", *WEATHER],
                         input=b"", capture_output=True, timeout=60)
    assert run.returncode == 2
    assert run.stderr.decode() == (f"tapes: error: {cassette}: cannot be written (the folder {cassette.parent} "
                                   "does not exist)\n")


def _listed_tools_over(cassette: Path, upstream: str) -> list[str]:
    port = _free_port()
    process = subprocess.Popen([sys.executable, "-m", "tapes", "replay", str(cassette), "--http", "--listen", f"127.0.0.1:{port}",
                                "--upstream", upstream, "--record-mode", "once"], stderr=subprocess.PIPE, text=True)
    try:
        url = f"http://127.0.0.1:{port}/mcp"
        _wait_until_listening(port)

        async def tools() -> list[str]:
            async with Client(url, cache=None) as client:
                return sorted(tool.name for tool in (await client.list_tools()).tools)

        return anyio.run(tools)
    finally:
        process.terminate()
        process.wait(timeout=30)


def _announced(server: subprocess.Popen[str]) -> str:
    assert server.stderr is not None
    for line in server.stderr:
        if "listening on" in line:
            return line.rsplit(" ", 1)[-1].strip()
    raise AssertionError("the notes server did not start")


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _wait_until_listening(port: int) -> None:
    """A TCP probe: an HTTP one would land in the recording."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        with socket.socket() as probe:
            if probe.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    raise AssertionError(f"nothing listens on port {port}")


def test_none_takes_the_same_command_line_and_leaves_the_server_unused(tmp_path: Path) -> None:
    cassette = tmp_path / "weather.tape"
    live = anyio.run(forecast, stdio(cassette, "--record-mode", "once"))
    recorded = tapes.load(cassette)
    # only TAPES_RECORD_MODE changes between a developer's run and CI's: the `-- SERVER` stays
    assert anyio.run(forecast, stdio(cassette, env={"TAPES_RECORD_MODE": "none"})) == live
    assert tapes.load(cassette).header.created == recorded.header.created


def test_the_readme_typescript_example_records_then_replays(tmp_path: Path) -> None:
    """docs/examples/weather.test.mjs, as the README shows it: the TypeScript SDK's stdio client
    with `tapes replay --record-mode` in place of the server command, under `node --test`."""
    for name in ("docs/examples/weather.test.mjs", "cassettes/example/weather_server.py"):
        (tmp_path / Path(name).name).write_bytes((ROOT / name).read_bytes())
    (tmp_path / "node_modules").symlink_to(ROOT / "tests" / "peers" / "node_modules")
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}

    def node_test(mode: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["node", "--test", "weather.test.mjs"], cwd=tmp_path, env={**env, "TAPES_RECORD_MODE": mode},
                              capture_output=True, text=True, timeout=120)

    recording = node_test("once")
    assert recording.returncode == 0 and "tapes replay: played" not in recording.stdout, recording.stdout
    recorded = (tmp_path / "weather.tape").read_bytes()
    replaying = node_test("none")  # offline: the cassette answers, and is left as it was
    assert replaying.returncode == 0, replaying.stdout
    assert "tapes replay: played 6 frames, 0 unmatched, 0 unused" in replaying.stdout
    assert (tmp_path / "weather.tape").read_bytes() == recorded
