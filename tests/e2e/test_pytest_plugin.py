"""The pytest plugin, with the official SDK client as the code under test: record modes, misses
failing the test, the frozen clock, pytest-xdist, and the race policies over 100 runs each."""

from __future__ import annotations

import dataclasses
import functools
import os
import signal
import sys
import time
from pathlib import Path

import anyio
import pytest
from mcp import Client, MCPError, StdioServerParameters

from tapes.cassette.frames import Frame, Kind
from tapes.cassette.store import load, save

from tests.support.http_peers import notes_over_http
from tests.support.paths import CASSETTES, ROOT, TAPES

WEATHER = [sys.executable, str(CASSETTES / "example" / "weather_server.py")]

# An inner test module: a tiny client library (forecast) tested through the plugin's fixtures.
INNER = f'''
import anyio, pytest
from datetime import datetime, UTC
from mcp import Client, StdioServerParameters

async def forecast(server, city):
    async with Client(StdioServerParameters(command=server[0], args=server[1:]), mode="legacy", cache=None) as client:
        result = await client.call_tool("get_forecast", {{"city": city}})
    return result.content[0].text

CITY = "Paris"

@pytest.mark.tape("cassettes/weather.tape", server={WEATHER!r})
def test_forecast(tape_server, tape):
    assert anyio.run(forecast, tape_server, CITY).startswith(CITY)
    print("RECORDING" if tape.recording else "REPLAYING")
'''


def run(pytester: pytest.Pytester, *args: str, ci: bool = False, source: str = INNER) -> pytest.RunResult:
    pytester.makepyfile(test_weather=source)
    if ci:
        pytester._monkeypatch.setenv("CI", "true")
    else:
        pytester._monkeypatch.delenv("CI", raising=False)
    return pytester.runpytest_subprocess("-s", "-p", "no:cacheprovider", *args)


def cassette(pytester: pytest.Pytester) -> Path:
    return pytester.path / "cassettes" / "weather.tape"


def test_none_fails_clearly_on_a_missing_cassette(pytester: pytest.Pytester) -> None:
    result = run(pytester, "--tape-record-mode=none")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*cassette*weather.tape is missing and the record mode is none*"])
    assert "Traceback" not in result.stdout.str()


def test_once_records_when_missing_then_replays(pytester: pytest.Pytester) -> None:
    run(pytester, "--tape-record-mode=once").assert_outcomes(passed=1)
    assert cassette(pytester).exists()
    recorded = cassette(pytester).read_bytes()
    second = run(pytester, "--tape-record-mode=once")
    second.assert_outcomes(passed=1)
    assert "REPLAYING" in second.stdout.str() and cassette(pytester).read_bytes() == recorded


def test_default_mode_is_none_under_ci_and_once_otherwise(pytester: pytest.Pytester) -> None:
    run(pytester, ci=True).assert_outcomes(errors=1)
    run(pytester).assert_outcomes(passed=1)
    assert "REPLAYING" in run(pytester, ci=True).stdout.str()


def test_all_records_every_time_and_replaces_the_cassette_only_when_the_test_passes_and_it_changed(
    pytester: pytest.Pytester,
) -> None:
    run(pytester, "--tape-record-mode=once").assert_outcomes(passed=1)
    first = cassette(pytester).read_bytes()
    again = run(pytester, "--tape-record-mode=all")
    again.assert_outcomes(passed=1)
    assert "RECORDING" in again.stdout.str()
    assert cassette(pytester).read_bytes() == first  # the same behaviour: the file is left as it was
    oslo = INNER.replace('CITY = "Paris"', 'CITY = "Oslo"')
    run(pytester, "--tape-record-mode=all", source=oslo).assert_outcomes(passed=1)
    assert any("Oslo" in str(frame.message) for frame in load(cassette(pytester)).frames)
    kept = cassette(pytester).read_bytes()
    failing = INNER.replace('.startswith(CITY)', '.startswith("Nowhere")')
    run(pytester, "--tape-record-mode=all", source=failing).assert_outcomes(failed=1)
    assert cassette(pytester).read_bytes() == kept
    assert not list(cassette(pytester).parent.glob("*.recording*"))


