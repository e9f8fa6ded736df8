"""The in-memory replay (`replayer.memory.ReplayTransport`, the plugin's `tape_transport`): the
official Python SDK client talks to the replay engine with no process and no socket, and gets
what it got from the real server when the session was recorded."""

from __future__ import annotations

import sys
from pathlib import Path

import anyio
import pytest
from mcp import Client

from replayer.memory import ReplayTransport
from tapes.cassette.store import load

ROOT = Path(__file__).resolve().parents[2]
WEATHER = [sys.executable, str(ROOT / "cassettes" / "example" / "weather_server.py")]

INNER = f'''
import anyio, json, pytest
from mcp import Client

async def forecasts(server):
    async with Client(server, mode="legacy", cache=None) as client:
        tools = await client.list_tools()
        answers = [(await client.call_tool("get_forecast", {{"city": city}})).content[0].text for city in ("Paris", "Oslo")]
    return [tool.name for tool in tools.tools], answers

@pytest.mark.tape("cassettes/weather.tape", server={WEATHER!r})
def test_forecast(tape_transport, tape):
    names, answers = anyio.run(forecasts, tape_transport)
    print("RESULT", json.dumps([names, answers]), "RECORDING" if tape.recording else "IN-MEMORY " + type(tape_transport).__name__)
'''


def run(pytester: pytest.Pytester, mode: str, source: str = INNER) -> pytest.RunResult:
    pytester.makepyfile(test_weather=source)
    pytester._monkeypatch.delenv("CI", raising=False)
    return pytester.runpytest_subprocess("-s", "-p", "no:cacheprovider", f"--tape-record-mode={mode}")


def _result(run: pytest.RunResult) -> str:
    line = next(line for line in run.outlines if "RESULT " in line)
    return line[line.index("RESULT ") :]


def test_the_in_memory_replay_gives_what_the_real_server_gave(pytester: pytest.Pytester) -> None:
    recorded = run(pytester, "once")
    recorded.assert_outcomes(passed=1)
    assert "RECORDING" in recorded.stdout.str()
    replayed = run(pytester, "none")
    replayed.assert_outcomes(passed=1)
    assert "IN-MEMORY ReplayTransport" in replayed.stdout.str()
    assert _result(replayed).split(" IN-MEMORY")[0] == _result(recorded).split(" RECORDING")[0]


def test_an_in_memory_miss_fails_the_test_at_teardown(pytester: pytest.Pytester) -> None:
    run(pytester, "once").assert_outcomes(passed=1)
    swallowing = INNER.replace('("Paris", "Oslo")', '("Paris", "Lima")').replace(
        "names, answers = anyio.run(forecasts, tape_transport)",
        "try:\n        anyio.run(forecasts, tape_transport)\n    except BaseException:\n        pass\n    names, answers = [], []")
    result = run(pytester, "none", swallowing)
    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines(["*did not go as recorded*", "*unmatched tools/call*Lima*"])


def test_an_http_cassette_is_served_in_memory_as_its_session() -> None:
    """A Streamable HTTP recording of server-everything, served in memory to the SDK client."""
    transport = ReplayTransport(load(ROOT / "cassettes" / "everything-http-2025-11-25.tape"))

    async def tools() -> list[str]:
        async with Client(transport, mode="legacy", cache=None) as client:  # type: ignore[arg-type]
            return [tool.name for tool in (await client.list_tools()).tools]

    names = anyio.run(tools)
    assert "echo" in names and len(names) == 15
    assert transport.session.report.unmatched == []
