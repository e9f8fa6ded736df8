"""`tapes view` without a browser: the page is self-contained, safe with hostile cassettes, small,
and the diagram model its script makes (view_model.js, run under Node) links what the issue asks
for (the page itself is checked in Chromium by e2e/test_view_browser.py)."""

from __future__ import annotations

import re
from typing import Any

import pytest

from tapes.cassette.store import Cassette, Header, load
from tapes.cassette.frames import STDIO, Direction, Frame, Kind
from tapes.render.view import Difference, render_comparison, render_page

from tests.support.paths import CASSETTES
from tests.support.samples import resumed_http_cassette
from tests.support.view_page import model_of

C2S, S2C = Direction.CLIENT_TO_SERVER, Direction.SERVER_TO_CLIENT
EVERYTHING_STDIO = CASSETTES / "everything-stdio-2025-11-25.tape"
DETAIL_LIMIT = 64_000  # characters of a frame's JSON the details panel shows (view_model.js)
HOSTILE = '</script><script>window.injected=1</script><!--<img src=x onerror=alert(1)>'


def rows_by_seq(side: dict[str, Any]) -> dict[int, dict[str, Any]]:
    return {row["seq"]: row for row in side["rows"]}


def marks(row: dict[str, Any]) -> list[tuple[str, str, int | None]]:
    return [(kind, text, target) for kind, text, target, _ in row.get("marks", [])]


def message(seq: int, direction: Direction, body: Any, t: float | None = None) -> Frame:
    return Frame(seq, seq / 100 if t is None else t, direction, STDIO, Kind.MESSAGE, body)


def assert_one_script_runs(page: str) -> None:
    """The page's one script is its own; every other script element holds data, which runs nothing."""
    opened = re.findall(r"<script([^>]*)>", page)
    assert [attributes for attributes in opened if "type=" not in attributes] == [""]
    assert {re.search(r'type="([^"]*)"', attributes).group(1) for attributes in opened if "type=" in attributes} \
        <= {"application/json", "application/octet-stream"}
    assert page.count("</script>") == len(opened) == page.count("<script")


def test_the_page_is_self_contained() -> None:
    page = render_page(load(EVERYTHING_STDIO), EVERYTHING_STDIO.name)
    assert "default-src 'none'" in page  # its CSP: nothing is fetched at view time
    assert not re.search(r"<(link|img|iframe)\b|<script[^>]*\bsrc=|@import|url\(", page)
    assert_one_script_runs(page)


def test_cassette_content_cannot_break_out_of_the_page() -> None:
    frames = [
        message(1, C2S, {"jsonrpc": "2.0", "id": HOSTILE, "method": HOSTILE, "params": {HOSTILE: [HOSTILE]}}),
        Frame(2, 0.02, S2C, STDIO, Kind.STDERR, data=HOSTILE.encode()),
        Frame(3, 0.03, S2C, STDIO, Kind.RAW, data=b"\xff\xfe" + HOSTILE.encode()),
    ]
    cassette = Cassette(Header("stdio", {"command": [HOSTILE]}, labels={HOSTILE: HOSTILE}), frames, [HOSTILE])
    page = render_page(cassette, HOSTILE)
    assert_one_script_runs(page)
    assert "<img" not in page and "<!--" not in page
    side = model_of(page)["sides"][0]
    assert side["rows"][0]["what"].startswith(f"request {HOSTILE} #")  # intact: only escaped
    assert side["rows"][0]["body"]["message"]["method"] == HOSTILE
    assert side["rows"][1]["body"] == {"data": HOSTILE}
    assert side["title"] == HOSTILE