def test_rewrite_records_over_anything_and_leaves_no_cassette_when_the_test_fails(pytester: pytest.Pytester) -> None:
    cassette(pytester).parent.mkdir()
    cassette(pytester).write_bytes(b"not a cassette at all")
    result = run(pytester, "--tape-record-mode=rewrite")
    result.assert_outcomes(passed=1)
    assert "RECORDING" in result.stdout.str() and load(cassette(pytester)).frames
    recorded = cassette(pytester).read_bytes()
    run(pytester, "--tape-record-mode=rewrite").assert_outcomes(passed=1)
    assert cassette(pytester).read_bytes() == recorded
    failing = INNER.replace('.startswith(CITY)', '.startswith("Nowhere")')
    run(pytester, "--tape-record-mode=rewrite", source=failing).assert_outcomes(failed=1)
    assert not list(cassette(pytester).parent.iterdir())


def test_a_run_killed_while_recording_under_once_leaves_no_cassette(pytester: pytest.Pytester) -> None:
    """A kill (a CI timeout's SIGKILL) after the session, before the test passed, left the recording
    under the cassette's name: the next run replayed it as a recording of a passed test."""
    killed = INNER.replace("import anyio, pytest", "import anyio, os, pytest, signal").replace(
        '    print("RECORDING"', '    os.kill(os.getpid(), signal.SIGKILL)\n    print("RECORDING"')
    assert run(pytester, "--tape-record-mode=once", source=killed).ret == -signal.SIGKILL
    assert not cassette(pytester).exists()
    again = run(pytester, "--tape-record-mode=once")
    again.assert_outcomes(passed=1)
    assert "RECORDING" in again.stdout.str() and load(cassette(pytester)).frames
    assert sorted(path.name for path in cassette(pytester).parent.iterdir()) == ["weather.tape"]  # the scratch went


def test_a_run_killed_while_recording_over_http_leaves_no_recorder_running(pytester: pytest.Pytester) -> None:
    """`tapes record --upstream` outlived a killed pytest (its stdin was /dev/null), holding on to
    the upstream; the next run hung."""
    killed = '''
import os, signal, pytest

@pytest.mark.tape("cassettes/remote.tape", upstream="http://127.0.0.1:9/mcp")
def test_remote(tape_url):
    os.kill(os.getpid(), signal.SIGKILL)
'''
    assert run(pytester, "--tape-record-mode=once", source=killed).ret == -signal.SIGKILL
    deadline = time.monotonic() + 15
    while (left := _recorders_writing_into(pytester.path)) and time.monotonic() < deadline:
        time.sleep(0.2)
    for pid in left:  # not left running by a failing test
        os.kill(pid, signal.SIGKILL)
    assert not left and not (pytester.path / "cassettes" / "remote.tape").exists()


def _recorders_writing_into(folder: Path) -> list[int]:
    """The `tapes record` processes whose cassette is under `folder` (Linux: read from /proc)."""
    found = []
    for proc in Path("/proc").iterdir():
        try:
            argv = (proc / "cmdline").read_bytes().split(b"\0")
        except OSError:  # not a process, or gone
            continue
        if b"record" in argv and any(arg.startswith(os.fsencode(folder)) for arg in argv):
            found.append(int(proc.name))
    return found


def test_tests_recording_one_cassette_under_xdist_take_turns(pytester: pytest.Pytester) -> None:
    """Two workers found the shared cassette missing and both recorded into it at once, losing
    frames. The second now waits for the first, then replays its recording, as without -n."""
    shared = INNER.replace("import anyio, pytest", "import anyio, pathlib, pytest, time").replace(
        "def test_forecast(tape_server, tape):\n", "@pytest.mark.parametrize('n', range(2))\n"
        "def test_forecast(tape_server, tape, n):\n    time.sleep(2)  # the other worker's setup comes meanwhile\n"
    ).replace('    print("RECORDING" if tape.recording else "REPLAYING")',
              '    with open(pathlib.Path(__file__).with_name("modes.txt"), "a") as modes:\n'
              '        print("RECORDING" if tape.recording else "REPLAYING", file=modes)')
    run(pytester, "-n", "2", "--tape-record-mode=once", source=shared).assert_outcomes(passed=2)
    assert sorted((pytester.path / "modes.txt").read_text().split()) == ["RECORDING", "REPLAYING"]
    run(pytester, "-n", "2", "--tape-record-mode=none", source=shared).assert_outcomes(passed=2)
    assert sorted(path.name for path in cassette(pytester).parent.iterdir()) == ["weather.tape"]


def messages(frames: list[Frame]) -> list[Frame]:
    return [frame for frame in frames if frame.kind is Kind.MESSAGE]


