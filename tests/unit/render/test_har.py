"""`tapes export --format har` on cassettes that load but hold what a HAR log cannot say plainly
(the committed cassettes, field by field, are in e2e/cli/test_export_har.py)."""

from __future__ import annotations

import base64
import dataclasses
import json

import pytest

from tapes.cassette.frames import Direction, Frame, Kind
from tapes.cassette.store import Cassette, Header
from tapes.errors import UserError
from tapes.render.har import har_text, to_har

HEADER = Header("http", {"url": "http://127.0.0.1:3001/mcp"}, created="2026-01-02T03:04:05.000006+00:00")


def request_head(t: float = 0.0, headers: list[list[str]] | None = None) -> Frame:
    return Frame(1, t, Direction.CLIENT_TO_SERVER, "http:1", Kind.HTTP_REQUEST,
                 info={"method": "GET", "path": "/mcp", "headers": headers or []})


def test_a_created_time_that_is_no_iso_time_is_one_sentence() -> None:
    cassette = Cassette(dataclasses.replace(HEADER, created="yesterday"), [request_head()])
    with pytest.raises(UserError, match=r"^a.tape: its created time 'yesterday' is not an ISO 8601 time"):
        to_har(cassette, "a.tape")


def test_a_frame_time_too_far_for_a_date_is_one_sentence() -> None:
    with pytest.raises(UserError, match=r"^a.tape: a frame's time is too far from the created time"):
        to_har(Cassette(HEADER, [request_head(t=1e300)]), "a.tape")


def test_a_lone_surrogate_is_written_as_its_json_escape() -> None:
    # JSON Lines cassettes hold one as the wire had it; UTF-8 has no form for it
    text = har_text(Cassette(HEADER, [request_head(headers=[["x-odd", "a\ud800"]])]), "a.tape")
    entry = json.loads(text)["log"]["entries"][0]
    assert entry["request"]["headers"] == [{"name": "x-odd", "value": "a\ud800"}]


def test_a_host_that_is_no_host_still_gives_the_url_and_its_query() -> None:
    head = request_head(headers=[["Host", "[::1"]])
    cassette = Cassette(HEADER, [Frame(1, 0.0, head.direction, head.channel, head.kind,
                                       info={**head.info, "path": "/mcp?a=1&b=%20"})])
    request = to_har(cassette, "a.tape")["log"]["entries"][0]["request"]
    assert request["url"] == "http://[::1/mcp?a=1&b=%20"
    assert request["queryString"] == [{"name": "a", "value": "1"}, {"name": "b", "value": " "}]


def test_a_server_url_that_is_no_url_leaves_the_path_as_recorded() -> None:
    cassette = Cassette(dataclasses.replace(HEADER, server={"url": "http://[oops/mcp"}), [request_head()])
    assert to_har(cassette, "a.tape")["log"]["entries"][0]["request"]["url"] == "/mcp"


def test_an_sse_event_id_with_a_lone_surrogate_is_written_as_its_escape() -> None:
    event = Frame(2, 0.0, Direction.SERVER_TO_CLIENT, "http:1", Kind.SSE_EVENT, data=b"x",
                  info={"id": "e\ud800", "event": None, "retry": None})
    log = json.loads(har_text(Cassette(HEADER, [request_head(), event]), "a.tape"))["log"]
    assert log["entries"][0]["response"]["content"]["text"] == "id: e\\ud800\ndata: x\n\n"


def test_a_response_body_that_is_not_utf8_is_base64_as_har_allows() -> None:
    frames = [request_head(),
              Frame(2, 0.1, Direction.SERVER_TO_CLIENT, "http:1", Kind.HTTP_RESPONSE,
                    info={"status": 200, "headers": [["content-type", "application/octet-stream"]]}),
              Frame(3, 0.1, Direction.SERVER_TO_CLIENT, "http:1", Kind.RAW, data=b"\xff\xfe\x00\x80")]
    content = to_har(Cassette(HEADER, frames), "a.tape")["log"]["entries"][0]["response"]["content"]
    assert (content["text"], content["encoding"], content["size"]) == ("//4AgA==", "base64", 4)


def test_an_event_stream_with_bytes_that_are_not_utf8_is_base64_as_sent() -> None:
    """Its events were re-encoded with U+FFFD in place of the bytes, sized and typed as text."""
    data = b'{"text":"caf\xe9"}'
    frames = [request_head(),
              Frame(2, 0.1, Direction.SERVER_TO_CLIENT, "http:1", Kind.HTTP_RESPONSE,
                    info={"status": 200, "headers": [["content-type", "text/event-stream"]]}),
              Frame(3, 0.1, Direction.SERVER_TO_CLIENT, "http:1", Kind.SSE_EVENT, data=data, info={"id": "1"})]
    content = to_har(Cassette(HEADER, frames), "a.tape")["log"]["entries"][0]["response"]["content"]
    sent = b"id: 1\ndata: " + data + b"\n\n"
    assert (content["encoding"], content["size"]) == ("base64", len(sent))
    assert base64.b64decode(content["text"]) == sent
