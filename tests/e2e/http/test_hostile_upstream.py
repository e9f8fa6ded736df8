"""`tapes record --upstream` in front of a hostile upstream (tests/servers/hostile_http_server.py):
malformed event streams, bodies that are not JSON-RPC or not JSON, wrong Content-Types, bodies on
statuses that have none, a reset mid-stream, a stream that never ends. The client gets through the
recorder exactly what it gets straight from the upstream, the cassette holds it (RAW where it is
no JSON-RPC, the events a conforming reader sees where it is an event stream), and loads, and
`tapes show` and `tapes lint` read it through."""

from __future__ import annotations

import socket
import subprocess
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import httpx
import pytest

from tapes.cassette.frames import Frame, Kind
from tapes.cassette.store import load, save
from tapes.wire.jsonrpc import decode
from tapes.wire.sse import SSEParser

from tests.servers.hostile_http_server import CASES
from tests.support.http_cassettes import channels, check_channel_shape
from tests.support.http_peers import Recorder
from tests.support.paths import SERVERS, TAPES
from tests.support.processes import TIMEOUT, Process

PING = b'{"jsonrpc":"2.0","id":1,"method":"ping"}'
HEADERS = {"content-type": "application/json", "accept": "application/json, text/event-stream"}
# What the recorder does not pass on as it came yet (test_known_divergences)
DIVERGING = {
    "early-hints": "mitmproxy takes a 103 Early Hints for the final response: the client waits for the 200 in vain, "
                   "and the cassette has the 103 alone",
}
SWEPT = [name for name in CASES if name not in DIVERGING]


@dataclass(frozen=True)
class Received:
    status: int
    headers: tuple[str | None, str | None]  # Content-Type, Content-Encoding
    body: bytes  # as it came, not decoded
    broken: bool  # the body was cut off


@pytest.fixture(scope="module")
def hostile() -> Iterator[str]:
    server = Process([*TAPES[:1], str(SERVERS / "hostile_http_server.py")])
    yield server.wait_for(r"listening on (\S+)")[1]
    server.stop()


def fetch(client: httpx.Client, url: str, name: str) -> Received:
    """POST a ping to the case `name`; a stream that never ends is left once it has sent all it will."""
    endless = CASES[name].framing == "hang"
    expected = len(b"".join(CASES[name].chunks))
    body = bytearray()
    with client.stream("POST", url + name, content=PING, headers=HEADERS) as response:
        try:
            for chunk in response.iter_raw():
                body += chunk
                if endless and len(body) >= expected:
                    break
        except (httpx.RemoteProtocolError, httpx.ReadError):  # cut off, or reset
            return Received(response.status_code, _heads(response), bytes(body), True)
    return Received(response.status_code, _heads(response), bytes(body), False)


def _heads(response: httpx.Response) -> tuple[str | None, str | None]:
    return response.headers.get("content-type"), response.headers.get("content-encoding")


RPC = '{"jsonrpc":"2.0","id":1,"result":{}}'
# What a conforming reader makes of the hostile streams: (data, id, event, retry, has data line)
EVENTS = {
    "sse-line-ends": [(RPC, "1", None, None, True), ("one\ntwo", None, "x", None, True), ("", None, None, None, True)],
    "sse-bad-utf8": [("\ufffd\ufffd" + RPC, None, None, None, True), ('{"s":"\u20ac"}', None, None, None, True)],
    # an id with NUL and a retry that is no number are ignored, as unknown fields are
    "sse-bad-fields": [("1", None, None, None, True), ("2", None, None, None, True), ("", None, None, 10, False),
                       ("", "", None, None, True)],
}


def events(frames: list[Frame]) -> list[tuple[str, str | None, str | None, int | None, bool]]:
    return [(f.shown_payload.decode("utf-8", "replace"), f.info["id"], f.info["event"], f.info["retry"], f.info.get("data", True))
            for f in frames if f.kind is Kind.SSE_EVENT]


