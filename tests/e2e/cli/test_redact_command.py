"""`tapes redact` round trips: a session recorded with a secret (by `tapes record`, from the SDK
notes server, driven by the SDK client) is redacted after the fact; the secret is gone from the
file, the listing names where it was without printing it, and `tapes replay` of the redacted
cassette still serves the client."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

from tapes.cassette.store import load

from tests.support.paths import ROOT
from tests.support.processes import Process

TAPES = [sys.executable, "-m", "tapes"]
NOTES_SERVER = [sys.executable, str(ROOT / "tests" / "servers" / "notes_server.py")]
SECRET = "hunter2-Zq8vX1mK4pL0"
BEARER = "Bearer tk-9f8e7d6c5b4a39281706"


def stdio(argv: list[str]) -> StdioServerParameters:
    return StdioServerParameters(command=argv[0], args=argv[1:], env=dict(os.environ))


async def store_secret(target: Any, **client_options: Any) -> list[Any]:
    """add_note with the secret as its text, then the tool list: what the client got."""
    with anyio.fail_after(60):
        async with Client(target, cache=None, **client_options) as client:
            note = await client.call_tool("add_note", {"title": "deploy", "text": SECRET})
            tools = await client.list_tools()
    return [note.structured_content, [tool.name for tool in tools.tools]]


def redact(source: Path, output: Path, *flags: str) -> list[str]:
    run = subprocess.run([*TAPES, "redact", str(source), "-o", str(output), *flags],
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    assert SECRET not in run.stdout and "tk-9f8e" not in run.stdout
    return run.stdout.splitlines()


@pytest.mark.parametrize("suffix", [".jsonl", ".tape"])
def test_a_secret_in_messages_is_redacted_and_the_replay_still_serves_the_client(suffix: str, tmp_path: Path) -> None:
    recorded, redacted, report = tmp_path / "notes.tape", tmp_path / f"redacted{suffix}", tmp_path / "report.json"
    live = anyio.run(store_secret, stdio([*TAPES, "record", "-o", str(recorded), "--", *NOTES_SERVER]))
    assert SECRET.encode() in recorded.read_bytes()

    listing = redact(recorded, redacted, "--redact-path", "params.arguments.text",
                     "--redact-path", "result.structuredContent.text", "--redact-path", "result.content.*.text")
    assert listing[0] == f"tapes redact: wrote {redacted}"
    assert [re.sub(r" \(.*", "", line.strip()) for line in listing[1:]] == [
        "json params.arguments.text: 1 frame", "json result.content.0.text: 1 frame",
        "json result.structuredContent.text: 1 frame"]
    assert SECRET.encode() not in redacted.read_bytes()
    assert redacted.read_bytes().startswith(b"{") == (suffix == ".jsonl")  # the output's name picks the format
    assert "json:params.arguments.text" in load(redacted).header.redaction

    # the client sends its secret again: the header's json:params.arguments.text leaves it out of matching,
    # and the client gets the placeholder back
    replay = [*TAPES, "replay", str(redacted), "--report", str(report)]
    replayed = anyio.run(store_secret, stdio(replay))
    assert replayed[1] == live[1]
    assert replayed[0] == {**live[0], "text": "<redacted:1>"}  # the same secret, the same placeholder
    assert json.loads(report.read_text())["unmatched"] == []


@contextmanager
def notes_over_http() -> Iterator[str]:
    server = Process([*NOTES_SERVER, "--http"])
    try:
        yield server.wait_for(r"listening on (\S+)")[1]
    finally:
        server.stop()


def over_http(url: str) -> list[Any]:
    client = httpx2.AsyncClient(headers={"Authorization": BEARER}, timeout=60)
    return anyio.run(store_secret, streamable_http_client(url, http_client=client))


def test_an_authorization_header_recorded_with_no_redact_is_redacted_and_replayed(tmp_path: Path) -> None:
    recorded, redacted = tmp_path / "notes.tape", tmp_path / "redacted.tape"
    with notes_over_http() as upstream:
        recorder = Process([*TAPES, "record", "-o", str(recorded), "--no-redact", "--upstream", upstream,
                            "--listen", "127.0.0.1:0"])
        live = over_http(recorder.wait_for(r"tapes: recording (http://\S+)")[1])
        assert recorder.stop(signal.SIGINT) == 0
    assert BEARER.encode() in recorded.read_bytes()

    listing = redact(recorded, redacted)  # the default rules: Authorization, cookies, key-like headers, volatile ones
    assert len(listing) == 3 and re.fullmatch(r"  header Authorization: \d+ frames \(.*\) -> <redacted:1>", listing[1])
    assert re.fullmatch(r"  header date: \d+ frames \(.*\) -> <volatile>", listing[2])
    assert b"tk-9f8e" not in redacted.read_bytes()

    replayer = Process([*TAPES, "replay", str(redacted), "--http", "--listen", "127.0.0.1:0"])
    assert over_http(replayer.wait_for(r"tapes: replaying at (\S+)")[1]) == live
    replayer.stop(signal.SIGINT)
    assert re.search(r"played \d+ frames, 0 unmatched", replayer.rest_of_stderr())
