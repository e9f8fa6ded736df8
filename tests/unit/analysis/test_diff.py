"""`tapes diff`: real recordings of the same flows across eras and transports, and synthetic
sessions for alignment, noise, era folds and the tool-surface classification."""

from __future__ import annotations

import io
import re
from dataclasses import replace
from typing import Any

import pytest
from rich.console import Console

from tapes.cassette.store import Cassette, load
from tapes.analysis.diff import BREAKING, COMPATIBLE, _input_rules, _output_rules, diff_cassettes, markdown, print_report, schema_changes
from tapes.analysis.normalize import Noise, session, wire_facts
from tapes.cassette.frames import Kind

from tests.support.messages import note, req, res
from tests.support.paths import CASSETTES
from tests.support.recordings import handshake, stdio_cassette


def tape(name: str) -> Cassette:
    return load(CASSETTES / f"{name}.tape")


def call(request_id: Any, tool: str, arguments: Any, answer: str) -> list[tuple[str, Any]]:
    return [("c", req(request_id, "tools/call", {"name": tool, "arguments": arguments})),
            ("s", res(request_id, {"content": [{"type": "text", "text": answer}]}))]


def sections(report: Any) -> set[tuple[str, str]]:
    return {(change.section, change.subject) for change in report.changes}


# --- real recordings ---------------------------------------------------------------------------


def test_cross_era_notes_flow_maps_sampling_and_roots_to_the_same_behaviour() -> None:
    report = diff_cassettes(tape("notes-stdio-2025-11-25"), tape("notes-stdio-2026-07-28"))

    assert not [change for change in report.changes if change.section == "interaction"]
    same = {equivalence.subject: equivalence for equivalence in report.equivalences}
    assert set(same) == {"handshake", "tools/call ask_model", "tools/call list_client_roots"}
    sampling = same["tools/call ask_model"]
    assert sampling.era == "2026-07-28"
    assert sampling.old_form == ("server→client request",)
    assert sampling.new_form == ("input_required result + retry with inputResponses",)
    assert "same behaviour, expressed as in 2026-07-28" in sampling.describe()
    assert sampling.frames == ((19, 20, 21, 22), (18, 19, 20, 21))  # the client's answer (old #21) is one of them
    assert same["handshake"].old_form == ("initialize",) and same["handshake"].new_form == ("server/discover",)
    # The real differences: the era, and the stateless server advertising listChanged/subscribe.
    assert sections(report) == {("session", "protocol version"), ("capability", "server prompts/listChanged"),
                                ("capability", "server resources/listChanged"), ("capability", "server resources/subscribe"),
                                ("capability", "server tools/listChanged")}
    assert {change.severity for change in report.changes if change.section == "capability"} == {COMPATIBLE}
    assert report.exit_code() == 1 and report.exit_code("breaking") == 0
    assert any("resultType" in fold for fold in report.folds["new"])


# (old, new) -> what really differs between the two recordings, by (section, subject)
ERA_PAIRS = {
    ("notes-stdio-2025-06-18", "notes-stdio-2025-11-25"): {("session", "protocol version")},
    ("everything-stdio-2024-11-05", "everything-stdio-2025-06-18"): {("session", "protocol version")},
    ("everything-stdio-2025-06-18", "everything-stdio-2025-11-25"): {("session", "protocol version")},
    # Streamable HTTP: server-everything's startup list_changed notifications are sent before any
    # stream is open to carry them, so the client never gets them (on stdio and legacy SSE it does).
    ("everything-stdio-2025-11-25", "everything-http-2025-11-25"): {
        ("transport", "transport"), ("notification", "server notifications/tools/list_changed ×3")},
    ("everything-sse-2024-11-05", "everything-http-2025-11-25"): {
        ("session", "protocol version"), ("notification", "server notifications/tools/list_changed ×3"),
        ("transport", "transport"), ("transport", "POST answered with"), ("transport", "client MCP headers"),
        ("transport", "server MCP headers"), ("transport", "standalone GET stream"), ("transport", "SSE event ids"),
        ("transport", "priming events")},
}


@pytest.mark.parametrize(("old", "new"), list(ERA_PAIRS))
def test_same_flow_across_eras_differs_only_where_the_protocol_does(old: str, new: str) -> None:
    report = diff_cassettes(tape(old), tape(new))
    assert sections(report) == ERA_PAIRS[(old, new)]
    assert report.matched >= 10
    transport = {change.subject: change.deltas[0] for change in report.changes if change.section == "transport"}
    if "priming events" in transport:
        assert (transport["priming events"].old, transport["priming events"].new) == (False, True)
        assert transport["client MCP headers"].new == ["mcp-method", "mcp-protocol-version", "mcp-session-id"]


