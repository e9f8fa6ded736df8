"""User mistakes on the command line: one sentence on stderr, exit 2, no traceback."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path

import pytest

from tapes.cassette.store import load
from tests.support.paths import CASSETTES, TAPES
from tests.support.processes import TIMEOUT, Process


def test_new_episodes_of_an_http_cassette_on_stdio_say_to_add_http() -> None:
    run = subprocess.run([*TAPES, "replay", str(CASSETTES / "everything-http-2025-11-25.tape"), "--new-episodes", "--", "true"],
                         input=b"", capture_output=True, timeout=60)
    assert run.returncode == 2 and run.stdout == b""
    assert b"was recorded over HTTP: new episodes of it need --http and --upstream URL" in run.stderr
    assert b"Traceback" not in run.stderr


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP], ids=["ctrl-c", "kill", "terminal closed"])
def test_an_http_replay_stopped_by_a_signal_prints_its_summary_and_report(signum: int, tmp_path: Path) -> None:
    report = tmp_path / "report.json"
    replay = Process([*TAPES, "replay", str(CASSETTES / "everything-http-2025-11-25.tape"), "--http", "--listen", "127.0.0.1:0",
                      "--report", str(report)])
    replay.wait_for(r"tapes: replaying at (http://\S+)")
    assert replay.stop(signum) == 0
    assert "tapes replay: session " in replay.rest_of_stderr() and json.loads(report.read_text())["complete"]


def test_an_http_replay_of_no_http_request_says_why(tmp_path: Path) -> None:
    """A stdio cassette wants no --http; an HTTP one that recorded nothing has nothing to serve either way."""
    empty = tmp_path / "empty.tape"
    empty.write_bytes((CASSETTES / "everything-http-2025-11-25.jsonl").read_bytes().splitlines(keepends=True)[0])
    for cassette, said in ((CASSETTES / "notes-stdio-2025-11-25.tape", b"was recorded over stdio: replay it without --http"),
                           (empty, b"has no HTTP requests to replay (its recording holds none)")):
        run = subprocess.run([*TAPES, "replay", str(cassette), "--http", "--listen", "127.0.0.1:0"], capture_output=True,
                             timeout=60)
        assert run.returncode == 2 and said in run.stderr and b"Traceback" not in run.stderr, run.stderr


@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_a_report_in_a_missing_folder_is_one_sentence_before_anything_is_served(transport: str, tmp_path: Path) -> None:
    report = tmp_path / "nope" / "report.json"
    http = ["--http", "--listen", "127.0.0.1:0"] if transport == "http" else []
    run = subprocess.run([*TAPES, "replay", str(CASSETTES / f"everything-{transport}-2025-11-25.tape"), *http,
                          "--report", str(report)], input=b"", capture_output=True, timeout=60)
    assert run.returncode == 2 and run.stdout == b""
    assert run.stderr.decode() == f"tapes: error: --report {report}: the folder {report.parent} does not exist\n"


@pytest.mark.skipif(not Path("/dev/full").is_char_device(), reason="needs /dev/full, a device every write to fails")
@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_a_report_that_cannot_be_written_is_one_sentence_naming_it(transport: str) -> None:
    """A write error names no file: it was said as if stdout had failed."""
    http = ["--http", "--listen", "127.0.0.1:0"] if transport == "http" else []
    replayer = Process([*TAPES, "replay", str(CASSETTES / f"everything-{transport}-2025-11-25.tape"), *http,
                        "--report", "/dev/full"])  # on stdio its stdin ends at once: the replay ends
    if http:
        replayer.wait_for(r"tapes: replaying at (\S+)")
    assert (replayer.stop(signal.SIGINT) if http else replayer.proc.wait(TIMEOUT)) == 2
    said = replayer.rest_of_stderr()
    assert "Traceback" not in said
    assert said.splitlines()[-1] == "tapes: error: --report /dev/full: cannot be written (No space left on device)"


def test_a_report_into_the_cassette_itself_is_refused(tmp_path: Path) -> None:
    cassette = tmp_path / "a.tape"
    cassette.write_bytes((CASSETTES / "everything-stdio-2025-11-25.tape").read_bytes())
    run = subprocess.run([*TAPES, "replay", str(cassette), "--report", str(cassette)], input=b"", capture_output=True,
                         timeout=60)
    assert run.returncode == 2 and run.stdout == b""
    assert run.stderr.decode() == f"tapes: error: --report {cassette} is the cassette itself: the report needs a file of its own\n"
    assert cassette.read_bytes() == (CASSETTES / "everything-stdio-2025-11-25.tape").read_bytes()


def test_an_http_replay_writes_its_report_too(tmp_path: Path) -> None:
    report = tmp_path / "report.json"
    replayer = Process([*TAPES, "replay", str(CASSETTES / "everything-http-2025-11-25.tape"), "--http",
                        "--listen", "127.0.0.1:0", "--report", str(report)])
    try:
        replayer.wait_for(r"tapes: replaying at (\S+)")
    finally:
        assert replayer.stop(signal.SIGINT) == 0
    written = json.loads(report.read_text())
    assert (written["complete"], written["played"], written["unmatched"]) == (True, 0, [])
    assert len(written["unused"]) == 11  # every recorded request: the client sent none


@pytest.mark.parametrize("command", [["verify", "everything-http-2025-11-25.tape", "--upstream"],
                                     ["replay", "everything-http-2025-11-25.tape", "--http", "--new-episodes", "--upstream"]])
@pytest.mark.parametrize(("url", "problem"), [("http://[::1", "is not valid (Invalid IPv6 URL)"),
                                              ("http://h:99999/mcp", "is not valid (Port out of range 0-65535)"),
                                              ("ftp://h/mcp", "is not an http:// or https:// URL with a host")])
def test_an_upstream_url_that_names_no_server_is_one_sentence(command: list[str], url: str, problem: str) -> None:
    """verify went on to a ValueError traceback, a replay to a hand-over that could not start."""
    verb, cassette, *flags = command
    run = subprocess.run([*TAPES, verb, str(CASSETTES / cassette), *flags, url], input=b"", capture_output=True,
                         timeout=60)
    assert run.returncode == 2 and run.stdout == b""
    assert run.stderr.decode() == f"tapes: error: the upstream URL {url!r} {problem}\n"


@pytest.mark.parametrize("seconds", ["-1", "inf", "nan", "1e9"])
def test_a_step_timeout_no_wait_takes_is_one_sentence(seconds: str) -> None:
    run = subprocess.run([*TAPES, "verify", str(CASSETTES / "everything-stdio-2025-11-25.tape"), "--step-timeout", seconds,
                          "--", "true"], capture_output=True, timeout=60)
    assert run.returncode == 2 and run.stdout == b""
    assert run.stderr.decode() == (f"tapes: error: --step-timeout {float(seconds)} is not a number of seconds from 0 to "
                                   "2147484 (24 days)\n")


@pytest.mark.parametrize("command", ["show", "view", "lint", "replay"])
def test_a_ctrl_c_while_a_command_reads_is_exit_130_without_click_s_aborted(command: str, tmp_path: Path) -> None:
    """The cassette is a FIFO nobody writes to: the command is blocked reading it when the SIGINT comes."""
    fifo = tmp_path / "slow.tape"
    os.mkfifo(fifo)
    extra = ["-o", str(tmp_path / "page.html")] if command == "view" else []
    reader = subprocess.Popen([*TAPES, command, str(fifo), *extra], stdin=subprocess.DEVNULL,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    writer = os.open(fifo, os.O_WRONLY)  # returns once the command has opened it to read
    try:
        reader.send_signal(signal.SIGINT)
        out, err = reader.communicate(timeout=30)
    finally:
        os.close(writer)
    assert reader.returncode == 130, err
    assert b"Aborted" not in err and b"Traceback" not in err and out == b""


SURROGATE_CASSETTE = "\n".join(json.dumps(record) for record in [  # json.dumps writes the lone surrogate as \ud800
    {"mcp-tapes": 1, "transport": "stdio", "server": {"command": ["server"]}, "created": "2026-01-01T00:00:00+00:00",
     "tool": "t", "labels": {"note": "\udfff"}},
    *({"seq": seq, "t": 0.0, "dir": "c2s", "ch": "stdio", "kind": "message",
       "msg": {"jsonrpc": "2.0", "id": "\ud800", "method": "tools/call", "params": {"name": "a\ud800"}}} for seq in (1, 2)),
    {"seq": 3, "t": 0.1, "dir": "s2c", "ch": "stdio", "kind": "message", "msg": {"jsonrpc": "2.0", "id": 1, "result": "\ud800"}},
]) + "\n"


@pytest.mark.parametrize("command", [["show"], ["diff", "--format", "text"], ["diff", "--format", "json"],
                                     ["diff", "--format", "markdown"], ["lint"], ["lint", "--format", "sarif"]])
def test_a_lone_surrogate_in_a_cassette_is_printed_as_its_escape(command: list[str], tmp_path: Path) -> None:
    # JSON Lines can hold one, UTF-8 cannot: it stopped the output with a UnicodeEncodeError
    cassette = tmp_path / "odd.jsonl"
    cassette.write_text(SURROGATE_CASSETTE)
    other = [str(CASSETTES / "notes-stdio-2025-06-18.tape")] if command[0] == "diff" else []
    run = subprocess.run([*TAPES, command[0], str(cassette), *other, *command[1:]], capture_output=True, timeout=60,
                         env={**os.environ, "COLUMNS": "200"})
    assert b"Traceback" not in run.stderr and run.returncode in (0, 1), run.stderr
    assert b"\\ud800" in run.stdout or b"\\\\ud800" in run.stdout


def _deepest_cassette() -> bytes:
    """A msgpack cassette whose messages nest as deep as a cassette can (`MAX_NESTING` levels)."""
    import msgpack

    from tapes.cassette.store import MAX_NESTING, Header

    deep = b"\x91" * (MAX_NESTING - 2) + msgpack.packb("x")  # in a frame array and a message
    request = b"\x84" + b"".join(map(msgpack.packb, ["jsonrpc", "2.0", "id", 1, "method", "tools/call", "params"])) + deep
    result = b"\x83" + b"".join(map(msgpack.packb, ["jsonrpc", "2.0", "id", 1, "result"])) + deep
    return (msgpack.packb(Header("stdio", {"command": ["server"]}).record())
            + b"\x96\x01" + msgpack.packb(0.0) + b"\x00\xa5stdio\x00" + request
            + b"\x96\x02" + msgpack.packb(0.1) + b"\x01\x00\x00" + result)


@pytest.mark.parametrize("command", [["show"], ["view", "-o", "-"], ["diff", "SELF"], ["lint", "--security"],
                                     ["redact", "--redact-path", "params.x", "-o", "OUT.jsonl"], ["export", "-o", "OUT.jsonl"]])
def test_messages_nested_as_deep_as_a_cassette_holds_are_read(command: list[str], tmp_path: Path) -> None:
    # walking them took more than Python's default 1000 frames: RecursionError
    cassette = tmp_path / "deep.tape"
    cassette.write_bytes(_deepest_cassette())
    arguments = [str(cassette) if part == "SELF" else str(tmp_path / "out.jsonl") if part == "OUT.jsonl" else part
                 for part in command[1:]]
    run = subprocess.run([*TAPES, command[0], str(cassette), *arguments], capture_output=True, timeout=120)
    assert run.returncode == 0 and b"Traceback" not in run.stderr, run.stderr[-2000:]


@pytest.mark.parametrize("output_format", ["text", "github"])
def test_lint_prints_no_control_character_a_cassette_holds(output_format: str, tmp_path: Path) -> None:
    # a notification's method with an ESC sequence (set the title, clear the screen) was echoed as it was
    records = [{"mcp-tapes": 1, "transport": "stdio", "server": {"command": ["server"]},
                "created": "2026-01-01T00:00:00+00:00", "tool": "t"},
               {"seq": 1, "t": 0.0, "dir": "c2s", "ch": "stdio", "kind": "message",
                "msg": {"jsonrpc": "2.0", "id": 1, "method": "notifications/\x1b]0;pwned\x07\x1b[2J"}}]
    cassette = tmp_path / "esc.jsonl"
    cassette.write_text("".join(json.dumps(record) + "\n" for record in records))
    run = subprocess.run([*TAPES, "lint", str(cassette), "--format", output_format], capture_output=True, timeout=60)
    assert run.returncode == 1, run.stderr
    assert b"\x1b" not in run.stdout and b"\x07" not in run.stdout
    assert b"notifications/\\x1b]0;pwned\\x07\\x1b[2J sent with id 1" in run.stdout


@pytest.mark.parametrize("listen", ["taken", "nosuch.invalid:8080"])
def test_an_http_recording_that_cannot_listen_leaves_the_cassette_there_was(listen: str, tmp_path: Path) -> None:
    import socket

    cassette = tmp_path / "kept.tape"
    kept = (CASSETTES / "everything-http-2025-11-25.tape").read_bytes()
    cassette.write_bytes(kept)
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        address = f"127.0.0.1:{busy.getsockname()[1]}" if listen == "taken" else listen
        run = subprocess.run([*TAPES, "record", "-o", str(cassette), "--listen", address, "--upstream",
                              "http://127.0.0.1:9/mcp"], capture_output=True, timeout=60)
    said = run.stderr.decode()
    assert run.returncode == 2 and said.startswith(f"tapes: error: cannot listen on {address} (") and said.count("\n") == 1
    assert ("address already in use" if listen == "taken" else "name or service not known") in said
    assert cassette.read_bytes() == kept and [p.name for p in tmp_path.iterdir()] == ["kept.tape"]


@pytest.mark.parametrize(("flags", "said"), [
    (["--listen", "127.0.0.1:9999", "--", "true"], "--listen only applies to an HTTP recording (--upstream or --proxy)"),
    (["--ca-dir", "ca", "--upstream", "http://127.0.0.1:9/mcp"],
     "--ca-dir only applies to a forward proxy recording (--proxy): it keeps the CA that intercepts HTTPS"),
    (["--ca-dir", "a-file", "--proxy", "--listen", "127.0.0.1:0"],
     "--ca-dir a-file: the forward proxy cannot keep its CA there (it is not a folder)"),
])
def test_a_recording_flag_that_would_do_nothing_is_refused(flags: list[str], said: str, tmp_path: Path) -> None:
    (tmp_path / "a-file").write_text("")
    run = subprocess.run([*TAPES, "record", "-o", "out.tape", *flags], cwd=tmp_path, capture_output=True, timeout=60)
    assert (run.returncode, run.stderr.decode()) == (2, f"tapes: error: {said}\n")
    assert not (tmp_path / "out.tape").exists()


def test_a_ctrl_c_while_the_cli_loads_exits_130_without_a_traceback() -> None:
    """The command's modules take about a tenth of a second to load: a Ctrl-C there (made certain
    here by an import that is interrupted) ends it as a Ctrl-C later does."""
    interrupted = ("import sys\n"
                   "class Interrupting:\n"
                   "    def find_spec(self, name, *args):\n"
                   "        if name == 'tapes.cli':\n"
                   "            raise KeyboardInterrupt\n"
                   "sys.meta_path.insert(0, Interrupting())\n"
                   "from tapes.__main__ import run\n"
                   "run()\n")
    run = subprocess.run([TAPES[0], "-c", interrupted, "show", "x"], capture_output=True, timeout=60)
    assert (run.returncode, run.stdout, run.stderr) == (130, b"", b"")


_DROPPING_A_CTRL_C = """
import signal, sys
class Dropping:
    def __del__(self):
        signal.raise_signal(signal.SIGINT)
