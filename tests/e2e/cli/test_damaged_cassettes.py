"""Every command on damaged cassettes: a cassette that cannot be loaded is one sentence on
stderr naming where (exit 2, no traceback); one that still loads (a truncated last frame, a
bit flip that left valid content) is handled as the command documents."""

from __future__ import annotations

import io
import json
import random
import subprocess
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import msgpack
import pytest

from tapes.cassette.store import CassetteError, load, save

from tests.support.paths import ROOT, TAPES

SOURCE = ROOT / "cassettes" / "everything-stdio-2025-11-25.tape"
TIMEOUT = 60


def _objects() -> list[object]:
    return list(msgpack.Unpacker(io.BytesIO(SOURCE.read_bytes()), raw=False))


def _repacked(change: Callable[[list[list[object]]], None]) -> bytes:
    """The source cassette with `change` applied to its frame arrays (object 0 is the header)."""
    header, *frames = _objects()
    change(frames)  # type: ignore[arg-type]
    return b"".join(msgpack.packb(value) for value in [header, *frames])


def _first(frames: list[list[object]], kind: int) -> list[object]:
    return next(frame for frame in frames if frame[4] == kind)


def _set(index: int, value: object, kind: int = 0) -> Callable[[list[list[object]]], None]:
    def change(frames: list[list[object]]) -> None:
        frame = _first(frames, kind)
        while len(frame) <= index:
            frame.append(None)
        frame[index] = value

    return change


def _bit_flipped(seed: int) -> bytes:
    content = bytearray(SOURCE.read_bytes())
    chooser = random.Random(seed)
    position = chooser.randrange(200, len(content))  # past the header
    content[position] ^= 1 << chooser.randrange(8)
    return bytes(content)


def _jsonl_with(change: Callable[[dict[str, object]], None], tmp_path: Path) -> bytes:
    save(load(SOURCE), tmp_path / "twin.jsonl", jsonl=True)
    lines = (tmp_path / "twin.jsonl").read_bytes().splitlines(keepends=True)
    record = json.loads(lines[3])
    change(record)
    lines[3] = json.dumps(record).encode() + b"\n"
    return b"".join(lines)


MESSAGE, EXIT = 0, 7
DAMAGE: dict[str, Callable[[Path], bytes]] = {
    "truncated": lambda tmp: SOURCE.read_bytes()[:-7],
    **{f"bit flip {seed}": (lambda tmp, seed=seed: _bit_flipped(seed)) for seed in range(6)},
    "seq a string": lambda tmp: _repacked(_set(0, "5")),
    "channel a float": lambda tmp: _repacked(_set(3, 1.5)),
    "exit info a list": lambda tmp: _repacked(_set(7, [1], kind=EXIT)),
    "NaN time": lambda tmp: _repacked(_set(1, float("nan"))),
    "message not JSON-RPC": lambda tmp: _repacked(_set(5, {"hello": "world"})),
    "message id not a scalar": lambda tmp: _repacked(_set(5, {"jsonrpc": "2.0", "id": [], "result": {}})),
    "JSON Lines NaN time": lambda tmp: _jsonl_with(lambda record: record.update(t=float("nan")), tmp),
    "JSON Lines message not JSON-RPC": lambda tmp: _jsonl_with(lambda record: record.update(msg=[1, 2]), tmp),
}

# What each command may exit with on a cassette that loads (its documented codes).
COMMANDS: dict[str, tuple[Callable[[Path, Path], list[str]], set[int]]] = {
    "show": (lambda cassette, tmp: ["show", str(cassette), "--width", "120"], {0}),
    "view": (lambda cassette, tmp: ["view", str(cassette), "-o", str(tmp / "page.html")], {0}),
    "lint": (lambda cassette, tmp: ["lint", str(cassette)], {0, 1}),
    "diff": (lambda cassette, tmp: ["diff", str(SOURCE), str(cassette)], {0, 1}),
    "replay": (lambda cassette, tmp: ["replay", str(cassette)], {0, 1}),
    "export": (lambda cassette, tmp: ["export", str(cassette), "-o", str(tmp / "out.jsonl")], {0}),
}


@pytest.mark.parametrize("damage", list(DAMAGE))
def test_every_command_on_a_damaged_cassette(damage: str, tmp_path: Path) -> None:
    suffix = ".jsonl" if damage.startswith("JSON Lines") else ".tape"
    cassette = tmp_path / f"damaged{suffix}"
    cassette.write_bytes(DAMAGE[damage](tmp_path))
    try:
        loaded = load(cassette)
        error = None
    except CassetteError as refused:
        loaded, error = None, str(refused)

    def run(name: str) -> tuple[str, subprocess.CompletedProcess[str]]:
        argv, _ = COMMANDS[name]
        folder = tmp_path / name
        folder.mkdir()
        result = subprocess.run(
            [*TAPES, *argv(cassette, folder)], stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=TIMEOUT
        )
        return name, result

    with ThreadPoolExecutor(2) as pool:
        results = dict(pool.map(run, COMMANDS))
    for name, result in results.items():
        assert "Traceback" not in result.stderr, f"{name}: {result.stderr}"
        if error is not None:
            assert result.returncode == 2, f"{name}: {result.returncode} {result.stderr}"
            assert result.stderr == f"tapes: error: {error}\n", name
            assert "frame " in error or "byte " in error  # it says where
        else:
            assert result.returncode in COMMANDS[name][1], f"{name}: {result.returncode} {result.stderr}"
    if damage in ("seq a string", "channel a float", "exit info a list", "NaN time", "message not JSON-RPC"):
        assert error is not None and "is not a valid frame" in error
    if damage == "truncated":
        assert loaded is not None and loaded.warnings
        # every command says so on stderr, `show` too when its timeline goes to a file or a pipe
        assert all("truncated" in result.stderr for result in results.values()), {n: r.stderr for n, r in results.items()}
        assert "truncated" in results["replay"].stderr


def test_a_request_whose_answer_was_cut_off_gets_an_error_not_a_wait(tmp_path: Path) -> None:
    """The file ends inside the frame after the recorded initialize: its answer is gone, and a
    client that waited for it would wait for ever."""
    cassette = tmp_path / "cut.tape"
    header, *frames = _objects()
    initialize = next(i for i, frame in enumerate(frames) if isinstance(frame[5], dict) and frame[5].get("method") == "initialize")
    kept = b"".join(msgpack.packb(value) for value in [header, *frames[: initialize + 1]])
    cassette.write_bytes(kept + msgpack.packb(frames[initialize + 1])[:9])
    live = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "c", "version": "1"}}}
    result = subprocess.run([*TAPES, "replay", str(cassette)], input=json.dumps(live) + "\n", capture_output=True,
                            text=True, timeout=TIMEOUT)
    answer = json.loads(result.stdout)
    assert answer["id"] == 1 and "the recording stops before the answer to initialize" in answer["error"]["message"]
    assert result.returncode == 1  # a miss
    assert "truncated at byte" in result.stderr and "unmatched initialize id 1" in result.stderr
