"""JSON-RPC classification, decoding with verbatim bytes, and stdio line framing."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tapes.wire.jsonrpc import (
    not_mcp_answer,
    INVALID_REQUEST,
    MAX_DEPTH,
    PARSE_ERROR,
    BoundedLineSplitter,
    LineSplitter,
    Overlong,
    MessageType,
    classify,
    decode,
    encode,
    items,
    read_json,
    refusal,
    unreadable_live,
    wire_form,
)

REQUEST = {"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {"name": "echo"}}
NOTIFICATION = {"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progressToken": 1}}
RESULT = {"jsonrpc": "2.0", "id": 4, "result": {"content": []}}
ERROR = {"jsonrpc": "2.0", "id": 4, "error": {"code": -32601, "message": "Method not found"}}


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        (REQUEST, MessageType.REQUEST),
        ({"jsonrpc": "2.0", "id": "abc", "method": "ping"}, MessageType.REQUEST),
        (NOTIFICATION, MessageType.NOTIFICATION),
        (RESULT, MessageType.RESULT),
        ({"jsonrpc": "2.0", "id": 1, "result": None}, MessageType.RESULT),
        (ERROR, MessageType.ERROR),
        ({"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "Parse error"}}, MessageType.ERROR),
        ([REQUEST, NOTIFICATION], MessageType.BATCH),
        ([RESULT, ERROR, RESULT], MessageType.BATCH),
    ],
)
def test_classify_valid(message: object, expected: MessageType) -> None:
    assert classify(message) is expected


@pytest.mark.parametrize(
    "message",
    [
        pytest.param({"id": 1, "method": "ping"}, id="no jsonrpc member"),
        pytest.param({"jsonrpc": "1.0", "id": 1, "method": "ping"}, id="wrong version"),
        pytest.param({"jsonrpc": "2.0", "id": 1, "method": 7}, id="method not a string"),
        pytest.param({"jsonrpc": "2.0", "result": {}}, id="result without id"),
        pytest.param({"jsonrpc": "2.0", "id": 1}, id="neither result nor error"),
        pytest.param({"jsonrpc": "2.0", "id": 1, "error": "boom"}, id="error not an object"),
        pytest.param("hello", id="a string"),
        pytest.param(42, id="a number"),
        pytest.param(None, id="null"),
        pytest.param([], id="empty batch"),
        pytest.param([REQUEST, {"jsonrpc": "2.0"}], id="batch with an invalid member"),
        pytest.param([REQUEST, [REQUEST]], id="nested batch"),
    ],
)
def test_classify_invalid(message: object) -> None:
    assert classify(message) is MessageType.INVALID


def test_items_of_single_message_and_batch() -> None:
    assert items(REQUEST) == [REQUEST]
    assert items([REQUEST, RESULT]) == [REQUEST, RESULT]


def test_encode_is_compact_keeps_key_order_and_unicode() -> None:
    message = {"params": {"b": 1, "a": "é✓"}, "method": "x", "jsonrpc": "2.0"}
    assert encode(message) == '{"params":{"b":1,"a":"é✓"},"method":"x","jsonrpc":"2.0"}'.encode()


@pytest.mark.parametrize(
    "payload",
    [
        pytest.param(b"", id="empty"),
        pytest.param(b"Server started on stdio", id="not JSON"),
        pytest.param(b'{"jsonrpc":"2.0","id":1,', id="cut JSON"),
        pytest.param(b'{"jsonrpc":"2.0","method":"\xff\xfe"}', id="not UTF-8"),
        pytest.param(b'{"hello":"world"}', id="JSON but not JSON-RPC"),
        pytest.param(b"[]", id="empty batch"),
        pytest.param(b'[{"jsonrpc":"2.0","method":"a"},{"x":1}]', id="batch with an invalid member"),
        pytest.param(b"[" * 100_000 + b"]" * 100_000, id="nesting too deep"),
        # members of a type JSON-RPC does not allow: no cassette holds these as messages
        pytest.param(b'{"jsonrpc":"2.0","id":true,"method":"ping"}', id="boolean id"),
        pytest.param(b'[{"jsonrpc":"2.0","method":"a"},{"jsonrpc":"2.0","id":[],"result":{}}]', id="array id in a batch"),
        pytest.param(b'{"jsonrpc":"2.0","id":1,"method":"a","params":"x"}', id="string params"),
        pytest.param(b'{"jsonrpc":"2.0","id":1,"error":{"code":"x","message":"m"}}', id="error code not an integer"),
    ],
)
def test_decode_keeps_what_is_not_json_rpc(payload: bytes) -> None:
    decoded = decode(payload)
    assert decoded.message is None
    assert decoded.verbatim == payload


@pytest.mark.parametrize(
    "message",
    [
        REQUEST,
        NOTIFICATION,
        RESULT,
        ERROR,
        [REQUEST, NOTIFICATION],
        {"jsonrpc": "2.0", "method": "é", "params": [1e-07, "\u2028"]},
    ],
)
def test_decode_canonical_payload_has_no_verbatim(message: object) -> None:
    decoded = decode(encode(message))
    assert decoded.message == message
    assert decoded.verbatim is None


@pytest.mark.parametrize(
    ("payload", "message"),
    [
        pytest.param(b'{"jsonrpc": "2.0", "method": "ping"}', {"jsonrpc": "2.0", "method": "ping"}, id="spaces"),
        pytest.param(b'{"jsonrpc":"2.0","method":"ping"}\r', {"jsonrpc": "2.0", "method": "ping"}, id="CR"),
        pytest.param(
            b'{"jsonrpc":"2.0","\\u006dethod":"ping"}', {"jsonrpc": "2.0", "method": "ping"}, id="escaped key"
        ),
        pytest.param(b'{"jsonrpc":"2.0","method":"\\u00e9"}', {"jsonrpc": "2.0", "method": "é"}, id="escaped value"),
        pytest.param(
            b'{"jsonrpc":"2.0","method":"a","params":[1e-7]}',
            {"jsonrpc": "2.0", "method": "a", "params": [1e-07]},
            id="1e-7 vs 1e-07",
        ),
        pytest.param(
            b'{"jsonrpc":"2.0","method":"a","params":[1.50]}',
            {"jsonrpc": "2.0", "method": "a", "params": [1.5]},
            id="trailing zero",
        ),
        pytest.param(
            b'{"jsonrpc":"2.0","method":"a","params":["\\ud800"]}',
            {"jsonrpc": "2.0", "method": "a", "params": ["\ud800"]},
            id="lone surrogate",
        ),
    ],
)
def test_decode_keeps_verbatim_when_canonical_differs(payload: bytes, message: object) -> None:
    decoded = decode(payload)
    assert decoded.message == message
    assert decoded.verbatim == payload


# --- line framing ---------------------------------------------------------------------------


def _split_at(data: bytes, cuts: list[int]) -> list[bytes]:
    points = [0, *sorted(cut % (len(data) + 1) for cut in cuts), len(data)]
    return [data[a:b] for a, b in zip(points, points[1:])]


@given(
    data=st.lists(st.sampled_from([b"\n", b"a", b"{}", b"\r", b"\xff", b"x" * 50]), max_size=40).map(b"".join),
    cuts=st.lists(st.integers(min_value=0), max_size=20),
)
def test_line_splitter_is_independent_of_chunking(data: bytes, cuts: list[int]) -> None:
    splitter = LineSplitter()
    lines = [line for chunk in _split_at(data, cuts) for line in splitter.feed(chunk)]
    *expected_lines, expected_rest = data.split(b"\n")
    assert lines == expected_lines
    assert splitter.finish() == (expected_rest or None)
    assert splitter.finish() is None  # finish empties it


def test_line_splitter_joins_a_30_mb_line_fed_in_64_kib_chunks() -> None:
    # Quadratic re-joining would take minutes here; one join at the newline takes milliseconds.
    line = b'{"jsonrpc":"2.0","id":1,"result":{"text":"' + b"x" * (30 * 1024 * 1024) + b'"}}'
    chunk_size = 64 * 1024
    splitter = LineSplitter()
    for start in range(0, len(line), chunk_size):
        assert splitter.feed(line[start : start + chunk_size]) == []
    assert splitter.feed(b"\nnext") == [line]
    assert splitter.finish() == b"next"



@given(
    data=st.lists(st.sampled_from([b"\n", b"a", b"{}", b"\r", b"x" * 50]), max_size=40).map(b"".join),
    cuts=st.lists(st.integers(min_value=0), max_size=20),
    limit=st.integers(min_value=0, max_value=120),
)
def test_a_bounded_splitter_gives_the_lines_within_its_limit_and_the_size_of_the_others(
    data: bytes, cuts: list[int], limit: int
) -> None:
    splitter = BoundedLineSplitter(limit)
    lines = [line for chunk in _split_at(data, cuts) for line in splitter.feed(chunk)]
    *expected_lines, expected_rest = data.split(b"\n")

    def bounded(line: bytes) -> bytes | Overlong:
        return line if len(line) <= limit else Overlong(len(line))

    assert lines == [bounded(line) for line in expected_lines]
    assert splitter.finish() == (bounded(expected_rest) if expected_rest else None)
    assert splitter.finish() is None


def test_a_bounded_splitter_holds_nothing_of_an_endless_line() -> None:
    splitter = BoundedLineSplitter(1024)
    for _ in range(1000):
        assert splitter.feed(b"x" * 4096) == []
    assert splitter._pending == []  # nothing held past the limit
    assert splitter.feed(b'x\n{"jsonrpc":"2.0","id":1,"method":"ping"}\n') == [
        Overlong(4096 * 1000 + 1), b'{"jsonrpc":"2.0","id":1,"method":"ping"}']


# --- reading a live client's messages at the edge ------------------------------------------------


@pytest.mark.parametrize(
    ("payload", "code", "says"),
    [
        (b"\xff{}", PARSE_ERROR, "utf-8"),
        (b'{"id": NaN}', PARSE_ERROR, "NaN is not JSON"),
        (b"[" * 100_000 + b"]" * 100_000, PARSE_ERROR, "nested too deeply"),
        (b"[" * 500 + b"]" * 500, INVALID_REQUEST, f"deeper than {MAX_DEPTH}"),
        (b'{"jsonrpc":"2.0","id":"\\udc00","method":"ping"}', INVALID_REQUEST, "lone UTF-16 surrogate"),
        (b'{"jsonrpc":"2.0","id":' + b"9" * 5000 + b',"method":"ping"}', PARSE_ERROR, "a number has more than 4300 digits"),
    ],
)
def test_payloads_that_are_not_json_the_replay_can_take(payload: bytes, code: int, says: str) -> None:
    value, refused = read_json(payload)
    assert value is None and refused is not None
    assert refused.code == code and says in refused.reason and refused.id is None


def test_a_payload_nested_up_to_the_limit_and_a_surrogate_pair_are_read() -> None:
    nested = b"[" * MAX_DEPTH + b"]" * MAX_DEPTH
    assert read_json(nested) == (json.loads(nested), None)
    assert read_json(b'{"jsonrpc":"2.0","method":"x","params":{"t":"\\ud83d\\ude00"}}')[0]["params"]["t"] == "😀"


@pytest.mark.parametrize(
    ("message", "live_id", "says"),
    [
        ({"jsonrpc": "2.0", "id": [], "result": {}}, None, "response id must be a string or an integer"),
        ({"jsonrpc": "2.0", "id": True, "method": "ping"}, None, "request id"),
        ({"jsonrpc": "2.0", "id": 1.5, "method": "ping"}, None, "request id"),
        ({"jsonrpc": "2.0", "id": {"a": 1}, "method": "ping"}, None, "request id"),
        ({"jsonrpc": "1.0", "id": 3, "method": "ping"}, 3, '"jsonrpc" must be "2.0"'),
        ({"jsonrpc": "2.0", "id": "a", "method": 7}, "a", "method must be a string"),
        ({"jsonrpc": "2.0", "id": 4, "method": "tools/list", "params": "x"}, 4, "params must be an object or an array"),
        ({"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {"_meta": []}}, 5, "_meta must be an object"),
        ({"jsonrpc": "2.0", "id": 6, "method": "x", "params": {"_meta": {"progressToken": [1]}}}, 6, "progressToken"),
        ({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": None}}, None, "requestId"),
        ({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": [1]}, None, "requestId"),
        ({"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progressToken": 1.5}}, None, "progressToken"),
        ({"jsonrpc": "2.0", "id": 7}, 7, "either a result or an error"),
        ({"jsonrpc": "2.0", "id": 8, "result": 1, "error": {}}, 8, "either a result or an error"),
        ({"jsonrpc": "2.0", "id": 9, "error": {"code": "x", "message": "m"}}, 9, "integer code"),
        ({"jsonrpc": "2.0"}, None, "needs a method"),
        ([1], None, "JSON object"),
        (None, None, "JSON object"),
    ],
)
def test_refused_messages_say_why_and_keep_a_usable_id(message: object, live_id: object, says: str) -> None:
    refused = refusal(message)
    assert refused is not None and refused.code == INVALID_REQUEST and says in refused.reason
    assert refused.id == live_id and type(refused.id) is type(live_id)
    assert refused.reply() == {"jsonrpc": "2.0", "id": live_id,
                               "error": {"code": INVALID_REQUEST, "message": f"Invalid Request: {refused.reason}"}}


@pytest.mark.parametrize(
    "message",
    [
        {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "x", "_meta": {"progressToken": "t"}}},
        {"jsonrpc": "2.0", "id": "a", "method": "ping"},
        {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 3, "reason": "x"}},
        {"jsonrpc": "2.0", "id": 2, "method": "legacy", "params": [1, 2]},
        {"jsonrpc": "2.0", "id": 0, "result": {}},
        {"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "Parse error"}},
    ],
)
def test_well_formed_messages_pass(message: object) -> None:
    assert refusal(message) is None


def test_an_answer_to_a_json_rpc_post_that_is_not_mcp_is_named() -> None:
    ping = b'{"jsonrpc":"2.0","id":1,"method":"ping"}'
    assert not_mcp_answer(ping, 500, "text/html; charset=utf-8") == "500 text/html"
    assert not_mcp_answer(ping, 200, None) == "200 without Content-Type"
    for status, media in [(200, "application/json"), (200, "text/event-stream; charset=utf-8"), (202, None), (400, "Application/JSON")]:
        assert not_mcp_answer(ping, status, media) is None
    assert not_mcp_answer(b"grant_type=code", 200, "text/html") is None  # an authorization flow's page, not MCP's business
    # a redirect that keeps the POST (the client sends it again there) is HTTP doing its job; one
    # that turns it into a GET loses the message
    assert not_mcp_answer(ping, 307, "text/html") is None and not_mcp_answer(ping, 308, None) is None
    assert not_mcp_answer(ping, 302, "text/html") == "302 text/html"


def test_wire_form_of_a_message_without_a_canonical_encoding() -> None:
    assert wire_form(RESULT) == encode(RESULT)
    # a lone surrogate (a JSON Lines cassette keeps one) went over the wire as its \\u escape
    assert json.loads(wire_form({"jsonrpc": "2.0", "id": 1, "result": "\ud800é"})) == {"jsonrpc": "2.0", "id": 1, "result": "\ud800é"}
    # msgpack's bytes have no JSON form: they are named, as the page and the timeline show them
    assert wire_form({"jsonrpc": "2.0", "id": 1, "result": {b"k": b"\x00\xff"}}) == \
        b'{"jsonrpc":"2.0","id":1,"result":{"<1 bytes: aw==>":"<2 bytes: AP8=>"}}'


_ODD_VALUES = st.sampled_from([float("nan"), float("inf"), 1.5, True, None, [], {}, "x", 7, "\ud800", "é"])
_ITEMS = st.fixed_dictionaries(
    {"jsonrpc": st.sampled_from(["2.0", "2.0", "1.0"])},
    optional={"id": _ODD_VALUES, "method": st.sampled_from(["ping", "notifications/progress", 3]),
              "params": st.one_of(_ODD_VALUES, st.fixed_dictionaries({}, optional={"progressToken": _ODD_VALUES,
                                                                                   "_meta": _ODD_VALUES}))},
)


@given(message=st.one_of(_ITEMS, st.lists(_ITEMS, min_size=1, max_size=3)),
       bom=st.booleans(), ascii_only=st.booleans(), spaced=st.booleans())
def test_unreadable_live_agrees_with_the_live_reader_on_what_a_recording_keeps_as_a_message(
    message: object, bom: bool, ascii_only: bool, spaced: bool
) -> None:
    text = json.dumps(message, ensure_ascii=ascii_only, separators=(", ", ": ") if spaced else (",", ":"))
    try:
        payload = (b"\xef\xbb\xbf" if bom else b"") + text.encode()
    except UnicodeEncodeError:  # a lone surrogate written raw is no UTF-8 at all
        return
    decoded = decode(payload)
    if decoded.message is not None:  # what a recorder keeps as a message frame
        assert unreadable_live(payload) == (read_json(payload)[1] is not None)