def body_frames(received: Received, frames: list[Frame]) -> None:
    """The frames of an exchange's response body hold what the client received."""
    body = [f for f in frames[2:] if f.kind not in (Kind.HTTP_RESPONSE, Kind.STREAM_END)]
    content_type = received.headers[0] or ""
    if content_type.startswith("text/event-stream"):
        parser = SSEParser()
        parsed = parser.feed(received.body)
        assert events(body) == [(e.data, e.id, e.event, e.retry, e.has_data) for e in parsed]
        rest = parser.finish()
        assert [f.payload for f in body if f.kind is Kind.RAW] == ([rest] if rest else [])
        return
    if not received.body:
        assert body == []
        return
    (frame,) = body
    assert frame.payload == received.body or received.headers[1]  # a Content-Encoding is undone when it can be
    too_deep = frame.payload.startswith(b'{"jsonrpc":"2.0","id":1,"result":[[[[')  # json-deep: kept as bytes
    assert frame.kind is (Kind.RAW if too_deep or decode(frame.payload).message is None else Kind.MESSAGE)


def test_the_client_gets_what_the_upstream_sent_and_the_cassette_holds_it(
    hostile: str, record: Callable[..., Recorder]
) -> None:
    recorder = record(hostile)
    with httpx.Client(timeout=TIMEOUT) as client:
        direct = {name: fetch(client, hostile, name) for name in SWEPT}
        proxied = {name: fetch(client, recorder.url, name) for name in SWEPT}
    cassette = recorder.stop()

    assert proxied == direct
    assert direct["sse-reset"].broken and direct["json-short"].broken and not direct["sse-hang"].broken
    assert cassette.warnings == []
    check_channel_shape(cassette)
    exchanges = list(channels(cassette).values())
    assert len(exchanges) == len(SWEPT)
    for (name, received), frames in zip(proxied.items(), exchanges, strict=True):
        assert frames[0].info["path"] == "/" + name
        assert frames[1].payload == PING
        assert frames[2].kind is Kind.HTTP_RESPONSE and frames[2].info["status"] == received.status, name
        body_frames(received, frames)
        if name in EVENTS:
            assert events(frames) == EVENTS[name], name
        reason = "client_disconnect" if name == "sse-hang" else "upstream_error" if received.broken else "closed"
        assert frames[-1].info["reason"] == reason, name
    # an event's data that is not UTF-8 is kept as it came
    assert [f.data for f in exchanges[SWEPT.index("sse-bad-utf8")] if f.kind is Kind.SSE_EVENT] == [
        b"\xff\xfe" + RPC.encode(), b'{"s":"\xe2\x82\xac"}']

    twin = recorder.cassette.with_suffix(".jsonl")  # as `tapes export` writes it
    save(cassette, twin)
    assert [(f.seq, f.kind, f.shown_payload, f.info) for f in load(twin).frames] == [
        (f.seq, f.kind, f.shown_payload, f.info) for f in cassette.frames]
    for command in (["show"], ["lint"]):
        run = subprocess.run([*TAPES, *command, str(recorder.cassette)], capture_output=True, timeout=TIMEOUT)
        assert run.returncode in (0, 1) and b"Traceback" not in run.stderr, (command, run.stderr[-2000:])


