"""Cassettes: msgpack and JSON Lines round trips, damaged and foreign files, the header's
negotiated protocol version (the `tapes export` / `tapes import` commands are in e2e/cli)."""

from __future__ import annotations

import dataclasses
import io
import json
from pathlib import Path
from typing import Any

import msgpack
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tapes.cassette.store import (
    FORMAT_VERSION,
    MAX_NESTING,
    Cassette,
    CassetteError,
    CassetteWriter,
    VersionWatch,
    dump,
    frame_from_record,
    frame_record,
    load,
    loads,
    save,
)
from tapes.cassette.frames import STDIO, Direction, Frame, Kind

from tests.support.paths import ROOT, SUPPORT
from tests.support.samples import EVERY_KIND, EVERY_KIND_HEADER, HTTP, write_cassette

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
    with pytest.raises(AttributeError):
        frame.seq = 2  # type: ignore[misc]
    assert hash(frame) == hash(EVERY_KIND[3])
    assert frame._replace(seq=2) == EVERY_KIND[3]._replace(seq=2)
    # hooks written when a frame was a dataclass change it with dataclasses.replace
    assert type(dataclasses.replace(frame, seq=2)) is Frame and dataclasses.replace(frame, seq=2) == frame._replace(seq=2)
    assert [field.name for field in dataclasses.fields(frame)] == list(Frame._fields)


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


def test_an_sse_event_whose_message_msgpack_cannot_hold_stays_an_sse_event(tmp_path: Path) -> None:
    # A JSON Lines cassette holds a lone surrogate as the wire had it (a \\u escape), msgpack cannot:
    # the event keeps its kind, its id and its place on the stream, with the bytes as its data.
    message = {"jsonrpc": "2.0", "id": 1, "result": {"text": "\ud800"}}
    event = Frame(1, 0.0, S2C, "http:1", Kind.SSE_EVENT, message, info={"id": "e1", "event": None, "retry": None})
    twin = tmp_path / "a.jsonl"
    save(Cassette(dataclasses.replace(EVERY_KIND_HEADER, transport="http"), [event]), twin)
    assert load(twin).frames == [event]
    save(load(twin), tmp_path / "a.tape")
    assert load(tmp_path / "a.tape").frames == [
        dataclasses.replace(event, message=None, data=b'{"jsonrpc":"2.0","id":1,"result":{"text":"\\ud800"}}')]


@pytest.mark.parametrize("cassette", [
    Cassette(dataclasses.replace(EVERY_KIND_HEADER, labels={"note": "\udfff"}), []),
    Cassette(EVERY_KIND_HEADER, [Frame(1, 0.0, S2C, STDIO, Kind.EXIT, info={"code": None, "signal": None, "n": 2**70})]),
    Cassette(EVERY_KIND_HEADER, [Frame(2**64, 0.0, S2C, STDIO, Kind.STDERR, data=b"x")]),
], ids=["surrogate in a label", "wide integer in an info", "wide seq"])
def test_what_msgpack_cannot_hold_outside_a_message_is_one_sentence(cassette: Cassette) -> None:
    with pytest.raises(CassetteError, match=r"^out: (its header|frame \d+) cannot be written as msgpack") as error:
        dump(cassette, io.BytesIO(), jsonl=False, name="out")
    _assert_one_sentence(str(error.value))


def _nested(levels: int) -> Any:
    value: Any = "x"
    for _ in range(levels):
        value = [value]
    return value


def test_json_lines_nest_no_deeper_than_msgpack_can() -> None:
    # a record is one level, its message another: a frame holds MAX_NESTING levels in either format
    def jsonl(levels: int) -> bytes:
        message = {"jsonrpc": "2.0", "id": 1, "method": "m", "params": _nested(levels - 2)}
        frame = {"seq": 1, "t": 0.0, "dir": "c2s", "ch": "stdio", "kind": "message", "msg": message}
        return b"".join(json.dumps(line).encode() + b"\n" for line in (EVERY_KIND_HEADER.record(1), frame))

    def packed(levels: int) -> bytes:  # [seq, t, dir, ch, kind, message]: the array is a level too
        params = b"\x91" * (levels - 2) + msgpack.packb("x")
        message = b"\x84" + b"".join(map(msgpack.packb, ["jsonrpc", "2.0", "id", 1, "method", "m", "params"])) + params
        return msgpack.packb(EVERY_KIND_HEADER.record()) + b"\x96\x01" + msgpack.packb(0.0) + b"\x00\xa5stdio\x00" + message

    for content in (jsonl(MAX_NESTING), packed(MAX_NESTING)):
        assert loads(content).frames[0].message["params"] == _nested(MAX_NESTING - 2)
    deep = jsonl(MAX_NESTING + 1)
    with pytest.raises(CassetteError) as error:
        loads(deep, "deep.jsonl")
    assert str(error.value) == (f"deep.jsonl: byte {deep.index(b'\n') + 1} (line 2) nests arrays and objects deeper than "
                                f"{MAX_NESTING} levels, which no cassette holds")
    with pytest.raises(CassetteError, match="is not valid msgpack"):
        loads(packed(MAX_NESTING + 1), "deep.tape")


