"""The replay engine on recordings built from wire lines: happens-before release, matching,
re-stamping, server→client requests, cancellation, batches and the misses report."""

from __future__ import annotations

import json
import signal

import pytest

from tapes.cassette.frames import Frame, Kind
from tapes.cassette.stdio_framer import StdioFramer
from tapes.replay.engine import ReplayEngine
from tapes.replay.outcomes import NO_MATCH
from tapes.wire.jsonrpc import PARSE_ERROR

from tests.support.messages import note, progress, req, res
from tests.support.recordings import recording, send


def test_response_gets_the_live_id_and_key_order_does_not_matter() -> None:
    engine = ReplayEngine(recording(("c", req(1, "tools/call", {"name": "a", "arguments": {"x": 1, "y": 2}})),
                                    ("s", res(1, {"content": []}))))
    assert engine.start() == []
    out = send(engine, req("live-9", "tools/call", {"arguments": {"y": 2, "x": 1}, "name": "a"}))
    assert out == [res("live-9", {"content": []})]
    assert engine.report.clean and engine.report.played == 1 and engine.report.unused == []


def test_concurrent_requests_answered_in_live_order_not_recorded_order() -> None:
    frames = recording(
        ("c", req(1, "tools/call", {"name": "a"})),
        ("c", req(2, "tools/call", {"name": "b"})),
        ("s", res(1, "A")),
        ("s", res(2, "B")),
    )
    engine = ReplayEngine(frames)
    assert send(engine, req(10, "tools/call", {"name": "b"})) == [res(10, "B")]
    assert send(engine, req(11, "tools/call", {"name": "a"})) == [res(11, "A")]
    assert engine.report.clean


def test_identical_requests_are_consumed_in_recorded_order() -> None:
    call = {"name": "roll"}
    engine = ReplayEngine(recording(("c", req(1, "tools/call", call)), ("s", res(1, "first")),
                                    ("c", req(2, "tools/call", call)), ("s", res(2, "second"))))
    assert send(engine, req(7, "tools/call", call)) == [res(7, "first")]
    assert send(engine, req(8, "tools/call", call)) == [res(8, "second")]
    assert send(engine, req(9, "tools/call", call))[0]["error"]["code"] == NO_MATCH


def test_a_client_that_lists_more_often_gets_the_last_list_again_until_the_recording_shows_it_changed() -> None:
    # A server lists the same again until it says the list changed: a client that lists more
    # often than the recorded one (the Python SDK before a call, to check its output) gets the
    # last recorded list, noted as adapted; not past a recorded list_changed, where it may differ.
    changed = note("notifications/tools/list_changed")
    engine = ReplayEngine(recording(("c", req(1, "tools/list")), ("s", res(1, "first")),
                                    ("c", req(2, "tools/list")), ("s", res(2, "second")),
                                    ("c", req(3, "prompts/list")), ("s", changed), ("s", res(3, "prompts"))))
    assert send(engine, req(7, "tools/list")) == [res(7, "first")]
    assert send(engine, req(8, "tools/list")) == [res(8, "second")]
    assert send(engine, req(9, "prompts/list")) == [changed, res(9, "prompts")]
    assert send(engine, req(10, "prompts/list")) == [res(10, "prompts")]  # another list's change
    assert send(engine, req(11, "tools/list"))[0]["error"]["code"] == NO_MATCH
    report = engine.report
    assert len(report.unmatched) == 1 and report.repeated == 0
    assert report.adapted == ["prompts/list ×1: answered again as last recorded (the recording had no unplayed "
                              "prompts/list left, and shows no change of the list after it)"]
    unchanged = ReplayEngine(recording(("c", req(1, "tools/list")), ("s", res(1, "tools"))))
    assert [send(unchanged, req(n, "tools/list")) for n in (5, 6, 7)] == [[res(n, "tools")] for n in (5, 6, 7)]
    assert unchanged.report.clean and unchanged.report.adapted[0].startswith("tools/list ×2: answered again")
    # a change notified while the list was asked for, before its answer, is in that answer
    tools_changed = note("notifications/tools/list_changed")
    early = ReplayEngine(recording(("c", req(1, "tools/list")), ("s", tools_changed), ("s", res(1, "tools"))))
    assert send(early, req(5, "tools/list")) == [tools_changed, res(5, "tools")]
    assert send(early, req(6, "tools/list")) == [res(6, "tools")] and early.report.clean


