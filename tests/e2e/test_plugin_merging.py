"""The tape marker as a suite uses it: markers merged from module to class to test over the
`tape_config` fixture, unknown arguments refused by name, user mistakes in one line, failed
(or empty) recordings not kept, and the wrong fixture for a cassette's transport said plainly.
The code under test is the official SDK client against the bundled weather server."""

from __future__ import annotations

import shutil
import sys

import pytest

from tapes.cassette.store import Cassette, Header, save
from tests.support.paths import CASSETTES

WEATHER = [sys.executable, str(CASSETTES / "example" / "weather_server.py")]
NOTHING_RECORDED = "*UserWarning: recording of *.tape: the test {}, so nothing was recorded and the cassette was not written"

CLIENT = '''
import anyio, pytest
from mcp import Client, StdioServerParameters

async def forecast_twice(server, city):
    async with Client(StdioServerParameters(command=server[0], args=server[1:]), mode="legacy", cache=None) as client:
        first = await client.call_tool("get_forecast", {"city": city})
        again = await client.call_tool("get_forecast", {"city": city})
    return first.content[0].text, again.content[0].text
'''


def run(pytester: pytest.Pytester, source: str, *args: str) -> pytest.RunResult:
    pytester.makepyfile(test_weather=CLIENT + source)
    pytester._monkeypatch.delenv("CI", raising=False)
    return pytester.runpytest_subprocess("-p", "no:cacheprovider", *args)


def test_module_class_and_test_markers_merge_the_closest_winning(pytester: pytest.Pytester) -> None:
    # The module names the server; the test adds repeats="allow" (its recording asks once, the
    # replay asks twice). Without merging the test's marker would have no server to record with.
    source = f'''
pytestmark = pytest.mark.tape("cassettes/weather.tape", server={WEATHER!r}, repeats="in-order")

class TestForecast:
    pytestmark = pytest.mark.tape(fail_on_unused=False)

    @pytest.mark.tape(repeats="allow")
    def test_forecast(self, tape_server, tape):
        first, again = anyio.run(forecast_twice, tape_server, "Paris")
        assert first == again and first.startswith("Paris")
'''
    run(pytester, source, "--tape-record-mode=once").assert_outcomes(passed=1)
    replayed = run(pytester, source, "--tape-record-mode=none")
    replayed.assert_outcomes(passed=1)


def test_tape_config_gives_defaults_that_markers_override(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(f'''
import pytest

@pytest.fixture
def tape_config():
    return {{"server": {WEATHER!r}, "repeats": "strict-order"}}
''')
    source = '''
@pytest.mark.tape("cassettes/weather.tape", repeats="allow")
def test_forecast(tape_server, tape):
    first, again = anyio.run(forecast_twice, tape_server, "Lyon")
    assert first == again
'''
    run(pytester, source, "--tape-record-mode=once").assert_outcomes(passed=1)
    run(pytester, source, "--tape-record-mode=none").assert_outcomes(passed=1)


def test_an_unknown_marker_argument_is_refused_by_name(pytester: pytest.Pytester) -> None:
    source = f'''
@pytest.mark.tape("cassettes/weather.tape", sever={WEATHER!r})
def test_forecast(tape_server):
    pass
'''
    result = run(pytester, source, "--tape-record-mode=once")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*tape marker: unknown argument 'sever' (did you mean 'server'?)*"])
    assert "Traceback" not in result.stdout.str()


@pytest.mark.parametrize(("marker", "expected"), [
    (f'"cassettes/weather.tape", server={WEATHER!r}, match="no-such-matcher"', "*tape marker: *no-such-matcher*"),
    (f'"/proc/no/such/dir/weather.tape", server={WEATHER!r}', "*cannot record /proc/no/such/dir/weather.tape*"),
])
def test_user_mistakes_are_one_line(pytester: pytest.Pytester, marker: str, expected: str) -> None:
    source = f'''
@pytest.mark.tape({marker})
def test_forecast(tape_server):
    pass
'''
    result = run(pytester, source, "--tape-record-mode=once")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines([expected])
    assert "Traceback" not in result.stdout.str()


@pytest.mark.parametrize("fixture", ["tape_server", "tape_transport", "tape_url"])
def test_a_damaged_cassette_fails_each_replay_fixture_in_one_line(pytester: pytest.Pytester, fixture: str) -> None:
    (pytester.path / "cassettes").mkdir()
    (pytester.path / "cassettes" / "weather.tape").write_bytes(b"\x81\xa9mcp-tapes\x02\xc1")  # a header cut short
    source = f'''
@pytest.mark.tape("cassettes/weather.tape", server={WEATHER!r})
def test_forecast({fixture}):
    pass
'''
    result = run(pytester, source, "--tape-record-mode=none")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*cassettes/weather.tape: has an unusable header at byte 0 (it has no transport)",
                                 "ERROR *Failed: *"])  # the test failed in one sentence, not by an exception
    assert "During handling" not in result.stdout.str()


