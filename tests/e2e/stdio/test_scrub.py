"""Before-record hooks: every frame passes through the user's function before it is written."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tapes.cassette.store import load
from tapes.cassette.frames import Kind

from tests.support.paths import CASSETTES, TAPES

WEATHER = [sys.executable, str(CASSETTES / "example" / "weather_server.py")]
CLIENT = (CASSETTES / "example" / "client.jsonl").read_bytes()
HOOKS = '''
from dataclasses import replace
from tapes.cassette.frames import Kind
from tapes.cassette.redact import Redactor, RedactionRules

redactor = Redactor(RedactionRules.default())  # stable placeholders within the cassette

def mask_cities(frame):
    if frame.kind is Kind.STDERR:
        return None  # drop the server's log lines
    if frame.message is None or "Paris" not in frame.payload.decode():
        return frame
    text = frame.payload.decode().replace("Paris", redactor.placeholder("Paris"))
    import json
    return replace(frame, message=json.loads(text), data=None)
'''


def record(tmp_path: Path, *flags: str) -> subprocess.CompletedProcess[bytes]:
    (tmp_path / "hooks.py").write_text(HOOKS)
    return subprocess.run([*TAPES, "record", "-o", "scrubbed.tape", *flags, "--", *WEATHER], input=CLIENT,
                          capture_output=True, cwd=tmp_path, timeout=60)


def test_the_hook_changes_and_drops_frames_before_they_are_written(tmp_path: Path) -> None:
    done = record(tmp_path, "--before-record", "hooks:mask_cities")
    assert done.returncode == 0 and b"Paris" in done.stdout  # the client still got the real bytes
    content = (tmp_path / "scrubbed.tape").read_bytes()
    assert b"Paris" not in content
    cassette = load(tmp_path / "scrubbed.tape")
    assert not [f for f in cassette.frames if f.kind is Kind.STDERR]
    masked = [f.message for f in cassette.frames if f.message is not None and "<redacted:1>" in str(f.message)]
    assert len(masked) == 2  # the request and its response: the same placeholder for the same secret
    assert cassette.header.redaction == ("hook:hooks:mask_cities",)


def test_the_hook_can_come_from_tool_tapes(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text('[tool.tapes]\nbefore-record = "hooks:mask_cities"\n')
    assert record(tmp_path).returncode == 0
    assert b"Paris" not in (tmp_path / "scrubbed.tape").read_bytes()


@pytest.mark.parametrize(("spec", "says"), [("hooks", "is not module:function"),
                                            ("nowhere:f", "cannot be imported"), ("hooks:absent", "has no 'absent'")])
def test_a_bad_hook_is_one_sentence(tmp_path: Path, spec: str, says: str) -> None:
    done = record(tmp_path, "--before-record", spec)
    assert done.returncode == 2 and done.stdout == b""
    [line] = done.stderr.decode().splitlines()
    assert line.startswith("tapes: error: before-record hook") and says in line
    assert not (tmp_path / "scrubbed.tape").exists()


BROKEN_HOOKS = '''
from dataclasses import replace

def raises(frame):
    return {}["missing"] if frame.seq == 3 else frame

def not_a_frame(frame):
    return "scrubbed"

def breaks_the_frame(frame):
    return replace(frame, t=float("nan"))
'''


@pytest.mark.parametrize(("hook", "says"), [
    ("raises", "the before-record hook failed on frame 3 (KeyError('missing'))"),
    ("not_a_frame", "the before-record hook returned str for frame 1, not a Frame or None"),
    ("breaks_the_frame", "the before-record hook made frame 1 invalid: its time is nan, not a finite number"),
])
def test_a_hook_that_fails_is_one_sentence_and_loses_nothing(tmp_path: Path, hook: str, says: str) -> None:
    """Recording keeps the raw capture; `tapes redact` leaves its output unwritten (nor a frame the
    hook broke, which would break every reader of the cassette)."""
    (tmp_path / "broken.py").write_text(BROKEN_HOOKS)
    done = record(tmp_path, "--before-record", f"broken:{hook}")
    assert done.returncode == 1 and b"Traceback" not in done.stderr
    assert f"tapes: error: {says}; scrubbed.tape keeps the raw capture, not scrubbed" in done.stderr.decode()
    assert len(load(tmp_path / "scrubbed.tape").frames) == len(load(CASSETTES / "example" / "weather.tape").frames)

    redacted = subprocess.run([*TAPES, "redact", str(CASSETTES / "example" / "weather.tape"), "-o", "out.tape",
                               "--before-record", f"broken:{hook}"], capture_output=True, cwd=tmp_path, timeout=60)
    assert redacted.returncode == 2 and redacted.stderr.decode() == f"tapes: error: {says}\n"
    assert not (tmp_path / "out.tape").exists()