def test_progress_tokens_are_restamped_and_dropped_when_the_client_asks_for_none() -> None:
    frames = recording(("c", req(4, "tools/call", {"name": "slow"}, token=4)),
                       ("s", progress(4, 1)), ("s", progress(4, 2)), ("s", res(4, "done")))
    out = send(ReplayEngine(frames), req(1, "tools/call", {"name": "slow"}, token="tok"))
    assert out == [progress("tok", 1), progress("tok", 2), res(1, "done")]
    out = send(ReplayEngine(frames), req(1, "tools/call", {"name": "slow"}))
    assert out == [res(1, "done")]


def test_server_request_waits_for_the_clients_answer() -> None:
    frames = recording(
        ("c", req(1, "tools/call", {"name": "ask"})),
        ("s", req(0, "sampling/createMessage", {"messages": []})),
        ("c", res(0, {"role": "assistant", "content": {"type": "text", "text": "hi"}})),
        ("s", res(1, "answered")),
    )
    engine = ReplayEngine(frames)
    assert send(engine, req(5, "tools/call", {"name": "ask"})) == [req(0, "sampling/createMessage", {"messages": []})]
    # the live answer may differ from the recorded one: it is matched by the server request's id
    assert send(engine, res(0, {"role": "assistant", "content": {"type": "text", "text": "other"}})) == [
        res(5, "answered")
    ]
    assert engine.report.clean


def test_an_answer_to_a_server_request_not_sent_yet_is_a_miss_and_the_real_answer_still_plays() -> None:
    """An answer ahead of its question is no answer: it is a miss, what the server did next still
    waits for the request and the live answer to it, and that answer is taken."""
    frames = recording(
        ("c", req(1, "tools/call", {"name": "ask"})),
        ("s", req(0, "roots/list")),
        ("c", res(0, {"roots": []})),
        ("s", res(1, "answered")),
    )
    engine = ReplayEngine(frames)
    assert send(engine, res(0, {"roots": []})) == []
    assert [miss.reason for miss in engine.report.unmatched] == ["the server has not sent a request with that id yet"]
    assert send(engine, req(5, "tools/call", {"name": "ask"})) == [req(0, "roots/list")]
    assert send(engine, res(0, {"roots": []})) == [res(5, "answered")]
    assert len(engine.report.unmatched) == 1


def test_a_server_request_is_not_sent_to_a_client_that_did_not_declare_its_capability() -> None:
    """A server asks for roots only of a client that declared roots: the recorded client did, this
    one did not. The request is not sent, the recorded answer stands in, and what followed plays."""
    frames = recording(
        ("c", req(1, "initialize", {"protocolVersion": "2025-11-25", "capabilities": {"roots": {}}})),
        ("s", res(1, {"protocolVersion": "2025-11-25", "capabilities": {}})),
        ("c", note("notifications/initialized")),
        ("s", req(0, "roots/list")),
        ("c", res(0, {"roots": []})),
        ("s", note("notifications/message", {"level": "info", "data": "0 roots"})),
        ("c", req(2, "tools/call", {"name": "ask"})),
        ("s", req(1, "sampling/createMessage", {"messages": []})),
        ("c", res(1, {"role": "assistant", "content": {"type": "text", "text": "hi"}})),
        ("s", res(2, "answered")),
    )
    engine = ReplayEngine(frames)
    send(engine, req(7, "initialize", {"protocolVersion": "2025-11-25", "capabilities": {"sampling": {}}}))
    assert send(engine, note("notifications/initialized")) == [note("notifications/message", {"level": "info", "data": "0 roots"})]
    # a capability it declared is asked of it
    assert send(engine, req(8, "tools/call", {"name": "ask"})) == [req(1, "sampling/createMessage", {"messages": []})]
    assert send(engine, res(1, {"role": "assistant", "content": {"type": "text", "text": "yo"}})) == [res(8, "answered")]
    assert engine.report.clean
    assert engine.report.adapted[1:] == ["roots/list #0 (frame 4): not sent, as the live client did not declare roots; "
                                         "the recorded client's answer stood in for its own"]


