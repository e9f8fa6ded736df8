"""A client that leaves `tapes replay` in the middle: a Ctrl-C (SIGINT) or a closed terminal
(SIGHUP) ends it as a SIGTERM does, between two steps, with the summary and the report."""

from __future__ import annotations

import json
import signal
import subprocess
from pathlib import Path

import pytest

from tapes.cassette.frames import Kind
from tapes.cassette.store import load

from tests.support.paths import CASSETTES, TAPES

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
