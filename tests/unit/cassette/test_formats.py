"""The cassette format follows the file name (`.jsonl` JSON Lines, any other name msgpack) for
every writer: `save`, `CassetteWriter`, `replace_file`; `dump` writes to an open file (stdout)."""

from __future__ import annotations

import codecs
import io
import json
import os
import stat
from pathlib import Path

import pytest

from tapes.cassette.frames import STDIO, Direction, Frame, Kind
from tapes.cassette.store import (
    JSONL_VERSION,
    Cassette,
    CassetteError,
    CassetteWriter,
    dump,
    is_jsonl_path,
    load,
    loads,
    replace_file,
    save,
)

from tests.support.samples import EVERY_KIND, EVERY_KIND_HEADER


@pytest.mark.parametrize(("name", "jsonl"), [("a.jsonl", True), ("a.tape", False), ("a.jsonl.tape", False),
                                             ("a", False), ("a.recording.jsonl", True)])
def test_the_name_picks_the_format(tmp_path: Path, name: str, jsonl: bool) -> None:
    assert is_jsonl_path(tmp_path / name) is jsonl
    save(Cassette(EVERY_KIND_HEADER, EVERY_KIND), tmp_path / name)
    content = (tmp_path / name).read_bytes()
    assert content.startswith(b"{") is jsonl  # a JSON object, or a msgpack map
    assert loads(content).frames == EVERY_KIND


def test_an_explicit_format_wins_over_the_name(tmp_path: Path) -> None:
    save(Cassette(EVERY_KIND_HEADER, EVERY_KIND), tmp_path / "a.tape", jsonl=True)
    assert json.loads((tmp_path / "a.tape").read_text().splitlines()[0])["mcp-tapes"] == JSONL_VERSION


def test_the_writer_appends_json_lines_to_a_jsonl_path(tmp_path: Path) -> None:
    with CassetteWriter(tmp_path / "a.jsonl", EVERY_KIND_HEADER) as writer:
        writer.write(EVERY_KIND[:3])
        assert len((tmp_path / "a.jsonl").read_text().splitlines()) == 4  # on disk as it goes
        writer.write(EVERY_KIND[3:])
    # line for line what save writes
    save(Cassette(EVERY_KIND_HEADER, EVERY_KIND), tmp_path / "b.jsonl")
    assert (tmp_path / "a.jsonl").read_bytes() == (tmp_path / "b.jsonl").read_bytes()


def test_replace_file_keeps_the_format_of_the_name(tmp_path: Path) -> None:
    for name in ("a.jsonl", "a.tape"):
        save(Cassette(EVERY_KIND_HEADER, EVERY_KIND[:1]), tmp_path / name)
        replace_file(Cassette(EVERY_KIND_HEADER, EVERY_KIND), tmp_path / name)
        assert (tmp_path / name).read_bytes().startswith(b"{") is name.endswith(".jsonl")
        assert load(tmp_path / name).frames == EVERY_KIND
    assert sorted(path.name for path in tmp_path.iterdir()) == ["a.jsonl", "a.tape"]  # no scratch left


@pytest.mark.parametrize("jsonl", [True, False])
def test_dump_writes_to_an_open_file_as_save_does(tmp_path: Path, jsonl: bool) -> None:
    out = io.BytesIO()
    dump(Cassette(EVERY_KIND_HEADER, EVERY_KIND), out, jsonl=jsonl)
    save(Cassette(EVERY_KIND_HEADER, EVERY_KIND), tmp_path / "a", jsonl=jsonl)
    assert out.getvalue() == (tmp_path / "a").read_bytes()


def test_a_lone_surrogate_goes_to_json_lines_as_an_escape(tmp_path: Path) -> None:
    message = {"jsonrpc": "2.0", "id": 1, "result": {"text": "lone \ud800 surrogate"}}
    frames = [Frame(1, 0.0, Direction.SERVER_TO_CLIENT, STDIO, Kind.MESSAGE, message)]
    save(Cassette(EVERY_KIND_HEADER, frames), tmp_path / "a.jsonl")
    line = (tmp_path / "a.jsonl").read_bytes().splitlines()[1]
    assert b"\\ud800" in line
    assert load(tmp_path / "a.jsonl").frames == frames


def test_replace_file_writes_into_what_is_no_regular_file(tmp_path: Path) -> None:
    """A FIFO (or a device: /dev/stdout, /dev/full) is written into, never renamed over."""
    fifo = tmp_path / "pipe.jsonl"
    os.mkfifo(fifo)
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)  # the cassette fits in the pipe's buffer
    try:
        replace_file(Cassette(EVERY_KIND_HEADER, EVERY_KIND), fifo)
        assert stat.S_ISFIFO(fifo.lstat().st_mode)
        assert loads(os.read(reader, 1 << 16)).frames == EVERY_KIND
    finally:
        os.close(reader)
    assert [path.name for path in tmp_path.iterdir()] == ["pipe.jsonl"]


def test_replace_file_through_a_symlink_replaces_its_target(tmp_path: Path) -> None:
    (tmp_path / "shared").mkdir()
    target = tmp_path / "shared" / "a.tape"
    save(Cassette(EVERY_KIND_HEADER, EVERY_KIND[:1]), target)
    link = tmp_path / "a.tape"
    link.symlink_to(target)
    replace_file(Cassette(EVERY_KIND_HEADER, EVERY_KIND), link)
    assert link.is_symlink() and load(target).frames == EVERY_KIND


def test_replace_file_into_a_missing_folder_names_the_file_asked_for(tmp_path: Path) -> None:
    with pytest.raises(CassetteError) as refused:
        replace_file(Cassette(EVERY_KIND_HEADER, EVERY_KIND), tmp_path / "nope" / "a.tape")
    assert str(refused.value) == f"{tmp_path / 'nope' / 'a.tape'}: cannot be written (No such file or directory)"


def test_json_lines_saved_by_an_editor_with_a_byte_order_mark_load(tmp_path: Path) -> None:
    save(Cassette(EVERY_KIND_HEADER, EVERY_KIND), tmp_path / "a.jsonl")
    assert loads(codecs.BOM_UTF8 + (tmp_path / "a.jsonl").read_bytes()).frames == EVERY_KIND