def test_a_server_request_needs_the_sub_capability_its_mode_or_task_asks_for() -> None:
    """An elicitation in URL mode needs elicitation.url; a task-augmented request needs
    tasks.requests.<its method>, and the server's polls about that task follow it unsent."""
    url = req(0, "elicitation/create", {"mode": "url", "url": "https://example.com/x", "message": "go"})
    tasked = req(1, "sampling/createMessage", {"messages": [], "task": {"ttl": 1000}})
    frames = recording(
        ("c", req(1, "initialize", {"protocolVersion": "2025-11-25", "capabilities": {
            "elicitation": {"form": {}, "url": {}}, "sampling": {}, "tasks": {"requests": {"sampling": {"createMessage": {}}}}}})),
        ("s", res(1, {"protocolVersion": "2025-11-25", "capabilities": {}})),
        ("c", req(2, "tools/call", {"name": "link"})),
        ("s", url),
        ("c", res(0, {"action": "accept"})),
        ("s", res(2, "linked")),
        ("c", req(3, "tools/call", {"name": "ask"})),
        ("s", tasked),
        ("c", res(1, {"task": {"taskId": "t1", "status": "working"}})),
        ("s", req(2, "tasks/result", {"taskId": "t1"})),
        ("c", res(2, {"role": "assistant", "content": {"type": "text", "text": "hi"}})),
        ("s", res(3, "asked")),
    )
    engine = ReplayEngine(frames)
    send(engine, req(7, "initialize", {"protocolVersion": "2025-11-25", "capabilities": {"elicitation": {}, "sampling": {}}}))
    assert send(engine, req(8, "tools/call", {"name": "link"})) == [res(8, "linked")]
    assert send(engine, req(9, "tools/call", {"name": "ask"})) == [res(9, "asked")]
    assert engine.report.clean
    notes = [line.split(": not sent, as ")[1].split(";")[0] for line in engine.report.adapted if "not sent" in line]
    assert notes == ["the live client did not declare elicitation.url",
                     "the live client did not declare tasks.requests.sampling.createMessage",
                     "it is about a task of a request the live client was not sent"]


def test_a_2026_retry_matches_whatever_its_input_says_and_another_kind_of_input_is_a_miss() -> None:
    """At 2026-07-28 the client's answers to the server's input requests ride in its retry's
    params: what they say may differ (a model's text), their kind not (another elicitation action)."""
    def retry(id_: int, answer: dict) -> dict:
        return req(id_, "tools/call", {"name": "ask", "requestState": "s1", "inputResponses": {"q": answer}})

    frames = recording(("c", retry(1, {"action": "accept", "content": {"name": "Ann"}})), ("s", res(1, "hello Ann")))
    engine = ReplayEngine(frames)
    assert send(engine, retry(5, {"action": "accept", "content": {"name": "Bob"}})) == [res(5, "hello Ann")]
    assert engine.report.clean
    declined = ReplayEngine(frames)
    assert send(declined, retry(6, {"action": "decline"})) == [res(6, "hello Ann")]  # played on
    [miss] = declined.report.unmatched
    assert miss.summary == "tools/call id 6: its input 'q'" and "action 'accept', this one's 'decline'" in miss.reason


@pytest.mark.parametrize(("recorded_answer", "live_answer", "reason"), [
    (res(0, {"role": "assistant", "content": {}}), {"jsonrpc": "2.0", "id": 0, "error": {"code": -1, "message": "User rejected"}},
     "the recorded client answered with a result, this one with an error (-1: User rejected)"),
    (res(0, {"action": "accept", "content": {"name": "x"}}), res(0, {"action": "decline"}),
     "the recorded client's answer has action 'accept', this one's 'decline'"),
])
def test_a_client_that_answers_a_server_request_otherwise_is_a_miss(recorded_answer: dict, live_answer: dict, reason: str) -> None:
    """What the recorded server did next came of the recorded answer: the replay plays it on, but
    a client that declined where the recorded one accepted is not told it succeeded, silently."""
    frames = recording(("c", req(1, "tools/call", {"name": "ask"})), ("s", req(0, "elicitation/create", {})),
                       ("c", recorded_answer), ("s", res(1, "answered")))
    engine = ReplayEngine(frames)
    send(engine, req(5, "tools/call", {"name": "ask"}))
    assert send(engine, live_answer) == [res(5, "answered")]
    [miss] = engine.report.unmatched
    assert miss.summary == "response id 0" and miss.reason.startswith(reason)


def test_a_request_the_recorded_client_cancelled_and_the_live_one_waited_for_is_a_miss_at_the_end() -> None:
    """The recording has no answer to give it (the real server would have answered, later): said
    once the client ends, instead of a clean summary over a client left waiting."""
    frames = recording(("c", req(3, "tools/call", {"name": "slow"})),
                       ("c", note("notifications/cancelled", {"requestId": 3, "reason": "user"})))
    engine = ReplayEngine(frames)
    assert send(engine, req(8, "tools/call", {"name": "slow"})) == []
    engine.end()
    [miss] = engine.report.unmatched
    assert miss.summary == "tools/call id 8" and "the recorded client cancelled tools/call #3" in miss.reason


