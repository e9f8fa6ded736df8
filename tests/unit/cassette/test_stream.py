"""Streaming a cassette: the header at once, the frames as they are iterated, a damaged frame
reported when it is reached (with the sentence `load` gives), the warnings once the end is read."""

from __future__ import annotations

from pathlib import Path

import msgpack
import pytest

from tapes.cassette.capture import CAPTURE_KEY, chunk_head
from tapes.cassette.stdio_framer import Stream
from tapes.cassette.store import Cassette, CassetteError, load, save, stream

from tests.support.samples import EVERY_KIND, EVERY_KIND_HEADER, write_cassette

BAD_FRAME = msgpack.packb([4, 0.5, 0, 0, 99])  # kind 99 is unknown


def _damaged_v2(tmp_path: Path) -> Path:
    """EVERY_KIND with a bad frame in place of its fourth."""
    head = write_cassette(tmp_path / "head.tape", EVERY_KIND[:3])
    tail = write_cassette(tmp_path / "tail.tape", EVERY_KIND[3:])[len(write_cassette(tmp_path / "empty.tape", [])) :]
    path = tmp_path / "damaged.tape"
    path.write_bytes(head + BAD_FRAME + tail)
    return path


def _load_error(path: Path) -> str:
    with pytest.raises(CassetteError) as caught:
        load(path)
    return str(caught.value)


def test_the_frames_before_a_damaged_one_come_before_its_error(tmp_path: Path) -> None:
    path = _damaged_v2(tmp_path)
    frames = stream(path)
    assert frames.header == EVERY_KIND_HEADER
    iterator = iter(frames)
    assert [next(iterator) for _ in range(3)] == EVERY_KIND[:3]
    with pytest.raises(CassetteError) as caught:
        next(iterator)
    assert str(caught.value) == _load_error(path)
    assert str(caught.value).startswith(f"{path}: frame 4 (byte ")


def test_a_damaged_json_lines_frame_is_reported_when_reached(tmp_path: Path) -> None:
    save(Cassette(EVERY_KIND_HEADER, EVERY_KIND), tmp_path / "a.jsonl")
    lines = (tmp_path / "a.jsonl").read_bytes().splitlines(keepends=True)
    lines[4] = b'{"seq": 4}\n'
    path = tmp_path / "damaged.jsonl"
    path.write_bytes(b"".join(lines))
    seen = []
    with stream(path) as frames, pytest.raises(CassetteError) as caught:
        for frame in frames:
            seen.append(frame)
    assert seen == EVERY_KIND[:3]
    assert str(caught.value) == _load_error(path)
    assert "frame 4 (byte" in str(caught.value)


@pytest.mark.parametrize("jsonl", [False, True], ids=["msgpack", "JSON Lines"])
def test_the_truncation_warning_comes_with_the_end(tmp_path: Path, jsonl: bool) -> None:
    path = tmp_path / ("a.jsonl" if jsonl else "a.tape")
    save(Cassette(EVERY_KIND_HEADER, EVERY_KIND), path)
    path.write_bytes(path.read_bytes()[:-3])
    frames = stream(path)
    first = next(iter(frames))
    assert frames.warnings == []
    assert [first, *frames] == EVERY_KIND[:-1]
    assert frames.warnings == load(path).warnings
    assert len(frames.warnings) == 1


def test_a_header_error_is_raised_at_once(tmp_path: Path) -> None:
    path = tmp_path / "a.tape"
    path.write_bytes(write_cassette(tmp_path / "whole.tape", [])[:-1])
    with pytest.raises(CassetteError, match="truncated inside its header"):
        stream(path)


def test_a_raw_capture_streams_and_warns_at_its_end(tmp_path: Path) -> None:
    header = {**EVERY_KIND_HEADER.record(), CAPTURE_KEY: {"unapplied": []}}
    line = b'{"jsonrpc":"2.0","id":1,"method":"ping"}\n'
    path = tmp_path / "killed.tape"
    path.write_bytes(msgpack.packb(header) + chunk_head(0.1, Stream.CLIENT_STDIN, len(line)) + line)
    frames = stream(path)
    first = next(iter(frames))
    assert first.message == {"jsonrpc": "2.0", "id": 1, "method": "ping"}
    assert frames.warnings == []
    assert [first, *frames] == load(path).frames
    assert frames.warnings == load(path).warnings
    assert "raw capture, framed now" in frames.warnings[0]


def test_a_stream_closed_early_yields_no_more(tmp_path: Path) -> None:
    path = tmp_path / "a.tape"
    write_cassette(path, EVERY_KIND)
    with stream(path) as frames:
        assert next(iter(frames)) == EVERY_KIND[0]
    assert list(frames) == []
