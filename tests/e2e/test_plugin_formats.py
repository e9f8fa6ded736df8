"""The pytest plugin: `[tool.tapes] format = "jsonl"`, quiet re-records in JSON Lines, and
`redact_headers`/`redact_paths` from the marker and `[tool.tapes]`."""

from __future__ import annotations

import json
import sys

import pytest

from tapes.cassette.store import load

from tests.support.http_peers import notes_over_http
from tests.support.paths import CASSETTES

WEATHER = [sys.executable, str(CASSETTES / "example" / "weather_server.py")]

INNER = f'''
import anyio, pytest
from mcp import Client, StdioServerParameters

async def forecast(server, city):
    async with Client(StdioServerParameters(command=server[0], args=server[1:]), mode="legacy", cache=None) as client:
        result = await client.call_tool("get_forecast", {{"city": city}})
    return result.content[0].text

@pytest.mark.tape(server={WEATHER!r}, MARKER)
def test_forecast(tape_server, tape):
    assert anyio.run(forecast, tape_server, "Paris").startswith("Paris")
    print("RECORDING" if tape.recording else "REPLAYING")
'''


def run(pytester: pytest.Pytester, mode: str, marker: str = "repeats='in-order'", tapes: str = "") -> pytest.RunResult:
    pytester.makepyfile(test_weather=INNER.replace("MARKER", marker))
    pytester.makefile(".toml", pyproject=f"[tool.tapes]\n{tapes}\n")
    pytester._monkeypatch.delenv("CI", raising=False)
    return pytester.runpytest_subprocess("-s", "-p", "no:cacheprovider", f"--tape-record-mode={mode}")


def test_format_jsonl_names_cassettes_jsonl_and_a_re_record_of_the_same_session_leaves_the_file(
    pytester: pytest.Pytester,
) -> None:
    run(pytester, "once", tapes='format = "jsonl"').assert_outcomes(passed=1)
    cassette = pytester.path / "cassettes" / "test_weather" / "test_forecast.jsonl"
    lines = cassette.read_text(encoding="utf-8").splitlines()
    assert json.loads(lines[0])["mcp-tapes"] == 1 and all(json.loads(line)["seq"] for line in lines[1:])
    recorded = cassette.read_bytes()
    replayed = run(pytester, "none", tapes='format = "jsonl"')
    replayed.assert_outcomes(passed=1)
    assert "REPLAYING" in replayed.stdout.str()
    for mode in ("all", "rewrite"):
        again = run(pytester, mode, tapes='format = "jsonl"')
        again.assert_outcomes(passed=1)
        assert "RECORDING" in again.stdout.str()
        assert cassette.read_bytes() == recorded
    assert sorted(path.name for path in cassette.parent.iterdir()) == ["test_forecast.jsonl"]


def test_redact_paths_from_the_marker_and_tool_tapes_add_up_and_the_cassette_still_replays(
    pytester: pytest.Pytester,
) -> None:
    marker = "redact_paths=['params.arguments.city'], redact_headers=['X-Tenant']"
    tapes = 'redact-paths = ["params.clientInfo.name"]'
    run(pytester, "once", marker, tapes).assert_outcomes(passed=1)
    cassette = load(pytester.path / "cassettes" / "test_weather" / "test_forecast.tape")
    assert cassette.header.redaction == ("json:params.clientInfo.name", "json:params.arguments.city")
    calls = [frame.message for frame in cassette.frames if frame.from_client and frame.message
             and frame.message.get("method") == "tools/call"]
    assert [call["params"]["arguments"]["city"] for call in calls] == ["<redacted:2>"]
    # the live "Paris" still matches the recorded placeholder: redacted params are left out of matching
    run(pytester, "none", marker, tapes).assert_outcomes(passed=1)


@pytest.mark.parametrize(("marker", "expected"), [
    ("redact_paths=['params..city']", "tape marker: the JSON path 'params..city' has an empty step*"),
    ("redact_headers='X-Tenant'", "tape marker: redact_headers is not a list of strings (e.g. redact_headers=[...])"),
])
def test_a_bad_redaction_argument_is_one_line(pytester: pytest.Pytester, marker: str, expected: str) -> None:
    result = run(pytester, "once", marker)
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines([expected])
    assert "Traceback" not in result.stdout.str()


NOTES_WITH_A_TENANT = """
import anyio, httpx2, pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

async def add(url):
    http = httpx2.AsyncClient(headers={{"X-Tenant": "acme-7731"}}, timeout=60)
    async with Client(streamable_http_client(url, http_client=http), mode="legacy", cache=None) as client:
        return (await client.call_tool("add_note", {{"title": "deploy", "text": "hunter2"}})).structured_content

@pytest.mark.tape(upstream={upstream!r}, redact_headers=["X-Tenant"], redact_paths=["params.arguments.text"])
def test_notes(tape_url):
    assert anyio.run(add, tape_url)["title"] == "deploy"
"""


def test_redaction_from_the_marker_reaches_an_http_recording_named_by_tool_tapes(pytester: pytest.Pytester) -> None:
    def run_notes(mode: str, upstream: str = "http://127.0.0.1:9/mcp") -> pytest.RunResult:
        pytester.makepyfile(test_notes=NOTES_WITH_A_TENANT.format(upstream=upstream))
        pytester.makefile(".toml", pyproject='[tool.tapes]\nformat = "jsonl"\n')
        return pytester.runpytest_subprocess("-p", "no:cacheprovider", f"--tape-record-mode={mode}")

    with notes_over_http() as upstream:
        run_notes("once", upstream).assert_outcomes(passed=1)
    cassette = pytester.path / "cassettes" / "test_notes" / "test_notes.jsonl"
    content = cassette.read_text(encoding="utf-8")
    assert json.loads(content.splitlines()[0])["transport"] == "http"
    frames = load(cassette).frames
    assert "acme-7731" not in content
    assert not any("hunter2" in str(frame.message) for frame in frames if frame.from_client)
    tenants = {value for frame in frames if frame.info and "headers" in frame.info
               for name, value in frame.info["headers"] if name.lower() == "x-tenant"}
    assert tenants == {"<redacted:1>"}
    run_notes("none").assert_outcomes(passed=1)  # offline: the redacted request still matches
