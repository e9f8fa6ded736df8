"""`tapes replay` reads a cassette as the replay goes: it answers before the end of a big cassette
is read, and a damaged frame late in it is reported, in the sentence `load` gives, when the replay
reaches it (here, while the client is idle)."""

from __future__ import annotations

import json
import signal
import subprocess
import time
from pathlib import Path

import msgpack
import pytest

from tapes.cassette.store import Cassette, CassetteError, load, save
from tapes.replay.engine import INDEX_STEP

from tests.support.messages import req, res
from tests.support.paths import TAPES
from tests.support.recordings import stdio_cassette

TIMEOUT = 60


def _calls(count: int) -> Cassette:
    exchange = []
    for n in range(count):
        exchange += [("c", req(n, "tools/call", {"name": "t", "arguments": {"n": n}})), ("s", res(n, n))]
    return stdio_cassette(*exchange)


def test_the_first_answer_comes_before_a_damaged_frame_late_in_the_cassette(tmp_path: Path) -> None:
    cassette = _calls(2 * INDEX_STEP)
    path = tmp_path / "big.tape"
    save(cassette, path)
    with path.open("ab") as file:
        file.write(msgpack.packb([len(cassette.frames) + 1, 0.5, 0, 0, 99]))  # kind 99 is unknown
    with pytest.raises(CassetteError) as whole:
        load(path)

    replay = subprocess.Popen([*TAPES, "replay", str(path)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE)
    assert replay.stdin is not None and replay.stdout is not None
    replay.stdin.write(json.dumps(req("live", "tools/call", {"name": "t", "arguments": {"n": 0}})).encode() + b"\n")
    replay.stdin.flush()
    assert json.loads(replay.stdout.readline()) == res("live", 0)
    # the client says no more and keeps stdin open: the replay reads on meanwhile and meets the damage
    assert replay.wait(TIMEOUT) == 2
    assert replay.stderr is not None and replay.stderr.read().decode() == f"tapes: error: {whole.value}\n"
    replay.stdin.close()


def test_a_truncated_big_cassette_warns_once_its_end_is_read(tmp_path: Path) -> None:
    path = tmp_path / "cut.tape"
    save(_calls(INDEX_STEP), path)
    path.write_bytes(path.read_bytes()[:-3])
    warning = load(path).warnings[0]
    done = subprocess.run([*TAPES, "replay", str(path), "--allow-unmatched"], input=b"", capture_output=True,
                          timeout=TIMEOUT)
    assert done.returncode == 0
    assert done.stderr.decode().splitlines()[0] == f"tapes replay: {warning}"


BIG = 40 * INDEX_STEP  # requests: reading them all takes the replay seconds


@pytest.fixture(scope="module")
def big_cassette(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("big") / "big.tape"
    save(_calls(BIG), path)
    return path


def _answered_once(path: Path, *flags: str) -> subprocess.Popen[bytes]:
    """`tapes replay` of `path` once it has answered the first recorded request: it reads the
    rest of the cassette from then on, while the client is idle."""
    replay = subprocess.Popen([*TAPES, "replay", str(path), *flags], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert replay.stdin is not None and replay.stdout is not None
    replay.stdin.write(json.dumps(req("live", "tools/call", {"name": "t", "arguments": {"n": 0}})).encode() + b"\n")
    replay.stdin.flush()
    assert json.loads(replay.stdout.readline()) == res("live", 0)
    return replay


def test_sigterm_while_the_rest_is_read_still_reports_all_of_it(big_cassette: Path, tmp_path: Path) -> None:
    """A client's SIGTERM that lands while the replay reads the rest of a big cassette in idle time
    ends the replay between two steps of that reading: the report then counts every recorded
    request the client did not send, not only those read before the signal."""
    count, report = BIG, tmp_path / "report.json"
    replay = _answered_once(big_cassette, "--report", str(report))
    replay.send_signal(signal.SIGTERM)
    assert replay.wait(TIMEOUT) == 128 + signal.SIGTERM
    assert len(json.loads(report.read_text())["unused"]) == count - 1
    assert replay.stderr is not None and f"{count - 1} unused" in replay.stderr.read().decode()
    replay.stdin.close()


def test_a_second_sigterm_stops_the_replay_at_once(big_cassette: Path, tmp_path: Path) -> None:
    """Told twice, the replay does not finish reading the cassette for its report: it stops."""
    report = tmp_path / "report.json"
    replay = _answered_once(big_cassette, "--report", str(report))
    replay.send_signal(signal.SIGTERM)
    time.sleep(0.3)  # the first is handled: the report waits for the rest of 160 000 requests
    replay.send_signal(signal.SIGTERM)
    assert replay.wait(TIMEOUT) == -signal.SIGTERM
    assert not report.exists()
    assert replay.stdin is not None
    replay.stdin.close()


def test_a_replay_killed_while_it_reads_the_rest_leaves_an_incomplete_report(big_cassette: Path, tmp_path: Path) -> None:
    """SDK clients kill a server a few seconds after closing its stdin. The report is written as
    soon as the client is done, marked incomplete (a miss has read the whole cassette already, so
    only the unused requests are unknown), and replaced by the whole one once the rest is read:
    a replay killed meanwhile leaves one that says what it knows."""
    report = tmp_path / "report.json"
    replay = subprocess.Popen([*TAPES, "replay", str(big_cassette), "--report", str(report)], stdin=subprocess.PIPE,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    assert replay.stdin is not None
    replay.stdin.write(json.dumps(req(1, "tools/call", {"name": "t", "arguments": {"n": 0}})).encode() + b"\n")
    replay.stdin.close()
    deadline = time.monotonic() + TIMEOUT
    while not report.exists() and time.monotonic() < deadline:
        time.sleep(0.01)
    replay.kill()
    replay.wait(TIMEOUT)
    written = json.loads(report.read_text())
    assert (written["complete"], written["unmatched"], written["played"]) == (False, [], 1)  # the answer went out


KILLED_INNER = '''
import json, subprocess, time
import pytest

@pytest.mark.tape("cassettes/big.tape", fail_on_unused=True)
def test_killed_while_the_rest_is_read(tape_server, tape):
    replay = subprocess.Popen(tape_server, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "t", "arguments": {"n": 0}}}
    replay.stdin.write(json.dumps(call).encode() + b"\\n")
    replay.stdin.flush()
    assert json.loads(replay.stdout.readline())["result"] == 0
    replay.stdin.close()
    while not tape.report_path.exists():
        time.sleep(0.01)
    replay.kill()  # as an SDK client does when the server takes long to exit
    replay.wait()
'''


def test_the_plugin_says_unused_requests_are_unknown_when_the_replay_was_killed_reading(
    big_cassette: Path, pytester: pytest.Pytester
) -> None:
    (pytester.path / "cassettes").mkdir()
    (pytester.path / "cassettes" / "big.tape").write_bytes(big_cassette.read_bytes())
    pytester.makepyfile(test_killed=KILLED_INNER)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--tape-record-mode=none")
    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines(["*replay of *big.tape did not go as recorded:*",
                                 "*stopped before it had read the whole cassette, so which recorded requests went "
                                 "unused is not known*"])