@pytest.mark.parametrize("suffix", [".jsonl", ".tape"])
def test_a_message_nested_deeper_than_a_cassette_holds_is_written_as_its_bytes(tmp_path: Path, suffix: str) -> None:
    """A server may send one (a recorder parses it as JSON-RPC): the cassette written must load."""
    params = b"[" * MAX_NESTING + b"]" * MAX_NESTING
    payload = b'{"jsonrpc":"2.0","id":1,"method":"m","params":' + params + b"}"
    frame = Frame(1, 0.0, C2S, STDIO, Kind.MESSAGE, json.loads(payload))
    raw = Frame(2, 0.0, C2S, STDIO, Kind.RAW, data=params)  # as deep, but bytes: kept as they are
    save(Cassette(EVERY_KIND_HEADER, [frame, raw]), tmp_path / f"deep{suffix}")
    assert load(tmp_path / f"deep{suffix}").frames == [
        dataclasses.replace(frame, kind=Kind.RAW, message=None, data=payload), raw]


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
_INT = st.integers(min_value=-(2**63), max_value=2**64 - 1)
_TEXT_OR_NONE = st.none() | st.text(max_size=10)
_MESSAGE = st.fixed_dictionaries(
    {"jsonrpc": st.just("2.0"), "method": st.text(max_size=10)}, optional={"id": _INT, "params": st.dictionaries(st.text(), _JSON, max_size=3) | st.lists(_JSON, max_size=3)}
) | st.fixed_dictionaries({"jsonrpc": st.just("2.0"), "id": _INT | st.text(), "result": _JSON})
_HEADERS = st.lists(st.lists(st.text(max_size=8), min_size=2, max_size=2), max_size=3)
# What each kind holds (the frame model that loading checks), with anything else left free.
_KIND_FIELDS = {
    Kind.MESSAGE: st.fixed_dictionaries(
        {"message": _MESSAGE | st.lists(_MESSAGE, min_size=1, max_size=3)},
        optional={"data": st.binary(max_size=64), "info": st.just({"partial": True})},
    ),
    Kind.RAW: st.fixed_dictionaries({"data": st.binary(max_size=64)}, optional={"info": st.just({"partial": True})}),
    Kind.STDERR: st.fixed_dictionaries({"data": st.text(max_size=20).map(str.encode)}),
    Kind.HTTP_REQUEST: st.fixed_dictionaries(
        {"info": st.fixed_dictionaries({"method": st.text(max_size=8), "path": st.text(), "headers": _HEADERS})}
    ),
    Kind.HTTP_RESPONSE: st.fixed_dictionaries({"info": st.fixed_dictionaries({"status": _INT, "headers": _HEADERS})}),
    Kind.SSE_EVENT: st.fixed_dictionaries(
        {"info": st.fixed_dictionaries({"id": _TEXT_OR_NONE, "event": _TEXT_OR_NONE, "retry": st.none() | _INT})},
        optional={"message": _MESSAGE, "data": st.binary(max_size=64)},
    ),
    Kind.STREAM_END: st.fixed_dictionaries(
        {"info": st.fixed_dictionaries({"reason": st.text(max_size=10)}, optional={"detail": _JSON})}
    ),
    Kind.EXIT: st.fixed_dictionaries(
        {"info": st.fixed_dictionaries({"code": st.none() | _INT, "signal": st.none() | _INT})}
    ),
}
_FRAMES = st.lists(
    st.builds(
        Frame,
        seq=st.integers(min_value=0, max_value=2**63 - 1),
        t=st.floats(min_value=0, allow_infinity=False, allow_nan=False),
        direction=st.sampled_from(Direction),
        channel=st.text(max_size=10),
        kind=st.sampled_from(Kind),
        message=st.none(), data=st.none(), info=st.none(),  # then the kind's own
    ).flatmap(lambda frame: _KIND_FIELDS[frame.kind].map(lambda fields: frame._replace(**fields))),
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


def test_a_cut_inside_the_json_lines_header_is_an_error(tmp_path: Path) -> None:
    """It said the file held no mcp-tapes header, and warned of the -1 frames before the cut."""
    save(Cassette(EVERY_KIND_HEADER, []), tmp_path / "a.jsonl", jsonl=True)
    content = (tmp_path / "a.jsonl").read_bytes()
    with pytest.raises(CassetteError) as caught:
        loads(content[:-10], "a.jsonl")
    assert str(caught.value) == "a.jsonl: is truncated inside its header (byte 0)"


@pytest.mark.parametrize("cr_from_line", [0, 2])
def test_json_lines_ending_in_cr_alone_are_named_so(tmp_path: Path, cr_from_line: int) -> None:
    """Old Mac line ends made the file one unterminated line: it said the file held no mcp-tapes header."""
    save(Cassette(EVERY_KIND_HEADER, EVERY_KIND[:3]), tmp_path / "a.jsonl", jsonl=True)
    lines = (tmp_path / "a.jsonl").read_bytes().splitlines(keepends=True)
    content = b"".join(lines[:cr_from_line]) + b"".join(line.replace(b"\n", b"\r") for line in lines[cr_from_line:])
    start = len(b"".join(lines[:cr_from_line]))
    where = f"frame 2 (byte {start}, line 3)" if cr_from_line else "byte 0 (line 1)"
    with pytest.raises(CassetteError) as caught:
        loads(content, "a.jsonl")
    assert str(caught.value) == (f"a.jsonl: {where} ends in CR alone at byte {start + len(lines[cr_from_line]) - 1} "
                                 "(an old Mac's line end), but JSON Lines lines end in LF")
    _assert_one_sentence(str(caught.value))
    assert loads(content.replace(b"\r", b"\r\n"), "a.jsonl").frames == EVERY_KIND[:3]  # CRLF is read


RAW = [4, 0.5, 0, 0, 1, None, b"x"]  # seq, t, c2s, channel 0 (stdio), raw, no message, data
NAN = float("nan")


def _raw(**changes: object) -> bytes:
    fields = list(RAW)
    for index, name in enumerate(("seq", "t", "dir", "ch", "kind", "msg", "data", "info")):
        if name in changes:
            while len(fields) <= index:
                fields.append(None)
            fields[index] = changes[name]
    return msgpack.packb(fields)


@pytest.mark.parametrize(
    ("garbage", "problem"),
    [
        pytest.param(b"\xc1", "is not valid msgpack", id="a byte msgpack never uses"),
        pytest.param(b"\x05", "(it is not an array of 5 to 8 fields)", id="a number"),
        pytest.param(msgpack.packb({"seq": 4}), "(it is not an array of 5 to 8 fields)", id="a map"),
        pytest.param(msgpack.packb([4, 2.0]), "(it is not an array of 5 to 8 fields)", id="missing fields"),
        pytest.param(_raw(kind=99), "kind 99 is unknown", id="unknown kind"),
        pytest.param(_raw(dir="c2s"), "direction 'c2s' or kind 1 is unknown", id="direction not a number"),
        pytest.param(_raw(ch=7), "channel number 7 was never named", id="channel never named"),
        pytest.param(_raw(ch=1.5), "channel is not a string", id="channel a float"),
        pytest.param(_raw(ch=[0]), "channel is not a string", id="channel a list"),
        pytest.param(_raw(dir=[0]), "direction [0] or kind 1 is unknown", id="direction a list"),
        pytest.param(_raw(seq="1"), "seq is not an integer", id="seq not an integer"),
        pytest.param(_raw(t="0.5"), "time is not a number", id="time not a number"),
        pytest.param(_raw(t=NAN), "its time is nan, not a finite number", id="NaN time"),
        pytest.param(_raw(t=float("inf")), "its time is inf, not a finite number", id="infinite time"),
        pytest.param(_raw(data="text"), "data is not bytes", id="data not bytes"),
        pytest.param(_raw(info=[1]), "info is not a map", id="info not a map"),
        pytest.param(_raw(kind=0, data=None), "message frame without a message", id="no msg"),
        pytest.param(_raw(kind=0, msg={"a": 1}), "its message is not a JSON-RPC message or batch", id="not JSON-RPC"),
        pytest.param(_raw(kind=0, msg=[]), "its message is not a JSON-RPC message or batch", id="empty batch"),
        pytest.param(_raw(kind=0, msg={"jsonrpc": "2.0", "id": [], "result": {}}), "id that is not", id="id a list"),
        pytest.param(_raw(kind=0, msg={"jsonrpc": "2.0", "id": True, "method": "x"}), "id that is not", id="id bool"),
        pytest.param(
            _raw(kind=0, msg={"jsonrpc": "2.0", "id": 1, "method": 5, "result": {}}), "not a JSON-RPC", id="method 5"
        ),
        pytest.param(_raw(kind=0, msg=[{"jsonrpc": "2.0", "method": "x", "params": 1}]), "params", id="params 1"),
        pytest.param(
            _raw(kind=0, msg={"jsonrpc": "2.0", "id": 1, "error": {"code": "x"}}), "error without", id="bad error"
        ),
        pytest.param(_raw(msg={"jsonrpc": "2.0", "method": "x"}), "it has a message, which no raw frame has", id="raw + msg"),
        pytest.param(_raw(kind=7, msg={"jsonrpc": "2.0", "method": "x"}), "(it has a message, which no exit frame has)",
                     id="exit + msg"),
        pytest.param(msgpack.packb({1: 2}), "is not a valid frame (it holds a map key that is not a string)", id="int key"),
        pytest.param(_raw(kind=7, info={"code": 0, "signal": None, 2.5: 1}), "is not a valid frame (it holds a map key "
                     "that is not a string)", id="float key in info"),
        pytest.param(_raw(kind=3, info={"method": "GET", "path": "/"}), "headers are not a list", id="no headers"),
        pytest.param(_raw(kind=4, info={"status": "200", "headers": []}), "(its info status is a string, not an integer)",
                     id="status"),
        pytest.param(_raw(kind=6, info={}), "(its info has no reason)", id="stream end without reason"),
        pytest.param(_raw(kind=6, info={"reason": None}), "(its info reason is null, not a string)", id="null reason"),
        pytest.param(_raw(kind=7, info={"code": 1.5, "signal": None}), "(its info code is a number, not an integer or null)",
                     id="exit code float"),
        pytest.param(_raw(kind=7, info={"code": None, "signal": {}}), "(its info signal is an object, not an integer or null)",
                     id="exit signal a map"),
        pytest.param(_raw(kind=4, info={"status": True, "headers": []}), "(its info status is a boolean, not an integer)",
                     id="status a boolean"),
        pytest.param(b"\xdb\xff\xff\xff\xff", "does not start a frame", id="a length running past the end"),
    ],
)
def test_garbage_in_the_middle_is_one_sentence_naming_the_frame_and_byte(
    tmp_path: Path, garbage: bytes, problem: str
) -> None:
    head = write_cassette(tmp_path / "a.tape", EVERY_KIND[:3])
    tail = write_cassette(tmp_path / "b.tape", EVERY_KIND[3:])[len(write_cassette(tmp_path / "c.tape", [])) :]
    with pytest.raises(CassetteError) as caught:
        loads(head + garbage + tail, "a.tape")
    message = str(caught.value)
    assert message.startswith(f"a.tape: frame 4 (byte {len(head)}) ") or message.startswith(
        f"a.tape: byte {len(head)} does not start a frame"
    )
    assert problem in message
    assert "strict_map_key" not in message
    _assert_one_sentence(message)


V1_RAW = {"seq": 1, "t": 0.5, "dir": "c2s", "ch": "stdio", "kind": "raw", "data": b"x"}


@pytest.mark.parametrize(
    ("record", "problem"),
    [
        pytest.param([1, 2.0, "c2s"], "(it is not a map)", id="an array"),
        pytest.param({"seq": 1, "t": 2.0}, "(it has no dir)", id="missing fields"),
        pytest.param({**V1_RAW, "kind": "nonsense"}, "kind 'nonsense' is unknown", id="unknown kind"),
        pytest.param({**V1_RAW, "t": NAN}, "its time is nan, not a finite number", id="NaN time"),
        pytest.param({**V1_RAW, "kind": "message", "msg": {"id": 1}}, "not a JSON-RPC message", id="not JSON-RPC"),
        pytest.param({**V1_RAW, "dir": ["c2s"]}, "direction ['c2s'] or kind 'raw' is unknown", id="direction a list"),
        pytest.param({**V1_RAW, "kind": {}}, "direction 'c2s' or kind {} is unknown", id="kind a map"),
    ],
)
def test_a_bad_v1_frame_is_one_sentence_naming_the_frame_and_byte(record: object, problem: str) -> None:
    head = msgpack.packb(EVERY_KIND_HEADER.record(1)) + msgpack.packb(V1_RAW)
    with pytest.raises(CassetteError) as caught:
        loads(head + msgpack.packb(record), "a.tape")
    message = str(caught.value)
    assert message.startswith(f"a.tape: frame 2 (byte {len(head)}) is not a valid frame ")
    assert problem in message
    _assert_one_sentence(message)


@pytest.mark.parametrize(("fields", "problem"), [({"text": 5}, "has text that is not a string"),
                                               ({"text": "x", "data": "eA=="}, "has both text and data")])
def test_jsonl_bytes_said_two_ways_or_not_as_text_name_their_frame(tmp_path: Path, fields: dict, problem: str) -> None:
    """A frame's bytes are its text or its data: one that is neither, or both, was dropped without a word."""
    save(Cassette(EVERY_KIND_HEADER, EVERY_KIND[:1]), tmp_path / "a.jsonl", jsonl=True)
    lines = (tmp_path / "a.jsonl").read_bytes().splitlines(keepends=True)
    stderr = json.dumps({"seq": 2, "t": 0.5, "dir": "s2c", "ch": "stdio", "kind": "stderr", **fields}).encode() + b"\n"
    with pytest.raises(CassetteError) as caught:
        loads(lines[0] + lines[1] + stderr, "a.jsonl")
    assert str(caught.value).startswith("a.jsonl: frame 2 ") and problem in str(caught.value)
    _assert_one_sentence(str(caught.value))


def test_jsonl_text_that_utf8_cannot_hold_names_its_frame(tmp_path: Path) -> None:
    save(Cassette(EVERY_KIND_HEADER, EVERY_KIND[:2]), tmp_path / "a.jsonl", jsonl=True)
    lines = (tmp_path / "a.jsonl").read_bytes().splitlines(keepends=True)
    stderr = json.dumps({"seq": 3, "t": 0.5, "dir": "s2c", "ch": "stdio", "kind": "stderr", "text": "\ud800"}).encode() + b"\n"
    with pytest.raises(CassetteError) as caught:
        loads(lines[0] + lines[1] + lines[2] + stderr, "a.jsonl")
    assert str(caught.value).startswith("a.jsonl: frame 3 ") and "lone surrogate" in str(caught.value)
    _assert_one_sentence(str(caught.value))
    # a seq msgpack has no room for, which only JSON Lines can hold (a page of `tapes view` packs it)
    huge = json.dumps({"seq": 2**64, "t": 0.5, "dir": "s2c", "ch": "stdio", "kind": "stderr", "text": "x"}).encode() + b"\n"
    with pytest.raises(CassetteError, match=r"frame 3 .* \(its seq is out of range\)"):
        loads(lines[0] + lines[1] + lines[2] + huge, "a.jsonl")


def test_garbage_jsonl_line_names_frame_byte_and_line(tmp_path: Path) -> None:
    save(Cassette(EVERY_KIND_HEADER, EVERY_KIND[:2]), tmp_path / "a.jsonl", jsonl=True)
    lines = (tmp_path / "a.jsonl").read_bytes().splitlines(keepends=True)
    content = lines[0] + lines[1] + b"{oops\n" + lines[2]
    with pytest.raises(CassetteError) as caught:
        loads(content, "a.jsonl")
    assert str(caught.value) == (f"a.jsonl: frame 2 (byte {len(lines[0]) + len(lines[1])}, line 3) is not valid JSON "
                                 "(Expecting property name enclosed in double quotes at its character 2)")
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
    record = [2, 0.5, 1, 0, 0, {"jsonrpc": "2.0", "id": 1, "result": extension}]
    with pytest.raises(CassetteError, match=f"frame 2 \\(byte {len(head)}\\) .*extension type") as caught:
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
            "a.tape: has an unusable header at byte 0 (format version 99 is not supported (this reads 1 to 2)",
            id="future format",
        ),
        pytest.param(
            msgpack.packb({**EVERY_KIND_HEADER.record(), "mcp-tapes": True}),
            "a.tape: has an unusable header at byte 0 (its format version is not an integer)",
            id="format version true",
        ),
        pytest.param(
            msgpack.packb({**EVERY_KIND_HEADER.record(), "mcp-tapes": 2.0}),
            "a.tape: has an unusable header at byte 0 (its format version is not an integer)",
            id="format version 2.0",
        ),
        pytest.param(
            json.dumps({**EVERY_KIND_HEADER.record(1), "mcp-tapes": True}).encode() + b"\n",
            "a.tape: has an unusable header at byte 0 (its format version is not an integer)",
            id="JSON Lines format version true",
        ),
        pytest.param(
            json.dumps({**EVERY_KIND_HEADER.record(1), "mcp-tapes": 1.0}).encode() + b"\n",
            "a.tape: has an unusable header at byte 0 (its format version is not an integer)",
            id="JSON Lines format version 1.0",
        ),
        pytest.param(
            msgpack.packb({**EVERY_KIND_HEADER.record(), "server": "python x.py"}),
            "a.tape: has an unusable header at byte 0 (its server is not a map)",
            id="bad header field",
        ),
        pytest.param(
            msgpack.packb({**EVERY_KIND_HEADER.record(), "transport": "stido"}),
            "a.tape: has an unusable header at byte 0 (its transport 'stido' is neither 'stdio' nor 'http')",
            id="unknown transport",
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


def test_protocol_version_after_any_number_of_unanswered_initialize_requests() -> None:
    # each was kept and walked again for every later frame (show, view) or result (the property): quadratic
    asked = [_message(seq, C2S, {"jsonrpc": "2.0", "id": seq, "method": "initialize"}) for seq in range(1, 20_001)]
    answers = [_message(20_000 + seq, S2C, {"jsonrpc": "2.0", "id": seq, "result": "no version"}) for seq in range(1, 20_001)]
    last = _message(40_001, S2C, {"jsonrpc": "2.0", "id": 20_000, "result": {"protocolVersion": "2025-06-18"}})
    frames = [*asked, *answers, last]
    watch = VersionWatch()
    assert [seq for seq, frame in enumerate(frames, 1) if watch.see(frame)] == [40_001]
    assert Cassette(EVERY_KIND_HEADER, frames).protocol_version == watch.version == "2025-06-18"


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


# --- format versions ------------------------------------------------------------------------



def test_a_committed_v1_cassette_still_loads_as_its_json_lines_twin(tmp_path: Path) -> None:
    """tests/support/data/weather-v1.tape is cassettes/example/weather.tape as format 1 wrote it (maps)."""
    v1 = load(SUPPORT / "data" / "weather-v1.tape")
    twin = load(ROOT / "cassettes" / "example" / "weather.jsonl")
    assert v1.header.format == 1 and v1.warnings == []
    assert (v1.header, v1.frames) == (twin.header, twin.frames)
    assert len(v1.frames) > 10
    save(v1, tmp_path / "v2.tape")  # saving writes v2, with the same content
    v2 = load(tmp_path / "v2.tape")
    assert v2.header.format == 2 and (v2.header, v2.frames) == (v1.header, v1.frames)


def test_v2_frames_are_arrays_that_name_a_channel_once(tmp_path: Path) -> None:
    content = write_cassette(tmp_path / "a.tape", EVERY_KIND)
    objects = list(msgpack.Unpacker(io.BytesIO(content), raw=False))
    assert objects[0]["mcp-tapes"] == 2
    arrays = objects[1:]
    assert all(type(array) is list and 5 <= len(array) <= 8 for array in arrays)
    assert [array[3] for array in arrays] == ["stdio", 0, 0, 0, 0, HTTP, 1, 1, 1, 0, 0, 0]
    assert arrays[3] == [4, 0.03, 1, 0, 1, None, b"\xff\xfe not JSON \x00"]  # trailing empty fields left out


def test_json_lines_keeps_the_v1_layout(tmp_path: Path) -> None:
    save(Cassette(EVERY_KIND_HEADER, EVERY_KIND[:1]), tmp_path / "a.jsonl", jsonl=True)
    header, frame = (tmp_path / "a.jsonl").read_text().splitlines()
    assert header.startswith('{"mcp-tapes":1,')
    assert frame.startswith('{"seq":1,"t":0.0,"dir":"c2s","ch":"stdio","kind":"message","msg":')
