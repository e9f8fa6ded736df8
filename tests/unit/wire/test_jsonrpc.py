"""JSON-RPC classification, decoding with verbatim bytes, and stdio line framing."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tapes.wire.jsonrpc import LineSplitter, MessageType, classify, decode, encode, items

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

