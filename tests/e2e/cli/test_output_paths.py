"""Where a command writes its output: into /dev/stdout (or a device) as into a file, never renamed
over; a folder that is not there is one sentence naming the file asked for, no traceback."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tapes.cassette.store import load, loads

from tests.support.paths import CASSETTES, TAPES

STDIO_CASSETTE = CASSETTES / "everything-stdio-2025-11-25.tape"
HTTP_CASSETTE = CASSETTES / "everything-http-2025-11-25.tape"


def tapes(*args: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([*TAPES, *args], stdin=subprocess.DEVNULL, capture_output=True, timeout=60)


def test_redact_to_dev_stdout_writes_the_cassette_down_the_pipe_and_what_it_did_to_stderr() -> None:
    run = tapes("redact", str(STDIO_CASSETTE), "-o", "/dev/stdout")
    assert run.returncode == 0, run.stderr
    assert loads(run.stdout).frames == load(STDIO_CASSETTE).frames
    assert run.stderr == b"tapes redact: wrote /dev/stdout (nothing to replace)\n"


@pytest.mark.parametrize("command", [["redact"], ["export"], ["export", "--format", "har"], ["import"], ["view"]])
def test_an_output_in_a_missing_folder_is_one_sentence(command: list[str], tmp_path: Path) -> None:
    source = HTTP_CASSETTE if "har" in command else STDIO_CASSETTE
    if command == ["import"]:
        source = STDIO_CASSETTE.with_suffix(".jsonl")
    output = tmp_path / "nope" / "out.tape"
    run = tapes(*command, str(source), "-o", str(output))
    assert run.returncode == 2 and run.stdout == b""
    assert run.stderr.decode() == f"tapes: error: {output}: cannot be written (No such file or directory)\n"


@pytest.mark.parametrize("through", ["the same name", "a symlink"])
def test_view_into_the_cassette_itself_is_refused_and_leaves_it_whole(through: str, tmp_path: Path) -> None:
    cassette = tmp_path / "a.tape"
    cassette.write_bytes(STDIO_CASSETTE.read_bytes())
    output = cassette
    if through == "a symlink":
        output = tmp_path / "page.html"
        output.symlink_to(cassette)
    run = tapes("view", str(cassette), "-o", str(output))
    assert run.returncode == 2
    assert run.stderr.decode() == f"tapes: error: -o {output} is the cassette itself: the page needs a file of its own\n"
    assert cassette.read_bytes() == STDIO_CASSETTE.read_bytes()


@pytest.mark.parametrize("command", [["lint"], ["show"], ["export", "-o", "-"], ["diff", str(STDIO_CASSETTE)]])
def test_a_stdout_that_fails_is_one_sentence(command: list[str]) -> None:
    with open("/dev/full", "wb") as full:
        run = subprocess.run([*TAPES, command[0], str(STDIO_CASSETTE), *command[1:]], stdin=subprocess.DEVNULL,
                             stdout=full, stderr=subprocess.PIPE, timeout=60)
    assert run.returncode == 2
    assert run.stderr == b"tapes: error: stdout: cannot be written (No space left on device)\n"


@pytest.mark.parametrize("command", [["lint"], ["export", "-o", "-"]])
def test_a_closed_stdout_is_written_to_nowhere(command: list[str]) -> None:
    run = subprocess.run(["sh", "-c", 'exec "$@" >&-', "sh", *TAPES, command[0], str(STDIO_CASSETTE), *command[1:]],
                         stdin=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=60)
    assert run.returncode == 0 and run.stderr == b""
