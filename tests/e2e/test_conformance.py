"""The official MCP conformance suite (@modelcontextprotocol/conformance, its server scenarios)
against a replay. The suite runs against tests/servers/conformance_server.py through `tapes
record`, then against `tapes replay --http` of that cassette: each scenario passes as it did when
recorded, run in the recorded order, then again against the same replay, and one by one in the
reverse order against a fresh one (a suite's scenarios open their sessions alike: each goes on in
the recording of the client that did what it does)."""

from __future__ import annotations

import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.http_peers import Tapes
from tests.support.paths import CONFORMANCE_SERVER, CONFORMANCE_SUITE
from tests.support.processes import TIMEOUT, Process

RESULT = re.compile(r"^[✓✗] (\S+): (\d+) passed, (\d+) failed", re.MULTILINE)  # a line per scenario of a suite run
ONE_RESULT = re.compile(r"^Passed: (\d+)/\d+, (\d+) failed", re.MULTILINE)  # a single scenario's run


def suite(url: str, *scenario: str) -> dict[str, tuple[int, int]]:
    """Each scenario run (one `scenario`, or all of the default suite): (checks passed, failed)."""
    if not Path(CONFORMANCE_SUITE[0]).exists():
        raise AssertionError("the conformance suite is not installed: run `npm install --prefix tests/peers/conformance` (.ci/run does)")
    argv = [*CONFORMANCE_SUITE, "server", "--url", url, *(("--scenario", *scenario) if scenario else ())]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=TIMEOUT * 4, stdin=subprocess.DEVNULL)
    found = [(scenario[0], *one) for one in ONE_RESULT.findall(done.stdout)] if scenario else RESULT.findall(done.stdout)
    results = {name: (int(passed), int(failed)) for name, passed, failed in found}
    assert results, done.stdout + done.stderr
    return results


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, dict[str, tuple[int, int]]]]:
    """The suite's run through the recorder, and its results."""
    cassette = tmp_path_factory.mktemp("conformance") / "suite.tape"
    server = Process(CONFORMANCE_SERVER)
    try:
        upstream = server.wait_for(r"listening on (\S+)")[1]
        recorder = Tapes("record", "-o", str(cassette), "--upstream", upstream, banner="recording")
        results = suite(recorder.url)
        assert recorder.stop()[0] == 0
    finally:
        server.stop()
    yield cassette, results


def test_every_scenario_passes_through_the_recorder(recorded: tuple[Path, dict[str, tuple[int, int]]]) -> None:
    _, results = recorded
    assert len(results) >= 30 and all(failed == 0 for _, failed in results.values()), results


def test_the_replay_passes_the_suite_and_passes_it_again(recorded: tuple[Path, dict[str, tuple[int, int]]]) -> None:
    cassette, results = recorded
    replay = Tapes("replay", str(cassette), "--http", banner="replaying at")
    try:
        first, second = suite(replay.url), suite(replay.url)
    finally:
        code, summary = replay.stop()
    assert first == results and second == results
    assert code == 0, summary


def test_the_replay_passes_scenarios_run_in_another_order(recorded: tuple[Path, dict[str, tuple[int, int]]]) -> None:
    cassette, results = recorded
    replay = Tapes("replay", str(cassette), "--http", banner="replaying at")
    try:
        reversed_order = {name: suite(replay.url, name)[name] for name in reversed(list(results))}
    finally:
        code, summary = replay.stop()
    assert reversed_order == results
    assert code == 0, summary
