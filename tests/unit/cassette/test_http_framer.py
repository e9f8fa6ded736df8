"""tapes.cassette.http_framer: what a re-record leaves alone (times in ms, volatile headers)."""

from __future__ import annotations

import pytest

from tapes.cassette.frames import Kind
from tapes.cassette.http_framer import HttpFramer
from tapes.cassette.redact import VOLATILE, RedactionRules, Redactor


def test_heads_keep_times_to_the_millisecond_and_volatile_headers_as_one_placeholder() -> None:
    framer = HttpFramer(Redactor(RedactionRules.default()))
    request = framer.request(0.1234567, 1, "POST", "/mcp", [("Content-Type", "application/json")],
                             b'{"jsonrpc":"2.0","id":1,"method":"ping"}')
    response = framer.response(0.2345678, 1, 200, [("Date", "Mon, 23 Nov 2026 10:00:00 GMT"),
                                                   ("Content-Type", "application/json")],
                               b'{"jsonrpc":"2.0","id":1,"result":{}}')
    assert [frame.t for frame in request + response] == [0.123, 0.123, 0.235, 0.235]
    assert response[0].info["headers"] == [["Date", VOLATILE], ["Content-Type", "application/json"]]


def test_endpoint_events_name_their_session_and_one_whose_url_does_not_parse_names_none() -> None:
    """An upstream's endpoint URL with an unclosed IPv6 bracket stopped the cassette writer."""
    framer = HttpFramer(Redactor(RedactionRules.default()))
    framer.response(0.0, 1, 200, [("Content-Type", "text/event-stream")], None)
    events = framer.chunk(0.1, 1, b"event: endpoint\ndata: http://[::1/messages?sessionId=a\n\n"
                                  b"event: endpoint\ndata: /messages/?session_id=b\n\n")
    assert [frame.shown_payload for frame in events] == [b"http://[::1/messages?sessionId=a", b"/messages/?session_id=b"]
    assert framer.sessions == ["b"]


def test_an_empty_post_body_is_kept_as_raw_and_a_get_has_no_body() -> None:
    """A replay matches a POST by its body: without a frame for an empty one, it had nothing to
    match, and answered what the recorded server had answered with an error of its own."""
    framer = HttpFramer(Redactor(RedactionRules.default()))
    posted = framer.request(0.0, 1, "POST", "/mcp", [("Content-Type", "application/json")], b"")
    opened = framer.request(0.1, 2, "GET", "/mcp", [("Accept", "text/event-stream")], b"")
    assert [(frame.kind, frame.data) for frame in posted] == [(Kind.HTTP_REQUEST, None), (Kind.RAW, b"")]
    assert [frame.kind for frame in opened] == [Kind.HTTP_REQUEST]
    cut = framer.request(0.2, 3, "POST", "/mcp", [("Content-Length", "100")], None)  # the client stopped sending it
    assert [frame.kind for frame in cut] == [Kind.HTTP_REQUEST]


def _compressed(coding: str, data: bytes) -> bytes:
    import gzip
    import zlib

    import brotli
    import zstandard

    if coding == "gzip":
        return gzip.compress(data[:40]) + gzip.compress(data[40:])  # two members, as a server may flush them
    if coding == "deflate":
        return zlib.compress(data)
    if coding == "raw deflate":
        squeeze = zlib.compressobj(wbits=-zlib.MAX_WBITS)
        return squeeze.compress(data) + squeeze.flush()
    if coding == "br":
        return brotli.compress(data)
    return zstandard.ZstdCompressor().compress(data)


@pytest.mark.parametrize("coding", ["gzip", "deflate", "raw deflate", "br", "zstd"])
def test_an_event_stream_sent_with_a_content_encoding_is_recorded_as_its_events(coding: str) -> None:
    events = b'id: 1\ndata: {"jsonrpc":"2.0","method":"notifications/message","params":{}}\n\n' \
             b'id: 2\ndata: {"jsonrpc":"2.0","id":1,"result":{}}\n\n'
    body = _compressed(coding, events)
    framer = HttpFramer(Redactor(RedactionRules.default()))
    head = [("Content-Type", "text/event-stream"), ("Content-Encoding", coding.removeprefix("raw "))]
    frames = framer.response(0.0, 1, 200, head, None)
    for start in range(0, len(body), 7):  # in small chunks, as they may come
        frames += framer.chunk(0.0, 1, body[start:start + 7])
    frames += framer.end(0.0, 1, "closed")
    assert [frame.kind for frame in frames] == [Kind.HTTP_RESPONSE, Kind.SSE_EVENT, Kind.SSE_EVENT, Kind.STREAM_END]
    assert [frame.message for frame in frames[1:3]] == [
        {"jsonrpc": "2.0", "method": "notifications/message", "params": {}}, {"jsonrpc": "2.0", "id": 1, "result": {}}]


def test_a_stream_not_in_the_coding_its_head_names_is_kept_as_it_came() -> None:
    framer = HttpFramer(Redactor(RedactionRules.default()))
    frames = framer.response(0.0, 1, 200, [("Content-Type", "text/event-stream"), ("Content-Encoding", "gzip")], None)
    frames += framer.chunk(0.0, 1, b"data: not gzip\n\n") + framer.chunk(0.0, 1, b"data: still not\n\n")
    frames += framer.end(0.0, 1, "closed")
    assert [(frame.kind, frame.data) for frame in frames[1:]] == [
        (Kind.RAW, b"data: not gzip\n\n"), (Kind.RAW, b"data: still not\n\n"), (Kind.STREAM_END, None)]