def updates_replaced(cassette: Cassette, first: Any) -> Cassette:
    """The cassette with its first notifications/resources/updated replaced by `first` (None: dropped)."""
    frames, done = [], False
    for frame in cassette.frames:
        if not done and isinstance(frame.message, dict) and frame.message.get("method") == "notifications/resources/updated":
            done = True
            if first is None:
                continue
            frame = replace(frame, message=first)
        frames.append(frame)
    assert done
    return Cassette(cassette.header, frames)


def test_the_feed_followed_through_resources_subscribe_and_subscriptions_listen_is_the_same_behaviour() -> None:
    old, new = tape("feed-stdio-2025-11-25"), tape("feed-stdio-2026-07-28")
    report = diff_cassettes(old, new)
    assert sections(report) == {("session", "protocol version")}
    forms = {equivalence.subject: equivalence.new_form for equivalence in report.equivalences}
    assert forms == {"handshake": ("server/discover",), "resources/subscribe feed://latest": ("subscriptions/listen",)}

    # the server updating another resource, or not at all, is a change
    stream = {"io.modelcontextprotocol/subscriptionId": "listen-1"}
    other = diff_cassettes(old, updates_replaced(new, note("notifications/resources/updated", {"_meta": stream, "uri": "feed://oldest"})))
    assert {(change.section, change.kind, change.subject) for change in other.changes if change.section != "session"} == {
        ("notification", "removed", "server notifications/resources/updated"),
        ("notification", "added", "server notifications/resources/updated")}
    missing = diff_cassettes(old, updates_replaced(new, None))
    assert [(change.kind, change.subject, change.deltas[0].old) for change in missing.changes if change.section == "notification"] == [
        ("removed", "server notifications/resources/updated", {"uri": "feed://latest"})]


def test_a_refused_probe_is_set_aside_in_every_session_not_only_the_first() -> None:
    # server-everything refuses the SDK client's server/discover probe, and each session opens with one
    one = tape("everything-http-2025-11-25")
    last = max(frame.seq for frame in one.frames)
    again = [replace(frame, seq=frame.seq + last, channel=f"{frame.channel}-again") for frame in one.frames]
    report = diff_cassettes(one, Cassette(one.header, one.frames + again))
    # the second session is the first one's steps again: its probe is no "+ handshake"
    assert [change.subject for change in report.changes if change.section == "interaction"] == [
        step.describe() for step in session(one).steps]
    assert {change.kind for change in report.changes if change.section == "interaction"} == {"added"}
    assert report.folds["new"] == report.folds["old"] == ["a refused server/discover probe before initialize"]


@pytest.mark.parametrize("name", sorted(path.stem for path in CASSETTES.glob("*.tape")))
def test_a_recording_is_the_same_as_itself(name: str) -> None:
    report = diff_cassettes(tape(name), tape(name))
    assert report.same and report.exit_code() == 0 and not report.equivalences


def test_ids_sessions_and_timestamps_are_not_differences() -> None:
    old = stdio_cassette(*handshake(), *call(2, "clock", {}, "now 2026-01-02T03:04:05Z session 1b4e28ba-2fa1-11d2-883f-0016d3cca427"))
    new = stdio_cassette(*handshake(), ("c", req("x-7", "tools/call", {"name": "clock", "arguments": {}, "_meta": {"progressToken": 9}})),
                         ("s", res("x-7", {"content": [{"type": "text", "text": "now 2027-12-31T23:59:59.5+01:00 session 6fa459ea-ee8a-3ca4-894e-db77e160355e"}]})))
    assert diff_cassettes(old, new).same
    strict = diff_cassettes(old, new, noise=Noise(rules=("meta",)))
    assert [delta.path for change in strict.changes for delta in change.deltas] == ["/outcome/result/content/0/text"]


def test_an_extra_request_does_not_shift_the_rest() -> None:
    old = stdio_cassette(*handshake(), *call(2, "a", {}, "A"), *call(3, "b", {}, "B"), *call(4, "c", {}, "C"))
    new = stdio_cassette(*handshake(), *call(2, "a", {}, "A"), *call(3, "extra", {}, "X"), *call(4, "b", {}, "B"),
                         *call(5, "c", {"n": 1}, "C2"))
    report = diff_cassettes(old, new)
    assert [(change.kind, change.subject, change.severity) for change in report.changes] == [
        ("added", "tools/call extra", COMPATIBLE), ("changed", "tools/call c", "changed")]
    deltas = {delta.path: (delta.old, delta.new) for delta in report.changes[1].deltas}
    assert deltas == {"/request/arguments/n": (None, 1), "/outcome/result/content/0/text": ("C", "C2")}
    assert report.changes[0].frames == ((), (6, 7))


