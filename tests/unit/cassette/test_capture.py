"""The stdio recorder's raw capture (what a killed recorder leaves behind) loads as frames."""

from __future__ import annotations

import msgpack

from tapes.cassette.capture import CAPTURE_KEY, END, chunk_head, exit_record
from tapes.cassette.frames import Direction, Kind
from tapes.cassette.stdio_framer import Stream
from tapes.cassette.store import Header, loads

C2S, S2C = Direction.CLIENT_TO_SERVER, Direction.SERVER_TO_CLIENT


def _capture(*records: bytes, unapplied: tuple[str, ...] = ()) -> bytes:
    header = {**Header(transport="stdio", server={"command": ["x"]}).record(), CAPTURE_KEY: {"unapplied": list(unapplied)}}
    return msgpack.packb(header) + b"".join(records)


def _chunk(t: float, code: int, payload: bytes = b"") -> bytes:
    return chunk_head(t, code, len(payload)) + payload


def test_a_capture_left_by_a_killed_recorder_loads_as_frames() -> None:
    notification = b'{"jsonrpc":"2.0","method":"notifications/x"}\n'
    content = _capture(
        _chunk(0.1, Stream.CLIENT_STDIN, b'{"jsonrpc":"2.0","id":1,"method":"ping"}\n{"ha'),
        _chunk(0.2, Stream.SERVER_STDOUT, b'{"jsonrpc":"2.0","id":1,"result":{}}\n'),
        _chunk(0.15, Stream.SERVER_STDERR, b"log"),  # appended late by another pump: times stay in order
        _chunk(0.3, Stream.SERVER_STDOUT, notification)[:-10],  # the kill cut this append: never forwarded
        unapplied=("hook:hooks:scrub",),
    )
    cassette = loads(content, "killed.tape")
    assert [(f.seq, f.t, f.direction, f.kind, f.payload, f.partial) for f in cassette.frames] == [
        (1, 0.1, C2S, Kind.MESSAGE, b'{"jsonrpc":"2.0","id":1,"method":"ping"}', False),
        (2, 0.2, S2C, Kind.MESSAGE, b'{"jsonrpc":"2.0","id":1,"result":{}}', False),
        (3, 0.2, C2S, Kind.RAW, b'{"ha', True),  # every stream ended with the recorder
        (4, 0.2, C2S, Kind.STREAM_END, b"", False),
        (5, 0.2, S2C, Kind.STREAM_END, b"", False),
        (6, 0.2, S2C, Kind.STDERR, b"log", True),
    ]
    assert len(cassette.warnings) == 2
    assert "truncated at byte" in cassette.warnings[0]
    assert cassette.warnings[1] == (
        "killed.tape: the recorder stopped before the server exited, so this cassette is its raw capture, "
        "framed now; hook:hooks:scrub was not applied to it"
    )


def test_a_capture_whose_server_exited_says_what_was_not_applied_to_it() -> None:
    """The recorder outlived the server but could not make the frames (its hook failed): the
    capture is unscrubbed, and whoever loads it must hear so."""
    content = _capture(_chunk(0.1, Stream.CLIENT_STDIN, b'{"jsonrpc":"2.0","id":1,"method":"ping"}\n'),
                       msgpack.packb(exit_record(0.2, 0, None)), unapplied=("hook:hooks:scrub",))
    assert loads(content, "kept.tape").warnings == [
        "kept.tape: the recorder did not finish this cassette, so it is its raw capture, framed now; "
        "hook:hooks:scrub was not applied to it"]


def test_after_a_normal_exit_a_capture_keeps_the_clients_unended_line_and_ends_nothing() -> None:
    """The server was given the client's last unterminated bytes: the cassette holds them too."""
    content = _capture(
        _chunk(0.1, Stream.CLIENT_STDIN, b"{}\n{"),  # the client's stdin never ends
        _chunk(0.2, END + Stream.SERVER_STDOUT),
        _chunk(0.2, END + Stream.SERVER_STDERR),
        msgpack.packb(exit_record(0.3, 0, None)),
    )
    cassette = loads(content)
    assert [(f.direction, f.kind, f.payload, f.partial) for f in cassette.frames] == [
        (C2S, Kind.RAW, b"{}", False),
        (S2C, Kind.STREAM_END, b"", False),
        (S2C, Kind.EXIT, b"", False),
        (C2S, Kind.RAW, b"{", True),  # no STREAM_END: the client did not close its stdin
    ]
    assert cassette.frames[2].info == {"code": 0, "signal": None}
    assert cassette.warnings == []
    assert loads(_capture()).frames == []


def test_captured_times_are_kept_to_the_millisecond() -> None:
    content = _capture(_chunk(0.0123456, Stream.CLIENT_STDIN, b'{"jsonrpc":"2.0","id":1,"method":"ping"}\n'),
                       msgpack.packb(exit_record(0.0456789, 0, None)))
    assert [frame.t for frame in loads(content).frames] == [0.012, 0.046]


def test_lines_whose_members_json_rpc_does_not_allow_load_as_raw() -> None:
    """The recorder wrote them as messages, which the cassette's frame model refuses: the cassette
    it left did not load."""
    lines = [b'{"jsonrpc":"2.0","id":true,"method":"ping"}', b'{"jsonrpc":"2.0","id":1,"method":"a","params":"x"}',
             b'{"jsonrpc":"2.0","id":1,"error":{"code":"x","message":"m"}}']
    content = _capture(_chunk(0.1, Stream.SERVER_STDOUT, b"\n".join(lines) + b"\n"), msgpack.packb(exit_record(0.2, 0, None)))
    cassette = loads(content)
    assert [(f.kind, f.payload) for f in cassette.frames[:3]] == [(Kind.RAW, line) for line in lines]
    assert cassette.warnings == []