def test_new_episodes_replays_what_it_has_and_records_what_it_lacks(pytester: pytest.Pytester) -> None:
    run(pytester, "--tape-record-mode=once").assert_outcomes(passed=1)
    before = load(cassette(pytester)).frames
    lima = INNER.replace('CITY = "Paris"', 'CITY = "Lima"')
    added = run(pytester, "--tape-record-mode=new_episodes", source=lima)
    added.assert_outcomes(passed=1)  # the real server answered the call the cassette lacked
    after = load(cassette(pytester)).frames
    # the Lima call and what followed it took the place of the recorded Paris continuation
    assert any("Lima" in str(frame.message) for frame in after)
    assert not any("Paris" in str(frame.message) for frame in after)
    # as many messages as before: the episode's took the place of the replaced ones (the real
    # server's stderr lines may land on either side of the warm-up, so they are not counted)
    assert len(messages(after)) == len(messages(before))
    # from now on the session replays offline, nothing unused, and nothing is added any more
    run(pytester, "--tape-record-mode=none", source=lima).assert_outcomes(passed=1)
    run(pytester, "--tape-record-mode=new_episodes", source=lima).assert_outcomes(passed=1)
    assert load(cassette(pytester)).frames == after


def test_new_episodes_of_a_test_that_failed_are_not_kept(pytester: pytest.Pytester) -> None:
    """As a recording is kept only when its test passed: else the failure would be replayed from
    the cassette on every later run, the real server never asked again."""
    run(pytester, "--tape-record-mode=once").assert_outcomes(passed=1)
    recorded = cassette(pytester).read_bytes()
    failing = INNER.replace('CITY = "Paris"', 'CITY = "Lima"').replace(".startswith(CITY)", '.startswith("Nowhere")')
    run(pytester, "--tape-record-mode=new_episodes", source=failing).assert_outcomes(failed=1)
    assert cassette(pytester).read_bytes() == recorded
    assert sorted(path.name for path in cassette(pytester).parent.iterdir()) == ["weather.tape"]  # no scratch left


NOTES_OVER_HTTP = """
import json, anyio, pytest
from mcp import Client

async def titles(url, adding):
    async with Client(url, mode="legacy", cache=None) as client:
        for title in adding:
            await client.call_tool("add_note", {{"title": title, "text": "x"}})
        index = await client.read_resource("notes://index")
    return json.loads(index.contents[0].text)["titles"]

@pytest.mark.tape("notes.tape", upstream={upstream!r})
def test_notes(tape_url):
    assert anyio.run(titles, tape_url, {adding!r}) == {adding!r}
"""


def test_new_episodes_over_http_hands_the_session_to_the_upstream(pytester: pytest.Pytester) -> None:
    def run_notes(mode: str, adding: list[str], upstream: str = "http://127.0.0.1:9/mcp") -> pytest.RunResult:
        pytester.makepyfile(test_notes=NOTES_OVER_HTTP.format(upstream=upstream, adding=adding))
        return pytester.runpytest_subprocess("-p", "no:cacheprovider", f"--tape-record-mode={mode}")

    with notes_over_http() as upstream:
        run_notes("once", ["a"], upstream).assert_outcomes(passed=1)
    with notes_over_http() as upstream:  # a fresh server: it only knows note a through the warm-up
        run_notes("new_episodes", ["a", "b"], upstream).assert_outcomes(passed=1)
    run_notes("none", ["a", "b"]).assert_outcomes(passed=1)  # offline, nothing listens upstream
    run_notes("none", ["a", "c"]).assert_outcomes(failed=1)


ECHO_TWICE_OVER_HTTP = f"""
import sys
sys.path.insert(0, {str(ROOT)!r})
import anyio, pytest
from tests.support.http_clients import echo_twice

@pytest.mark.tape({str(CASSETTES / "everything-http-2025-11-25.tape")!r}, repeats="allow"{{unused}})
def test_echo_twice(tape_url):
    assert anyio.run(echo_twice, tape_url) == ["Echo: hello", "Echo: hello"]
"""


@pytest.mark.parametrize("unused, outcome", [("", {"passed": 1}), (", fail_on_unused=True", {"passed": 1, "errors": 1})])
def test_the_marker_steers_http_replays_too(pytester: pytest.Pytester, unused: str, outcome: dict[str, int]) -> None:
    pytester.makepyfile(test_echo=ECHO_TWICE_OVER_HTTP.format(unused=unused))
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--tape-record-mode=none")
    result.assert_outcomes(**outcome)  # repeats="allow" answers the second echo; the recording has more unused
    if "errors" in outcome:
        result.stdout.fnmatch_lines(["*did not go as recorded:*", "*unused tools/call*"])


