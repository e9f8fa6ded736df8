"""Hostile input never stops a replay: a client message of any shape gets its JSON-RPC error (over
HTTP a 400) and the replay goes on answering; text from the wire, a cassette or its path is shown
as it is, never read as Rich markup, by replay, show, lint, diff and view."""

from __future__ import annotations

import dataclasses
import json
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest

from replayer.http import replay_server
from tapes.cassette.frames import Direction, Frame, Kind
from tapes.cassette.store import load, save
from tapes.wire.jsonrpc import INVALID_REQUEST, PARSE_ERROR

from tests.support.paths import NOTES_SERVER, ROOT, TAPES
from tests.support.processes import Process
from tests.support.stdio_sessions import Session
from tests.support.view_page import model_of

STDIO_CASSETTE = ROOT / "cassettes" / "everything-stdio-2025-11-25.tape"
HTTP_CASSETTE = ROOT / "cassettes" / "everything-http-2025-11-25.tape"
ID_ARRAY = b'{"jsonrpc":"2.0","id":[],"result":{}}'
MARKUP_METHODS = ["[/foo]", "[bold]x", "[link=http://e]x[/link]"]


def tapes(*args: str, stdin: bytes = b"") -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([sys.executable, "-m", "tapes", *args], input=stdin, capture_output=True, timeout=60)


def client_messages(path: Path) -> list[bytes]:
    return [frame.payload for frame in load(path).frames if frame.from_client and frame.kind is Kind.MESSAGE]


def error_of(line: bytes) -> dict[str, Any]:
    return json.loads(line)["error"]


# --- any shape of message -----------------------------------------------------------------------


def test_the_stdio_replayer_answers_a_hostile_line_and_goes_on() -> None:
    first, second = client_messages(STDIO_CASSETTE)[:2]  # server/discover (answered with an error), initialize
    hostile = [ID_ARRAY, b"[" * 100_000 + b"]" * 100_000, b'{"jsonrpc":"2.0","id":7,"method":"tools/call","params":"x"}',
               b'[{"jsonrpc":"2.0","id":true,"method":"ping"}]', b"[]"]
    run = tapes("replay", str(STDIO_CASSETTE), stdin=b"\n".join([first, *hostile, second]) + b"\n")
    assert b"Traceback" not in run.stderr and run.returncode == 1  # strict: the hostile lines are misses
    lines = run.stdout.splitlines()
    assert json.loads(lines[0])["id"] == 1  # the recorded answer to the first message
    refused = [json.loads(line) for line in lines[1:6]]
    assert isinstance(refused[3], list) and len(refused[3]) == 1  # a batch's answer is a batch, of one here
    refused[3] = refused[3][0]
    assert [(r["id"], r["error"]["code"]) for r in refused] == [
        (None, INVALID_REQUEST), (None, PARSE_ERROR), (7, INVALID_REQUEST), (None, INVALID_REQUEST), (None, INVALID_REQUEST)]
    assert "a response id must be a string or an integer" in refused[0]["error"]["message"]
    assert "params must be an object or an array" in refused[2]["error"]["message"]
    assert json.loads(lines[6])["result"]["protocolVersion"] == "2025-11-25"  # initialize, answered as recorded
    assert b"5 unmatched" in run.stderr


def test_hostile_lines_a_real_server_was_sent_replay_as_it_answered_them(tmp_path: Path) -> None:
    """Lines no client reader takes (NaN, a BOM, an array id, string params, not JSON), recorded
    in front of the SDK server: the same lines replayed get what that server did with them, here
    nothing, and the replay ends clean."""
    initialize = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "hostile", "version": "1"}}}
    hostile = [b'{"jsonrpc":"2.0","id":NaN,"method":"ping"}', b'\xef\xbb\xbf{"jsonrpc":"2.0","id":7,"method":"ping"}',
               ID_ARRAY, b'{"jsonrpc":"2.0","id":8,"method":"ping","params":"s"}', b"not json"]
    stdin = b"\n".join([json.dumps(initialize).encode(), b'{"jsonrpc":"2.0","method":"notifications/initialized"}',
                        *hostile, b'{"jsonrpc":"2.0","id":9,"method":"ping"}']) + b"\n"
    cassette = tmp_path / "hostile.tape"
    recording = Session(cassette, NOTES_SERVER)
    recording.send(stdin)
    recording.response(9)  # stdin stays open until the last answer: at end of input the server may drop it
    recording.close_stdin()
    assert recording.finish() == 0, recording.stderr
    replayed = tapes("replay", str(cassette), stdin=stdin)
    assert b"Traceback" not in replayed.stderr and replayed.returncode == 0, replayed.stderr
    assert replayed.stdout == bytes(recording.received)
    assert [json.loads(line)["id"] for line in replayed.stdout.splitlines()] == [1, 9]
    assert b"0 unmatched, 0 unused" in replayed.stderr


