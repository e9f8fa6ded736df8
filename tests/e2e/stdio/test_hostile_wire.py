"""`tapes record` on stdio under hostile bytes both ways: whatever a client and a server write (binary,
NUL, invalid UTF-8, CR or CRLF line ends, no last newline, lines of megabytes, JSON that is no
JSON-RPC, odd ids, batches, stderr floods), each side gets exactly what the other sent, the recorder
adds nothing to either stream, and the cassette rebuilds every byte stream, stderr and the exit."""

from __future__ import annotations

import signal
import sys
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path

import msgpack
from hypothesis import given, settings
from hypothesis import strategies as st

from tapes.cassette.frames import Direction, Frame, Kind
from tapes.cassette.store import Cassette, load, save

from tests.support.paths import SERVERS, SUPPORT
from tests.support.stdio_sessions import TIMEOUT, Session, flood, of_kind, wire

C2S, S2C = Direction.CLIENT_TO_SERVER, Direction.SERVER_TO_CLIENT
SERVER = [sys.executable, str(SERVERS / "scripted_stdio_server.py")]
ECHO = [sys.executable, str(SUPPORT / "recorder_peer.py"), "echo"]
READY = b'{"jsonrpc":"2.0","method":"notifications/message","params":{"data":"ready"}}\n'

ODD_LINES = [
    b'{"jsonrpc":"2.0","id":1,"method":"ping"}',
    b'{"jsonrpc": "2.0", "id": 2, "result": {}}',  # not canonical
    b'{"a":1}', b"[1,2]", b'"text"', b"null", b"{", b"}",  # JSON that is no JSON-RPC, and no JSON
    b'{"jsonrpc":"2.0","id":true,"method":"ping"}', b'{"jsonrpc":"2.0","id":null,"result":{}}',
    b'{"jsonrpc":"2.0","id":[],"result":{}}', b'{"jsonrpc":"2.0","id":1e400,"result":{}}',
    b'{"jsonrpc":"2.0","id":NaN,"result":{}}', b'{"jsonrpc":"2.0","id":-0,"method":"x"}',
    b'{"jsonrpc":"2.0","id":123456789012345678901234567890,"method":"ping"}',
    b'{"jsonrpc":"2.0","id":"\\ud800","method":"ping"}', b'{"jsonrpc":"2.0","id":1,"id":2,"method":"x"}',
    b'[{"jsonrpc":"2.0","id":1,"method":"a"},{"jsonrpc":"2.0","method":"b"}]', b"[]",
    b'{"jsonrpc":"2.0","id":1,"result":' + b"[" * 5000 + b"]" * 5000 + b"}",
    b'\xef\xbb\xbf{"jsonrpc":"2.0","id":1,"method":"ping"}',  # a BOM
    b'{"jsonrpc":"2.0","method":"x","params":{"s":"\xff\xfe\x00"}}',
]
LINE_ENDS = [b"\n", b"\r\n", b"\r", b"\n\n", b"\0"]

pieces = st.one_of(
    st.binary(max_size=40),
    st.sampled_from(LINE_ENDS),
    st.sampled_from(ODD_LINES),
    # a line of up to 2 MB: longer than a pipe or a read holds
    st.builds(lambda size, byte: byte * size, st.integers(1 << 16, 2 << 20), st.sampled_from([b"x", b"\xff", b"\r"])),
)
# mostly whole lines, so that odd ones stand alone; a line end of b"" runs a piece into the next
lines = st.builds(bytes.__add__, pieces, st.sampled_from([*LINE_ENDS, b""]))
chunks = st.lists(lines, max_size=6).map(b"".join)


@dataclass
class Script:
    client: list[bytes]  # what the client writes, chunk by chunk
    writes: list[tuple[int, bytes]]  # what the server writes, to fd 1 or 2
    client_closes: bool  # the client closes its stdin (else it keeps it open past the server's exit)
    ignore_term: bool  # the server ignores SIGTERM, and the test sends the recorder one (before it closes stdin)
    exit: int
    signal: int | None

    def server_output(self, fd: int) -> bytes:
        return b"".join(data for to, data in self.writes if to == fd)


@st.composite
def scripts(draw: st.DrawFn) -> Script:
    ignore_term = draw(st.booleans())
    writes = draw(st.lists(st.tuples(st.sampled_from([1, 2]), chunks), max_size=6))
    if ignore_term:  # the test waits for this line: SIGTERM is ignored by then
        writes.insert(0, (1, READY))
    signals = [signal.SIGKILL, signal.SIGHUP] + ([] if ignore_term else [signal.SIGTERM])
    return Script(
        client=draw(st.lists(chunks, max_size=4)),
        writes=writes,
        # the server must outlive the SIGTERM: a recorder whose server is gone does not pass it on
        client_closes=ignore_term or draw(st.booleans()),
        ignore_term=ignore_term,
        exit=draw(st.sampled_from([0, 1, 3, 255])),
        signal=draw(st.none() | st.sampled_from(signals)),
    )


