"""tapes.cassette.http_framer: what a re-record leaves alone (times in ms, volatile headers)."""

from __future__ import annotations

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