def test_values_json_cannot_carry_still_make_a_valid_page() -> None:
    frames = [
        message(1, C2S, {"jsonrpc": "2.0", "id": 1, "method": "m", "params": {"nan": float("nan"), "b": b"\x00\x01"}}),
        message(2, S2C, {"jsonrpc": "2.0", "id": 1, "result": {"text": "lone \ud800 surrogate"}}),
    ]
    page = render_page(Cassette(Header("stdio", {}), frames), "odd.tape")
    page.encode("utf-8")  # writable as UTF-8
    rows = model_of(page)["sides"][0]["rows"]
    assert rows[0]["body"]["message"]["params"] == {"nan": "nan", "b": "<2 bytes: AAE=>"}
    assert rows[1]["what"] == "result #1"  # a message still, the surrogate shown as its escape
    assert rows[1]["body"]["message"]["result"]["text"] == "lone \\ud800 surrogate"


def test_progress_with_params_as_an_array_is_drawn() -> None:
    # params may be an array (JSON-RPC allows it): an AttributeError in the row's label
    frames = [message(1, S2C, {"jsonrpc": "2.0", "method": "notifications/progress", "params": [{"progress": 1}]})]
    assert model_of(render_page(Cassette(Header("stdio", {}), frames), "a.tape"))["sides"][0]["rows"][0]["what"] == \
        "progress null"


def test_a_huge_frame_is_cut_in_the_details_but_its_row_is_whole() -> None:
    big = {"jsonrpc": "2.0", "id": 1, "result": {"text": "x" * (4 * DETAIL_LIMIT)}}
    page = render_page(Cassette(Header("stdio", {}), [message(1, S2C, big)]), "big.tape")
    row = model_of(page)["sides"][0]["rows"][0]
    assert row["what"] == "result #1"
    assert row["body"].startswith('{"message"') and row["body"].endswith("`tapes export` has them all)")
    assert len(page) < 4 / 3 * 4 * DETAIL_LIMIT + 100_000  # the frame's bytes once, in base64, and the page's code


def test_a_thousand_frames_make_less_than_a_megabyte() -> None:
    recorded = load(CASSETTES / "everything-stdio-2025-11-25.tape").frames
    frames = [
        Frame(n + 1, n * 0.01, frame.direction, frame.channel, frame.kind, frame.message, frame.data, frame.info)
        for n, frame in enumerate(recorded[n % len(recorded)] for n in range(1000))
    ]
    page = render_page(Cassette(Header("stdio", {}), frames), "big.tape")
    assert len(model_of(page)["sides"][0]["rows"]) == 1000
    assert len(page.encode()) < 1_000_000


def test_the_cancellation_and_the_race_are_marked() -> None:
    rows = rows_by_seq(model_of(render_page(load(EVERYTHING_STDIO), "x"))["sides"][0])
    assert ("cancel", "✕ cancels #10", 32) in marks(rows[34])  # notifications/cancelled → its request
    assert ("race", "no response", None) in marks(rows[34])
    assert ("cancel", "✕ cancelled", 34) in marks(rows[32])
    assert ("late", "after cancel", 34) in marks(rows[38])  # progress went on after the cancel
    assert ("progress", "progress ×5", 33) in marks(rows[32])
    assert rows[32]["g"] == rows[33]["g"] == rows[34]["g"] == rows[41]["g"]  # one interaction


