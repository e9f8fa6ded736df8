"""`tapes lint` as a command: JSON output, exit codes, a clean cassette, and one that cannot be read among others."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from tests.support.paths import ROOT, TAPES


def test_lint_command() -> None:
    run = subprocess.run([*TAPES, "lint", "cassettes/notes-stdio-2026-07-28.tape", "cassettes/example/weather.tape",
                          "--format", "json"], capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert run.returncode == 1
    report = json.loads(run.stdout)
    assert report["cassettes/notes-stdio-2026-07-28.tape"]["findings"] == []
    assert report["cassettes/example/weather.tape"]["findings"][0]["rule"] == "before-initialize"
    clean = subprocess.run([*TAPES, "lint", "cassettes/notes-stdio-2025-11-25.tape"], capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert clean.returncode == 0 and "no findings" in clean.stdout


def test_a_cassette_that_cannot_be_read_leaves_the_others_linted(tmp_path: Path) -> None:
    empty = tmp_path / "empty.tape"
    empty.write_bytes(b"")
    for output_format in ("text", "json"):
        run = subprocess.run([*TAPES, "lint", "cassettes/notes-stdio-2025-11-25.tape", str(empty), "cassettes/example/weather.tape",
                              "--format", output_format], capture_output=True, text=True, cwd=ROOT, timeout=60, check=False)
        assert run.returncode == 2  # the worst: an error outranks findings
        assert run.stderr == f"tapes: error: {empty}: is empty, not a cassette\n"
        if output_format == "json":
            assert list(json.loads(run.stdout)) == ["cassettes/notes-stdio-2025-11-25.tape", "cassettes/example/weather.tape"]
        else:
            assert run.stdout.startswith("cassettes/notes-stdio-2025-11-25.tape (2025-11-25): no findings\n"
                                         "cassettes/example/weather.tape (2025-06-18): 4 findings\n")


def test_when_no_cassette_can_be_read_no_empty_report_is_printed(tmp_path: Path) -> None:
    empty = tmp_path / "empty.tape"
    empty.write_bytes(b"")
    for output_format in ("text", "json", "github", "sarif"):
        run = subprocess.run([*TAPES, "lint", str(empty), "--format", output_format], capture_output=True, text=True,
                             cwd=ROOT, timeout=60, check=False)
        assert (run.returncode, run.stdout, run.stderr) == (2, "", f"tapes: error: {empty}: is empty, not a cassette\n")
