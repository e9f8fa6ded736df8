"""The pytest plugin's default cassette names (one file per test, classes and parameter ids
included) and the mistakes around it that fail a test's setup in one line."""

from __future__ import annotations

import sys

import pytest

from tests.support.paths import CASSETTES

WEATHER = [sys.executable, str(CASSETTES / "example" / "weather_server.py")]

TESTS = f'''
import anyio, pytest
from mcp import Client, StdioServerParameters

async def forecast(server, city):
    async with Client(StdioServerParameters(command=server[0], args=server[1:]), mode="legacy", cache=None) as client:
        return (await client.call_tool("get_forecast", {{"city": city}})).content[0].text

pytestmark = pytest.mark.tape(server={WEATHER!r})

class TestAlice:
    def test_city(self, tape_server):
        assert anyio.run(forecast, tape_server, "Paris").startswith("Paris")

class TestBob:
    def test_city(self, tape_server):
        assert anyio.run(forecast, tape_server, "Lima").startswith("Lima")

class TestParis:
    class TestWeather:
        def test_city(self, tape_server):
            assert anyio.run(forecast, tape_server, "Paris").startswith("Paris")

class TestLima:
    class TestWeather:
        def test_city(self, tape_server):
            assert anyio.run(forecast, tape_server, "Lima").startswith("Lima")

@pytest.mark.parametrize("city", ["Ann Lee", "Ann/Lee", "Ann?Lee", "Oslo"])
def test_named(tape_server, city):
    assert anyio.run(forecast, tape_server, city).startswith(city)

def test_named_Oslo(tape_server):
    assert anyio.run(forecast, tape_server, "Rome").startswith("Rome")
'''


def test_every_test_records_and_replays_a_cassette_of_its_own(pytester: pytest.Pytester) -> None:
    """Same-named tests of two classes (or of two same-named classes nested in others), ids that
    differ only in characters a file name should not hold, and an id that spells another test's
    name shared one file: the second test replayed the first's recording, and failed, or passed
    against the wrong one. A class in none keeps its name alone."""
    pytester.makepyfile(test_weather=TESTS)
    pytester._monkeypatch.delenv("CI", raising=False)
    pytester.runpytest_subprocess("-p", "no:cacheprovider", "--tape-record-mode=once").assert_outcomes(passed=9)
    names = sorted(path.name for path in (pytester.path / "cassettes" / "test_weather").iterdir())
    assert len(names) == 9 and "TestAlice.test_city.tape" in names and "TestBob.test_city.tape" in names
    assert "TestParis.TestWeather.test_city.tape" in names and "TestLima.TestWeather.test_city.tape" in names
    assert "test_named-Oslo.tape" in names and "test_named_Oslo.tape" in names
    assert sum(name.startswith("test_named-Ann_Lee-") for name in names) == 3
    pytester.runpytest_subprocess("-p", "no:cacheprovider", "--tape-record-mode=none").assert_outcomes(passed=9)


LONG_IDS = f'''
import anyio, pytest
from mcp import Client, StdioServerParameters

async def forecast(server, city):
    async with Client(StdioServerParameters(command=server[0], args=server[1:]), mode="legacy", cache=None) as client:
        return (await client.call_tool("get_forecast", {{"city": city}})).content[0].text

@pytest.mark.tape(server={WEATHER!r})
@pytest.mark.parametrize("city", ["x" * 300, "y" * 233, "é" * 200], ids=str)
def test_named(tape_server, city):
    assert anyio.run(forecast, tape_server, "Paris").startswith("Paris")
'''


def test_a_long_test_id_gets_a_name_cut_to_fit_with_its_scratch_name(pytester: pytest.Pytester) -> None:
    """An id too long for a file name was an OSError traceback (File name too long); one that fit
    recorded under `once` and failed under `all`, whose scratch name is longer. Cut by bytes: the
    'é's are two each, kept whole."""
    pytester.makepyfile(test_weather=LONG_IDS)
    (pytester.path / "pytest.ini").write_text(
        "[pytest]\ndisable_test_id_escaping_and_forfeit_all_rights_to_community_support = true\n")
    pytester._monkeypatch.delenv("CI", raising=False)
    for mode in ("once", "all", "none"):
        result = pytester.runpytest_subprocess("-p", "no:cacheprovider", f"--tape-record-mode={mode}")
        result.assert_outcomes(passed=3)
    names = [path.name for path in (pytester.path / "cassettes" / "test_weather").iterdir()]
    assert len(names) == 3 and all(len(name.encode()) <= 255 - len(".episodes.episode") for name in names)
    assert sorted(name[:12] for name in names) == ["test_named-x", "test_named-y", "test_named-é"]


@pytest.mark.parametrize(("files", "said"), [
    ({"pyproject.toml": '[tool.tapes]\nformt = "jsonl"\n'}, "[tool.tapes] has no setting 'formt'"),
    ({"pyproject.toml": '[tool.tapes]\nrecord-mode = "sometimes"\n'}, "tape record mode 'sometimes' is not one of"),
    ({"pytest.ini": "[pytest]\ntape_record_mode = replay\n"}, "tape record mode 'replay' is not one of"),
])
def test_a_setting_that_is_wrong_fails_the_setup_in_one_line(pytester: pytest.Pytester, files: dict[str, str], said: str) -> None:
    for name, text in files.items():
        (pytester.path / name).write_text(text)
    pytester.makepyfile(test_weather=TESTS)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-k", "TestAlice")
    result.assert_outcomes(errors=1)
    assert said in result.stdout.str() and "Traceback" not in result.stdout.str() and "pytest_plugin.py" not in result.stdout.str()


def test_tape_url_on_a_stdio_cassette_says_which_fixture_replays_it(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_url=f'''
import pytest
@pytest.mark.tape({str(CASSETTES / "example" / "weather.tape")!r})
def test_url(tape_url):
    pass
''')
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--tape-record-mode=none")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*weather.tape was recorded over stdio: use the tape_server (or tape_transport) fixture*"])


def test_a_truncated_cassette_replayed_in_process_is_a_test_warning(pytester: pytest.Pytester) -> None:
    """tape_transport and tape_url load the cassette themselves: what loading it warned of (its
    last frame cut short) was said nowhere."""
    full = (CASSETTES / "example" / "weather.tape").read_bytes()
    (pytester.path / "cut.tape").write_bytes(full[:-40])
    pytester.makepyfile(test_cut='''
import pytest
@pytest.mark.tape("cut.tape")
def test_cut(tape_transport):
    pass
''')
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--tape-record-mode=none")
    result.assert_outcomes(passed=1, warnings=1)
    result.stdout.fnmatch_lines(["*replay of *cut.tape: *the last frame is truncated at byte*"])
