"""tapes.wire.sse: the incremental SSE parser, the encoder, and the legacy endpoint rewriter."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from tapes.wire.sse import EndpointRewriter, SSEEvent, SSEParser, encode_event, is_event_stream

WIRE = (
    b"\xef\xbb\xbfid: 1\r\ndata:\r\n\r\n"  # BOM, CRLF, a priming event
    b": keep-alive\n\n"  # a comment alone is no event
    b"event: message\nid: 2\ndata: {\"a\":\n"  # id after event; data over two lines
    b"data: 1}\nretry: 250\n\n"
    b"id: 3\rdata: caf\xc3\xa9\r\r"  # CR only; a multi-byte character
    b"retry: soon\nid: bad\x00id\nbogus: x\ndata:no-space\n\n"  # ignored retry, id and field
)
EXPECTED = [
    SSEEvent(data="", id="1"),
    SSEEvent(data='{"a":\n1}', id="2", event="message", retry=250),
    SSEEvent(data="café", id="3"),
    SSEEvent(data="no-space"),
]


def parse_in_pieces(wire: bytes, cuts: list[int]) -> tuple[list[SSEEvent], bytes]:
    parser = SSEParser()
    events: list[SSEEvent] = []
    start = 0
    for cut in sorted(cuts) + [len(wire)]:
        events += parser.feed(wire[start:cut])
        start = max(start, cut)
    return events, parser.finish()


def test_whole_stream() -> None:
    assert parse_in_pieces(WIRE, []) == (EXPECTED, b"")


def test_every_single_cut_gives_the_same_events() -> None:
    # Cuts between CR and LF, inside the BOM and inside a UTF-8 character included.
    for cut in range(len(WIRE) + 1):
        assert parse_in_pieces(WIRE, [cut]) == (EXPECTED, b""), cut


@given(st.lists(st.integers(min_value=0, max_value=len(WIRE)), max_size=12))
def test_any_chunking_gives_the_same_events(cuts: list[int]) -> None:
    assert parse_in_pieces(WIRE, cuts) == (EXPECTED, b"")


def test_priming_event() -> None:
    assert SSEEvent(data="", id="7").is_priming
    assert not SSEEvent(data="x", id="7").is_priming
    assert not SSEEvent(data="").is_priming


def test_an_unterminated_event_is_returned_by_finish() -> None:
    parser = SSEParser()
    assert parser.feed(b"id: 1\ndata: {\"jsonrpc\"") == []
    assert parser.finish() == b'id: 1\ndata: {"jsonrpc"'
    assert parser.finish() == b""


def test_comments_between_events_are_not_kept_for_finish() -> None:
    parser = SSEParser()
    assert parser.feed(b": ping\n\n: ping\n") == []
    assert parser.finish() == b""


def test_many_lines_in_one_chunk() -> None:
    wire = b"".join(b"id: %d\ndata: %d\n\n" % (i, i) for i in range(2000))
    events = SSEParser().feed(wire)
    assert [e.id for e in events] == [str(i) for i in range(2000)]


event_strategy = st.builds(
    SSEEvent,
    data=st.text(st.characters(blacklist_characters="\r\x00", blacklist_categories=("Cs",))),
    id=st.none() | st.text(st.characters(blacklist_characters="\r\n\x00", blacklist_categories=("Cs",))),
    event=st.none() | st.text(st.characters(blacklist_characters="\r\n", blacklist_categories=("Cs",)), min_size=1),
    retry=st.none() | st.integers(min_value=0, max_value=10**9),
)


@given(st.lists(event_strategy, max_size=5))
def test_encode_then_parse_round_trips(events: list[SSEEvent]) -> None:
    wire = b"".join(encode_event(event) for event in events)
    assert SSEParser().feed(wire) == events


def test_encode_priming_event() -> None:
    assert encode_event(SSEEvent(data="", id="s/1", retry=100)) == b"id: s/1\nretry: 100\ndata:\n\n"


def test_is_event_stream() -> None:
    assert is_event_stream("text/event-stream")
    assert is_event_stream("Text/Event-Stream; charset=utf-8")
    assert not is_event_stream("application/json")
    assert not is_event_stream(None)


def test_endpoint_rewriter_points_an_absolute_upstream_url_at_the_proxy() -> None:
    rewriter = EndpointRewriter("http://up:9000", "http://127.0.0.1:8080")
    out = rewriter.feed(b"event: endpoint\ndata: http://up:9000/messages?session_id=")
    assert out == b""  # held until the event is complete
    out += rewriter.feed(b"abc\n\nevent: message\ndata: {}\n\n")
    assert out == b"event: endpoint\ndata: http://127.0.0.1:8080/messages?session_id=abc\n\nevent: message\ndata: {}\n\n"
    assert rewriter.feed(b"data: http://up:9000/x\n\n") == b"data: http://up:9000/x\n\n"  # only the first event


def test_endpoint_rewriter_leaves_relative_urls_and_other_streams_alone() -> None:
    wire = b"event: endpoint\ndata: /message?sessionId=1\n\n"
    assert EndpointRewriter("http://up:9000", "http://p:1").feed(wire) == wire
    other = b"id: 1\ndata: {}\n\n"
    assert EndpointRewriter("http://up:9000", "http://p:1").feed(other) == other


def test_endpoint_rewriter_releases_what_it_held_at_end_of_stream() -> None:
    rewriter = EndpointRewriter("http://up:9000", "http://p:1")
    assert rewriter.feed(b"event: endpoint\ndata: /m") == b""
    assert rewriter.feed(b"") == b"event: endpoint\ndata: /m"


def test_an_event_without_data_is_kept_apart_from_one_with_empty_data() -> None:
    events = SSEParser().feed(b"event: ping\n\nid: 9\rretry: 5\r\rid: 1\ndata:\n\n")
    assert [event.has_data for event in events] == [False, False, True]
    # a browser dispatches no event without data, and one with empty data: each is written back as it came
    assert b"".join(encode_event(event) for event in events) == b"event: ping\n\nid: 9\nretry: 5\n\nid: 1\ndata:\n\n"


def test_an_events_data_that_is_not_utf8_is_kept_as_sent_too() -> None:
    stream = b"\xef\xbb\xbfdata: ok\ndata: \xff\xfe\xe2\x82\ndata:\xac\r\n\r\ndata: fine\n\n"  # after a BOM
    for cut in range(len(stream)):  # a chunk may end anywhere, inside a character too
        parser = SSEParser()
        events = parser.feed(stream[:cut]) + parser.feed(stream[cut:])
        assert [(event.data, event.raw_data) for event in events] == [
            ("ok\n\ufffd\ufffd\ufffd\n\ufffd", b"ok\n\xff\xfe\xe2\x82\n\xac"), ("fine", None)]