def test_a_long_run_of_one_tool_pairs_call_by_call() -> None:
    # the common beginning and end are paired before SequenceMatcher, which is quadratic in such a run
    old = stdio_cassette(*handshake(), *(message for n in range(2, 502) for message in call(n, "t", {"n": n}, "ok")))
    new = stdio_cassette(*handshake(), *(message for n in range(2, 502) for message in call(n, "t", {"n": n}, "ok")),
                         *call(502, "extra", {}, "x"))
    changed = [message for n in range(2, 502) for message in call(n, "t", {"n": n}, "ok" if n != 300 else "no")]
    assert diff_cassettes(old, old).matched == 501
    assert [(change.kind, change.subject) for change in diff_cassettes(old, new).changes] == [("added", "tools/call extra")]
    report = diff_cassettes(old, stdio_cassette(*handshake(), *changed))
    assert [(change.subject, change.frames) for change in report.changes] == [("tools/call t", ((600, 601), (600, 601)))]


def test_concurrent_calls_of_one_tool_sent_in_another_order_pair_by_what_they_ask() -> None:
    def forecast(request_id: int, city: str) -> dict[str, Any]:
        return req(request_id, "tools/call", {"name": "get_forecast", "arguments": {"city": city}})

    def answer(request_id: int, text: str) -> dict[str, Any]:
        return res(request_id, {"content": [{"type": "text", "text": text}]})

    old = stdio_cassette(*handshake(), ("c", forecast(2, "Paris")), ("c", forecast(3, "Oslo")),
                         ("s", answer(2, "sunny")), ("s", answer(3, "snow")))
    swapped = stdio_cassette(*handshake(), ("c", forecast(2, "Oslo")), ("c", forecast(3, "Paris")),
                             ("s", answer(3, "sunny")), ("s", answer(2, "snow")))
    assert diff_cassettes(old, swapped).same
    # what changed is told of the call it changed in, and a call asked otherwise still pairs in order
    rained = stdio_cassette(*handshake(), ("c", forecast(2, "Oslo")), ("c", forecast(3, "Paris")), ("c", forecast(4, "Rome")),
                            ("s", answer(3, "rain")), ("s", answer(2, "snow")), ("s", answer(4, "hot")))
    old_and_rome = stdio_cassette(*handshake(), ("c", forecast(2, "Paris")), ("c", forecast(3, "Oslo")), ("c", forecast(4, "Milan")),
                                  ("s", answer(2, "sunny")), ("s", answer(3, "snow")), ("s", answer(4, "hot")))
    report = diff_cassettes(old_and_rome, rained)
    assert [(change.frames, [delta.path for delta in change.deltas]) for change in report.changes] == [
        (((4, 7), (5, 7)), ["/outcome/result/content/0/text"]), (((6, 9), (6, 9)), ["/request/arguments/city"])]


def test_the_frames_of_a_step_include_its_progress_and_the_clients_answers() -> None:
    # the HTML page highlights a change's frames: a changed progress or client answer is among them
    ask = {"messages": [{"role": "user", "content": {"type": "text", "text": "q"}}], "maxTokens": 5}
    counted = ("c", req(2, "tools/call", {"name": "count", "arguments": {}, "_meta": {"progressToken": "t"}}))

    def flow(progress: int, text: str) -> Cassette:
        return stdio_cassette(*handshake(), counted, ("s", note("notifications/progress", {"progressToken": "t", "progress": progress})),
                              ("s", req(0, "sampling/createMessage", ask)),
                              ("c", res(0, {"role": "assistant", "content": {"type": "text", "text": text}, "model": "m"})),
                              ("s", res(2, {"content": []})))

    report = diff_cassettes(flow(1, "A"), flow(2, "B"))
    assert [change.frames for change in report.changes] == [((4, 5, 6, 7, 8), (4, 5, 6, 7, 8))]


def test_a_step_that_moved_is_still_the_same_step() -> None:
    old = stdio_cassette(*handshake(), *call(2, "a", {}, "A"), *call(3, "b", {}, "B"), *call(4, "c", {}, "C"))
    new = stdio_cassette(*handshake(), *call(2, "b", {}, "B"), *call(3, "a", {}, "A"), *call(4, "c", {}, "C"))
    report = diff_cassettes(old, new)
    assert report.same and report.matched == 4


