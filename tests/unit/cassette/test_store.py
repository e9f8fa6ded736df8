"""Cassettes: msgpack and JSON Lines round trips, damaged and foreign files, the header's
negotiated protocol version (the `tapes export` / `tapes import` commands are in e2e/cli)."""

from __future__ import annotations

import dataclasses
import io
from pathlib import Path

import msgpack
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tapes.cassette.store import (
    FORMAT_VERSION,
    Cassette,
    CassetteError,
    CassetteWriter,
    frame_from_record,
    frame_record,
    load,
    loads,
    save,
)
from tapes.cassette.frames import STDIO, Direction, Frame, Kind

from tests.support.samples import EVERY_KIND, EVERY_KIND_HEADER, write_cassette

C2S, S2C = Direction.CLIENT_TO_SERVER, Direction.SERVER_TO_CLIENT
def _assert_one_sentence(message: str) -> None:
    assert "\n" not in message
    assert ". " not in message.rstrip(".")


# --- round trips ----------------------------------------------------------------------------


def test_msgpack_round_trip_of_every_frame_kind(tmp_path: Path) -> None:
    write_cassette(tmp_path / "a.tape", EVERY_KIND)
    cassette = load(tmp_path / "a.tape")
    assert cassette.header == EVERY_KIND_HEADER
    assert cassette.frames == EVERY_KIND
    assert cassette.warnings == []


def test_loaded_frames_are_ordinary_immutable_frames(tmp_path: Path) -> None:
    write_cassette(tmp_path / "a.tape", EVERY_KIND)
    frame = load(tmp_path / "a.tape").frames[3]  # a raw frame: no dicts in it, so hashable
    assert type(frame) is Frame
    assert type(frame.direction) is Direction and type(frame.kind) is Kind
    with pytest.raises(dataclasses.FrozenInstanceError):
        frame.seq = 2  # type: ignore[misc]
    assert hash(frame) == hash(EVERY_KIND[3])
    assert dataclasses.replace(frame, seq=2) == dataclasses.replace(EVERY_KIND[3], seq=2)


def test_jsonl_round_trip_and_back_to_identical_msgpack(tmp_path: Path) -> None:
    original = write_cassette(tmp_path / "a.tape", EVERY_KIND)
    save(load(tmp_path / "a.tape"), tmp_path / "a.jsonl", jsonl=True)
    twin = load(tmp_path / "a.jsonl")
    assert (twin.header, twin.frames) == (EVERY_KIND_HEADER, EVERY_KIND)
    save(twin, tmp_path / "b.tape")
    assert (tmp_path / "b.tape").read_bytes() == original


def test_jsonl_keeps_utf8_readable_and_other_bytes_as_base64(tmp_path: Path) -> None:
    save(Cassette(EVERY_KIND_HEADER, EVERY_KIND), tmp_path / "a.jsonl", jsonl=True)
    lines = (tmp_path / "a.jsonl").read_text(encoding="utf-8").splitlines()
    assert len(lines) == 1 + len(EVERY_KIND)
    assert '"text":"Warnung: Überlast ✓"' in lines[5]
    assert '"data":"//4gbm90IEpTT04gAA=="' in lines[4]


def test_frame_record_round_trip() -> None:
    for frame in EVERY_KIND:
        assert frame_from_record(frame_record(frame)) == frame


def test_integer_too_wide_for_msgpack_is_kept_as_raw_bytes(tmp_path: Path) -> None:
    payload = b'{"jsonrpc":"2.0","id":1,"result":{"n":123456789012345678901234567890}}'
    frame = Frame(1, 0.0, S2C, STDIO, Kind.MESSAGE, {"jsonrpc": "2.0", "id": 1, "result": {"n": 10**29}}, payload)
    write_cassette(tmp_path / "a.tape", [frame])
    assert load(tmp_path / "a.tape").frames == [Frame(1, 0.0, S2C, STDIO, Kind.RAW, data=payload)]


def test_every_write_is_flushed(tmp_path: Path) -> None:
    path = tmp_path / "a.tape"
    with open(path, "wb") as file:
        writer = CassetteWriter(file, EVERY_KIND_HEADER)
        for count, frame in enumerate(EVERY_KIND, 1):
            writer.write([frame])
            assert load(path).frames == EVERY_KIND[:count]  # readable while the writer is open


