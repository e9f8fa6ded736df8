"""`tapes replay` reads a cassette as the replay goes: it answers before the end of a big cassette
is read, and a damaged frame late in it is reported, in the sentence `load` gives, when the replay
reaches it (here, while the client is idle)."""

from __future__ import annotations

import json
import subprocess
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
