"""The HTTP recorder's cassette writer thread: a failure while framing what the proxy captured
stops the recording loudly (a sentence on stderr, a failed exit), never silently."""

from __future__ import annotations

from pathlib import Path

import pytest

from recorder.http import _CassetteSink
from tapes.cassette.redact import RedactionRules, Redactor
from tapes.cassette.store import Header, load

from tests.support.paths import CASSETTES


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


def _sink(output: Path) -> _CassetteSink:
    return _CassetteSink(str(output), Header(transport="http", server={"url": "http://127.0.0.1:9/mcp"}),
                         Redactor(RedactionRules()), None)


@pytest.mark.parametrize("how", ["deleted", "replaced"])
def test_a_cassette_deleted_or_replaced_mid_session_is_written_again_and_said(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], how: str) -> None:
    output = tmp_path / "http.tape"
    sink = _sink(output)
    sink.capture(("request", 0.0, 1, b"POST", b"/mcp", (), b'{"jsonrpc":"2.0","id":1,"method":"ping"}'))
    output.unlink()
    if how == "replaced":  # a new file at the path, as `git checkout` restores an older cassette
        output.write_bytes((CASSETTES / "everything-http-2025-11-25.tape").read_bytes())
    sink.capture(("request", 0.1, 2, b"POST", b"/mcp", (), b'{"jsonrpc":"2.0","id":2,"method":"ping"}'))
    sink.close()
    assert not sink.failed
    what = "deleted or moved away" if how == "deleted" else "replaced by another file"
    assert capsys.readouterr().err == (
        f"tapes: warning: {output} was {what} during the recording; the recording was written there again\n"
    )
    assert [frame.message["id"] for frame in load(output).frames if frame.message] == [1, 2]


def test_a_cassette_that_cannot_be_written_again_is_one_sentence_and_a_failed_exit(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = tmp_path / "cassettes"
    folder.mkdir()
    output = folder / "http.tape"
    sink = _sink(output)
    output.unlink()
    folder.rmdir()
    sink.close()
    assert sink.failed  # record_http exits 1
    assert capsys.readouterr().err == (f"tapes: error: {output} was deleted or moved away during the recording and "
                                       "cannot be written again (No such file or directory): the recording is lost\n")