class Interrupting:
    def find_spec(self, name, *args):
        if name == MODULE:
            Dropping()
MODULE = sys.argv.pop(1)
sys.meta_path.insert(0, Interrupting())
from tapes.__main__ import run
run()
"""


@pytest.mark.parametrize(("module", "command", "code"), [
    ("recorder.http", ["record", "-o", "{out}", "--upstream", "http://127.0.0.1:9/mcp", "--listen", "127.0.0.1:0"], 0),
    ("replayer.http", ["replay", str(CASSETTES / "everything-http-2025-11-25.tape"), "--http", "--listen", "127.0.0.1:0"], 0),
    ("replayer.stdio", ["replay", str(CASSETTES / "everything-stdio-2025-11-25.tape")], 130),
    ("recorder.stdio", ["record", "-o", "{out}", "--", "sleep", "30"], 130),  # passed on to the server
], ids=["record-http", "replay-http", "replay-stdio", "record-stdio"])
def test_a_ctrl_c_that_python_drops_while_a_command_loads_still_stops_it(module: str, command: list[str], code: int,
                                                                         tmp_path: Path) -> None:
    """A SIGINT whose KeyboardInterrupt lands in a `__del__` or a weakref callback (importlib's module
    locks run them on every import) is dropped by Python: made certain here by one such drop while
    the command's module loads. The command stops as if the Ctrl-C came once it was up (its client
    keeps stdin open: nothing else would end it)."""
    output = tmp_path / "out.tape"
    argv = [TAPES[0], "-c", _DROPPING_A_CTRL_C, module, *(part.format(out=output) for part in command)]
    process = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        stdout, stderr = process.communicate(timeout=20)
    finally:
        process.kill()
    assert (process.returncode, stdout) == (code, b""), stderr
    assert b"Traceback" not in stderr and b"Exception ignored" not in stderr
    if module.startswith("recorder"):
        load(output)  # a cassette, whole


@pytest.mark.parametrize("command", [["diff", "{full}", "{cut}"], ["lint", "{cut}"], ["lint", "--security", "{cut}"],
                                     ["export", "{cut}", "-o", "-"], ["redact", "{cut}", "-o", "-"],
                                     ["replay", "{cut}", "--dry-run", "--fault", "tools/call:hang"],
                                     ["view", "{cut}", "-o", "-"]])
def test_every_command_that_reads_a_truncated_cassette_says_so(command: list[str], tmp_path: Path) -> None:
    """A cassette cut short (a killed recorder, a copy that stopped) loads with the frames before
    its last, and every command says on stderr that the rest is missing: a diff that reads it as
    a server that stopped answering, or an export written clean, would hide it."""
    full = CASSETTES / "example" / "weather.tape"
    cut = tmp_path / "cut.tape"
    cut.write_bytes(full.read_bytes()[:-40])
    argv = [part.format(full=full, cut=cut) for part in command]
    done = subprocess.run([*TAPES, *argv], capture_output=True, text=True, timeout=TIMEOUT, stdin=subprocess.DEVNULL)
    assert f"tapes: warning: {cut}: the last frame is truncated at byte" in done.stderr, (done.returncode, done.stderr)
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize(("argv", "said"), [
    (["diff", "{folder}", "{folder}"], "Invalid value for 'OLD': File '{folder}' is a directory."),
    (["lint", "--nope", "x.tape"], "No such option '--nope'"),
    (["show"], "Missing argument 'CASSETTE'."),
])
def test_a_mistake_in_the_arguments_is_one_line(argv: list[str], said: str, tmp_path: Path) -> None:
    """As every other mistake: not click's usage block."""
    done = subprocess.run([*TAPES, *[part.format(folder=tmp_path) for part in argv]], capture_output=True, text=True,
                          timeout=TIMEOUT, stdin=subprocess.DEVNULL)
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert done.stderr.startswith("tapes: error: ") and said.format(folder=tmp_path) in done.stderr
    assert f"(tapes {argv[0]} --help lists what it takes)" in done.stderr


