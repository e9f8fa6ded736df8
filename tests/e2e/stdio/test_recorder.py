"""End-to-end tests of `tapes record` on stdio: real processes on real pipes, the recorder run
the way an MCP client runs a server command."""

from __future__ import annotations

import contextlib
import json
import os
import random
import resource
import select
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client, StdioServerParameters

from tapes.cassette.frames import Direction, Kind
from tapes.cassette.store import load

from tests.support.paths import CASSETTES, SUPPORT, TAPES
from tests.support.stdio_sessions import TIMEOUT, Session, flood, of_kind, wire

PEER = [sys.executable, str(SUPPORT / "recorder_peer.py")]
TEE = [sys.executable, str(SUPPORT / "recorder_tee.py")]
READY = b'{"jsonrpc":"2.0","method":"notifications/message","params":{"data":"ready"}}\n'

C2S, S2C = Direction.CLIENT_TO_SERVER, Direction.SERVER_TO_CLIENT


Record = Callable[..., tuple[Session, Path]]


@pytest.fixture
def record(tmp_path: Path) -> Iterator[Record]:
    """Start `tapes record` for a server command; returns the session and its cassette path.
    Recorders a test left running are killed at the end."""
    sessions: list[Session] = []

    def start(server: list[str], preexec_fn: Callable[[], None] | None = None) -> tuple[Session, Path]:
        cassette = tmp_path / f"session{len(sessions)}.tape"
        sessions.append(Session(cassette, server, preexec_fn))
        return sessions[-1], cassette

    yield start
    for session in sessions:
        if session.proc.poll() is None:
            session.proc.kill()
            session.proc.wait(TIMEOUT)
        for pipe in (session.proc.stdin, session.proc.stdout, session.proc.stderr):
            if pipe is not None:
                pipe.close()


def children(pid: int) -> set[int]:
    return {int(child) for path in Path(f"/proc/{pid}/task").glob("*/children") for child in path.read_text().split()}


def wait_exit(pidfd: int, what: str) -> None:
    ready, _, _ = select.select([pidfd], [], [], TIMEOUT)
    assert ready, f"{what} did not exit within {TIMEOUT}s"


# --- a real client and a real server ---------------------------------------------------------


async def _use_everything(server: StdioServerParameters) -> list[dict[str, Any]]:
    with anyio.fail_after(TIMEOUT):
        async with Client(server) as client:
            return [
                (await client.list_tools()).model_dump(),
                (await client.call_tool("echo", {"message": "hi"})).model_dump(),
                (await client.call_tool("get-sum", {"a": 1, "b": 2})).model_dump(),
            ]


def test_sdk_client_gets_the_same_results_and_the_cassette_holds_every_byte(
    everything_stdio: list[str], tmp_path: Path
) -> None:
    direct = anyio.run(_use_everything, StdioServerParameters(command=everything_stdio[0], args=everything_stdio[1:]))

    cassette_path, c2s_tap, s2c_tap = tmp_path / "everything.tape", tmp_path / "c2s", tmp_path / "s2c"
    recorder = [*TAPES, "record", "-o", str(cassette_path), "--", *everything_stdio]
    tapped = [*TEE[1:], str(c2s_tap), str(s2c_tap), "--", *recorder]
    recorded = anyio.run(_use_everything, StdioServerParameters(command=TEE[0], args=tapped))

    assert recorded == direct
    assert recorded[2]["content"][0]["text"] == "The sum of 1 and 2 is 3."
    cassette = load(cassette_path)
    assert cassette.warnings == []
    assert cassette.header.server == {"command": everything_stdio}
    assert wire(cassette, C2S) == c2s_tap.read_bytes()
    assert wire(cassette, S2C) == s2c_tap.read_bytes()
    methods = [f.message.get("method") for f in of_kind(cassette, Kind.MESSAGE, C2S)]
    assert methods.count("tools/call") == 2
    assert cassette.frames[-1].kind is Kind.EXIT
    assert [f.seq for f in cassette.frames] == list(range(1, len(cassette.frames) + 1))


# --- exit, signals, stderr, shutdown ---------------------------------------------------------