@pytest.mark.parametrize(
    ("response_at", "on_cancel", "on_response"),
    [(0.5, "⚡ response still came", "⚡ after cancel"), (0.2, "⚡ too late: answered", "⚡ raced a cancel")],
)
def test_a_response_that_raced_a_cancel_is_marked(response_at: float, on_cancel: str, on_response: str) -> None:
    frames = [
        message(1, C2S, {"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {"name": "slow"}}, 0.1),
        message(2, C2S, {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 5}}, 0.3),
        message(3, S2C, {"jsonrpc": "2.0", "id": 5, "result": {}}, response_at),
    ]
    frames.sort(key=lambda frame: frame.t)
    frames = [Frame(n, f.t, f.direction, f.channel, f.kind, f.message) for n, f in enumerate(frames, start=1)]
    rows = model_of(render_page(Cassette(Header("stdio", {}), frames), "x"))["sides"][0]["rows"]
    cancel = next(row for row in rows if "cancelled" in row["what"])
    response = next(row for row in rows if row["what"] == "result #5")
    assert ("race", on_cancel, response["seq"]) in marks(cancel)
    assert ("race", on_response, cancel["seq"]) in marks(response)


def test_a_server_request_and_its_answer_are_linked() -> None:
    rows = rows_by_seq(model_of(render_page(load(EVERYTHING_STDIO), "x"))["sides"][0])
    assert ("answer", "↩ answered at 30", 30) in marks(rows[29])  # sampling/createMessage #1
    assert ("answer", "↪ answers server #1", 29) in marks(rows[30])
    assert ("of", "for #9", 28) in marks(rows[29])


def test_http_channels_are_named_by_what_they_carried() -> None:
    side = model_of(render_page(resumed_http_cassette(), "x"))["sides"][0]
    assert [(c["label"], c["end"]) for c in side["channels"]] == [
        ("http:1 POST tools/call #7", "client_disconnect"),
        ("http:2 GET resume", "closed"),
    ]
    rows = rows_by_seq(side)
    assert [rows[seq].get("eid") for seq in (4, 5, 6, 10, 11)] == ["e0", "e1", "e2", "e3", "e4"]
    assert ("resume", "⟲ resumes http:1 after e2", 6) in marks(rows[8])
    assert ("resumed", "⟲ resumed by http:2", 8) in marks(rows[7])


def test_a_comparison_highlights_the_differences_on_both_sides() -> None:
    a = load(EVERYTHING_STDIO)
    b = load(CASSETTES / "notes-stdio-2025-11-25.tape")
    differences = [Difference("tools/call echo removed", (17, 18), (), "breaking"), Difference("same", (4,), (3,))]
    model = model_of(render_comparison(a, b, differences, titles=("old.tape", "new.tape")))
    old, new = model["sides"]
    assert (old["title"], new["title"]) == ("old.tape", "new.tape")
    assert rows_by_seq(old)[17]["notes"] == ["tools/call echo removed"]
    assert rows_by_seq(new)[3]["notes"] == ["same"]
    assert "notes" not in rows_by_seq(new)[4]
    assert model["differences"][0] == {"note": "tools/call echo removed", "severity": "breaking", "a": [17, 18], "b": []}


def test_a_tasks_polls_status_and_result_are_tied_to_the_request_that_created_it() -> None:
    rows = rows_by_seq(model_of(render_page(load(CASSETTES / "everything-tasks-stdio-2025-11-25.tape"), "x"))["sides"][0])
    polls = [seq for seq, row in rows.items() if "tasks/get" in row["what"]]
    assert ("poll", f"polled ×{len(polls)}", polls[0]) in marks(rows[5])  # tools/call, answered with the task
    assert [marks(rows[seq]) for seq in polls[:2]] == [[("poll", "poll 1 of task", 5)], [("poll", "poll 2 of task", 5)]]
    assert ("poll", "result of task", 5) in marks(rows[29]) and ("poll", "status of task", 5) in marks(rows[7])


def test_a_subscriptions_events_and_its_close_are_tied_to_its_listen_request() -> None:
    rows = rows_by_seq(model_of(render_page(load(CASSETTES / "feed-stdio-2026-07-28.tape"), "x"))["sides"][0])
    events = [seq for seq, row in rows.items() if ("of", 'on #"listen-1"', 3) in marks(row)]
    assert events == [4, 6, 8, 12, 14]  # the acknowledgment, then two events per post
    assert ("progress", "events ×5", 4) in marks(rows[3])
    assert ("cancel", "server closed", 3) in marks(rows[16])  # the listen's result: the server's close
    assert ("cancel", '✕ cancels #"listen-2"', 18) in marks(rows[21])  # the client's close of the second


def http_exchange(seq: int, channel: str, session: str, request: Any, response: Any) -> list[Frame]:
    """A POST of `request` on `channel` in `session`, answered with `response` as JSON."""
    json_head = [["content-type", "application/json"], ["mcp-session-id", session]]
    return [
        Frame(seq, seq / 100, C2S, channel, Kind.HTTP_REQUEST, info={"method": "POST", "path": "/mcp", "headers": json_head}),
        Frame(seq + 1, seq / 100, C2S, channel, Kind.MESSAGE, request),
        Frame(seq + 2, seq / 100, S2C, channel, Kind.HTTP_RESPONSE, info={"status": 200, "headers": json_head}),
        Frame(seq + 3, seq / 100, S2C, channel, Kind.MESSAGE, response),
        Frame(seq + 4, seq / 100, S2C, channel, Kind.STREAM_END, info={"reason": "closed"}),
    ]


def test_a_task_is_tied_to_its_request_in_its_own_session() -> None:
    """Two HTTP sessions use the same request id at once: the task created in session A is tied to
    A's request, not to B's, which came later with the same id."""
    call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "slow", "task": {}}}
    task = {"jsonrpc": "2.0", "id": 1, "result": {"task": {"taskId": "t1", "status": "working"}}}
    frames = [
        Frame(1, 0.0, C2S, "http:1", Kind.HTTP_REQUEST,
              info={"method": "POST", "path": "/mcp", "headers": [["mcp-session-id", "A"]]}),
        Frame(2, 0.0, C2S, "http:1", Kind.MESSAGE, call),
        *http_exchange(3, "http:2", "B", call, {"jsonrpc": "2.0", "id": 1, "result": {"content": []}}),
        Frame(8, 0.1, S2C, "http:1", Kind.HTTP_RESPONSE, info={"status": 200, "headers": [["mcp-session-id", "A"]]}),
        Frame(9, 0.1, S2C, "http:1", Kind.MESSAGE, task),
        *http_exchange(10, "http:3", "A", {"jsonrpc": "2.0", "id": 2, "method": "tasks/get", "params": {"taskId": "t1"}},
                       {"jsonrpc": "2.0", "id": 2, "result": {"taskId": "t1", "status": "working"}}),
    ]
    rows = rows_by_seq(model_of(render_page(Cassette(Header("http", {"url": "http://x/mcp"}), frames), "x"))["sides"][0])
    assert marks(rows[11]) == [("poll", "poll 1 of task", 2)]  # session A's tools/call, not B's (frame 4)
    assert ("poll", "polled ×1", 11) in marks(rows[2])
    assert not any(kind == "poll" for kind, _, _ in marks(rows[4]))
    assert rows[9]["g"] == rows[2]["g"] != rows[4]["g"] == rows[6]["g"]  # each result in its own session's interaction