def assert_the_twin_holds_the_same(cassette: Cassette, directory: Path, suffix: str) -> None:
    """The cassette converts to the other format (as `tapes export` does) and back, frame for frame."""
    twin = directory / ("twin.tape" if suffix == ".jsonl" else "twin.jsonl")
    save(cassette, twin)

    def described(frames: list[Frame]) -> list[tuple[object, ...]]:
        # by bytes: a NaN id is not equal to itself, and a message msgpack cannot hold (an id wider
        # than 64 bits) is kept there as the bytes it stands for
        return [(f.seq, f.t, f.direction, "line" if f.kind in (Kind.MESSAGE, Kind.RAW) else f.kind, f.shown_payload,
                 f.info) for f in frames]

    assert described(load(twin).frames) == described(cassette.frames)


def send(session: Session, chunks: list[bytes], close: bool) -> None:
    """Write the client's chunks; stop quietly when the recorder is gone (a server that did not wait)."""
    try:
        for chunk in chunks:
            session.send(chunk)
        if close:
            session.close_stdin()
    except BrokenPipeError:
        pass


def run(script: Script, directory: Path, suffix: str) -> tuple[Session, int, bytes, Cassette]:
    cassette_path, script_path, received_path = directory / f"x{suffix}", directory / "script", directory / "received"
    script_path.write_bytes(msgpack.packb({
        "writes": script.writes, "wait_stdin": script.client_closes, "ignore_term": script.ignore_term,
        "exit": script.exit, "signal": script.signal,
    }))
    session = Session(cassette_path, [*SERVER, str(script_path), str(received_path)])
    try:
        if script.ignore_term:
            assert session.read_line() == READY
            session.proc.send_signal(signal.SIGTERM)  # passed on to the server, which goes on
        sender = threading.Thread(target=send, args=(session, script.client, script.client_closes), daemon=True)
        sender.start()
        returncode = session.finish()
        if script.client_closes:
            sender.join(TIMEOUT)
        return session, returncode, received_path.read_bytes(), load(cassette_path)
    finally:
        session.proc.kill()
        session.proc.wait(TIMEOUT)
        for pipe in (session.proc.stdin, session.proc.stdout, session.proc.stderr):
            if pipe is not None and not pipe.closed:
                try:
                    pipe.close()
                except BrokenPipeError:
                    pass


@settings(max_examples=25, deadline=None)
@given(script=scripts(), suffix=st.sampled_from([".tape", ".jsonl"]))
def test_every_byte_goes_through_unchanged_and_the_cassette_rebuilds_it(script: Script, suffix: str) -> None:
    with tempfile.TemporaryDirectory() as directory:
        session, returncode, received, cassette = run(script, Path(directory), suffix)
        assert_the_twin_holds_the_same(cassette, Path(directory), suffix)

    sent = b"".join(script.client)
    assert returncode == (128 + script.signal if script.signal is not None else script.exit)
    assert bytes(session.received) == script.server_output(1)
    assert bytes(session.stderr) == script.server_output(2)  # the server's, and nothing of the recorder's
    assert cassette.warnings == []
    assert wire(cassette, S2C) == script.server_output(1)
    assert wire(cassette, S2C, (Kind.STDERR,)) == script.server_output(2)
    exits = of_kind(cassette, Kind.EXIT)
    assert [f.info for f in exits] == [{"code": None if script.signal else script.exit, "signal": script.signal}]
    assert len(of_kind(cassette, Kind.STREAM_END, S2C)) == 1
    if script.client_closes:  # the server read all the client sent before it ended
        assert received == sent
        assert wire(cassette, C2S) == sent
        assert len(of_kind(cassette, Kind.STREAM_END, C2S)) == 1
    else:  # appended before forwarded: the cassette holds all the server was given, at most what was sent
        recorded = wire(cassette, C2S)
        assert recorded.startswith(received) and sent.startswith(recorded)


@settings(max_examples=10, deadline=None)
@given(chunks=st.lists(chunks, min_size=1, max_size=6), suffix=st.sampled_from([".tape", ".jsonl"]),
       at=st.floats(0.0, 1.0))
def test_a_recorder_killed_among_hostile_bytes_leaves_a_cassette_that_loads(
    chunks: list[bytes], suffix: str, at: float
) -> None:
    """kill -9 once some of the echo came back: the cassette loads, holds all the client received,
    at most what it sent; it says only that the recorder stopped (and where a cut append ends)."""
    sent = b"".join(chunks) + b"\n"  # the echo server answers a line once it ends
    echoed = sent.rfind(b"\n", 0, max(1, int(len(sent) * at))) + 1 or len(sent)
    with tempfile.TemporaryDirectory() as directory:
        cassette_path = Path(directory) / f"x{suffix}"
        session = Session(cassette_path, ECHO)
        try:
            assert flood(session, chunks + [b"\n"], echoed).wait(TIMEOUT)
            session.proc.kill()
            session.proc.wait(TIMEOUT)
            assert session.reader is not None
            session.reader.join(TIMEOUT)
        finally:
            session.proc.kill()
            session.proc.wait(TIMEOUT)
        cassette = load(cassette_path)

    c2s, s2c, received = wire(cassette, C2S), wire(cassette, S2C), bytes(session.received)
    assert s2c.startswith(received) and c2s.startswith(s2c) and sent.startswith(c2s)
    assert len(received) >= echoed
    stopped, cut = "the recorder stopped before the server exited", "truncated at byte"
    assert any(stopped in warning for warning in cassette.warnings)
    assert all(stopped in warning or cut in warning for warning in cassette.warnings), cassette.warnings