def test_a_body_whose_content_encoding_cannot_be_undone_goes_through_untouched(
    hostile: str, record: Callable[..., Recorder]
) -> None:
    """The recorder reads bodies to move origins: one that says gzip and is not must pass as it is
    both ways, and be recorded (it was lost, the hook reading it failed)."""
    recorder = record(hostile)
    body = b"\x00 not gzip"
    with httpx.Client(timeout=TIMEOUT) as client:
        echoed = client.post(recorder.url + "echo", content=body, headers={"content-encoding": "gzip"})
        # a GET: its answer may be an authorization flow's document, read to move origins in
        with client.stream("GET", recorder.url + "json-bad-gzip") as answer:
            answered = b"".join(answer.iter_raw())
    cassette = recorder.stop()
    assert echoed.status_code == 200 and echoed.content == body
    assert answered == b"".join(CASES["json-bad-gzip"].chunks)
    request, response = channels(cassette).values()
    assert [(f.kind, f.payload) for f in request if f.kind is Kind.RAW] == [(Kind.RAW, body)] * 2  # sent, echoed
    assert [(f.kind, f.payload) for f in response if f.kind is Kind.RAW] == [(Kind.RAW, answered)]
    assert response[-1].info == {"reason": "closed"}


@pytest.mark.parametrize("name", [pytest.param(name, marks=pytest.mark.xfail(strict=True, reason=reason))
                                  for name, reason in DIVERGING.items()])
def test_known_divergences(hostile: str, record: Callable[..., Recorder], name: str) -> None:
    recorder = record(hostile)
    with httpx.Client(timeout=2) as client:  # a hang fails soon
        assert fetch(client, recorder.url, name) == fetch(client, hostile, name)


def _send_raw(origin: str, request: bytes) -> bytes:
    """A request written byte for byte (no client library sends a target that is not UTF-8); the answer."""
    host, port = origin.removeprefix("http://").rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=TIMEOUT) as sock:
        sock.sendall(request)
        answer = b""
        while chunk := sock.recv(1 << 16):
            answer += chunk
    return answer


def test_a_request_target_or_method_that_is_not_utf8_is_recorded_and_so_is_what_follows(
    hostile: str, record: Callable[..., Recorder]
) -> None:
    """Every byte kept, as Latin-1, as a replay reads a live target (the cassette writer died on it)."""
    recorder = record(hostile)
    heads = [b"POST /echo?q=\xff\xfe", b"P\xffST /echo"]
    for head in heads:
        assert _send_raw(recorder.origin, head + b" HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc").startswith(
            b"HTTP/1.1 ")
    with httpx.Client(timeout=TIMEOUT) as client:
        assert client.post(recorder.url + "echo", content=b"after").content == b"after"
    cassette = recorder.stop()
    assert "Traceback" not in recorder.process.rest_of_stderr()
    requests = [(f.info["method"], f.info["path"]) for f in cassette.frames if f.kind is Kind.HTTP_REQUEST]
    assert requests == [("POST", "/echo?q=\xff\xfe"), ("P\xffST", "/echo"), ("POST", "/echo")]
    assert [f.payload for f in cassette.frames if f.kind is Kind.RAW] == [b"abc"] * 3 + [b"after"] * 2


ODD_MESSAGES = [b'{"jsonrpc":"2.0","id":true,"method":"ping"}', b'{"jsonrpc":"2.0","id":1,"method":"a","params":"x"}',
                b'{"jsonrpc":"2.0","id":1,"error":{"code":1.5,"message":"m"}}', b'[]', b'{"jsonrpc":"2.0","id":1e400,"result":{}}',
                b'{"jsonrpc":"2.0","id":123456789012345678901234567890,"method":"ping"}']


def test_json_rpc_with_members_of_the_wrong_type_is_recorded_both_ways_as_it_came(
    hostile: str, record: Callable[..., Recorder]
) -> None:
    """Bodies a cassette cannot hold as messages are kept as their bytes, and the cassette loads."""
    recorder = record(hostile)
    with httpx.Client(timeout=TIMEOUT) as client:
        for body in ODD_MESSAGES:
            answer = client.post(recorder.url + "echo", content=body, headers={"content-type": "application/json"})
            assert answer.content == body
    cassette = recorder.stop()
    bodies = [f.shown_payload for f in cassette.frames if f.kind in (Kind.MESSAGE, Kind.RAW)]
    assert bodies == [body for body in ODD_MESSAGES for _ in range(2)]  # sent, echoed