def test_the_initialize_request_joins_the_session_its_response_names() -> None:
    """An initialize POST carries no session id; its response issues one. Its result is tied to it,
    though another session's request with the same id came in between."""
    initialize = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {}}
    frames = [
        Frame(1, 0.0, C2S, "http:1", Kind.HTTP_REQUEST, info={"method": "POST", "path": "/mcp", "headers": []}),
        Frame(2, 0.0, C2S, "http:1", Kind.MESSAGE, initialize),
        *http_exchange(3, "http:2", "B", {"jsonrpc": "2.0", "id": 0, "method": "ping"}, {"jsonrpc": "2.0", "id": 0, "result": {}}),
        Frame(8, 0.1, S2C, "http:1", Kind.HTTP_RESPONSE, info={"status": 200, "headers": [["mcp-session-id", "A"]]}),
        Frame(9, 0.1, S2C, "http:1", Kind.MESSAGE, {"jsonrpc": "2.0", "id": 0, "result": {"protocolVersion": "2025-11-25"}}),
    ]
    side = model_of(render_page(Cassette(Header("http", {"url": "http://x/mcp"}), frames), "x"))["sides"][0]
    rows = rows_by_seq(side)
    assert rows[9]["g"] == rows[2]["g"] != rows[6]["g"] == rows[4]["g"]
    assert ["protocol", "2025-11-25"] in side["meta"]
