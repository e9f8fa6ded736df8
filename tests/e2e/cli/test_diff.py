"""`tapes diff` as a command: its formats, exit codes and one-sentence user errors."""

from __future__ import annotations

import json
import subprocess
from typing import Any

from tests.support.paths import ROOT, TAPES


def run_tapes(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*TAPES, *args], capture_output=True, text=True, cwd=ROOT, timeout=60)


def test_diff_command_formats_and_exit_codes(tmp_path: Any) -> None:
    old, new = "cassettes/notes-stdio-2025-11-25.tape", "cassettes/notes-stdio-2026-07-28.tape"
    text = run_tapes("diff", old, new)
    assert text.returncode == 1
    assert "tools/call ask_model: same behaviour, expressed as in 2026-07-28" in text.stdout

    as_json = run_tapes("diff", old, new, "--format", "json")
    report = json.loads(as_json.stdout)
    assert report["same"] is False and report["counts"] == {"changed": 1, "compatible": 4}
    assert {e["subject"] for e in report["equivalences"]} >= {"tools/call ask_model", "tools/call list_client_roots"}

    as_markdown = run_tapes("diff", old, new, "--format", "markdown")
    assert as_markdown.stdout.startswith("### tapes diff") and "| ~ | server tools/listChanged | compatible |" in as_markdown.stdout

    assert run_tapes("diff", old, new, "--fail-on", "breaking").returncode == 0
    assert run_tapes("diff", old, old).returncode == 0

    missing = run_tapes("diff", old, str(tmp_path / "nothere.tape"))
    assert missing.returncode == 2 and missing.stderr.strip().endswith("nothere.tape: no such cassette file")
    bad_rule = run_tapes("diff", old, old, "--noise", "nope")
    assert bad_rule.returncode == 2 and "unknown noise rule 'nope'" in bad_rule.stderr