def test_a_cancel_recorded_after_the_answer_is_no_miss_when_the_live_client_does_not_send_it() -> None:
    frames = recording(("c", req(3, "tools/call", {"name": "quick"})), ("s", res(3, "done")),
                       ("c", note("notifications/cancelled", {"requestId": 3, "reason": "too late"})))
    engine = ReplayEngine(frames)
    assert send(engine, req(8, "tools/call", {"name": "quick"})) == [res(8, "done")]
    engine.end()
    assert engine.report.unmatched == []


def test_response_recorded_after_a_cancel_is_held_until_the_live_cancel() -> None:
    frames = recording(
        ("c", req(3, "tools/call", {"name": "slow"}, token=3)),
        ("s", progress(3, 1)),
        ("c", note("notifications/cancelled", {"requestId": 3, "reason": "user"})),
        ("s", res(3, "too late")),
    )
    engine = ReplayEngine(frames)
    assert send(engine, req(8, "tools/call", {"name": "slow"}, token=8)) == [progress(8, 1)]
    assert send(engine, note("notifications/cancelled", {"requestId": 8, "reason": "user"})) == [res(8, "too late")]
    assert engine.report.clean


def test_cancelled_call_without_recorded_response_gets_none() -> None:
    frames = recording(
        ("c", req(3, "tools/call", {"name": "slow"})),
        ("c", note("notifications/cancelled", {"requestId": 3})),
        ("c", req(4, "ping")),
        ("s", res(4, {})),
    )
    engine = ReplayEngine(frames)
    assert send(engine, req(1, "tools/call", {"name": "slow"})) == []
    assert send(engine, note("notifications/cancelled", {"requestId": 1})) == []
    assert send(engine, req(2, "ping")) == [res(2, {})]
    assert engine.report.clean


def test_untied_notifications_follow_the_client_message_recorded_before_them() -> None:
    frames = recording(
        ("c", req(1, "initialize", {"protocolVersion": "2025-06-18", "clientInfo": {"name": "x", "version": "1"}})),
        ("s", res(1, {"protocolVersion": "2025-06-18"})),
        ("c", note("notifications/initialized")),
        ("s", note("notifications/tools/list_changed")),
    )
    engine = ReplayEngine(frames)
    # clientInfo is volatile: another client version still matches
    live_init = req(0, "initialize", {"protocolVersion": "2025-06-18", "clientInfo": {"name": "y", "version": "2"}})
    assert send(engine, live_init) == [res(0, {"protocolVersion": "2025-06-18"})]
    assert send(engine, note("notifications/initialized")) == [note("notifications/tools/list_changed")]


def test_unmatched_request_names_the_nearest_candidate_and_the_differing_path() -> None:
    frames = recording(("c", req(1, "tools/list")), ("s", res(1, {})),
                       ("c", req(2, "tools/call", {"name": "weather", "arguments": {"city": "Paris"}})),
                       ("s", res(2, "sunny")))
    engine = ReplayEngine(frames)
    [error] = send(engine, req(5, "tools/call", {"name": "weather", "arguments": {"city": "Lyon"}}))
    assert error["id"] == 5 and error["error"]["code"] == NO_MATCH
    message = error["error"]["message"]
    assert "tools/call #2" in message and '/params/arguments/city: "Paris" → "Lyon"' in message
    assert not engine.report.clean and engine.report.unmatched[0].summary == "tools/call id 5"
    assert engine.report.unused == ["tools/list #1 (frame 1)", "tools/call #2 (frame 3)"]


def test_garbage_from_the_client_gets_a_parse_error_unless_it_was_recorded() -> None:
    frames = recording(("c", b"not json"), ("s", b"also not json"))
    engine = ReplayEngine(frames)
    assert [a.payload for a in engine.receive(b"not json").actions] == [b"also not json"]
    [error] = [json.loads(a.payload) for a in engine.receive(b"{broken").replies]
    assert error["error"]["code"] == PARSE_ERROR and error["id"] is None


