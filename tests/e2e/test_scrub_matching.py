"""Scrubbing that still matches: a cassette scrubbed by a before-record hook is replayed with the
same hook applied to the live messages before matching (as VCR.py's before_record_request), so the
unscrubbed live session matches it. The hook is the README's, run as written."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import anyio
from mcp import Client, StdioServerParameters

import tapes

ROOT = Path(__file__).resolve().parents[2]
WEATHER = [sys.executable, str(ROOT / "cassettes" / "example" / "weather_server.py")]
SECRET = "sk-live-4f9a1c"
CITY = f"Paris key={SECRET}"


def readme_hook() -> str:
    """The `hooks.py` block of the README's "Scrubbing before recording" section."""
    readme = (ROOT / "README.md").read_text()
    section = readme[readme.index("## Scrubbing before recording"):]
    return re.search(r"```python\n# hooks.py\n(.*?)```", section, re.S).group(1)


async def ask(server: StdioServerParameters) -> str:
    async with Client(server, mode="legacy", cache=None) as client:
        return (await client.call_tool("get_forecast", {"city": CITY})).content[0].text


def tapes_server(folder: Path, *args: str) -> StdioServerParameters:
    return StdioServerParameters(command=sys.executable, args=["-m", "tapes", *args], cwd=str(folder))


def test_a_scrubbed_cassette_matches_the_unscrubbed_live_session(tmp_path: Path) -> None:
    (tmp_path / "hooks.py").write_text(readme_hook())
    cassette = tmp_path / "weather.tape"
    live = anyio.run(ask, tapes_server(tmp_path, "record", "-o", str(cassette), "--before-record", "hooks:mask_api_key",
                                       "--", *WEATHER))
    assert SECRET in live  # the client saw the real answer
    assert SECRET.encode() not in cassette.read_bytes()
    assert any("<redacted:1>" in frame.payload.decode() for frame in tapes.load(cassette).frames)

    report = tmp_path / "report.json"
    replayed = anyio.run(ask, tapes_server(tmp_path, "replay", str(cassette), "--before-record", "hooks:mask_api_key",
                                           "--report", str(report)))
    assert json.loads(report.read_text())["unmatched"] == []
    assert replayed == live.replace(SECRET, "<redacted:1>")  # what the cassette holds


def test_without_the_hook_the_scrubbed_cassette_does_not_match(tmp_path: Path) -> None:
    (tmp_path / "hooks.py").write_text(readme_hook())
    cassette = tmp_path / "weather.tape"
    anyio.run(ask, tapes_server(tmp_path, "record", "-o", str(cassette), "--before-record", "hooks:mask_api_key", "--", *WEATHER))
    run = subprocess.run([sys.executable, "-m", "tapes", "replay", str(cassette)], cwd=tmp_path, capture_output=True,
                         input=(b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"get_forecast",'
                                b'"arguments":{"city":"' + CITY.encode() + b'"}}}\n'), timeout=60)
    assert run.returncode == 1 and b"differing at /params/arguments/city" in run.stdout
