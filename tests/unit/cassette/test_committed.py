"""The committed cassettes in cassettes/: every session the make scripts record is there, and each is
lossless in both formats."""

from __future__ import annotations

from pathlib import Path

import pytest

from tapes.cassette.store import load, save

from tests.support.make_cassettes import STDIO_SESSIONS
from tests.support.paths import CASSETTES

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