def test_a_removed_request_and_a_result_turned_error_are_breaking() -> None:
    old = stdio_cassette(*handshake(), *call(2, "a", {}, "A"), *call(3, "b", {}, "B"))
    new = stdio_cassette(*handshake(), ("c", req(2, "tools/call", {"name": "a", "arguments": {}})),
                         ("s", {"jsonrpc": "2.0", "id": 2, "error": {"code": -32602, "message": "unknown tool"}}))
    report = diff_cassettes(old, new)
    assert [(change.kind, change.subject, change.severity) for change in report.changes] == [
        ("changed", "tools/call a", BREAKING), ("removed", "tools/call b", BREAKING)]
    assert report.exit_code("breaking") == 1


def polled_task(task_id: str, states: list[str], final: str = "report") -> list[tuple[str, Any]]:
    """A tool run as a task: its creation, a poll per state (status notifications between), its result."""
    messages = [("c", req(2, "tools/call", {"name": "research", "arguments": {}, "task": {"ttl": 1000}})),
                ("s", res(2, {"task": {"taskId": task_id, "status": "working"}}))]
    for number, state in enumerate(states, start=3):
        messages += [("s", note("notifications/tasks/status", {"taskId": task_id, "status": state})),
                     ("c", req(number, "tasks/get", {"taskId": task_id})), ("s", res(number, {"taskId": task_id, "status": state}))]
    return messages + [("c", req(99, "tasks/result", {"taskId": task_id})),
                       ("s", res(99, {"content": [{"type": "text", "text": final}]}))]


def test_a_different_number_of_polls_and_fresh_task_ids_are_not_differences() -> None:
    old = stdio_cassette(*handshake("2025-11-25"), *polled_task("a1f3", ["working", "working", "working", "completed"]))
    new = stdio_cassette(*handshake("2025-11-25"), *polled_task("77c0", ["working", "completed"]))
    assert diff_cassettes(old, new).same
    # what the polls end on, and the task's result, still are
    failed = stdio_cassette(*handshake("2025-11-25"), *polled_task("77c0", ["working", "failed"], final="boom"))
    report = diff_cassettes(old, failed)
    assert [(change.subject, [delta.path for delta in change.deltas]) for change in report.changes] == [
        ("tasks/get", ["/outcome/result/status"]), ("tasks/result", ["/outcome/result/content/0/text"])]


def test_ignored_paths_take_out_what_a_test_declares_volatile() -> None:
    old = stdio_cassette(*handshake(), *call(2, "dice", {}, "4"))
    new = stdio_cassette(*handshake(), *call(2, "dice", {}, "6"))
    assert not diff_cassettes(old, new).same
    assert diff_cassettes(old, new, noise=Noise(ignore=("/outcome/result/content/*/text",))).same
    with pytest.raises(ValueError, match="JSON pointer"):
        Noise(ignore=("outcome",))


# --- era folds -----------------------------------------------------------------------------------

META = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}


def modern(request_id: Any, method: str, params: dict[str, Any]) -> dict[str, Any]:
    return req(request_id, method, {**params, "_meta": META})


