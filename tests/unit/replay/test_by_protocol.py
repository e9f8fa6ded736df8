"""What a replay answers by the protocol rather than from the cassette, for a client unlike the
recorded one: its handshake (another version, other capabilities), pings, the server/discover probe
of a 2026-07-28 client to a server of an initialize era, and blank lines on stdio."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tapes.cassette.frames import Kind
from tapes.cassette.stdio_framer import StdioFramer, Stream
from tapes.replay.engine import Repeats, ReplayEngine
from tapes.replay.matching import CallableMatcher, Matcher, matcher_named
from tapes.replay.outcomes import NO_MATCH
from tapes.wire.jsonrpc import METHOD_NOT_FOUND

from tests.support.messages import note, req, res
from tests.support.recordings import recording, send


def initialize(id_: int, version: str, capabilities: dict, client: str = "recorder") -> dict:
    return req(id_, "initialize", {"protocolVersion": version, "capabilities": capabilities,
                                   "clientInfo": {"name": client, "version": "1"}})


RECORDED_RESULT = {"protocolVersion": "2025-06-18", "capabilities": {"tools": {}}, "serverInfo": {"name": "s", "version": "1"}}
SESSION = recording(
    ("c", initialize(1, "2025-06-18", {"roots": {"listChanged": True}, "sampling": {}})),
    ("s", res(1, RECORDED_RESULT)),
    ("c", note("notifications/initialized")),
    ("c", req(2, "tools/list")),
    ("s", res(2, {"tools": []})),
)


@pytest.mark.parametrize("asked", ["2024-11-05", "2025-03-26"])
def test_a_client_of_an_earlier_version_gets_its_version(asked: str) -> None:
    # a client that speaks only earlier versions gave up on the recorded server's later choice
    # (the Python SDK 1.9: "Unsupported protocol version from the server: 2025-06-18")
    engine = ReplayEngine(SESSION)
    assert send(engine, initialize(0, asked, {}, client="older")) == [res(0, {**RECORDED_RESULT, "protocolVersion": asked})]
    assert send(engine, note("notifications/initialized")) == []
    assert send(engine, req(1, "tools/list")) == [res(1, {"tools": []})]
    report = engine.report
    assert report.clean and report.unused == []
    assert report.adapted[1] == (f"initialize id 0: answered at {asked}, the version the live client asked for, where "
                                 "the recorded server chose 2025-06-18, as a server that speaks both would")


@pytest.mark.parametrize("asked", ["2025-11-25", "2026-07-28", "1999-01-01"])
def test_a_client_of_a_later_or_unknown_version_gets_the_recorded_one(asked: str) -> None:
    engine = ReplayEngine(SESSION)
    assert send(engine, initialize(0, asked, {})) == [res(0, RECORDED_RESULT)]
    assert len(engine.report.adapted) == 1


def test_a_handshake_from_another_client_gets_the_recorded_answer_and_a_note() -> None:
    engine = ReplayEngine(SESSION)
    live = initialize(0, "2025-11-25", {}, client="someone else")
    assert send(engine, live) == [res(0, RECORDED_RESULT)]  # the version the recorded server chose
    assert send(engine, note("notifications/initialized")) == []
    assert send(engine, req(1, "tools/list")) == [res(1, {"tools": []})]
    report = engine.report
    assert report.clean and report.unused == []
    [adapted] = report.adapted
    assert adapted.startswith("initialize id 0: answered as the recorded initialize #1 (frame 1), which differed at ")
    assert '/params/protocolVersion: "2025-06-18" → "2025-11-25"' in adapted and "/params/capabilities/sampling" in adapted
    assert any(line.startswith("adapted initialize id 0") for line in report.lines())
    assert report.as_json()["adapted"] == [adapted]


def test_a_client_that_does_not_probe_first_still_gets_what_the_server_said_after_the_recorded_probe() -> None:
    # A recording by a client that probes with server/discover, to a server of an initialize era
    # that wrote to stderr after the probe came: a client that opens with initialize at once gets
    # that stderr too, and the probe is no miss, nor unused.
    framer = StdioFramer()
    frames = [*framer.data(0, Stream.CLIENT_STDIN, json.dumps(req(1, "server/discover")).encode() + b"\n"),
              *framer.data(1, Stream.SERVER_STDERR, b"Starting server...\n"),
              *framer.data(2, Stream.SERVER_STDOUT, json.dumps({"jsonrpc": "2.0", "id": 1, "error": {
                  "code": METHOD_NOT_FOUND, "message": "Method not found"}}).encode() + b"\n"),
              *framer.data(3, Stream.CLIENT_STDIN, json.dumps(initialize(2, "2025-06-18", {})).encode() + b"\n"),
              *framer.data(4, Stream.SERVER_STDOUT, json.dumps(res(2, RECORDED_RESULT)).encode() + b"\n")]
    engine = ReplayEngine(frames)
    reception = engine.receive(json.dumps(initialize(0, "2025-06-18", {})).encode())
    assert [(action.frame.kind, action.payload) for action in reception.actions] == [
        (Kind.STDERR, b"Starting server..."), (Kind.MESSAGE, json.dumps(res(0, RECORDED_RESULT), separators=(",", ":")).encode())]
    report = engine.report
    assert report.clean and report.unused == []
    assert report.adapted == ["initialize id 0: the live client did not probe first; the recorded server/discover #1 "
                              "(frame 1) before it was skipped"]


def test_an_equal_handshake_is_preferred_and_is_no_adaptation() -> None:
    two = recording(("c", initialize(1, "2025-03-26", {})), ("s", res(1, {"first": True})),
                    ("c", initialize(2, "2025-06-18", {"sampling": {}})), ("s", res(2, {"second": True})))
    engine = ReplayEngine(two)
    assert send(engine, initialize(5, "2025-06-18", {"sampling": {}})) == [res(5, {"second": True})]
    assert engine.report.adapted == []
    assert send(engine, initialize(6, "2024-11-05", {})) == [res(6, {"first": True})]  # then the one left
    assert len(engine.report.adapted) == 1


def _same_version(recorded: dict, live: dict) -> bool:
    return recorded["params"]["protocolVersion"] == live["params"]["protocolVersion"]


@pytest.mark.parametrize("matcher", [matcher_named("exact"), CallableMatcher("same-version", _same_version)])
def test_matchers_that_compare_every_param_or_ask_a_predicate_do_not_adapt(matcher: Matcher) -> None:
    engine = ReplayEngine(SESSION, matcher)
    [error] = send(engine, initialize(0, "2025-11-25", {}))
    assert error["error"]["code"] == NO_MATCH and "protocolVersion" in error["error"]["message"]
    assert engine.report.adapted == []


@pytest.mark.parametrize("params", [None, [1, 2], {"capabilities": {}}, {"protocolVersion": 2025}])
def test_a_handshake_a_server_would_refuse_is_a_miss(params: object) -> None:
    engine = ReplayEngine(SESSION)
    live = {"jsonrpc": "2.0", "id": 0, "method": "initialize", **({"params": params} if params is not None else {})}
    [error] = send(engine, live)
    assert error["error"]["code"] == NO_MATCH and not engine.report.clean and engine.report.adapted == []


def test_strict_order_adapts_only_the_handshake_that_comes_next() -> None:
    engine = ReplayEngine(SESSION, repeats=Repeats.STRICT)
    assert send(engine, initialize(0, "2025-11-25", {})) == [res(0, RECORDED_RESULT)]
    [error] = send(engine, initialize(1, "2025-11-25", {}))
    assert error["error"]["code"] == NO_MATCH


def test_pings_the_recording_has_none_left_of_get_an_empty_result() -> None:
    engine = ReplayEngine(recording(("c", req(1, "ping")), ("s", res(1, {"recorded": True}))))
    assert send(engine, req(7, "ping")) == [res(7, {"recorded": True})]  # the recorded one first
    assert send(engine, req("p", "ping")) == [res("p", {})]
    assert send(engine, req(9, "ping")) == [res(9, {})]
    assert engine.report.clean
    # counted, not listed: a client may ping all day
    assert engine.report.adapted == ["ping ×2: answered with an empty result (the recording had no unplayed ping left)"]


def test_a_log_level_gets_an_empty_result_only_from_a_server_that_declared_logging() -> None:
    with_logging = recording(("c", initialize(1, "2025-06-18", {})),
                             ("s", res(1, {**RECORDED_RESULT, "capabilities": {"logging": {}}})))
    engine = ReplayEngine(with_logging)
    send(engine, initialize(1, "2025-06-18", {}))
    assert send(engine, req(2, "logging/setLevel", {"level": "debug"})) == [res(2, {})]
    assert engine.report.clean and engine.report.adapted[-1].startswith("logging/setLevel ×1: answered with an empty result")
    [refused] = send(engine, req(3, "logging/setLevel", {"level": "loud"}))  # not a level: the server would refuse it
    assert refused["error"]["code"] == NO_MATCH
    for odd in ({"x": 1}, [], None):  # no level either (a dict crashed the replay)
        [refused] = send(engine, req(4, "logging/setLevel", {"level": odd}))
        assert refused["error"]["code"] == NO_MATCH
    without = ReplayEngine(SESSION)  # its server declared tools only: it has no logging/setLevel
    [error] = send(without, req(2, "logging/setLevel", {"level": "debug"}))
    assert error["error"] == {"code": METHOD_NOT_FOUND, "message": "Method not found"} and without.report.clean


@pytest.mark.parametrize("method", ["prompts/list", "resources/list", "resources/templates/list", "completion/complete"])
def test_a_request_for_a_capability_the_recorded_server_did_not_declare_gets_method_not_found(method: str) -> None:
    engine = ReplayEngine(SESSION)  # its server declared tools only
    send(engine, initialize(1, "2025-06-18", {"roots": {"listChanged": True}, "sampling": {}}))
    for id_ in (2, 3):
        assert send(engine, req(id_, method)) == [
            {"jsonrpc": "2.0", "id": id_, "error": {"code": METHOD_NOT_FOUND, "message": "Method not found"}}]
    capability = "completions" if method.startswith("completion") else method.split("/")[0]
    assert engine.report.clean
    assert engine.report.adapted == [f"{method} ×2: answered Method not found (the recorded server did not declare {capability})"]


def test_a_request_for_a_declared_capability_the_recording_lacks_is_a_miss() -> None:
    engine = ReplayEngine(SESSION)
    send(engine, initialize(1, "2025-06-18", {"roots": {"listChanged": True}, "sampling": {}}))
    [error] = send(engine, req(2, "tools/call", {"name": "unrecorded"}))
    assert error["error"]["code"] == NO_MATCH and not engine.report.clean


def test_without_a_recorded_handshake_nothing_is_known_undeclared() -> None:
    engine = ReplayEngine(recording(("c", req(1, "tools/list")), ("s", res(1, {"tools": []}))))
    [error] = send(engine, req(2, "prompts/list"))
    assert error["error"]["code"] == NO_MATCH and not engine.report.clean


def test_the_discover_probe_gets_method_not_found_from_a_server_of_an_initialize_era() -> None:
    engine = ReplayEngine(SESSION)
    probe = req(0, "server/discover", {"_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}})
    assert send(engine, probe) == [{"jsonrpc": "2.0", "id": 0, "error": {"code": METHOD_NOT_FOUND, "message": "Method not found"}}]
    assert send(engine, initialize(1, "2025-06-18", {"roots": {"listChanged": True}, "sampling": {}})) == [res(1, RECORDED_RESULT)]
    assert engine.report.clean
    assert engine.report.adapted == ["server/discover id 0: answered Method not found, as the recorded server (of an initialize era) would"]


def test_the_discover_probe_is_a_miss_where_the_recording_has_no_initialize() -> None:
    engine = ReplayEngine(recording(("c", req(1, "tools/list")), ("s", res(1, {"tools": []}))))
    [error] = send(engine, req(0, "server/discover"))
    assert error["error"]["code"] == NO_MATCH and not engine.report.clean


MODERN = {"_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}}
DISCOVERED = {"supportedVersions": ["2026-07-28"], "capabilities": {"tools": {"listChanged": True}}, "instructions": "hi",
              "resultType": "complete", "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "s", "version": "2"}}}
# the SDK server stamps its info on every result at 2026-07-28
LISTED = {"tools": [], "resultType": "complete", "ttlMs": 0, "cacheScope": "private",
          "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "s", "version": "2"}, "example/trace": 7}}
STATELESS_SESSION = recording(("c", req(1, "server/discover", MODERN)), ("s", res(1, DISCOVERED)),
                              ("c", req(2, "tools/list", MODERN)), ("s", res(2, LISTED)))


@pytest.mark.parametrize(("asked", "answered"), [("2025-06-18", "2025-06-18"), ("2024-11-05", "2024-11-05"),
                                                 ("2026-07-28", "2025-11-25"), ("2099-01-01", "2025-11-25")])
def test_an_initialize_to_a_stateless_era_recording_is_answered_from_its_discover(asked: str, answered: str) -> None:
    engine = ReplayEngine(STATELESS_SESSION, remember_played=True)
    # list changes came on subscriptions/listen streams, which a client of initialize never opens
    assert send(engine, initialize(0, asked, {})) == [res(0, {
        "protocolVersion": answered, "capabilities": {"tools": {"listChanged": False}},
        "serverInfo": {"name": "s", "version": "2"}, "instructions": "hi"})]
    assert send(engine, note("notifications/initialized")) == []
    # _meta is left out of matching; the result comes in the client's era's form
    assert send(engine, req(1, "tools/list")) == [res(1, {"tools": [], "_meta": {"example/trace": 7}})]
    # the discover served the handshake: not unused, and played (new episodes keep it in the cassette)
    assert engine.report.clean and engine.report.unused == [] and {1, 2} <= (engine.played_frames or set())
    assert engine.report.adapted == [
        (f"initialize id 0: answered at {answered} from the recorded server/discover #1 (frame 1), as a server of both "
         "eras would (the recording has no initialize)"),
        "notifications/initialized: taken silently, as any server takes it (the recorded client did not send it)"]


def test_each_session_answered_from_the_discover_may_send_its_initialized() -> None:
    engine = ReplayEngine(STATELESS_SESSION, repeats=Repeats.ALLOW)  # the Inspector: one session per step
    for live in range(3):
        assert send(engine, initialize(live, "2025-11-25", {}))[0]["result"]["protocolVersion"] == "2025-11-25"
        assert send(engine, note("notifications/initialized")) == []
    assert send(engine, note("notifications/initialized")) == []  # a fourth, which nothing owes: a miss
    assert [miss.summary for miss in engine.report.unmatched] == ["notifications/initialized"]


def test_clients_of_both_eras_served_by_one_engine_each_get_their_eras_form() -> None:
    # a stateless HTTP recording has one engine for every live client
    engine = ReplayEngine(STATELESS_SESSION, repeats=Repeats.ALLOW)
    send(engine, initialize(0, "2025-11-25", {}))
    assert send(engine, req(1, "tools/list")) == [res(1, {"tools": [], "_meta": {"example/trace": 7}})]
    assert send(engine, req(2, "tools/list", MODERN)) == [res(2, LISTED)]


def test_a_client_of_the_stateless_era_gets_the_recorded_results_whole() -> None:
    engine = ReplayEngine(STATELESS_SESSION)
    assert send(engine, req(0, "server/discover", MODERN)) == [res(0, DISCOVERED)]
    assert send(engine, req(1, "tools/list", MODERN)) == [res(1, LISTED)]
    assert engine.report.clean and engine.report.adapted == []


_JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=3),
                     lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3),
                     max_leaves=8)
_MEMBERS = st.sampled_from(["capabilities", "serverInfo", "instructions", "_meta", "resultType", "ttlMs", "tools", "listChanged"])


@given(discovered=st.dictionaries(_MEMBERS, _JSON, max_size=5), listed=st.dictionaries(_MEMBERS, _JSON, max_size=5))
def test_an_initialize_answered_from_any_recorded_discover_result_is_a_valid_handshake(discovered: dict, listed: dict) -> None:
    engine = ReplayEngine(recording(("c", req(1, "server/discover", MODERN)), ("s", res(1, discovered)),
                                    ("c", req(2, "tools/list", MODERN)), ("s", res(2, listed))))
    [answer] = send(engine, initialize(0, "2025-06-18", {}))
    result = answer["result"]
    assert result["protocolVersion"] == "2025-06-18"
    assert isinstance(result["capabilities"], dict) and isinstance(result["serverInfo"], dict)
    [listing] = send(engine, req(1, "tools/list"))
    assert listing["id"] == 1 and isinstance(listing["result"], dict)


def test_an_initialize_is_not_made_up_under_exact_matching_nor_without_a_version_nor_from_nothing() -> None:
    for engine, live in ((ReplayEngine(STATELESS_SESSION, matcher_named("exact")), initialize(0, "2025-11-25", {})),
                         (ReplayEngine(STATELESS_SESSION), req(0, "initialize", {"capabilities": {}})),
                         (ReplayEngine(recording(("c", req(1, "tools/list")), ("s", res(1, {})))), initialize(0, "2025-11-25", {}))):
        [error] = send(engine, live)
        assert error["error"]["code"] == NO_MATCH and engine.report.adapted == []


@pytest.mark.parametrize("blank", [b"", b"  ", b"\r", b"\t \r"])
def test_a_blank_line_is_no_message_on_stdio(blank: bytes) -> None:
    engine = ReplayEngine(SESSION)
    reception = engine.receive(blank, line=True)
    assert reception.replies == [] and reception.actions == [] and engine.report.clean
    # not a line (an HTTP body, say): it is not JSON, and is told so
    [reply] = engine.receive(blank).replies
    assert reply.malformed and not engine.report.clean


def test_a_blank_line_the_recorded_client_sent_too_still_releases_what_followed_it() -> None:
    engine = ReplayEngine(recording(("c", b""), ("s", note("notifications/message", {"level": "info", "data": "hi"}))))
    assert [json.loads(action.payload) for action in engine.receive(b"", line=True).actions] == [
        note("notifications/message", {"level": "info", "data": "hi"})]
    assert engine.report.clean


WITHOUT_INITIALIZED = recording(
    ("c", initialize(1, "2025-06-18", {})),
    ("s", res(1, RECORDED_RESULT)),
    ("c", req(2, "tools/list")),
    ("s", res(2, {"tools": []})),
)


def test_an_initialized_notification_the_recorded_client_did_not_send_is_taken_once() -> None:
    engine = ReplayEngine(WITHOUT_INITIALIZED)
    assert send(engine, initialize(0, "2025-06-18", {})) == [res(0, RECORDED_RESULT)]
    assert send(engine, note("notifications/initialized")) == []
    assert send(engine, req(1, "tools/list")) == [res(1, {"tools": []})]
    assert engine.report.clean
    assert engine.report.adapted == [
        "notifications/initialized: taken silently, as any server takes it (the recorded client did not send it)"]
    send(engine, note("notifications/initialized"))  # a second one is no handshake's
    assert [miss.summary for miss in engine.report.unmatched] == ["notifications/initialized"]


def test_an_initialized_notification_before_any_handshake_or_under_exact_matching_is_a_miss() -> None:
    before = ReplayEngine(WITHOUT_INITIALIZED)
    send(before, note("notifications/initialized"))
    exact = ReplayEngine(WITHOUT_INITIALIZED, matcher_named("exact"))
    send(exact, initialize(0, "2025-06-18", {}))
    send(exact, note("notifications/initialized"))
    for engine in (before, exact):
        assert [miss.summary for miss in engine.report.unmatched] == ["notifications/initialized"]
        assert engine.report.adapted == []


def test_what_the_server_declared_is_read_from_its_initialize_not_its_answer_to_a_probe() -> None:
    """A server of an initialize era that answers the server/discover probe with `{}` (the
    bundled weather server does) declared its tools in its initialize result: a tool call the
    recording lacks is a miss naming the nearest, not "Method not found" and no miss at all."""
    session = recording(
        ("c", req(0, "server/discover")), ("s", res(0, {})),
        ("c", initialize(1, "2025-06-18", {})), ("s", res(1, RECORDED_RESULT)),
        ("c", note("notifications/initialized")),
        ("c", req(2, "tools/call", {"name": "get_forecast", "arguments": {"city": "Paris"}})), ("s", res(2, {"content": []})),
    )
    engine = ReplayEngine(session)
    send(engine, req(0, "server/discover"))
    send(engine, initialize(1, "2025-06-18", {}))
    [error] = send(engine, req(2, "tools/call", {"name": "get_forecast", "arguments": {"city": "Lima"}}))
    assert error["error"]["code"] == NO_MATCH and "nearest recorded is tools/call #2" in error["error"]["message"]
    assert len(engine.report.unmatched) == 1


def test_a_method_the_recording_never_had_is_said_so_once_all_was_played() -> None:
    # the Python SDK lists tools after a call to check its result: "every recorded request was
    # already played" read as if a tools/list had been recorded and used up
    engine = ReplayEngine(SESSION)
    send(engine, initialize(0, "2025-06-18", {"roots": {"listChanged": True}, "sampling": {}}))
    send(engine, note("notifications/initialized"))
    send(engine, req(1, "tools/list"))
    [error] = send(engine, req(2, "tools/call", {"name": "add", "arguments": {}}))
    assert error["error"]["message"].endswith(
        "no recorded request matches tools/call: the recording has none, and every request it has was already played")
