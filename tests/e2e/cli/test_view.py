"""`tapes view` as a command: it writes the page, and reports a missing cassette in one line."""

from __future__ import annotations

import subprocess
from pathlib import Path

from tests.support.paths import CASSETTES, TAPES
from tests.support.view_page import model_of

EVERYTHING_STDIO = CASSETTES / "everything-stdio-2025-11-25.tape"


def test_the_command_writes_the_page(tmp_path: Path) -> None:
    done = subprocess.run([*TAPES, "view", str(EVERYTHING_STDIO)], cwd=tmp_path, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stderr == "tapes view: wrote everything-stdio-2025-11-25.html\n"
    assert len(model_of((tmp_path / "everything-stdio-2025-11-25.html").read_text())["sides"][0]["rows"]) == 43

    out = tmp_path / "page.html"
    assert subprocess.run([*TAPES, "view", str(EVERYTHING_STDIO), "-o", str(out)], capture_output=True).returncode == 0
    assert out.read_text().startswith("<!doctype html>")


def test_the_command_reports_a_missing_cassette_in_one_line(tmp_path: Path) -> None:
    done = subprocess.run([*TAPES, "view", "nothere.tape"], cwd=tmp_path, capture_output=True, text=True)
    assert (done.returncode, done.stderr) == (2, "tapes: error: nothere.tape: no such cassette file\n")
    assert not list(tmp_path.iterdir())


def test_a_cassette_damaged_past_its_start_leaves_the_page_there_was(tmp_path: Path) -> None:
    damaged = tmp_path / "damaged.tape"
    data = bytearray(EVERYTHING_STDIO.read_bytes())
    data[-40:] = b"\xc1" * 40  # a byte msgpack never uses, in the last frames
    damaged.write_bytes(bytes(data))
    page = tmp_path / "page.html"
    page.write_text("the page from before")
    done = subprocess.run([*TAPES, "view", str(damaged), "-o", str(page)], capture_output=True, text=True)
    assert done.returncode == 2 and "is not valid msgpack" in done.stderr and "Traceback" not in done.stderr
    assert page.read_text() == "the page from before" and sorted(p.name for p in tmp_path.iterdir()) == ["damaged.tape", "page.html"]
