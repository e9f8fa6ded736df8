"""The committed cassettes in cassettes/ are still a faithful stand-in for the real servers they
were recorded from (replay gives what a direct run gives)."""

from __future__ import annotations

import subprocess

import anyio
import pytest

from tapes.cassette.store import load
from tapes.cassette.frames import Kind

from tests.support.make_cassettes import EXAMPLE, STDIO_SESSIONS
from tests.support.paths import CASSETTES, ROOT, TAPES

@pytest.mark.parametrize("name", sorted(STDIO_SESSIONS))
def test_replaying_a_committed_cassette_gives_the_direct_result(name: str, everything_stdio: list[str]) -> None:
    flow, server = STDIO_SESSIONS[name]
    direct = anyio.run(flow, server)
    assert anyio.run(flow, [*TAPES, "replay", str(CASSETTES / f"{name}.tape")]) == direct


def test_the_example_replays_the_servers_exact_bytes() -> None:
    cassette = load(EXAMPLE / "weather.tape")
    recorded_stdout = b"".join(
        f.payload + b"\n" for f in cassette.frames if not f.from_client and f.kind is Kind.MESSAGE
    )
    with open(EXAMPLE / "client.jsonl", "rb") as client:
        done = subprocess.run([*TAPES, "replay", str(EXAMPLE / "weather.tape")], stdin=client,
                              capture_output=True, timeout=30, cwd=ROOT)
    assert done.returncode == 0
    assert done.stdout == recorded_stdout
    assert b"weather server ready" in done.stderr and b"0 unmatched" in done.stderr