def test_a_recording_whose_test_failed_is_not_kept_under_once(pytester: pytest.Pytester) -> None:
    source = f'''
@pytest.mark.tape("cassettes/weather.tape", server={WEATHER!r})
def test_forecast(tape_server):
    first, _ = anyio.run(forecast_twice, tape_server, "Paris")
    assert first.startswith("Nowhere")
'''
    run(pytester, source, "--tape-record-mode=once").assert_outcomes(failed=1)
    assert not (pytester.path / "cassettes" / "weather.tape").exists()


def test_an_unreachable_upstream_is_said_and_nothing_is_kept(pytester: pytest.Pytester) -> None:
    source = '''
import httpx

@pytest.mark.tape("cassettes/remote.tape", upstream="http://127.0.0.1:9/mcp")
def test_remote(tape_url):
    httpx.post(tape_url, json={"jsonrpc": "2.0", "id": 1, "method": "ping"}, timeout=10)
'''
    result = run(pytester, source, "--tape-record-mode=once")
    result.stdout.fnmatch_lines(["*upstream unreachable at http://127.0.0.1:9/mcp*"])
    assert not (pytester.path / "cassettes" / "remote.tape").exists()


def test_a_recording_of_no_request_is_said_and_not_kept(pytester: pytest.Pytester) -> None:
    # nothing listens upstream, and nothing asked it: a kept empty recording failed the next run's setup
    source = '''
@pytest.mark.tape("cassettes/remote.tape", upstream="http://127.0.0.1:9/mcp")
def test_remote(tape_url):
    pass
'''
    for _ in range(2):  # the next run records again
        result = run(pytester, source, "--tape-record-mode=once")
        result.assert_outcomes(passed=1, warnings=1)
        result.stdout.fnmatch_lines([NOTHING_RECORDED.format("sent no request")])
        assert not (pytester.path / "cassettes" / "remote.tape").exists()


def test_a_recording_of_no_request_leaves_the_cassette_it_would_replace(pytester: pytest.Pytester) -> None:
    (pytester.path / "cassettes").mkdir()
    cassette = pytester.path / "cassettes" / "remote.tape"
    shutil.copyfile(CASSETTES / "everything-http-2025-11-25.tape", cassette)
    source = '''
@pytest.mark.tape("cassettes/remote.tape", upstream="http://127.0.0.1:9/mcp")
def test_remote(tape_url):
    pass
'''
    result = run(pytester, source, "--tape-record-mode=all")
    result.assert_outcomes(passed=1, warnings=1)
    assert cassette.read_bytes() == (CASSETTES / "everything-http-2025-11-25.tape").read_bytes()


def test_a_stdio_test_that_never_starts_its_server_is_said(pytester: pytest.Pytester) -> None:
    source = f'''
@pytest.mark.tape("cassettes/weather.tape", server={WEATHER!r})
def test_forecast(tape_server):
    pass
'''
    result = run(pytester, source, "--tape-record-mode=once")
    result.assert_outcomes(passed=1, warnings=1)
    result.stdout.fnmatch_lines([NOTHING_RECORDED.format("never started its server")])
    assert not (pytester.path / "cassettes" / "weather.tape").exists()


def test_a_stdio_server_started_and_told_nothing_is_a_recording_kept(pytester: pytest.Pytester) -> None:
    source = f'''
import subprocess

@pytest.mark.tape("cassettes/weather.tape", server={WEATHER!r})
def test_forecast(tape_server):
    subprocess.run(tape_server, stdin=subprocess.DEVNULL, capture_output=True, timeout=30)
'''
    result = run(pytester, source, "--tape-record-mode=once")
    result.assert_outcomes(passed=1)
    assert (pytester.path / "cassettes" / "weather.tape").exists()


def test_an_http_cassette_of_no_request_says_so_in_the_plugins_terms(pytester: pytest.Pytester) -> None:
    # as an older version kept one: a header and no frame
    (pytester.path / "cassettes").mkdir()
    save(Cassette(Header("http", {"url": "http://127.0.0.1:9/mcp"}), []), pytester.path / "cassettes" / "remote.tape")
    source = '''
@pytest.mark.tape("cassettes/remote.tape", upstream="http://127.0.0.1:9/mcp")
def test_remote(tape_url):
    pass
'''
    result = run(pytester, source, "--tape-record-mode=once")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*remote.tape has no HTTP requests to replay (it recorded nothing): delete it to record it again"])
    assert "--http" not in result.stdout.str()


