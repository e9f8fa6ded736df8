"""The stdio recorder's writer side, sans IO: the records a recorder leaves in its pipe become frames,
including what a killed recorder left half-written."""

from __future__ import annotations

from recorder.stdio import END, EXIT, EXIT_STATUS, RECORD, _RecordFramer
from tapes.cassette.frames import Direction, Kind
from tapes.cassette.stdio_framer import Stream

C2S, S2C = Direction.CLIENT_TO_SERVER, Direction.SERVER_TO_CLIENT


def _record(t: float, event: int, payload: bytes = b"") -> bytes:
    return RECORD.pack(t, event, len(payload)) + payload


def test_the_writer_keeps_what_a_killed_recorder_left_in_the_pipe() -> None:
    framer = _RecordFramer()
    whole = _record(0.1, Stream.CLIENT_STDIN, b'{"jsonrpc":"2.0","id":1,"method":"ping"}\n{"ha') + _record(
        0.2, Stream.SERVER_STDOUT, b'{"jsonrpc":"2.0","id":1,"result":{}}\n'
    )
    notification = b'{"jsonrpc":"2.0","method":"notifications/x"}\n'
    cut = _record(0.3, Stream.SERVER_STDOUT, notification)[:-10]  # the kill stopped this record's write
    buffer = bytearray(whole + cut)
    frames, used = framer.records(buffer)
    assert used == len(whole)
    frames += framer.finish(bytes(buffer[used:]))
    assert [(f.seq, f.direction, f.kind, f.payload, f.partial) for f in frames] == [
        (1, C2S, Kind.MESSAGE, b'{"jsonrpc":"2.0","id":1,"method":"ping"}', False),
        (2, S2C, Kind.MESSAGE, b'{"jsonrpc":"2.0","id":1,"result":{}}', False),
        (3, C2S, Kind.RAW, b'{"ha', True),
        (4, C2S, Kind.STREAM_END, b"", False),
        (5, S2C, Kind.RAW, notification[:-10], True),
        (6, S2C, Kind.STREAM_END, b"", False),
    ]


def test_the_writer_adds_nothing_after_a_normal_exit_or_when_no_server_ran() -> None:
    framer = _RecordFramer()
    records = b"".join(
        [
            _record(0.1, Stream.CLIENT_STDIN, b"{}\n{"),  # the client's stdin never ends
            _record(0.2, END + Stream.SERVER_STDOUT),
            _record(0.2, END + Stream.SERVER_STDERR),
            _record(0.3, EXIT, EXIT_STATUS.pack(0, -1)),
        ]
    )
    frames, used = framer.records(bytearray(records))
    assert used == len(records)
    assert [f.kind for f in frames] == [Kind.RAW, Kind.STREAM_END, Kind.EXIT]
    assert frames[-1].info == {"code": 0, "signal": None}
    assert framer.finish(b"") == []
    assert _RecordFramer().finish(b"") == []