def test_exit_code_and_stderr_are_passed_on_and_recorded(record: Record) -> None:
    session, cassette_path = record([*PEER, "exit", "3"])
    # The client's stdin stays open: the server's exit alone ends the recording.
    assert session.finish() == 3
    assert bytes(session.received) == READY
    assert bytes(session.stderr) == b"stderr line 1\nstderr line 2\n"

    cassette = load(cassette_path)
    assert [f.data for f in of_kind(cassette, Kind.STDERR)] == [b"stderr line 1", b"stderr line 2"]
    assert wire(cassette, S2C) == READY
    assert cassette.frames[-1].kind is Kind.EXIT
    assert cassette.frames[-1].info == {"code": 3, "signal": None}


@pytest.mark.parametrize("signum", [signal.SIGKILL, signal.SIGTERM])
def test_a_server_killed_by_a_signal_gives_128_plus_its_number(record: Record, signum: int) -> None:
    session, cassette_path = record([*PEER, "kill", str(signum)])
    session.close_stdin()
    assert session.finish() == 128 + signum
    assert session.received == b""

    exits = of_kind(load(cassette_path), Kind.EXIT)
    assert [f.info for f in exits] == [{"code": None, "signal": signum}]


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP])
def test_signals_to_the_recorder_reach_the_server_once(record: Record, signum: signal.Signals) -> None:
    session, cassette_path = record([*PEER, "signals"])
    assert session.read_line() == READY  # the server is up with its handlers installed
    session.proc.send_signal(signum)
    assert session.finish() == 0
    assert bytes(session.stderr) == f"got {signum.name}\n".encode()

    cassette = load(cassette_path)
    assert [f.data for f in of_kind(cassette, Kind.STDERR)] == [f"got {signum.name}".encode()]
    assert cassette.frames[-1].info == {"code": 0, "signal": None}


def test_a_signal_ignored_when_the_recorder_started_stays_ignored_by_it_and_the_server(record: Record) -> None:
    """As under `nohup`: the terminal closing (SIGHUP) ends neither the recorder nor the server."""
    session, cassette_path = record([*PEER, "echo"], lambda: signal.signal(signal.SIGHUP, signal.SIG_IGN))
    line = b'{"jsonrpc":"2.0","id":1,"method":"ping"}\n'
    session.send(line)
    assert session.read_line() == line  # the server is up
    session.proc.send_signal(signal.SIGHUP)
    session.send(line)
    assert session.read_line() == line
    session.close_stdin()
    assert session.finish() == 0
    assert load(cassette_path).frames[-1].info == {"code": 0, "signal": None}


