"""`tapes lint` as a command: JSON output, exit codes, and a clean cassette."""

from __future__ import annotations

import json
import subprocess

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
