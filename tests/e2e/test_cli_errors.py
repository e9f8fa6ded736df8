"""User mistakes on the command line: one sentence on stderr, exit 2, no traceback."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_replaying_an_http_cassette_on_stdio_says_to_add_http() -> None:
    run = subprocess.run([sys.executable, "-m", "tapes", "replay", str(ROOT / "cassettes" / "everything-http-2025-11-25.tape")],
                         input=b"", capture_output=True, timeout=60)
    assert run.returncode == 2 and run.stdout == b""
    assert b"was recorded over HTTP: replay it with --http" in run.stderr and b"Traceback" not in run.stderr