def test_lines_a_lenient_recorder_parsed_but_no_client_reader_takes_are_matched_as_bytes() -> None:
    # NaN, a BOM before the JSON: the recorder kept them as messages, a live client's are not JSON
    # to the replay's reader; the same bytes get what the recorded server did (here nothing, as an
    # SDK server skips them), with no made-up error and no miss
    hostile = [b'{"jsonrpc":"2.0","id":NaN,"method":"x"}', b'\xef\xbb\xbf{"jsonrpc":"2.0","id":7,"method":"ping"}']
    frames = recording(*(("c", line) for line in hostile), ("c", req(9, "ping")), ("s", res(9, {})))
    assert [frame.kind for frame in frames[:2]] == ["message"] * 2  # what the recorder made of them
    engine = ReplayEngine(frames)
    for line in hostile:
        reception = engine.receive(line)
        assert reception.replies == [] and reception.actions == []
    assert send(engine, req("live", "ping")) == [res("live", {})]
    assert engine.report.clean and engine.report.unused == []
    # not recorded: the reader's own errors, and misses
    engine = ReplayEngine(recording(("c", req(9, "ping")), ("s", res(9, {}))))
    assert [json.loads(reply.payload)["error"]["code"] for line in hostile for reply in engine.receive(line).replies] == [
        PARSE_ERROR, PARSE_ERROR]


def test_batch_elements_are_matched_one_by_one_and_answered_as_a_batch() -> None:
    frames = recording(("c", [req(1, "ping"), req(2, "tools/list")]), ("s", [res(1, {}), res(2, {"tools": []})]))
    engine = ReplayEngine(frames)
    assert send(engine, [req("a", "tools/list"), req("b", "ping")]) == [[res("b", {}), res("a", {"tools": []})]]


def test_server_output_before_any_client_message_is_released_at_start_and_exit_after_stdin_closes() -> None:
    frames = recording(("s", note("notifications/message", {"level": "info", "data": "up"})),
                       ("c", req(1, "ping")), ("s", res(1, {})), ("c_end", None), ("exit", 0))
    engine = ReplayEngine(frames)
    assert [json.loads(a.payload) for a in engine.start()] == [note("notifications/message", {"level": "info", "data": "up"})]
    send(engine, req(1, "ping"))
    [exit_action] = engine.end()
    assert exit_action.frame is not None and exit_action.frame.info == {"code": 0, "signal": None}


@pytest.mark.parametrize(("stopped_after_stdin", "signal_number", "code"), [
    (True, signal.SIGTERM, 0),  # the recorded client killed a server that outlived its stdin: not the server's status
    (True, signal.SIGKILL, 0),
    (True, signal.SIGSEGV, None),  # a crash is the server's own
    (False, signal.SIGTERM, None),  # killed while its client still talked: part of the session
])
def test_a_server_its_client_stopped_with_a_signal_after_closing_stdin_replays_as_a_clean_exit(
        stopped_after_stdin: bool, signal_number: int, code: int | None) -> None:
    frames = recording(("c", req(1, "ping")), ("s", res(1, {})), *([("c_end", None)] if stopped_after_stdin else []))
    frames.append(StdioFramer().exit(9.0, None, signal_number)._replace(seq=len(frames) + 1))
    if not stopped_after_stdin:
        frames += [end._replace(seq=len(frames) + 1) for end in recording(("c_end", None))]
    engine = ReplayEngine(frames)
    released = engine.receive(json.dumps(req(1, "ping")).encode()).actions + engine.end()
    [exit_action] = [action for action in released if action.frame.kind is Kind.EXIT]
    exit_info = exit_action.frame.info
    if code is None:
        assert exit_info == {"code": None, "signal": signal_number} and engine.report.adapted == []
        assert exit_action.gap > 0  # the recorded wait before it is the server's: kept under a timing
    else:
        assert exit_info == {"code": 0, "signal": None}
        assert exit_action.gap == 0  # how long the recorded client waited before the kill: a SIGTERM then cut the replay
        assert engine.report.adapted == [f"exit: the recorded server was stopped by signal {int(signal_number)} after "
                                         "its client closed stdin; the replay exits 0 as the live client closes stdin"]


def test_a_message_holding_bytes_is_refused_in_one_sentence() -> None:
    import pytest

    from tapes.cassette.store import CassetteError
    from tapes.cassette.frames import Direction, Kind

    bad = Frame(1, 0.0, Direction.CLIENT_TO_SERVER, "stdio", Kind.MESSAGE, req(1, "ping", {"x": b"\x00"}))
    with pytest.raises(CassetteError, match="frame 1 holds a message that is not JSON"):
        ReplayEngine([bad])