def test_the_stdio_replayer_drops_a_line_past_its_limit_as_it_comes_and_goes_on() -> None:
    """A client line longer than the replay holds (it could be endless) gets an error without an
    id, once its newline comes; what follows is answered as ever."""
    from replayer.stdio import LONGEST_LINE

    overlong = b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"x":"' + b"x" * LONGEST_LINE + b'"}}'
    run = tapes("replay", str(STDIO_CASSETTE), stdin=overlong + b'\n{"jsonrpc":"2.0","id":2,"method":"ping"}\n')
    assert b"Traceback" not in run.stderr and run.returncode == 1
    refused, ping = (json.loads(line) for line in run.stdout.splitlines())
    assert refused["id"] is None and refused["error"]["code"] == INVALID_REQUEST
    assert refused["error"]["message"] == (f"Invalid Request: it is {len(overlong)} bytes long, past the {LONGEST_LINE} "
                                           "bytes a replay takes")
    assert ping == {"jsonrpc": "2.0", "id": 2, "result": {}}
    assert f"unmatched a message of {len(overlong)} bytes".encode() in run.stderr


def test_the_http_replayer_answers_400_and_goes_on() -> None:
    initialize, initialized, *_ = client_messages(HTTP_CASSETTE)[1:]  # after server/discover
    headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    with replay_server(HTTP_CASSETTE) as server, httpx.Client(timeout=30, headers=headers) as client:
        opened = client.post(server.url, content=initialize)
        assert opened.status_code == 200 and "protocolVersion" in opened.text
        session = {"Mcp-Session-Id": opened.headers["mcp-session-id"], "MCP-Protocol-Version": "2025-11-25"}
        for body, code in [(ID_ARRAY, INVALID_REQUEST), (b"[" * 100_000 + b"]" * 100_000, PARSE_ERROR),
                           (b'{"jsonrpc":"2.0","id":"a","method":"tools/call","params":{"name":["x"]}}', INVALID_REQUEST)]:
            refused = client.post(server.url, content=body, headers=session)
            assert refused.status_code == 400 and refused.json()["error"]["code"] == code
        # 2026-07-28 checks the headers against the body: an odd body is refused before that, not a 500
        stateless = client.post(server.url, content=b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":[1]}}',
                                headers={"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", **session})
        assert stateless.status_code == 400 and stateless.json()["id"] == 1
        assert client.post(server.url, content=initialized, headers=session).status_code == 202  # goes on
    assert not server.clean and any("not JSON-RPC" in line for line in server.report_lines)


# --- the user's own code ---------------------------------------------------------------------

RAISING_MATCHER = "operator:truth"  # takes one argument: called with two, it raises TypeError
MATCHER_FAILED = "matcher 'operator:truth' failed on a live {} request (TypeError('"  # then Python's words for it


def said_the_matcher_failed(line: str, method: str) -> bool:
    return line.startswith(MATCHER_FAILED.format(method)) and line.endswith("takes exactly one argument (2 given)'))")


def test_a_matcher_that_raises_ends_a_stdio_replay_in_one_sentence() -> None:
    run = tapes("replay", str(STDIO_CASSETTE), "--match", RAISING_MATCHER, stdin=client_messages(STDIO_CASSETTE)[0] + b"\n")
    assert run.returncode == 2 and run.stdout == b""
    [line] = run.stderr.decode().splitlines()
    assert said_the_matcher_failed(line.removeprefix("tapes: error: "), "server/discover"), line


def test_a_matcher_that_raises_gets_a_500_naming_it_over_http_and_fails_the_replay() -> None:
    replayer = Process([*TAPES, "replay", str(HTTP_CASSETTE), "--http", "--listen", "127.0.0.1:0", "--match", RAISING_MATCHER])
    try:
        url = replayer.wait_for(r"tapes: replaying at (\S+)")[1]
        headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
        answered = httpx.post(url, content=client_messages(HTTP_CASSETTE)[1], headers=headers, timeout=30)
    finally:
        code = replayer.stop(signal.SIGINT)
    assert answered.status_code == 500
    assert said_the_matcher_failed(answered.json()["error"]["message"].removeprefix("Internal Server Error: "), "initialize")
    said = replayer.rest_of_stderr()
    assert code == 2 and "Traceback" not in said
    assert said_the_matcher_failed(said.splitlines()[-1].removeprefix("tapes: error: "), "initialize")