def test_an_http_cassette_with_the_stdio_fixture_says_which_fixture_to_use(pytester: pytest.Pytester) -> None:
    http_cassette = CASSETTES / "everything-http-2025-11-25.tape"
    source = f'''
@pytest.mark.tape({str(http_cassette)!r})
def test_it(tape_server):
    pass
'''
    result = run(pytester, source, "--tape-record-mode=none")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*was recorded over HTTP: use the tape_url fixture*"])


def test_a_matcher_registered_in_conftest_works_for_a_stdio_replay(pytester: pytest.Pytester) -> None:
    # the stdio replayer is a process of its own: the plugin names the predicate by its file
    pytester.makeconftest('''
import tapes

def same_city_any_case(recorded, live):
    city = lambda request: str(((request.get("params") or {}).get("arguments") or {}).get("city", "")).lower()
    return city(recorded) == city(live)

tapes.register_matcher("any-case", same_city_any_case)
''')
    source = f'''
@pytest.mark.tape("cassettes/weather.tape", server={WEATHER!r}, match="any-case")
def test_forecast(tape_server, tape):
    first, _ = anyio.run(forecast_twice, tape_server, "Paris" if tape.recording else "PARIS")
    assert first.startswith("Paris")
'''
    run(pytester, source, "--tape-record-mode=once").assert_outcomes(passed=1)
    run(pytester, source, "--tape-record-mode=none").assert_outcomes(passed=1)


def test_marker_arguments_of_the_wrong_shape_are_refused_in_one_line(pytester: pytest.Pytester) -> None:
    source = f'''
@pytest.mark.tape(1234, server={WEATHER!r})
def test_path_is_a_number(tape_server):
    pass

@pytest.mark.tape("cassettes/weather.tape", "cassettes/other.tape", server={WEATHER!r})
def test_two_paths(tape_server):
    pass

@pytest.mark.tape("cassettes/weather.tape", server="python weather.py")
def test_server_is_one_string(tape_server):
    pass

@pytest.mark.tape("cassettes/weather.tape", server={WEATHER!r}, fail_on_unused="no")
def test_fail_on_unused_is_a_string(tape_server):
    pass

@pytest.mark.tape("cassettes/weather.tape", server={WEATHER!r}, freeze_time="no")
def test_freeze_time_is_a_string(tape_server):
    pass

@pytest.mark.tape("cassettes/weather.tape", server={WEATHER!r}, before_record=["hooks:scrub"])
def test_hook_is_a_list(tape_server):
    pass

@pytest.mark.tape("cassettes/weather.tape", server={WEATHER!r}, match=5)
def test_matcher_is_a_number(tape_server):
    pass

@pytest.mark.tape("cassettes/weather.tape", server={WEATHER!r}, timing=[1])
def test_timing_is_a_list(tape_server):
    pass

@pytest.mark.tape("cassettes/weather.tape", upstream=123)
def test_upstream_is_a_number(tape_server):
    pass
'''
    result = run(pytester, source, "--tape-record-mode=once")
    result.assert_outcomes(errors=9)
    result.stdout.fnmatch_lines_random([
        "*tape marker: its one positional argument is the cassette's path, a string (got 1234)*",
        "*tape marker: its one positional argument is the cassette's path, a string (got 'cassettes/weather.tape', 'cassettes/other.tape')*",
        "*tape marker: server is not a list of strings (e.g. server=*",  # (fnmatch reads [...] as a set)
        "*tape marker: fail_on_unused is True or False, not 'no'*",
        "*tape marker: freeze_time is True or False, not 'no'*",
        "*tape marker: before_record is a string, not ?'hooks:scrub'?*",
        "*tape marker: match is a string, not 5*",
        "*tape marker: timing is a string, not ?1?*",
        "*tape marker: upstream is a string, not 123*"])
    assert "Traceback" not in result.stdout.str()


def test_a_recording_whose_hook_failed_does_not_take_the_cassettes_place(pytester: pytest.Pytester) -> None:
    """The recorder could not pass the frames through the hook: the raw capture it leaves holds what
    the hook would remove, so it is not put at the cassette's name (nor replayed next time)."""
    pytester.makepyfile(broken="def raises(frame):\n    raise RuntimeError('no')\n")
    source = f'''
@pytest.mark.tape("cassettes/weather.tape", server={WEATHER!r}, before_record="broken:raises")
def test_forecast(tape_server):
    first, again = anyio.run(forecast_twice, tape_server, "Paris")
    assert first.startswith("Paris")
'''
    result = run(pytester, source, "--tape-record-mode=once")
    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines(["*the recording of *weather.tape did not finish, so hook:broken:raises was not applied to it: "
                                 "it did not take the cassette's place, and is kept in *weather.recording.tape*"])
    assert not (pytester.path / "cassettes" / "weather.tape").exists()