# Everything a frame can hold, as msgpack and JSON both can: 64-bit integers, finite floats
# (NaN is not equal to itself), any unicode text, any bytes.
_JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**64 - 1)
    | st.floats(allow_nan=False)
    | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=12,
)
_FRAMES = st.lists(
    st.builds(
        Frame,
        seq=st.integers(min_value=0, max_value=2**63 - 1),
        t=st.floats(min_value=0, allow_infinity=False, allow_nan=False),
        direction=st.sampled_from(Direction),
        channel=st.text(max_size=10),
        kind=st.sampled_from(Kind),
        message=st.none(),
        data=st.none() | st.binary(max_size=64) | st.text(max_size=20).map(str.encode),
        info=st.none() | st.dictionaries(st.text(max_size=8), _JSON, max_size=3),
    ).flatmap(
        lambda frame: st.dictionaries(st.text(), _JSON, min_size=1, max_size=4).map(
            lambda message: dataclasses.replace(frame, message=message)
        )
        if frame.kind is Kind.MESSAGE
        else st.just(frame)
    ),
    max_size=8,
)


# No deadline: every example writes and flushes files, so a loaded machine's disk, not the code, sets the pace.
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(frames=_FRAMES, labels=st.dictionaries(st.text(), st.text(), max_size=3))
def test_msgpack_to_jsonl_to_msgpack_is_lossless(tmp_path: Path, frames: list[Frame], labels: dict[str, str]) -> None:
    header = dataclasses.replace(EVERY_KIND_HEADER, labels=labels)
    original = write_cassette(tmp_path / "a.tape", frames, header)
    loaded = load(tmp_path / "a.tape")
    assert (loaded.header, loaded.frames) == (header, frames)
    save(loaded, tmp_path / "a.jsonl", jsonl=True)
    twin = load(tmp_path / "a.jsonl")
    assert (twin.header, twin.frames, twin.warnings) == (header, frames, [])
    save(twin, tmp_path / "b.tape")
    assert (tmp_path / "b.tape").read_bytes() == original


# --- damage ---------------------------------------------------------------------------------


def test_every_cut_of_the_last_frame_warns_and_keeps_the_frames_before(tmp_path: Path) -> None:
    before = write_cassette(tmp_path / "a.tape", EVERY_KIND[:-1])
    content = write_cassette(tmp_path / "b.tape", EVERY_KIND)
    start = len(before)
    for end in range(start + 1, len(content)):
        cassette = loads(content[:end], "b.tape")
        assert cassette.frames == EVERY_KIND[:-1]
        assert len(cassette.warnings) == 1
        assert f"truncated at byte {start}" in cassette.warnings[0]
    assert loads(content[:start]).warnings == []  # a cut between frames is no damage


def test_cut_inside_the_header_is_an_error(tmp_path: Path) -> None:
    content = write_cassette(tmp_path / "a.tape", [])
    with pytest.raises(CassetteError, match="truncated inside its header"):
        loads(content[:-1], "a.tape")


def test_truncated_last_jsonl_line_warns(tmp_path: Path) -> None:
    save(Cassette(EVERY_KIND_HEADER, EVERY_KIND), tmp_path / "a.jsonl", jsonl=True)
    content = (tmp_path / "a.jsonl").read_bytes()
    start = content.rstrip(b"\n").rindex(b"\n") + 1
    cassette = loads(content[: start + 10], "a.jsonl")
    assert cassette.frames == EVERY_KIND[:-1]
    assert cassette.warnings == [
        f"a.jsonl: the last line is truncated at byte {start}; the {len(EVERY_KIND) - 1} frames before it are kept"
    ]


RAW = {"seq": 1, "t": 0.5, "dir": "c2s", "ch": "stdio", "kind": "raw", "data": b"x"}


