"""A miss costs a bounded amount whatever the recording: the nearest-candidate search compares
only the first NEAREST_CANDIDATES unplayed requests of the method, large requests only member by
member, and the printed summary caps its lists (the JSON report has them all). The timing is in
bench/nearest_miss.py; these tests check the bounds themselves."""

from __future__ import annotations

import json
from typing import Any

from tapes.cassette.frames import Frame
from tapes.cassette.stdio_framer import StdioFramer, Stream
from tapes.replay.engine import DEEP_DIFF_SIZE, NEAREST_CANDIDATES, ReplayEngine
from tapes.replay.matching import MEMBERS_COUNTED, Difference, Matcher
from tapes.replay.outcomes import SUMMARY_LIMIT, Report, Unmatched


class CountingMatcher(Matcher):
    """The default matcher, noting each comparison a miss makes and whether it went in depth."""

    def __init__(self) -> None:
        super().__init__()
        self.compared: list[bool] = []

    def differences(self, recorded: dict[str, Any], live: dict[str, Any], *, deep: bool = True) -> list[Difference]:
        self.compared.append(deep)
        return super().differences(recorded, live, deep=deep)


def calls(count: int) -> list[Frame]:
    """A stdio recording of `count` tools/call requests, each answered, then one tools/list."""
    framer = StdioFramer()
    frames: list[Frame] = []
    for n in range(count):
        request = {"jsonrpc": "2.0", "id": n, "method": "tools/call", "params": {"name": "echo", "arguments": {"n": n}}}
        frames += framer.data(n, Stream.CLIENT_STDIN, json.dumps(request).encode() + b"\n")
        frames += framer.data(n, Stream.SERVER_STDOUT, json.dumps({"jsonrpc": "2.0", "id": n, "result": {}}).encode() + b"\n")
    frames += framer.data(count, Stream.CLIENT_STDIN, b'{"jsonrpc":"2.0","id":"l","method":"tools/list"}\n')
    return frames


def miss(engine: ReplayEngine, arguments: dict[str, Any]) -> str:
    request = {"jsonrpc": "2.0", "id": "x", "method": "tools/call", "params": {"name": "echo", "arguments": arguments}}
    [reply] = engine.receive(json.dumps(request).encode()).replies
    return reply.message["error"]["message"]


def test_a_miss_compares_a_capped_number_of_candidates_of_its_method() -> None:
    matcher = CountingMatcher()
    engine = ReplayEngine(calls(2_000), matcher)
    said = miss(engine, {"n": "nope"})
    assert len(matcher.compared) == NEAREST_CANDIDATES and all(matcher.compared)
    assert "nearest recorded is tools/call #0 (frame 1), differing at /params/arguments/n: 0 → \"nope\"" in said


def test_played_requests_are_not_candidates_any_more() -> None:
    matcher = CountingMatcher()
    engine = ReplayEngine(calls(40), matcher)
    for n in range(30):  # played in recorded order
        miss_or_hit = engine.receive(json.dumps({"jsonrpc": "2.0", "id": n, "method": "tools/call",
                                                 "params": {"name": "echo", "arguments": {"n": n}}}).encode())
        assert not miss_or_hit.replies
    assert "nearest recorded is tools/call #30 " in miss(engine, {"n": "nope"})
    assert len(matcher.compared) == 10  # the 10 left


def test_a_large_request_is_compared_member_by_member() -> None:
    matcher = CountingMatcher()
    engine = ReplayEngine(calls(100), matcher)
    said = miss(engine, {"n": 1, "blob": "x" * (DEEP_DIFF_SIZE + 1)})
    assert len(matcher.compared) == NEAREST_CANDIDATES and not any(matcher.compared)
    assert "differing at /params/arguments: " in said and len(said) < 400  # the blob is shown cut short


def test_a_request_of_many_members_costs_a_bounded_count_of_differences() -> None:
    """250 000 params: each candidate's differing members are counted to MEMBERS_COUNTED, not one
    by one to the end (a 4 MB body held an HTTP replay's event loop for seconds)."""
    many = {f"k{n}": 0 for n in range(250_000)}
    recorded = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "echo"}}
    found = Matcher().differences(recorded, {**recorded, "params": many}, deep=False)
    assert len(found) == MEMBERS_COUNTED and found[0].path == "/params/name"


def test_a_method_the_recording_lacks_is_compared_with_the_first_requests_of_any_method() -> None:
    matcher = CountingMatcher()
    engine = ReplayEngine(calls(100), matcher)
    request = {"jsonrpc": "2.0", "id": "p", "method": "prompts/list"}
    [reply] = engine.receive(json.dumps(request).encode()).replies
    assert len(matcher.compared) == NEAREST_CANDIDATES
    assert "nearest recorded is tools/call #0 (frame 1), differing at /method" in reply.message["error"]["message"]


def test_the_summary_caps_long_lists_and_the_json_report_keeps_them() -> None:
    report = Report(played=3, unmatched=[Unmatched(f"ping id {n}", "no") for n in range(12)],
                    unused=[f"tools/call #{n}" for n in range(200_000)])
    lines = report.lines()
    assert lines[0] == "played 3 frames, 12 unmatched, 200000 unused"
    assert lines[1 : SUMMARY_LIMIT + 1] == [f"unmatched ping id {n}: no" for n in range(SUMMARY_LIMIT)]
    assert lines[SUMMARY_LIMIT + 1] == "… and 2 more unmatched (all of them in the JSON report: --report FILE)"
    assert lines[-1] == "… and 199 990 more unused (all of them in the JSON report: --report FILE)"
    assert len(lines) == 1 + 2 * (SUMMARY_LIMIT + 1)
    assert len(report.as_json()["unused"]) == 200_000


def test_once_every_request_of_its_method_was_played_a_miss_names_the_nearest_played_one() -> None:
    def call(live_id: str, n: int) -> bytes:
        return json.dumps({"jsonrpc": "2.0", "id": live_id, "method": "tools/call",
                           "params": {"name": "echo", "arguments": {"n": n}}}).encode()

    engine = ReplayEngine(calls(3))
    for n in range(3):
        engine.receive(call(f"live-{n}", n))
    [reply] = engine.receive(call("x", 7)).replies
    assert "nearest recorded is tools/call #0 (frame 1), already played, differing at /params/arguments/n: 0 → 7" \
        in reply.message["error"]["message"]
