"""`tapes show` as a command: the timeline within the asked width, and a missing cassette in one line."""

from __future__ import annotations

import subprocess
from pathlib import Path

from tapes.cassette.store import Cassette, save

from tests.support.paths import TAPES
from tests.support.samples import TIMELINE_FRAMES, TIMELINE_HEADER


def test_cli_show(tmp_path: Path) -> None:
    save(Cassette(TIMELINE_HEADER, TIMELINE_FRAMES), tmp_path / "a.tape")
    result = subprocess.run(
        [*TAPES, "show", str(tmp_path / "a.tape"), "--width", "100"], capture_output=True, text=True, timeout=60
    )
    assert (result.returncode, result.stderr) == (0, "")
    assert "protocol     2025-06-18" in result.stdout
    assert "request tools/call #4" in result.stdout
    assert "error #\"x7\" -32601" in result.stdout
    assert all(len(line) <= 100 for line in result.stdout.splitlines())


def test_cli_show_of_a_missing_cassette(tmp_path: Path) -> None:
    result = subprocess.run([*TAPES, "show", str(tmp_path / "none.tape")], capture_output=True, text=True, timeout=60)
    assert result.returncode == 2
    assert result.stderr == f"tapes: error: {tmp_path / 'none.tape'}: no such cassette file\n"


def test_a_width_below_one_or_past_any_screen_is_refused_not_laid_out(tmp_path: Path) -> None:
    save(Cassette(TIMELINE_HEADER, TIMELINE_FRAMES), tmp_path / "a.tape")
    for width in ("0", "-5", "10001", "999999999"):
        result = subprocess.run([*TAPES, "show", str(tmp_path / "a.tape"), "--width", width], capture_output=True,
                                text=True, timeout=60)
        assert result.returncode == 2 and result.stdout == ""
        assert f"Invalid value for '--width': {width} is not in the range 1<=x<=10000" in result.stderr