def test_an_unmatched_request_fails_the_test_naming_the_nearest_candidate(pytester: pytest.Pytester) -> None:
    run(pytester, "--tape-record-mode=once").assert_outcomes(passed=1)
    result = run(pytester, "--tape-record-mode=none", source=INNER.replace('CITY = "Paris"', 'CITY = "Lima"'))
    result.assert_outcomes(failed=1)  # the client got the replayer's JSON-RPC error
    result.stdout.fnmatch_lines(['*nearest recorded is tools/call #*differing at /params/arguments/city: "Paris" → "Lima"*'])


def test_a_miss_the_code_under_test_swallows_still_fails_the_test_at_teardown(pytester: pytest.Pytester) -> None:
    run(pytester, "--tape-record-mode=once").assert_outcomes(passed=1)
    swallowing = INNER.replace('CITY = "Paris"', 'CITY = "Lima"').replace(
        "assert anyio.run(forecast, tape_server, CITY).startswith(CITY)",
        "try:\n        anyio.run(forecast, tape_server, CITY)\n    except Exception:\n        pass")
    result = run(pytester, "--tape-record-mode=none", source=swallowing)
    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines(["*replay of *weather.tape did not go as recorded:*", "*unmatched tools/call id *Lima*"])


def test_frozen_clock_is_the_recorded_start(pytester: pytest.Pytester) -> None:
    run(pytester, "--tape-record-mode=once").assert_outcomes(passed=1)
    frozen = INNER.replace('server={', 'freeze_time=True, server={') + '''
@pytest.mark.tape("cassettes/weather.tape", freeze_time=True)
def test_clock(tape):
    print("NOW", datetime.now(UTC).isoformat())
'''
    result = run(pytester, "--tape-record-mode=none", source=frozen)
    result.assert_outcomes(passed=2)
    assert f"NOW {load(cassette(pytester)).header.created}" in result.stdout.str()
    recorded = load(cassette(pytester))  # a header whose time is no time: one line, no traceback
    save(dataclasses.replace(recorded, header=dataclasses.replace(recorded.header, created="yesterday")), cassette(pytester))
    result = run(pytester, "--tape-record-mode=none", source=frozen)
    result.assert_outcomes(passed=1, errors=1)  # test_clock's marker freezes the clock
    result.stdout.fnmatch_lines(["*freeze_time: cassette *weather.tape says it was created 'yesterday', not an ISO 8601 time*"])
    assert "Traceback" not in result.stdout.str()


def test_runs_under_xdist(pytester: pytest.Pytester) -> None:
    run(pytester, "--tape-record-mode=once").assert_outcomes(passed=1)
    many = INNER + "".join(
        f'''
@pytest.mark.tape("cassettes/weather.tape")
def test_forecast_{n}(tape_server):
    assert anyio.run(forecast, tape_server, CITY).startswith(CITY)
''' for n in range(4))
    run(pytester, "-n", "2", "--tape-record-mode=none", source=many).assert_outcomes(passed=5)


# --- race policies ----------------------------------------------------------------------------

RACE_SERVER = r'''
import json, sys
def send(message):
    sys.stdout.write(json.dumps(message) + "\n"); sys.stdout.flush()
for line in sys.stdin:
    message = json.loads(line)
    if message.get("method") == "initialize":
        send({"jsonrpc": "2.0", "id": message["id"], "result": {"protocolVersion": "2025-06-18",
              "capabilities": {"tools": {}}, "serverInfo": {"name": "race", "version": "1"}}})
    elif message.get("method") == "tools/list":
        send({"jsonrpc": "2.0", "id": message["id"], "result": {"tools": [{"name": "slow", "inputSchema": {"type": "object"}}]}})
    elif message.get("method") == "tools/call":
        token = message["params"]["_meta"]["progressToken"]
        send({"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progressToken": token, "progress": 1}})
        sys.stdin.readline()  # the client's cancel: this server answers anyway
        send({"jsonrpc": "2.0", "id": message["id"], "result": {"content": [{"type": "text", "text": "done"}]}})
'''