@pytest.mark.parametrize(
    ("garbage", "problem"),
    [
        pytest.param(b"\xc1", "is not valid msgpack", id="a byte msgpack never uses"),
        pytest.param(b"\x05", "holds no valid frame", id="a number"),
        pytest.param(msgpack.packb([1, 2.0, "c2s"]), "holds no valid frame (it is not a map)", id="an array"),
        pytest.param(msgpack.packb({"seq": 1, "t": 2.0}), "holds no valid frame (it has no dir)", id="missing fields"),
        pytest.param(msgpack.packb({**RAW, "kind": "nonsense"}), "kind 'nonsense' is unknown", id="unknown kind"),
        pytest.param(msgpack.packb({**RAW, "seq": "1"}), "seq is not an integer", id="seq not an integer"),
        pytest.param(msgpack.packb({**RAW, "t": "0.5"}), "time is not a number", id="time not a number"),
        pytest.param(msgpack.packb({**RAW, "data": "text"}), "data is not bytes", id="data not bytes"),
        pytest.param(msgpack.packb({**RAW, "info": [1]}), "info is not a map", id="info not a map"),
        pytest.param(msgpack.packb({**RAW, "kind": "message"}), "message frame without a message", id="no msg"),
        pytest.param(b"\xdb\xff\xff\xff\xff", "does not start a frame", id="a length running past the end"),
    ],
)
def test_garbage_in_the_middle_is_one_sentence_naming_the_byte(tmp_path: Path, garbage: bytes, problem: str) -> None:
    head = write_cassette(tmp_path / "a.tape", EVERY_KIND[:3])
    tail = write_cassette(tmp_path / "b.tape", EVERY_KIND[3:])[len(write_cassette(tmp_path / "c.tape", [])) :]
    with pytest.raises(CassetteError) as caught:
        loads(head + garbage + tail, "a.tape")
    message = str(caught.value)
    assert message.startswith(f"a.tape: byte {len(head)} ")
    assert problem in message
    _assert_one_sentence(message)


def test_garbage_jsonl_line_names_byte_and_line(tmp_path: Path) -> None:
    save(Cassette(EVERY_KIND_HEADER, EVERY_KIND[:2]), tmp_path / "a.jsonl", jsonl=True)
    lines = (tmp_path / "a.jsonl").read_bytes().splitlines(keepends=True)
    content = lines[0] + lines[1] + b"{oops\n" + lines[2]
    with pytest.raises(CassetteError) as caught:
        loads(content, "a.jsonl")
    assert str(caught.value).startswith(f"a.jsonl: byte {len(lines[0]) + len(lines[1])} (line 3) is not valid JSON")
    _assert_one_sentence(str(caught.value))


@pytest.mark.parametrize(
    "extension",
    [
        pytest.param(msgpack.ExtType(5, b"abc"), id="ext type 5"),
        pytest.param(msgpack.ExtType(7, b""), id="empty ext type"),
        pytest.param(msgpack.Timestamp(1_700_000_000, 5), id="timestamp"),
    ],
)
def test_msgpack_extension_types_are_refused(tmp_path: Path, extension: object) -> None:
    head = write_cassette(tmp_path / "a.tape", EVERY_KIND[:1])
    record = {**RAW, "kind": "message", "msg": {"jsonrpc": "2.0", "id": 1, "result": extension}}
    with pytest.raises(CassetteError, match=f"byte {len(head)} .*extension type") as caught:
        loads(head + msgpack.packb(record), "a.tape")
    _assert_one_sentence(str(caught.value))


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        pytest.param(b"", "a.tape: is empty, not a cassette", id="empty"),
        pytest.param(b"hello world\n", "a.tape: is not a cassette (byte 0 starts", id="text"),
        pytest.param(b"\x7fELF\x02\x01", "a.tape: is not a cassette (byte 0 starts", id="binary"),
        pytest.param(b"\x89PNG\r\n", "a.tape: is not a cassette (byte 0 holds no mcp-tapes header)", id="PNG"),
        pytest.param(msgpack.packb({"a": 1}), "a.tape: is not a cassette (byte 0 holds no mcp-tapes header)", id="map"),
        pytest.param(b'{"a": 1}\n', "a.tape: is not a cassette (byte 0 holds no mcp-tapes header)", id="JSON"),
        pytest.param(
            msgpack.packb({"mcp-tapes": 99, "transport": "stdio"}),
            "a.tape: has an unusable header at byte 0 (format version 99 is not supported (this is",
            id="future format",
        ),
        pytest.param(
            msgpack.packb({**EVERY_KIND_HEADER.record(), "server": "python x.py"}),
            "a.tape: has an unusable header at byte 0 (its server is not a map)",
            id="bad header field",
        ),
    ],
)
def test_foreign_file_is_one_clear_sentence(tmp_path: Path, content: bytes, problem: str) -> None:
    (tmp_path / "a.tape").write_bytes(content)
    with pytest.raises(CassetteError) as caught:
        load(tmp_path / "a.tape")
    message = str(caught.value)
    assert message.startswith(str(tmp_path / problem))
    _assert_one_sentence(message)