def discover() -> list[tuple[str, Any]]:
    return [("c", modern(1, "server/discover", {})),
            ("s", res(1, {"capabilities": {"tools": {}}, "supportedVersions": ["2026-07-28"], "resultType": "complete",
                          "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "srv", "version": "1"}}}))]


def test_resource_not_found_and_subscriptions_fold_across_eras() -> None:
    not_found = {"message": "no such resource"}
    old = stdio_cassette(*handshake(),
                         ("c", req(2, "resources/read", {"uri": "x://gone"})),
                         ("s", {"jsonrpc": "2.0", "id": 2, "error": {"code": -32002, **not_found, "data": {"uri": "x://gone"}}}),
                         ("c", req(3, "resources/subscribe", {"uri": "x://a"})), ("s", res(3, {})))
    new = stdio_cassette(*discover(),
                         ("c", modern(2, "resources/read", {"uri": "x://gone"})),
                         ("s", {"jsonrpc": "2.0", "id": 2, "error": {"code": -32602, **not_found}}),
                         *listen(3, ["x://a"]))
    report = diff_cassettes(old, new)
    assert sections(report) == {("session", "protocol version")}
    forms = {equivalence.subject: equivalence.new_form for equivalence in report.equivalences}
    assert forms == {"handshake": ("server/discover",), "resources/read x://gone": ("resource-not-found error -32602",),
                     "resources/subscribe x://a": ("subscriptions/listen",)}


def listen(listen_id: Any, uris: list[str], honored: list[str] | None = None) -> list[tuple[str, Any]]:
    """A subscriptions/listen for `uris` and its acknowledgment (of `honored`, by default all)."""
    stream = {"io.modelcontextprotocol/subscriptionId": listen_id}
    return [("c", modern(listen_id, "subscriptions/listen", {"notifications": {"resourceSubscriptions": uris}})),
            ("s", note("notifications/subscriptions/acknowledged",
                       {"_meta": stream, "notifications": {"resourceSubscriptions": uris if honored is None else honored}}))]


def updated(uri: str, listen_id: Any = None) -> tuple[str, Any]:
    stream = {"_meta": {"io.modelcontextprotocol/subscriptionId": listen_id}} if listen_id is not None else {}
    return "s", note("notifications/resources/updated", {**stream, "uri": uri})


def test_leaving_a_listen_stream_is_unsubscribing_and_its_events_are_plain_notifications() -> None:
    old = stdio_cassette(*handshake(), ("c", req(2, "resources/subscribe", {"uri": "x://a"})), ("s", res(2, {})),
                         updated("x://a"), ("c", req(3, "resources/unsubscribe", {"uri": "x://a"})), ("s", res(3, {})))
    new = stdio_cassette(*discover(), *listen("L", ["x://a"]), updated("x://a", "L"),
                         ("c", note("notifications/cancelled", {"requestId": "L", "reason": "caller cancelled"})))
    report = diff_cassettes(old, new)
    assert sections(report) == {("session", "protocol version")}
    forms = {equivalence.subject: (equivalence.old_form, equivalence.new_form) for equivalence in report.equivalences}
    assert forms["resources/unsubscribe x://a"] == (("resources/unsubscribe",), ("subscriptions/listen closed by the client",))
    # without the noise rules too: the stream an event names is a request id, which the fold sets aside
    bare = diff_cassettes(old, new, noise=Noise(rules=()))
    assert not [change for change in bare.changes if change.section == "notification"]


def test_a_subscription_the_acknowledgment_leaves_out_was_refused() -> None:
    old = stdio_cassette(*handshake(), ("c", req(2, "resources/subscribe", {"uri": "x://a"})), ("s", res(2, {})))
    new = stdio_cassette(*discover(), *listen("L", ["x://a"], honored=[]))
    report = diff_cassettes(old, new)
    refused = [change for change in report.changes if change.section == "interaction"]
    assert [(change.subject, change.severity) for change in refused] == [("resources/subscribe x://a", BREAKING)]


def test_a_changed_sampling_answer_is_a_difference_even_across_eras() -> None:
    ask = {"messages": [{"role": "user", "content": {"type": "text", "text": "q"}}], "maxTokens": 5}
    old = stdio_cassette(*handshake(), ("c", req(2, "tools/call", {"name": "ask", "arguments": {}})),
                         ("s", req(0, "sampling/createMessage", ask)),
                         ("c", res(0, {"role": "assistant", "content": {"type": "text", "text": "A"}, "model": "m"})),
                         ("s", res(2, {"content": []})))
    state = {"requestState": "opaque"}
    new = stdio_cassette(*discover(), ("c", modern(2, "tools/call", {"name": "ask", "arguments": {}})),
                         ("s", res(2, {"resultType": "input_required", **state,
                                       "inputRequests": {"k": {"method": "sampling/createMessage", "params": ask}}})),
                         ("c", modern(3, "tools/call", {"name": "ask", "arguments": {}, **state, "inputResponses": {
                             "k": {"role": "assistant", "content": {"type": "text", "text": "B"}, "model": "m"}}})),
                         ("s", res(3, {"content": [], "resultType": "complete"})))
    report = diff_cassettes(old, new)
    changed = [change for change in report.changes if change.section == "interaction"]
    assert [(delta.path, delta.old, delta.new) for delta in changed[0].deltas] == [("/asks/0/answer/content/text", "A", "B")]


# --- tool surface ----------------------------------------------------------------------------------

SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}}, "required": ["city"]}


@pytest.mark.parametrize(("new", "rules", "kind", "severity"), [
    ({**SCHEMA, "properties": {**SCHEMA["properties"], "units": {"type": "string"}}}, _input_rules, "property added", COMPATIBLE),
    ({**SCHEMA, "properties": {**SCHEMA["properties"], "units": {"type": "string"}}, "required": ["city", "units"]},
     _input_rules, "required property added", BREAKING),
    ({**SCHEMA, "required": ["city", "days"]}, _input_rules, "now required", BREAKING),
    ({**SCHEMA, "required": []}, _input_rules, "no longer required", COMPATIBLE),
    ({**SCHEMA, "properties": {"city": {"type": "string"}}}, _input_rules, "property removed", BREAKING),
    ({**SCHEMA, "properties": {**SCHEMA["properties"], "days": {"type": "string"}}}, _input_rules, "type changed", BREAKING),
    ({**SCHEMA, "properties": {"city": {"type": "string"}}}, _output_rules, "property removed", BREAKING),
    ({**SCHEMA, "properties": {**SCHEMA["properties"], "extra": {"type": "string"}}}, _output_rules, "property added", COMPATIBLE),
    ({**SCHEMA, "required": []}, _output_rules, "no longer required", BREAKING),
    (None, _output_rules, "schema removed", BREAKING),
])
def test_schema_changes_are_classified(new: Any, rules: dict[str, str], kind: str, severity: str) -> None:
    assert [(found_kind, found_severity) for _, found_severity, found_kind in schema_changes(SCHEMA, new, rules, "/s")] == [
        (kind, severity)]


def test_a_schema_whose_properties_or_required_are_of_the_wrong_shape_has_none() -> None:
    # required holding an object was unhashable in a set; properties as a list had no keys()
    odd = {**SCHEMA, "properties": [{"city": {}}], "required": [["city"], {"a": 1}]}
    assert sorted((kind, delta.path) for delta, _, kind in schema_changes(SCHEMA, odd, _input_rules, "/s")) == [
        ("property removed", "/s/properties/city"), ("property removed", "/s/properties/days")]


def test_tool_surface_changes_in_a_session() -> None:
    def listing(tools: list[dict[str, Any]]) -> list[tuple[str, Any]]:
        return [("c", req(2, "tools/list")), ("s", res(2, {"tools": tools}))]

    weather = {"name": "weather", "inputSchema": SCHEMA}
    old = stdio_cassette(*handshake(), *listing([weather, {"name": "old", "inputSchema": {"type": "object"}}]))
    new = stdio_cassette(*handshake(), *listing([{**weather, "inputSchema": {**SCHEMA, "required": ["city", "days"]},
                                                  "description": "now documented"},
                                                 {"name": "new", "inputSchema": {"type": "object"}}]))
    tools = [(change.kind, change.subject, change.severity, change.note)
             for change in diff_cassettes(old, new).changes if change.section == "tool"]
    assert tools == [("removed", "old", BREAKING, ""), ("added", "new", COMPATIBLE, ""),
                     ("changed", "weather", BREAKING, "now required"),
                     ("changed", "weather", COMPATIBLE, "description or annotations")]


def test_transport_facts_of_a_cassette_shifted_in_time_are_unchanged() -> None:
    cassette = tape("everything-http-2025-11-25")
    shifted = Cassette(replace(cassette.header, created="2030-01-01T00:00:00+00:00"),
                       [replace(frame, t=frame.t + 100) for frame in cassette.frames])
    assert diff_cassettes(cassette, shifted).same


def test_the_servers_polls_of_a_task_the_client_runs_fold_into_the_last() -> None:
    def session(task_id: str, states: list[str]) -> Cassette:
        messages: list[tuple[str, Any]] = [
            ("c", req(2, "tools/call", {"name": "sample-async", "arguments": {}})),
            ("s", req(0, "sampling/createMessage", {"task": {"ttl": 1000}, "messages": []})),
            ("c", res(0, {"task": {"taskId": task_id, "status": "working"}}))]
        for number, state in enumerate(states, start=1):
            messages += [("s", req(number, "tasks/get", {"taskId": task_id})), ("c", res(number, {"taskId": task_id, "status": state}))]
        return stdio_cassette(*handshake("2025-11-25"), *messages, ("s", res(2, {"content": []})))

    assert diff_cassettes(session("c-1", ["working", "working", "completed"]), session("c-2", ["completed"])).same
    report = diff_cassettes(session("c-1", ["working", "completed"]), session("c-2", ["failed"]))
    assert [delta.path for change in report.changes for delta in change.deltas] == ["/asks/1/answer/status"]


# --- odd values a cassette that loads may hold --------------------------------------------------


def test_bytes_in_messages_are_compared_as_text() -> None:
    # msgpack cassettes can hold bytes, as values and as map keys: they were a TypeError in the
    # pointer of a difference and in sorting an event's keys
    old = stdio_cassette(*handshake(), *call(2, "echo", {b"k": b"\x00", "a": 1}, "x"),
                         ("s", note("notifications/message", {b"level": "info", "data": "x"})))
    new = stdio_cassette(*handshake(), *call(2, "echo", {b"k": b"\x01", "a": 1}, "x"))
    report = diff_cassettes(old, new)
    changed = next(change for change in report.changes if change.section == "interaction")
    assert [delta.path for delta in changed.deltas] == ["/request/arguments/<1 bytes: aw==>"]
    assert ("notification", "server notifications/message") in sections(report)


@pytest.mark.parametrize("odd", [[1], {"a": 1}])
def test_ids_tokens_and_states_that_are_objects_or_arrays_tie_nothing(odd: Any) -> None:
    # each was looked up in a table: TypeError, unhashable
    cassette = stdio_cassette(
        *handshake(),
        ("c", req(2, "tools/call", {"name": "slow", "_meta": {"progressToken": odd}})),
        ("s", note("notifications/progress", {"progressToken": odd, "progress": 1})),
        ("c", note("notifications/cancelled", {"requestId": odd})),
        ("c", req(3, "tasks/get", {"taskId": odd})),
        ("s", res(3, {"resultType": "input_required", "inputRequests": [odd], "requestState": odd})),
        ("c", req(4, "tasks/get", {"taskId": odd, "requestState": odd, "inputResponses": "x"})),
        ("s", note("notifications/message", {"_meta": {"io.modelcontextprotocol/subscriptionId": odd}})),
    )
    report = diff_cassettes(cassette, cassette)
    assert report.same and report.matched == 3


def test_listen_subscriptions_and_tool_lists_of_the_wrong_shape_list_nothing() -> None:
    cassette = stdio_cassette(
        *handshake("2026-07-28"),
        ("c", req(2, "subscriptions/listen", {"notifications": ["resourceSubscriptions"]})),
        ("s", note("notifications/subscriptions/acknowledged",
                   {"notifications": {"resourceSubscriptions": 5}, "_meta": {"io.modelcontextprotocol/subscriptionId": 2}})),
        ("c", req(3, "subscriptions/listen", {"notifications": {"resourceSubscriptions": [["file:///a"], "file:///b"]}})),
        ("c", req(4, "tools/list")),
        ("s", res(4, {"tools": 7})),
    )
    assert diff_cassettes(cassette, cassette).same
    built = session(cassette)
    assert [step.key for step in built.steps if step.method != "handshake"] == [
        ("resources/subscribe", "file:///b"), ("tools/list", "")]
    assert built.tools == {}


def test_a_post_s_framing_is_told_by_its_media_type_whatever_its_case() -> None:
    """`Text/Event-Stream; charset=utf-8` is an SSE answer, as the recorder and the replayer read it."""
    cassette = load(CASSETTES / "everything-http-2025-11-25.tape")

    def shouted(frame: Any) -> Any:
        if frame.kind is not Kind.HTTP_RESPONSE:
            return frame
        headers = [["CONTENT-TYPE", value.title() + "; charset=utf-8"] if name.lower() == "content-type" else [name, value]
                   for name, value in frame.info["headers"]]
        return replace(frame, info={**frame.info, "headers": headers})

    mis_cased = Cassette(cassette.header, [shouted(frame) for frame in cassette.frames])
    assert wire_facts(mis_cased)["POST answered with"] == wire_facts(cassette)["POST answered with"] == ["202 Accepted", "JSON", "SSE"]


def test_markdown_renders_no_tag_a_cassette_holds() -> None:
    # for a pull-request comment, which renders HTML tags such as <img> and <details>
    hostile = "<img src=x onerror=alert(1)>"
    old = stdio_cassette(*handshake(hostile), *call(2, hostile, {}, "a"))
    new = stdio_cassette(*handshake("2025-06-18"), *call(2, hostile, {}, "b|`c`"))
    text = markdown(diff_cassettes(old, new))
    assert "<img" not in text and "&lt;img src=x onerror=alert(1)&gt;" in text
    assert "b\\|\\`c\\`" in text


def test_markdown_says_what_was_set_aside_as_the_text_does() -> None:
    report = diff_cassettes(tape("feed-stdio-2025-11-25"), tape("feed-stdio-2026-07-28"), new_name="new|one")
    out = io.StringIO()
    print_report(report, Console(file=out, width=500))
    text_lines = [line.strip() for line in out.getvalue().splitlines() if line.strip().startswith("set aside")]
    assert len(text_lines) == len(report.folds["new"]) > 1
    unescaped = [re.sub(r"\\(.)", r"\1", line[2:]) for line in markdown(report).splitlines() if line.startswith("- set aside")]
    assert unescaped == text_lines


def test_markdown_renders_no_link_image_or_emphasis_a_cassette_holds() -> None:
    # `![](URL)` shows an image in a pull-request comment as <img> does, and a link can pose as ours
    names = ["![px](https://tracker.example/p.png)", "[Approve](https://evil.example/)", "_em_ **b** ~~s~~", "a\\|b"]
    old = stdio_cassette(*handshake(), *[frame for n, name in enumerate(names) for frame in call(2 + n, name, {}, "a")])
    new = stdio_cassette(*handshake(), *[frame for n, name in enumerate(names) for frame in call(2 + n, name, {}, "b")])
    text = markdown(diff_cassettes(old, new))
    assert "| tools/call !\\[px\\](https://tracker.example/p.png) |" in text
    assert "| tools/call \\[Approve\\](https://evil.example/) |" in text
    assert "| tools/call \\_em\\_ \\*\\*b\\*\\* \\~\\~s\\~\\~ |" in text
    assert "| tools/call a\\\\\\|b |" in text  # its own backslash escapes nothing: the pipe stays in the cell


def test_control_characters_a_cassette_holds_reach_no_terminal() -> None:
    # an ESC sequence in a tool name would set the terminal's title, or clear it
    hostile = "\x1b]0;pwned\x07\x1b[2J"
    old = stdio_cassette(*handshake(), *call(2, hostile, {}, "a"))
    new = stdio_cassette(*handshake(), *call(2, hostile, {}, "b"))
    report = diff_cassettes(old, new)
    out = io.StringIO()
    print_report(report, Console(file=out, width=200))
    for text in (out.getvalue(), markdown(report).replace("\\]", "]").replace("\\[", "[")):
        assert "\x1b" not in text and "\x07" not in text
        assert "\\x1b]0;pwned\\x07\\x1b[2J" in text


def test_a_megabyte_tool_name_is_cut_on_the_terminal() -> None:
    name = "t" * 1_000_000
    report = diff_cassettes(stdio_cassette(*handshake(), *call(2, name, {}, "a")),
                            stdio_cassette(*handshake(), *call(2, name, {}, "b")))
    out = io.StringIO()
    print_report(report, Console(file=out, width=200, soft_wrap=True))
    assert max(map(len, out.getvalue().splitlines())) < 2100 and "more characters)" in out.getvalue()


@pytest.mark.parametrize(("ending", "severity"), [({"code": None, "signal": 11}, BREAKING), ({"code": 3, "signal": None}, BREAKING),
                                                  ({"code": None, "signal": 15}, "changed"), ({"code": None, "signal": 1}, "changed")])
def test_how_the_server_exited_is_compared(ending: dict[str, Any], severity: str) -> None:
    """A crash at the end of a session that went the same was "same behaviour"; a server stopped
    by its client's side (SIGTERM; SIGHUP, its terminal closed) where it exited by itself is a
    change, not a break, as the replay takes it."""
    old = tape("notes-stdio-2025-11-25")
    new = replace(old, frames=[f._replace(info=ending) if f.kind is Kind.EXIT else f for f in old.frames])
    [change] = diff_cassettes(old, new).changes
    assert (change.subject, change.severity, change.deltas[0].old, change.deltas[0].new) == (
        "server exit", severity, "code 0", f"signal {ending['signal']}" if ending["signal"] else f"code {ending['code']}")


def test_output_that_is_not_json_rpc_is_a_transport_change() -> None:
    old = tape("notes-stdio-2025-11-25")
    last = old.frames[-1]
    garbage = last._replace(seq=last.seq + 1, kind=Kind.RAW, message=None, data=b"GARBAGE NOT JSON", info=None)
    new = replace(old, frames=[*old.frames, garbage])
    [change] = diff_cassettes(old, new).changes
    assert (change.section, change.subject, change.deltas[0].new) == ("transport", "output that is not JSON-RPC", True)


def test_long_values_that_part_late_are_shown_from_where_they_part() -> None:
    """Both cut at the same 70 characters, a removed tool read as no change at all."""
    from tapes.analysis.diff import Delta

    tools = [{"description": "Echo a message back to the caller, unchanged.", "name": "echo"}]
    line = Delta("/result/tools", [*tools, {"name": "add"}], tools).describe()
    old, new = line.removeprefix("/result/tools: ").split(" → ")
    assert old != new and old.startswith("…") and '{"name": "add"}' in old
    assert Delta("/x", "short", "other").describe() == '/x: "short" → "other"'


def test_markdown_header_keeps_a_file_name_with_backticks_a_code_span() -> None:
    # a backtick in a cassette's name closed its code span: the rest of the name rendered as Markdown
    report = diff_cassettes(stdio_cassette(*handshake()), stdio_cassette(*handshake()),
                            old_name="a`[x](https://evil.example/)`.tape", new_name="`b``\nc.tape")
    header = markdown(report).splitlines()[0]
    assert header == ("### tapes diff: ``a`[x](https://evil.example/)`.tape`` (2025-06-18) → "
                      "``` `b`` c.tape ``` (2025-06-18)")
