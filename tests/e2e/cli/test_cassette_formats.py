"""Recording and converting in the format the file name says (`.jsonl` JSON Lines), `-o -` to
stdout where stdout is free, and the stdio recorder's JSON-path redaction."""

from __future__ import annotations

import json
import shlex
import signal
import subprocess
import sys
from pathlib import Path

import anyio

from tapes.cassette.store import load, loads

from tests.support.flows import connect
from tests.support.http_peers import Recorder, notes_over_http
from tests.support.paths import CASSETTES, TAPES
from tests.support.processes import Process

EXAMPLE = CASSETTES / "example"
WEATHER = [sys.executable, str(EXAMPLE / "weather_server.py")]


def _record_stdio(tmp_path: Path, output: str, *flags: str) -> subprocess.CompletedProcess[bytes]:
    with open(EXAMPLE / "client.jsonl", "rb") as client:
        return subprocess.run([*TAPES, "record", "-o", output, *flags, "--", *WEATHER], stdin=client,
                              capture_output=True, timeout=60, cwd=tmp_path)


def test_a_stdio_recording_named_jsonl_is_json_lines_with_times_in_ms_and_redacted_paths(tmp_path: Path) -> None:
    done = _record_stdio(tmp_path, "weather.jsonl", "--redact-path", "params.arguments.city")
    assert done.returncode == 0, done.stderr
    lines = (tmp_path / "weather.jsonl").read_text(encoding="utf-8").splitlines()
    header, frames = json.loads(lines[0]), [json.loads(line) for line in lines[1:]]
    assert header["mcp-tapes"] == 1 and header["redaction"] == ["json:params.arguments.city"]
    assert all(round(frame["t"], 3) == frame["t"] for frame in frames)
    calls = [frame["msg"] for frame in frames if frame.get("msg", {}).get("method") == "tools/call"]
    assert [call["params"]["arguments"]["city"] for call in calls] == ["<redacted:1>", "<redacted:2>"]
    assert not any("Paris" in json.dumps(frame) for frame in frames if frame["dir"] == "c2s")  # no verbatim copy
    assert b'"text":"Paris: sunny' in done.stdout  # the client got the real session all the same


