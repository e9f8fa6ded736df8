"""A client that leaves `tapes replay` in the middle: a Ctrl-C (SIGINT) or a closed terminal
(SIGHUP) ends it as a SIGTERM does, between two steps, with the summary and the report; a client
that closed its pipes is not waited for through the recorded gaps of --timing recorded."""

from __future__ import annotations

import dataclasses
import json
import signal
import subprocess
from pathlib import Path

import pytest

from tapes.cassette.frames import STDIO, Direction, Frame, Kind
from tapes.cassette.store import load, save

from tests.support.messages import req, res
from tests.support.paths import CASSETTES, TAPES
from tests.support.recordings import stdio_cassette

CASSETTE = CASSETTES / "everything-stdio-2025-11-25.tape"
TIMEOUT = 60


def _client_lines() -> list[bytes]:
    return [frame.payload + b"\n" for frame in load(CASSETTE).frames if frame.from_client and frame.kind is Kind.MESSAGE]


def _answered_once(*flags: str) -> subprocess.Popen[bytes]:
    """A replay that answered the client's first request, its stdin still open."""
    replay = subprocess.Popen([*TAPES, "replay", str(CASSETTE), *flags], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert replay.stdin is not None and replay.stdout is not None
    replay.stdin.write(_client_lines()[0])
    replay.stdin.flush()
    assert json.loads(replay.stdout.readline())["id"] == 1
    return replay


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGHUP])
def test_sigint_and_sighup_end_the_replay_with_its_summary_and_report(signum: signal.Signals, tmp_path: Path) -> None:
    report = tmp_path / "report.json"
    replay = _answered_once("--report", str(report))
    replay.send_signal(signum)
    _, stderr = replay.communicate(timeout=TIMEOUT)
    assert replay.returncode == 128 + signum
    said = stderr.decode()
    assert "tapes replay: played" in said and "Aborted" not in said and "Traceback" not in said, said
    written = json.loads(report.read_text())
    assert written["complete"] is True and written["played"] >= 1


def test_a_client_gone_is_not_waited_for_through_the_recorded_gaps(tmp_path: Path) -> None:
    recorded = stdio_cassette(("c", req(1, "tools/call", {"name": "slow"})), ("s", res(1, {})))
    hour_later = [recorded.frames[0], dataclasses.replace(recorded.frames[1], t=3600.0)]
    path = tmp_path / "slow.tape"
    save(dataclasses.replace(recorded, frames=hour_later), path)
    replay = subprocess.Popen([*TAPES, "replay", str(path), "--timing", "recorded"], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert replay.stdin is not None and replay.stdout is not None and replay.stderr is not None
    replay.stdin.write(json.dumps(req(1, "tools/call", {"name": "slow"})).encode() + b"\n")
    replay.stdin.close()  # the client gives up on the answer an hour away, and goes
    replay.stdout.close()
    assert replay.wait(TIMEOUT) == 0
    said = replay.stderr.read().decode()
    assert "played 1 frame" in said and "Traceback" not in said, said


def test_a_gap_slowed_down_past_what_can_be_waited_is_waited_until_told_to_stop(tmp_path: Path) -> None:
    """--timing 1e-30 makes a gap of a second longer than poll (or sleep) can wait: no traceback."""
    recorded = stdio_cassette(("c", req(1, "tools/call", {"name": "slow"})), ("s", res(1, {})))
    started = Frame(2, recorded.frames[0].t, Direction.SERVER_TO_CLIENT, STDIO, Kind.STDERR, data=b"working")
    frames = [recorded.frames[0], started, dataclasses.replace(recorded.frames[1], seq=3, t=1.0)]
    path = tmp_path / "slowed.tape"
    save(dataclasses.replace(recorded, frames=frames), path)
    replay = subprocess.Popen([*TAPES, "replay", str(path), "--timing", "1e-30"], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert replay.stdin is not None and replay.stderr is not None
    replay.stdin.write(json.dumps(req(1, "tools/call", {"name": "slow"})).encode() + b"\n")
    replay.stdin.flush()
    assert replay.stderr.readline() == b"working\n"  # the answer's gap is next
    replay.send_signal(signal.SIGTERM)
    _, stderr = replay.communicate(timeout=TIMEOUT)
    assert replay.returncode == 128 + signal.SIGTERM and b"Traceback" not in stderr, stderr



@pytest.mark.parametrize(("redirect", "flags", "code"), [
    ("<&-", [], 0), (">&-", [], 0), (">/dev/full", [], 0), ("2>&-", [], 0),
    (">&-", ["--fault", "server/discover:drop"], 1),  # the drop closes a stdout nothing was written to
])
def test_stdio_that_cannot_be_read_or_written_ends_the_replay_without_a_traceback(
        redirect: str, flags: list[str], code: int) -> None:
    """A client may start the replay with stdin, stdout or stderr closed, or where writes fail."""
    replay = subprocess.run(["sh", "-c", f'exec "$@" {redirect}', "sh", *TAPES, "replay", str(CASSETTE), *flags],
                            input=_client_lines()[0], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            timeout=TIMEOUT)
    assert replay.returncode == code and b"Traceback" not in replay.stderr, replay.stderr.decode()


def test_a_client_that_closed_its_end_of_stderr_gets_the_exit_code_all_the_same() -> None:
    replay = subprocess.Popen([*TAPES, "replay", str(CASSETTE)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE)
    assert replay.stderr is not None
    replay.stderr.close()  # the recorded server's log and the summary have no reader
    out, _ = replay.communicate(b"".join(_client_lines()), timeout=TIMEOUT)
    assert replay.returncode == 0 and out.count(b"\n") > 10
