"""The HTTP recorder's cassette writer thread: a failure while framing what the proxy captured
stops the recording loudly (a sentence on stderr, a failed exit), never silently."""

from __future__ import annotations

from pathlib import Path

import pytest

from recorder.http import _CassetteSink
from tapes.cassette.redact import RedactionRules, Redactor
from tapes.cassette.store import Header, load


def test_a_framing_failure_stops_the_recording_and_says_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    output = tmp_path / "http.tape"
    sink = _CassetteSink(str(output), Header(transport="http", server={"url": "http://127.0.0.1:9/mcp"}),
                         Redactor(RedactionRules()), None)

    def broken(*args: object) -> list[object]:
        raise KeyError("a framer bug")

    monkeypatch.setattr(sink._framer, "request", broken)
    sink.capture(("request", 0.0, 1, b"POST", b"/mcp", (), b"{}"))
    sink.capture(("request", 0.1, 2, b"POST", b"/mcp", (), b"{}"))
    sink.close()
    assert sink.failed
    said = capsys.readouterr().err.splitlines()
    assert len(said) == 1 and said[0].startswith(f"tapes: error: {output}: ")
    assert "framing exchange 1 failed (KeyError: 'a framer bug')" in said[0]
    assert load(output).frames == []  # the header is there; it loads