def test_missing_file_and_directory_are_one_clear_sentence(tmp_path: Path) -> None:
    with pytest.raises(CassetteError, match=r"^.*missing\.tape: no such cassette file$"):
        load(tmp_path / "missing.tape")
    with pytest.raises(CassetteError, match=r"^.*: is a directory, not a cassette file$"):
        load(tmp_path)


def test_unwritable_path_is_one_clear_sentence(tmp_path: Path) -> None:
    with pytest.raises(CassetteError, match=r"no-such-dir/a\.tape: cannot be written \(No such file or directory\)$"):
        CassetteWriter(tmp_path / "no-such-dir" / "a.tape", EVERY_KIND_HEADER)
    with pytest.raises(CassetteError, match="cannot be written"):
        save(Cassette(EVERY_KIND_HEADER, []), tmp_path / "no-such-dir" / "a.jsonl", jsonl=True)


def test_loads_accepts_both_formats(tmp_path: Path) -> None:
    save(Cassette(EVERY_KIND_HEADER, EVERY_KIND), tmp_path / "a.jsonl", jsonl=True)
    buffer = io.BytesIO()
    CassetteWriter(buffer, EVERY_KIND_HEADER).write(EVERY_KIND)
    assert loads(buffer.getvalue()).frames == loads((tmp_path / "a.jsonl").read_bytes()).frames == EVERY_KIND


# --- the negotiated protocol version --------------------------------------------------------


def _message(seq: int, direction: Direction, message: object) -> Frame:
    return Frame(seq, seq / 10, direction, STDIO, Kind.MESSAGE, message)


def _meta_request(seq: int, method: str, version: str) -> Frame:
    params = {"_meta": {"io.modelcontextprotocol/protocolVersion": version}}
    return _message(seq, C2S, {"jsonrpc": "2.0", "id": seq, "method": method, "params": params})


def test_protocol_version_from_the_initialize_result() -> None:
    frames = [
        _message(1, C2S, {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": "2099"}}),
        _message(2, S2C, {"jsonrpc": "2.0", "id": 7, "result": {"protocolVersion": "1999-01-01"}}),  # not initialize's
        _message(3, S2C, {"jsonrpc": "2.0", "id": 0, "result": {"protocolVersion": "2025-06-18"}}),
    ]
    assert Cassette(EVERY_KIND_HEADER, frames).protocol_version == "2025-06-18"


def test_protocol_version_from_a_stateless_request_meta() -> None:
    frames = [
        _meta_request(1, "server/discover", "2099-01-01"),
        _message(2, C2S, {"jsonrpc": "2.0", "method": "notifications/x", "params": []}),
        _message(3, C2S, {"jsonrpc": "2.0", "id": 3, "method": "tools/list", "params": ["positional"]}),
        _meta_request(4, "tools/list", "2026-07-28"),
    ]
    assert Cassette(EVERY_KIND_HEADER, frames).protocol_version == "2026-07-28"


def test_protocol_version_unknown() -> None:
    frames = [
        _meta_request(1, "server/discover", "2026-07-28"),
        _message(2, S2C, {"jsonrpc": "2.0", "id": 0, "error": {"code": -32602, "message": "Unsupported"}}),
        Frame(3, 0.3, S2C, STDIO, Kind.STDERR, data=b"protocolVersion"),
    ]
    assert Cassette(EVERY_KIND_HEADER, frames).protocol_version is None
    assert Cassette(EVERY_KIND_HEADER, []).protocol_version is None



def test_format_version_is_in_the_header(tmp_path: Path) -> None:
    content = write_cassette(tmp_path / "a.tape", [])
    assert msgpack.unpackb(content)["mcp-tapes"] == FORMAT_VERSION
