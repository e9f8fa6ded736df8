"""The pytest plugin's `faults=[...]` marker argument, with the official SDK client as the code
under test: over stdio (tape_server) and in memory (tape_transport), and a fault that never fired
(a warning, an error under fail_on_unused)."""

from __future__ import annotations

import sys

import pytest

from tests.support.paths import CASSETTES

WEATHER = [sys.executable, str(CASSETTES / "example" / "weather_server.py")]

# An inner test module: two forecasts through the plugin's fixtures; a fault replaces the second.
INNER = f'''
import anyio, pytest
from mcp import Client, MCPError, StdioServerParameters

async def forecasts(server):
    said = []
    async with Client(server, mode="legacy", cache=None) as client:
        for city in ("Paris", "Oslo"):
            try:
                said.append((await client.call_tool("get_forecast", {{"city": city}})).content[0].text)
            except MCPError as error:
                said.append(f"error {{error.error.code}}: {{error.error.message}}")
    return said

def target(fixture):
    return StdioServerParameters(command=fixture[0], args=fixture[1:]) if isinstance(fixture, list) else fixture

@pytest.mark.tape("cassettes/weather.tape", server={WEATHER!r}, faults=FAULTS, fail_on_unused=FAIL_ON_UNUSED)
def test_forecasts(FIXTURE, tape):
    said = anyio.run(forecasts, target(FIXTURE))
    if tape.recording:  # faults apply to replays only
        assert said == ["Paris: sunny, 21 °C", "Oslo: snow, -3 °C"]
    else:
        assert said == EXPECTED
'''


def run(pytester: pytest.Pytester, fixture: str, faults: list[str], expected: list[str],
        fail_on_unused: bool = False) -> pytest.RunResult:
    """Record the inner test's cassette (faults do not apply), then run it again as a replay."""
    source = (INNER.replace("FIXTURE", fixture).replace("FAULTS", repr(faults)).replace("EXPECTED", repr(expected))
              .replace("FAIL_ON_UNUSED", repr(fail_on_unused)))
    pytester.makepyfile(test_weather=source)
    pytester.runpytest_subprocess("-p", "no:cacheprovider", "--tape-record-mode=once").assert_outcomes(passed=1)
    return pytester.runpytest_subprocess("-p", "no:cacheprovider", "--tape-record-mode=none")


@pytest.mark.parametrize("fixture", ["tape_server", "tape_transport"])
def test_the_marker_s_fault_replaces_the_second_call(pytester: pytest.Pytester, fixture: str) -> None:
    result = run(pytester, fixture, ["tools/call@get_forecast#2:error:-32000:rate limited"],
                 ["Paris: sunny, 21 °C", "error -32000: rate limited"])
    result.assert_outcomes(passed=1)
    assert "fault never fired" not in result.stdout.str()


def test_a_fault_that_never_fired_is_a_warning(pytester: pytest.Pytester) -> None:
    result = run(pytester, "tape_server", ["tools/call@get_forecast#3:hang"], ["Paris: sunny, 21 °C", "Oslo: snow, -3 °C"])
    result.assert_outcomes(passed=1, warnings=1)
    result.stdout.fnmatch_lines(["*UserWarning: replay of *weather.tape: fault never fired: tools/call@get_forecast#3:hang*"])


def test_a_fault_that_never_fired_fails_the_test_under_fail_on_unused(pytester: pytest.Pytester) -> None:
    result = run(pytester, "tape_transport", ["tools/call@get_forecast#3:hang"], ["Paris: sunny, 21 °C", "Oslo: snow, -3 °C"],
                 fail_on_unused=True)
    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines(["*did not go as recorded:*", "*fault never fired: tools/call@get_forecast#3:hang*"])
