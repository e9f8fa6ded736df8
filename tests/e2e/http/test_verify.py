"""`tapes verify --upstream`: end-to-end runs of the recorded server-everything session against a
live server-everything and against a changed SDK server."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import anyio
from mcp import Client
from mcp.client.sse import sse_client

from tests.support.http_peers import record_session, start_everything
from tests.support.paths import ROOT, SERVERS, TAPES
from tests.support.processes import Process

CASSETTE = "cassettes/everything-http-2025-11-25.tape"


def run_tapes(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*TAPES, *args], check=False, capture_output=True, text=True, cwd=ROOT, timeout=60)


def test_verify_server_everything_over_http_against_the_recording(everything_http: str, tmp_path: Path) -> None:
    live = tmp_path / "live.tape"
    # a generous step timeout: under a loaded test run a server's answer may take seconds
    run = run_tapes("verify", CASSETTE, "--upstream", everything_http, "--format", "json", "--keep", str(live),
                    "--step-timeout", "20")
    report = json.loads(run.stdout)
    assert run.returncode == 0, f"{json.dumps(report['changes'], indent=1)}\n{run.stderr}"  # whole: a string is not cut
    assert report["same"] and report["matched"] == 10
    assert run_tapes("show", str(live)).returncode == 0
    text = run_tapes("verify", CASSETTE, "--upstream", everything_http, "--step-timeout", "20")
    assert text.returncode == 0 and "same behaviour (10 interactions matched)" in text.stdout


def test_verify_server_everything_over_legacy_sse_against_the_recording(tmp_path: Path) -> None:
    server, url = start_everything("sse")
    try:
        run = run_tapes("verify", "cassettes/everything-sse-2024-11-05.tape", "--upstream", url, "--format", "json",
                        "--step-timeout", "20")
    finally:
        server.stop()
    report = json.loads(run.stdout)
    assert run.returncode == 0, f"{json.dumps(report['changes'], indent=1)}\n{run.stderr}"  # whole: a string is not cut
    assert report["same"] and report["matched"] >= 10


SLOW_SSE_SERVER = f"""
import sys
sys.path.insert(0, {str(SERVERS)!r})
import anyio
from mcp.server.mcpserver import MCPServer
from serving import serve

server = MCPServer(name="slow", log_level="WARNING")

@server.tool(description="Echoes back the input, a while after its POST was accepted")
async def slow_echo(message: str) -> str:
    await anyio.sleep(0.5)
    return f"Echo: {{message}}"

serve(server.sse_app(), "slow server", path="/sse")
"""


def test_verify_over_legacy_sse_waits_for_the_last_answer_after_its_post_was_accepted(tmp_path: Path) -> None:
    """A legacy POST is answered 202 at once; its result comes later on the GET stream. The live
    session ends once that came, not when the last POST was accepted."""
    script = tmp_path / "slow_server.py"
    script.write_text(SLOW_SSE_SERVER)
    recording = tmp_path / "slow.tape"

    async def call(url: str) -> None:
        async with Client(sse_client(url), mode="legacy", cache=None) as client:
            await client.list_tools()  # the tool's output schema known: the call is the session's last request
            await client.call_tool("slow_echo", {"message": "late"})

    server = Process([sys.executable, str(script)])
    try:
        url = server.wait_for(r"listening on (\S+)")[1]
        record_session(recording, url, lambda proxy: anyio.run(call, proxy))
        run = run_tapes("verify", str(recording), "--upstream", url, "--format", "json")
    finally:
        server.stop()
    report = json.loads(run.stdout)
    assert run.returncode == 0, f"{json.dumps(report['changes'], indent=1)}\n{run.stderr}"


CHANGED_SERVER = f"""
import sys
sys.path.insert(0, {str(SERVERS)!r})
from mcp.server.mcpserver import MCPServer
from serving import serve

server = MCPServer(name="everything-changed", version="2.0.0", log_level="WARNING")

@server.tool(description="Echoes back the input")
def echo(message: str) -> str:
    return f"Echo (changed): {{message}}"

serve(server.streamable_http_app(), "changed server")
"""


def test_verify_over_http_reports_what_a_changed_server_does_differently(tmp_path: Path) -> None:
    script = tmp_path / "changed_server.py"
    script.write_text(CHANGED_SERVER)
    server = Process([sys.executable, str(script)])
    try:
        url = server.wait_for(r"listening on (\S+)")[1]
        run = run_tapes("verify", CASSETTE, "--upstream", url, "--step-timeout", "0.5", "--format", "json")
    finally:
        server.stop()
    assert run.returncode == 1, run.stderr
    report = json.loads(run.stdout)
    assert not report["same"]
    subjects = {(change["section"], change["kind"], change["subject"]) for change in report["changes"]}
    assert ("tool", "removed", "get-roots-list") in subjects, subjects
    echoed = {(delta["old"], delta["new"]) for change in report["changes"] if change["subject"] == "tools/call echo"
              for delta in change["deltas"] if delta["path"] == "/outcome/result/content/0/text"}
    assert ("Echo: hello", "Echo (changed): hello") in echoed, report["changes"]


def test_verify_upstream_user_errors() -> None:
    nothing_there = run_tapes("verify", CASSETTE, "--upstream", "http://127.0.0.1:1/mcp")
    assert nothing_there.returncode == 2 and "cannot reach http://127.0.0.1:1/mcp" in nothing_there.stderr
    stdio = run_tapes("verify", "cassettes/notes-stdio-2025-11-25.tape", "--upstream", "http://127.0.0.1:1/mcp")
    assert stdio.returncode == 2 and "is a stdio recording" in stdio.stderr
    both = run_tapes("verify", CASSETTE, "--upstream", "http://127.0.0.1:1/mcp", "--", "true")
    assert both.returncode == 2 and "not both" in both.stderr