async def call_with_timeout(argv: list[str], timeout: float) -> str:
    """Call the slow tool; the SDK cancels it (notifications/cancelled) when `timeout` passes."""
    async with Client(StdioServerParameters(command=argv[0], args=argv[1:]), mode="legacy", cache=None) as client:
        async def progress(*_: object) -> None: ...

        await client.list_tools()  # listed first: the SDK checks results against the listing
        try:
            result = await client.call_tool("slow", {}, read_timeout_seconds=timeout, progress_callback=progress)
        except MCPError as error:
            return f"error: {error}"
    return result.content[0].text


@pytest.fixture(scope="module")
def race_cassette(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("race")
    (folder / "race_server.py").write_text(RACE_SERVER)
    path = folder / "race.tape"
    outcome = anyio.run(call_with_timeout, [*TAPES, "record", "-o", str(path), "--", sys.executable,
                                            str(folder / "race_server.py")], 0.3)
    assert outcome.startswith("error") and "timed out" in outcome
    messages = [frame.message for frame in load(path).frames if frame.message is not None]
    assert [m.get("method", "result") for m in messages[-3:]] == [
        "notifications/progress", "notifications/cancelled", "result"]  # answered after the cancel
    return path


async def outcomes(path: Path, race: str, runs: int) -> list[str]:
    results: list[str] = []
    limiter = anyio.CapacityLimiter(4)  # four replays at a time: 100 runs stay quick

    async def one() -> None:
        async with limiter:
            results.append(await call_with_timeout([*TAPES, "replay", str(path), "--race", race], 0.5))

    async with anyio.create_task_group() as group:
        for _ in range(runs):
            group.start_soon(one)
    return results


@pytest.mark.parametrize(("race", "expected"), [("response-wins", "done"), ("cancel-wins", "error: ")])
def test_race_policies_decide_the_outcome_every_time(race_cassette: Path, race: str, expected: str) -> None:
    results = anyio.run(functools.partial(outcomes, race_cassette, race, 100))
    assert len(results) == 100
    assert {result[: len(expected)] for result in results} == {expected}


# A server that reports progress after it has answered: the recording keeps that order, and every
# replay reproduces it, so a client's handling of a late progress notification can be tested.
LATE_PROGRESS_SERVER = RACE_SERVER.replace('''        send({"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progressToken": token, "progress": 1}})
        sys.stdin.readline()  # the client's cancel: this server answers anyway
        send({"jsonrpc": "2.0", "id": message["id"], "result": {"content": [{"type": "text", "text": "done"}]}})''',
'''        send({"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progressToken": token, "progress": 1}})
        send({"jsonrpc": "2.0", "id": message["id"], "result": {"content": [{"type": "text", "text": "done"}]}})
        send({"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progressToken": token, "progress": 2}})''')


async def call_seeing_progress(argv: list[str]) -> dict[str, object]:
    """Call the tool; what the progress callback saw, and every notification the client was handed
    before the session's next answer (a late one, if any, arrives before it)."""
    progress: list[float] = []
    handed: list[str] = []

    async def tap(message: object) -> None:
        handed.append(getattr(getattr(message, "params", None), "progress", None) or type(message).__name__)

    async def on_progress(value: float, *_: object) -> None:
        progress.append(value)

    async with Client(StdioServerParameters(command=argv[0], args=argv[1:]), mode="legacy", message_handler=tap,
                      cache=None) as client:
        await client.list_tools()
        result = await client.call_tool("slow", {}, progress_callback=on_progress)
        await client.list_tools()  # the late progress went out before this answer
    return {"result": result.content[0].text, "progress": progress, "handed": handed}


def test_progress_after_the_result_is_replayed_after_it_every_time(tmp_path: Path) -> None:
    (tmp_path / "late.py").write_text(LATE_PROGRESS_SERVER)
    path = tmp_path / "late.tape"
    live = anyio.run(call_seeing_progress, [*TAPES, "record", "-o", str(path), "--", sys.executable, str(tmp_path / "late.py")])
    server_said = [m.get("method", "result") for m in (f.message for f in load(path).frames if not f.from_client and f.message)]
    assert server_said[-4:-1] == ["notifications/progress", "result", "notifications/progress"]
    # the late progress reaches the client, whose progress callback no longer takes it
    assert live == {"result": "done", "progress": [1], "handed": [1, 2]}

    async def replays() -> list[dict[str, object]]:
        return [await call_seeing_progress([*TAPES, "replay", str(path)]) for _ in range(10)]

    assert anyio.run(replays) == [live] * 10