# --- no markup --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def marked_up(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A stdio cassette whose client sent requests named like Rich markup (never answered), in a
    folder whose name is markup too."""
    recorded = load(ROOT / "cassettes" / "notes-stdio-2025-06-18.tape")
    frames = list(recorded.frames)
    at = next(i for i, frame in enumerate(frames) if frame.kind is Kind.STREAM_END)
    # the session's opening only, so that the summary's unused lines (10 at most) list the odd ones
    opened = 1 + next(i for i, frame in enumerate(frames) if (frame.message or {}).get("method") == "notifications/initialized")
    odd = [Frame(0, frames[at].t, Direction.CLIENT_TO_SERVER, "stdio", Kind.MESSAGE,
                 message={"jsonrpc": "2.0", "id": 900 + n, "method": method, "params": {"[/q]": "[red]v"}})
           for n, method in enumerate(MARKUP_METHODS)]
    frames = [dataclasses.replace(frame, seq=seq) for seq, frame in enumerate([*frames[:opened], *odd, *frames[at:]], 1)]
    folder = tmp_path_factory.mktemp("tapes") / "[/x]"
    folder.mkdir(parents=True)  # a folder "[" holding a folder "x]": the path reads [/x]
    save(dataclasses.replace(recorded, frames=frames), folder / "marked.tape")
    return folder / "marked.tape"


def assert_literal(run: subprocess.CompletedProcess[bytes], *texts: str) -> None:
    said = (run.stdout + run.stderr).decode()
    assert "Traceback" not in said and "MarkupError" not in said, said
    for text in texts:
        assert text in said, (text, said)


def test_replay_summary_over_stdio_shows_markup_as_text(marked_up: Path) -> None:
    live = [json.dumps({"jsonrpc": "2.0", "id": n, "method": method}).encode() for n, method in enumerate(["[/bar]", "[bold]y"], 1)]
    run = tapes("replay", str(marked_up), stdin=b"\n".join(live) + b"\n")
    assert_literal(run, "unmatched [/bar] id 1", "unmatched [bold]y id 2", *(f"unused {m} #" for m in MARKUP_METHODS))


def test_replay_of_a_truncated_cassette_in_a_markup_path_warns_with_the_path(marked_up: Path) -> None:
    truncated = marked_up.with_name("cut.tape")
    truncated.write_bytes(marked_up.read_bytes()[:-3])
    run = tapes("replay", str(truncated))
    assert_literal(run, "[/x]")


def test_replay_summary_over_http_shows_markup_as_text() -> None:
    replayer = Process([*TAPES, "replay", str(HTTP_CASSETTE), "--http", "--listen", "127.0.0.1:0"])
    try:
        url = replayer.wait_for(r"tapes: replaying at (\S+)")[1]
        initialize = client_messages(HTTP_CASSETTE)[1]
        headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
        with httpx.Client(timeout=30, headers=headers) as client:
            session = client.post(url, content=initialize).headers["mcp-session-id"]
            for n, method in enumerate(MARKUP_METHODS):
                client.post(url, json={"jsonrpc": "2.0", "id": 10 + n, "method": method}, headers={"Mcp-Session-Id": session})
    finally:
        replayer.stop(signal.SIGINT)
    said = replayer.rest_of_stderr()
    assert "Traceback" not in said and "MarkupError" not in said
    assert all(f"unmatched {method} id {10 + n}" in said for n, method in enumerate(MARKUP_METHODS))


@pytest.mark.parametrize("command", ["show", "lint", "view", "diff"])
def test_cassette_commands_show_markup_as_text(command: str, marked_up: Path, tmp_path: Path) -> None:
    args = {"show": [str(marked_up), "--width", "200"], "lint": [str(marked_up)],
            "view": [str(marked_up), "-o", str(tmp_path / "page.html")],
            "diff": [str(marked_up), str(ROOT / "cassettes" / "notes-stdio-2025-06-18.tape")]}[command]
    run = tapes(command, *args)
    if command == "view":
        assert_literal(run)
        shown = [row["what"] for row in model_of((tmp_path / "page.html").read_text())["sides"][0]["rows"]]
        assert all(any(method in what for what in shown) for method in MARKUP_METHODS)
    else:
        assert_literal(run, *MARKUP_METHODS[:2])