def test_redact_paths_from_tool_tapes_reach_a_stdio_recording(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text('[tool.tapes]\nredact-paths = ["params.arguments.city"]\n')
    assert _record_stdio(tmp_path, "weather.tape").returncode == 0
    assert load(tmp_path / "weather.tape").header.redaction == ("json:params.arguments.city",)


def test_a_stdio_recording_refuses_stdout_and_header_rules_in_one_sentence(tmp_path: Path) -> None:
    for flags, expected in (
        (["-o", "-"], "tapes: error: -o - cannot be used with a stdio recording: stdout carries the protocol to "
                      "the client, so the cassette needs a file\n"),
        (["-o", "a.tape", "--redact-header", "X-Tenant"],
         "tapes: error: --redact-header only applies to an HTTP recording (stdio has no headers; --redact-path "
         "applies to both)\n"),
    ):
        done = subprocess.run([*TAPES, "record", *flags, "--", *WEATHER], capture_output=True, text=True,
                              timeout=60, cwd=tmp_path)
        assert (done.returncode, done.stdout, done.stderr) == (2, "", expected)
    assert list(tmp_path.iterdir()) == []


def test_an_http_recording_to_stdout_streams_json_lines(tmp_path: Path) -> None:
    output = tmp_path / "stdout"
    with notes_over_http() as upstream:
        command = shlex.join([*TAPES, "record", "-o", "-", "--upstream", upstream, "--listen", "127.0.0.1:0"])
        recorder = Process(["sh", "-c", f"exec {command} > {shlex.quote(str(output))}"])
        url = recorder.wait_for(r"tapes: recording (http://\S+)")[1]

        async def list_tools() -> list[str]:
            async with connect(url) as client:
                return [tool.name for tool in (await client.list_tools()).tools]

        assert "add_note" in anyio.run(list_tools)
        assert recorder.stop(signal.SIGINT) == 0, recorder.rest_of_stderr()
    content = output.read_bytes()
    assert content.startswith(b'{"mcp-tapes":1,"transport":"http"')
    cassette = loads(content, "stdout")
    assert cassette.warnings == [] and any(frame.message for frame in cassette.frames)
    dates = [value for frame in cassette.frames if frame.info and "status" in frame.info
             for name, value in frame.info["headers"] if name.lower() == "date"]
    assert dates and set(dates) == {"<volatile>"}


def test_export_and_import_follow_the_name_and_write_to_stdout(tmp_path: Path) -> None:
    source = CASSETTES / "notes-stdio-2025-11-25.tape"
    twin = CASSETTES / "notes-stdio-2025-11-25.jsonl"
    exported = subprocess.run([*TAPES, "export", "--format", "jsonl", "-o", "-", str(source)], capture_output=True,
                              timeout=60)
    assert (exported.returncode, exported.stderr) == (0, b"")
    assert exported.stdout == twin.read_bytes()  # what a git textconv shows
    assert subprocess.run([*TAPES, "export", str(source), "-o", str(tmp_path / "x.tape")], timeout=60).returncode == 0
    assert (tmp_path / "x.tape").read_bytes() == source.read_bytes()
    assert subprocess.run([*TAPES, "import", str(twin), "-o", str(tmp_path / "y.jsonl")], timeout=60).returncode == 0
    assert (tmp_path / "y.jsonl").read_bytes() == twin.read_bytes()
    for command in ("export", "show"):  # a reader gone before anything is written: no noise, and exit 1
        argv = [*TAPES, command, str(source), *(["-o", "-"] if command == "export" else [])]
        gone = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        assert gone.stdout is not None and gone.stderr is not None
        gone.stdout.close()  # the only reader of the pipe
        assert (gone.wait(timeout=60), gone.stderr.read()) == (1, b""), command
        gone.stderr.close()
    piped = subprocess.run(f"{shlex.join([*TAPES, 'export', str(source), '-o', '-'])} | head -c 10", shell=True,
                           capture_output=True, timeout=60)
    assert piped.stdout == twin.read_bytes()[:10]


def test_an_http_recording_named_jsonl_is_json_lines_with_its_labels(tmp_path: Path) -> None:
    cassette = tmp_path / "notes.jsonl"
    with notes_over_http() as upstream:
        recorder = Recorder(cassette, upstream)

        async def list_tools() -> list[str]:
            async with connect(recorder.url) as client:
                return [tool.name for tool in (await client.list_tools()).tools]

        assert "add_note" in anyio.run(list_tools)
        recorded = recorder.stop()
    header = json.loads(cassette.read_text(encoding="utf-8").splitlines()[0])
    assert header["mcp-tapes"] == 1 and header["labels"]["protocol_version"] == recorded.protocol_version
    assert all(round(frame.t, 3) == frame.t for frame in recorded.frames)


def test_view_writes_its_page_to_stdout_with_o_dash(tmp_path: Path) -> None:
    done = subprocess.run([*TAPES, "view", str(CASSETTES / "notes-stdio-2025-11-25.tape"), "-o", "-"],
                          capture_output=True, timeout=60, cwd=tmp_path)
    assert (done.returncode, done.stderr) == (0, b"")
    assert done.stdout.startswith(b"<!doctype html>") and list(tmp_path.iterdir()) == []


def test_redact_writes_json_lines_to_stdout_and_its_listing_to_stderr(tmp_path: Path) -> None:
    done = subprocess.run([*TAPES, "redact", str(CASSETTES / "notes-stdio-2025-11-25.tape"), "-o", "-",
                           "--redact-path", "params.arguments.text"], capture_output=True, timeout=60, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    redacted = loads(done.stdout, "stdout")
    assert redacted.header.redaction[-1] == "json:params.arguments.text"
    assert done.stderr.decode().startswith("tapes redact: wrote stdout\n  json params.arguments.text: ")
    assert list(tmp_path.iterdir()) == []