def test_sigint_stops_a_recorder_started_ignoring_it(record: Record) -> None:
    """As a script's background job starts: SIGINT ignored so that the terminal's Ctrl-C passes it
    by. `kill -INT` still ends the session as Ctrl-C does."""
    session, _ = record([*PEER, "signals"], lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
    assert session.read_line() == READY
    session.proc.send_signal(signal.SIGINT)
    assert session.finish() == 0
    assert bytes(session.stderr) == b"got SIGINT\n"


def test_closing_the_clients_stdin_closes_the_servers(record: Record) -> None:
    session, cassette_path = record([*PEER, "echo"])
    line = b'{"jsonrpc":"2.0","id":1,"method":"ping"}\n'
    session.send(line)
    assert session.read_line() == line
    session.close_stdin()
    assert session.finish() == 0  # the echo server exits when its stdin ends

    cassette = load(cassette_path)
    kinds = [(f.direction, f.kind) for f in cassette.frames]
    assert kinds == [
        (C2S, Kind.MESSAGE),
        (S2C, Kind.MESSAGE),
        (C2S, Kind.STREAM_END),
        (S2C, Kind.STREAM_END),
        (S2C, Kind.EXIT),
    ]
    assert cassette.frames[2].info == {"reason": "eof"}


def test_a_client_that_stops_reading_is_still_recorded(record: Record) -> None:
    session, cassette_path = record([*PEER, "echo"])
    assert session.proc.stdout is not None
    session.proc.stdout.close()  # the recorder's writes to the client now fail with EPIPE
    lines = [b'{"jsonrpc":"2.0","id":%d,"method":"ping"}\n' % n for n in range(3)]
    for line in lines:
        session.send(line)
    session.close_stdin()
    assert session.finish() == 0
    assert session.stderr == b""  # no complaint, no traceback

    cassette = load(cassette_path)
    assert wire(cassette, S2C) == b"".join(lines)
    assert cassette.frames[-1].info == {"code": 0, "signal": None}


def test_a_process_the_server_left_holding_its_pipes_does_not_keep_the_recorder(record: Record) -> None:
    """A server may start a process that inherits its stdout and stderr and outlives it (a worker,
    a daemon): the recorder ends with the server, with all the server wrote, not with that process."""
    session, cassette_path = record([*PEER, "orphan"])
    try:
        assert session.finish() == 5
    finally:
        held = int(session.stderr.split()[-1]) if session.stderr.startswith(b"started ") else None
        if held is not None:
            os.kill(held, signal.SIGKILL)
    said = b'{"jsonrpc":"2.0","method":"orphan","params":{"pid":%d}}\n{"partial' % held
    assert bytes(session.received) == said and session.stderr == b"started %d\n" % held

    cassette = load(cassette_path)
    assert cassette.warnings == []
    assert wire(cassette, S2C) == said and wire(cassette, S2C, (Kind.STDERR,)) == session.stderr
    assert [frame.info for frame in of_kind(cassette, Kind.EXIT)] == [{"code": 5, "signal": None}]


# --- a recorder killed mid-session -----------------------------------------------------------


def test_a_recorder_killed_mid_session_leaves_everything_it_forwarded(
    record: Record, everything_stdio: list[str]
) -> None:
    session, cassette_path = record(everything_stdio)

    def request(request_id: int, method: str, params: dict[str, Any] | None = None) -> None:
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
        if params is not None:
            message["params"] = params
        session.send(json.dumps(message).encode() + b"\n")

    client_info = {"name": "recorder-test", "version": "0"}
    request(1, "initialize", {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": client_info})
    assert session.response(1)["result"]["serverInfo"]
    session.send(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
    request(2, "tools/list")
    assert session.response(2)["result"]["tools"]
    request(3, "tools/call", {"name": "echo", "arguments": {"message": "before the kill"}})
    assert session.response(3)["result"]["content"][0]["text"] == "Echo: before the kill"
    request(4, "ping")
    assert session.response(4)["result"] == {}
    settled_c2s, settled_s2c = bytes(session.sent), bytes(session.received)

    recorder = session.proc.pid
    (server,) = children(recorder)  # no writer process: the recorder appends as it forwards
    server_fd = os.pidfd_open(server)
    try:
        session.proc.kill()
        session.finish()  # the client sees EOF on stdout once the recorder is gone
        wait_exit(server_fd, "the server (its stdin should have ended)")
    finally:
        os.close(server_fd)

    cassette = load(cassette_path)
    assert len(cassette.warnings) == 1 and "the recorder stopped before the server exited" in cassette.warnings[0]
    c2s, s2c = wire(cassette, C2S), wire(cassette, S2C)
    # Appended before forwarded: the cassette holds all a peer was given, and at most what the
    # recorder read but had no time to forward.
    assert c2s.startswith(settled_c2s) and bytes(session.sent).startswith(c2s)
    assert s2c.startswith(settled_s2c) and s2c.startswith(bytes(session.received))
    assert of_kind(cassette, Kind.EXIT) == []  # the recorder did not see the server exit


def test_a_server_outlives_no_recorder_killed_under_it(tmp_path: Path) -> None:
    """The server runs in its own process group, so a client's kill of the recorder's group (what
    the SDKs do to a server that will not stop) does not reach it: it dies with the recorder."""
    session = Session(tmp_path / "session.tape", [*PEER, "stubborn"], preexec_fn=os.setpgrp)
    try:
        assert session.read_line() == READY
        (server,) = children(session.proc.pid)
        server_fd = os.pidfd_open(server)
        try:
            os.killpg(session.proc.pid, signal.SIGKILL)  # the group the client started the recorder in
            session.finish()
            wait_exit(server_fd, "the server (it ignores SIGTERM and the end of its stdin)")
        finally:
            os.close(server_fd)
    finally:
        if session.proc.poll() is None:
            session.proc.kill()
        session.proc.wait(TIMEOUT)


def test_a_client_that_writes_on_after_the_server_exited_gets_a_broken_pipe(tmp_path: Path) -> None:
    """As it would writing to the server itself: the recorder does not read (and record) it for ever."""
    cassette_path = tmp_path / "session.tape"
    recorder = subprocess.Popen([*TAPES, "record", "-o", str(cassette_path), "--", *PEER, "exit", "3"],
                                stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                start_new_session=True)
    assert recorder.stdin is not None
    block = b'{"jsonrpc":"2.0","method":"notifications/x","params":{"pad":"' + b"x" * 65_000 + b'"}}\n'
    written = 0
    try:
        with pytest.raises(BrokenPipeError):
            while written < 100 * 1024 * 1024:  # 100 MB: far more than the pipes hold
                recorder.stdin.write(block)
                written += len(block)
        assert recorder.wait(TIMEOUT) == 3
    finally:
        if recorder.poll() is None:
            recorder.kill()
        with contextlib.suppress(BrokenPipeError):
            recorder.stdin.close()
    assert written < 100 * 1024 * 1024 and cassette_path.stat().st_size < 10 * 1024 * 1024


# --- wire input that is not well-formed ------------------------------------------------------


def test_malformed_input_is_forwarded_verbatim_and_recorded(record: Record) -> None:
    valid = b'{"jsonrpc":"2.0","id":1,"method":"ping"}'
    spaced = b'{"jsonrpc": "2.0", "id": 2, "method": "ping"}'
    bad_json = b'{"jsonrpc":"2.0","id":3,"method":'
    bad_utf8 = b'{"jsonrpc":"2.0","method":"notifications/x","params":{"s":"\xff\xfe"}}'
    big = b'{"jsonrpc":"2.0","method":"notifications/big","params":{"blob":"' + b"x" * 20_000_000 + b'"}}'
    half = b'{"jsonrpc":"2.0","id":4,"meth'
    data = b"\n".join([valid, spaced, bad_json, bad_utf8, big]) + b"\n" + half

    session, cassette_path = record([*PEER, "echo"])
    stdout, stderr = session.proc.communicate(data, timeout=TIMEOUT)
    assert session.proc.returncode == 0
    assert stdout == data
    assert stderr == b""

    cassette = load(cassette_path)
    expected = [
        (Kind.MESSAGE, valid, False),
        (Kind.MESSAGE, spaced, False),
        (Kind.RAW, bad_json, False),
        (Kind.RAW, bad_utf8, False),
        (Kind.MESSAGE, big, False),
        (Kind.RAW, half, True),
        (Kind.STREAM_END, b"", False),
    ]
    for direction in (C2S, S2C):
        frames = [f for f in cassette.frames if f.direction is direction and f.kind is not Kind.EXIT]
        assert [(f.kind, f.payload, f.partial) for f in frames] == expected
    spaced_frame = of_kind(cassette, Kind.MESSAGE, C2S)[1]
    assert spaced_frame.message == {"jsonrpc": "2.0", "id": 2, "method": "ping"}
    assert spaced_frame.data == spaced  # not canonical: the exact bytes are kept


# --- mistakes a user can make ----------------------------------------------------------------


def _user_error(argv: list[str]) -> str:
    result = subprocess.run(argv, capture_output=True, timeout=TIMEOUT)
    assert result.returncode == 2
    assert result.stdout == b""
    lines = result.stderr.decode().splitlines()
    assert len(lines) == 1 and lines[0].startswith("tapes: error: "), result.stderr
    return lines[0]


def test_an_unwritable_cassette_path_is_one_sentence_and_starts_no_server(tmp_path: Path) -> None:
    output = tmp_path / "no-such-dir" / "x.tape"
    marker = tmp_path / "server-ran"
    server = [sys.executable, "-c", f"open({str(marker)!r}, 'w')"]
    line = _user_error([*TAPES, "record", "-o", str(output), "--", *server])
    assert str(output) in line
    assert not marker.exists()


@pytest.mark.parametrize("closed", [0, 1, 2])
def test_a_recorder_started_with_a_closed_standard_stream_records_the_session(closed: int, tmp_path: Path) -> None:
    """The cassette file must not take the closed stream's number: what is forwarded there would
    be written into it."""
    output = tmp_path / "x.tape"
    ping = b'{"jsonrpc":"2.0","id":1,"method":"ping"}\n'
    run = subprocess.run(["sh", "-c", f'exec "$@" {closed}>&-', "sh", *TAPES, "record", "-o", str(output), "--",
                          sys.executable, "-c", "import sys; sys.stdout.write(sys.stdin.read())"],
                         input=ping, capture_output=True, timeout=TIMEOUT)
    assert run.returncode == 0 and b"Traceback" not in run.stderr, run.stderr
    messages = [(frame.direction, frame.message) for frame in load(output).frames if frame.kind is Kind.MESSAGE]
    assert messages == ([] if closed == 0 else [(C2S, json.loads(ping)), (S2C, json.loads(ping))])


def test_a_cassette_path_that_is_the_recorders_stdout_is_one_sentence(tmp_path: Path) -> None:
    """/dev/stdout carries the protocol to the client: a capture written there would corrupt it."""
    marker = tmp_path / "server-ran"
    server = [sys.executable, "-c", f"open({str(marker)!r}, 'w')"]
    line = _user_error([*TAPES, "record", "-o", "/dev/stdout", "--", *server])
    assert "/dev/stdout" in line and "carries the protocol" in line
    assert not marker.exists()


@pytest.mark.parametrize("kind", ["bare name", "path", "not executable"])
def test_a_server_command_that_cannot_run_is_one_sentence(tmp_path: Path, kind: str) -> None:
    command = {"bare name": "no-such-mcp-server", "path": str(tmp_path / "no-such-server")}.get(kind)
    if command is None:
        script = tmp_path / "server.sh"
        script.write_text("#!/bin/sh\n")
        command = str(script)
    output = tmp_path / "x.tape"
    line = _user_error([*TAPES, "record", "-o", str(output), "--", command, "stdio"])
    assert repr(command) in line
    assert not output.exists()


# --- kill -9 at any moment, a cassette that cannot be written --------------------------------


def test_kill_9_at_random_moments_loses_no_forwarded_byte(record: Record) -> None:
    chooser = random.Random(1414)
    for kill in range(30):
        session, cassette_path = record([*PEER, "echo"])
        # lines of 40 bytes to 300 kB: a kill lands between small and inside big chunks alike
        lines = [
            b'{"jsonrpc":"2.0","id":%d,"method":"ping","params":{"pad":"%s"}}\n' % (n, b"x" * chooser.choice(SIZES))
            for n in range(400)
        ]
        enough = chooser.randrange(1, sum(map(len, lines)))
        reached = flood(session, lines, enough)
        assert reached.wait(TIMEOUT), f"kill {kill}: the echo did not come back"
        session.proc.kill()
        session.proc.wait(TIMEOUT)
        session.reader.join(TIMEOUT)

        cassette = load(cassette_path)
        c2s, s2c = wire(cassette, C2S), wire(cassette, S2C)
        received = bytes(session.received)
        assert s2c.startswith(received), f"kill {kill}: a line the client received is not in the cassette"
        assert c2s.startswith(s2c) and bytes(session.sent).startswith(c2s), f"kill {kill}"
        assert received.count(b"\n") >= 1 and s2c.count(b"\n") >= received.count(b"\n")


SIZES = [0, 10, 100, 1000, 10_000, 100_000, 300_000]


def _read_stderr_line(session: Session) -> bytes:
    assert session.proc.stderr is not None
    ready, _, _ = select.select([session.proc.stderr], [], [], TIMEOUT)
    assert ready, "nothing on stderr"
    return session.proc.stderr.readline()


def test_a_full_disk_keeps_the_session_going_says_so_at_once_and_exits_non_zero(tmp_path: Path) -> None:
    session = Session(Path("/dev/full"), [*PEER, "echo"])
    try:
        line = b'{"jsonrpc":"2.0","id":1,"method":"ping"}\n'
        # said while the session runs (the header is the first write), in one sentence
        said = _read_stderr_line(session)
        assert said == (
            b"tapes: error: /dev/full: cannot be written (No space left on device); "
            b"the session goes on unrecorded and tapes record will exit non-zero\n"
        )
        for _ in range(3):
            session.send(line)
            assert session.read_line() == line
        session.close_stdin()
        assert session.finish() == 1  # the echo server exited 0
        assert session.stderr == b""  # nothing more said
    finally:
        session.proc.kill()
        session.proc.wait(TIMEOUT)


def test_a_write_error_mid_session_keeps_what_was_written(tmp_path: Path) -> None:
    """A file size limit makes the cassette's writes fail part way (EFBIG), as a disk filling up does."""
    cassette_path = tmp_path / "limited.tape"

    def limit() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # fail the write instead of killing the writer
        resource.setrlimit(resource.RLIMIT_FSIZE, (64_000, 64_000))

    session = Session(cassette_path, [*PEER, "echo"], preexec_fn=limit)
    lines = [b'{"jsonrpc":"2.0","id":%d,"method":"ping","params":{"pad":"%s"}}\n' % (n, b"y" * 1000) for n in range(200)]
    for line in lines:  # one at a time: the cassette fills up part way through the session
        session.send(line)
        assert session.read_line() == line
    session.close_stdin()
    assert session.finish() == 1
    assert session.stderr.count(b"\n") == 1
    assert b"cannot be written (a write stopped part way, as on a full disk); the session goes on" in session.stderr

    cassette = load(cassette_path)  # the capture as far as it went
    c2s = wire(cassette, C2S)
    assert c2s and b"".join(lines).startswith(c2s)
    assert any("the recorder stopped before the server exited" in warning for warning in cassette.warnings)


# --- a cassette deleted, moved or replaced while the session runs ----------------------------


def _meddle(cassette_path: Path, how: str) -> None:
    if how == "deleted":
        cassette_path.unlink()
    elif how == "moved":
        cassette_path.rename(cassette_path.with_name("moved.tape"))
    else:  # a new file at the path, as `git checkout` or a test's cleanup restores an older cassette
        cassette_path.unlink()
        cassette_path.write_bytes((CASSETTES / "everything-stdio-2024-11-05.tape").read_bytes())


@pytest.mark.parametrize("how", ["deleted", "moved", "replaced"])
def test_a_cassette_deleted_moved_or_replaced_mid_session_is_written_again_and_said(
    record: Record, how: str
) -> None:
    session, cassette_path = record([*PEER, "echo"])
    lines = [b'{"jsonrpc":"2.0","id":%d,"method":"ping"}\n' % n for n in range(3)]
    session.send(lines[0])
    assert session.read_line() == lines[0]  # recorded: the chunk was appended before it was forwarded
    _meddle(cassette_path, how)
    for line in lines[1:]:
        session.send(line)
        assert session.read_line() == line
    session.close_stdin()
    assert session.finish() == 0
    what = "deleted or moved away" if how != "replaced" else "replaced by another file"
    assert session.stderr == (
        f"tapes: warning: {cassette_path} was {what} during the recording; the recording was written there again\n"
    ).encode()

    cassette = load(cassette_path)
    assert wire(cassette, C2S) == wire(cassette, S2C) == b"".join(lines)
    assert cassette.frames[-1].info == {"code": 0, "signal": None} and not cassette.warnings


def test_a_cassette_whose_folder_is_removed_mid_session_is_one_sentence_and_a_failed_exit(tmp_path: Path) -> None:
    folder = tmp_path / "cassettes"
    folder.mkdir()
    cassette_path = folder / "x.tape"
    session = Session(cassette_path, [*PEER, "echo"])
    line = b'{"jsonrpc":"2.0","id":1,"method":"ping"}\n'
    session.send(line)
    assert session.read_line() == line
    cassette_path.unlink()
    folder.rmdir()
    session.close_stdin()
    assert session.finish() == 1  # the echo server exited 0
    assert session.stderr == (
        f"tapes: error: {cassette_path} was deleted or moved away during the recording and cannot be written "
        "again (No such file or directory): the recording is lost\n"
    ).encode()
