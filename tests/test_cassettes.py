"""The committed cassettes in cassettes/: lossless in both formats, and still a faithful stand-in
for the real servers they were recorded from (replay gives what a direct run gives)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import anyio
import pytest
from conftest import ROOT, TAPES
from make_cassettes import CASSETTES, EXAMPLE, STDIO_SESSIONS

from tapes.cassette.store import load, save
from tapes.cassette.frames import Kind

TAPE_FILES = sorted(CASSETTES.rglob("*.tape"))


def test_every_stdio_session_and_the_example_are_committed() -> None:
    names = {path.stem for path in TAPE_FILES}
    assert {*STDIO_SESSIONS, "weather"} <= names


@pytest.mark.parametrize("path", TAPE_FILES, ids=lambda p: p.stem)
def test_msgpack_and_jsonl_round_trip_is_lossless(path: Path, tmp_path: Path) -> None:
    original = load(path)
    twin = load(path.with_suffix(".jsonl"))
    assert (twin.header, twin.frames) == (original.header, original.frames)
    save(original, tmp_path / "copy.jsonl", jsonl=True)
    save(load(tmp_path / "copy.jsonl"), tmp_path / "copy.tape")
    assert (tmp_path / "copy.tape").read_bytes() == path.read_bytes()
    assert (tmp_path / "copy.jsonl").read_bytes() == path.with_suffix(".jsonl").read_bytes()


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
