"""`tapes export` and `tapes import` as commands: a lossless round trip, and one-line errors."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tapes.cassette.frames import Direction, Frame, Kind
from tapes.cassette.store import load

from tests.support.paths import TAPES
from tests.support.samples import EVERY_KIND, write_cassette


def _tapes(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*TAPES, *map(str, args)], capture_output=True, text=True, timeout=60)


def test_cli_export_import_round_trip(tmp_path: Path) -> None:
    original = write_cassette(tmp_path / "a.tape", EVERY_KIND)
    exported = _tapes("export", tmp_path / "a.tape", "-o", tmp_path / "a.jsonl")
    assert (exported.returncode, exported.stderr) == (0, "")
    assert load(tmp_path / "a.jsonl").frames == EVERY_KIND
    imported = _tapes("import", tmp_path / "a.jsonl", "-o", tmp_path / "b.tape")
    assert (imported.returncode, imported.stderr) == (0, "")
    assert (tmp_path / "b.tape").read_bytes() == original


@pytest.mark.parametrize("damage", ["missing", "corrupt", "unwritable output"])
def test_cli_error_is_one_line_without_traceback(tmp_path: Path, damage: str) -> None:
    source, output = tmp_path / "a.tape", tmp_path / "a.jsonl"
    if damage == "corrupt":
        source.write_bytes(write_cassette(source, EVERY_KIND[:2]) + b"\xc1" + b"\x00" * 10)
    elif damage == "unwritable output":
        write_cassette(source, EVERY_KIND[:2])
        output = tmp_path / "no-such-dir" / "a.jsonl"
    result = _tapes("export", source, "-o", output)
    assert result.returncode == 2
    assert result.stdout == ""
    assert result.stderr.startswith("tapes: error: ")
    assert result.stderr.count("\n") == 1 and result.stderr.endswith("\n")
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize("output", ["out.jsonl", "-"])
@pytest.mark.parametrize("where", ["msg", "info"])
def test_msgpack_bytes_where_json_belongs_are_named_in_the_input(tmp_path: Path, output: str, where: str) -> None:
    """Bytes in a message or its info (msgpack has them, JSON has not): the error named the output file."""
    source = tmp_path / "a.tape"
    message = {"jsonrpc": "2.0", "id": 9, "method": "ping", "params": {"blob": b"\x00\x01"}}
    damaged = Frame(40, 0.5, Direction.CLIENT_TO_SERVER, "stdio", Kind.MESSAGE, message) if where == "msg" else \
        Frame(40, 0.5, Direction.SERVER_TO_CLIENT, "stdio", Kind.STREAM_END, info={"reason": "eof", b"note": "x"})
    offset = len(write_cassette(source, EVERY_KIND[:3]))
    write_cassette(source, [*EVERY_KIND[:3], damaged])
    for command in ("export", "import"):
        result = _tapes(command, source, "--format", "jsonl", "-o", output if output == "-" else tmp_path / output)
        assert result.returncode == 2 and result.stdout == ""
        assert result.stderr == (f"tapes: error: {source}: frame 4 (byte {offset}) cannot be written as JSON "
                                 "(it holds bytes, which JSON has no form for)\n")
    assert not (tmp_path / "out.jsonl").exists()


def test_a_cassette_the_format_cannot_hold_leaves_the_output_as_it_was(tmp_path: Path) -> None:
    # a lone surrogate in a JSON Lines header has no msgpack form: the import stopped after it had
    # emptied the output
    source, output = tmp_path / "a.jsonl", tmp_path / "b.tape"
    header = {"mcp-tapes": 1, "transport": "stdio", "server": {}, "created": "2026-01-01T00:00:00+00:00", "tool": "t",
              "labels": {"note": "\ud800"}}
    source.write_text(json.dumps(header) + "\n")
    output.write_bytes(b"what was there")
    result = _tapes("import", source, "-o", output)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert result.stderr.startswith(f"tapes: error: {output}: its header cannot be written as msgpack")
    assert output.read_bytes() == b"what was there"
    assert sorted(tmp_path.iterdir()) == sorted([source, output])  # no scratch file left beside it