@pytest.mark.parametrize(("configured", "said"), [
    ('redact-paths = ["params.arguments.city"]',
     "tapes: WARNING: --no-redact: the [tool.tapes] redact-paths (params.arguments.city) are not applied"),
    ("", "tapes: --no-redact changes nothing here"),
])
def test_no_redact_on_stdio_says_what_it_does(configured: str, said: str, tmp_path: Path) -> None:
    """On stdio it drops the configured redact-paths, silently before; without any, it does nothing."""
    (tmp_path / "pyproject.toml").write_text(f"[tool.tapes]\n{configured}\n")
    done = subprocess.run([*TAPES, "record", "-o", "out.jsonl", "--no-redact", "--", "python",
                           str(CASSETTES / "example" / "weather_server.py")], cwd=tmp_path, capture_output=True, text=True,
                          input="", timeout=TIMEOUT)
    assert done.returncode == 0 and said in done.stderr, done.stderr


def test_the_configured_record_mode_applies_where_the_command_names_the_real_server(tmp_path: Path) -> None:
    """[tool.tapes] record-mode sets the CLI's default too: `tapes replay FILE -- SERVER` records a
    missing cassette under `once` (it said --new-episodes needs the real server). A replay that
    names no server replays, as the plugin's setting is meant for its tests."""
    (tmp_path / "pyproject.toml").write_text('[tool.tapes]\nrecord-mode = "once"\n')
    client = (CASSETTES / "example" / "client.jsonl").read_bytes()
    server = ["python", str(CASSETTES / "example" / "weather_server.py")]
    recorded = subprocess.run([*TAPES, "replay", "new.tape", "--", *server], cwd=tmp_path, input=client,
                              capture_output=True, timeout=TIMEOUT)
    assert recorded.returncode == 0 and (tmp_path / "new.tape").exists(), recorded.stderr
    replayed = subprocess.run([*TAPES, "replay", "new.tape"], cwd=tmp_path, input=client, capture_output=True, timeout=TIMEOUT)
    assert replayed.returncode == 0 and replayed.stdout == recorded.stdout, replayed.stderr
