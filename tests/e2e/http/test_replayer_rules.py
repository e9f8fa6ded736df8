"""The HTTP rules the replayer applies (tapes.replay.http_rules), end to end: a 2025-03-26 batch
answered as a batch; a stateless 2026-07-28 recording replayed to the SDK client with the
standard headers checked against the body."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from mcp import Client

from replayer.http import replay_server
from tapes.cassette.store import Cassette, Header, load
from tapes.cassette.frames import Direction, Kind
from tapes.replay.outcomes import NO_MATCH
from tapes.replay.http_rules import HEADER_MISMATCH
from tapes.wire.http import header
from tapes.wire.jsonrpc import INVALID_REQUEST, PARSE_ERROR

from tests.support import flows
from tests.support.http_clients import ACCEPT
from tests.support.http_peers import record_session
from tests.support.paths import CASSETTES
from tests.support.messages import req, res
from tests.support.processes import TIMEOUT
from tests.support.recordings import Recording

def test_a_2025_03_26_batch_is_answered_as_a_batch() -> None:
    r = Recording()
    r.post(1, [req(1, "tools/list"), req(2, "prompts/list")])
    r.add(Direction.SERVER_TO_CLIENT, 1, Kind.HTTP_RESPONSE, status=200, headers=[["Content-Type", "application/json"]])
    r.add(Direction.SERVER_TO_CLIENT, 1, Kind.MESSAGE, [res(1, {"tools": []}), res(2, {"prompts": []})])
    r.end(1)
    cassette = Cassette(Header("http", {"url": "http://up/mcp"}), r.frames)
    with replay_server(cassette) as server, httpx.Client(timeout=TIMEOUT) as http:
        answer = http.post(server.url, json=[req("b", "prompts/list"), req("a", "tools/list")], headers=ACCEPT)
        # a batch of one, or of what is no message, is answered with an array too (JSON-RPC 2.0, section 6)
        unmatched = http.post(server.url, json=[req("c", "resources/list")], headers=ACCEPT)
        invalid = http.post(server.url, json=[1], headers=ACCEPT)
    assert answer.status_code == 200 and answer.headers["content-type"] == "application/json"
    assert answer.json() == [res("a", {"tools": []}), res("b", {"prompts": []})]
    assert [item["id"] for item in unmatched.json()] == ["c"] and unmatched.json()[0]["error"]["code"] == NO_MATCH
    assert invalid.status_code == 400 and [item["error"]["code"] for item in invalid.json()] == [INVALID_REQUEST]


def test_a_header_that_came_twice_is_replayed_twice() -> None:
    """Two WWW-Authenticate challenges on a 401 (Bearer and DPoP), two Set-Cookie on an answer:
    each as often as the recorded server sent it (a client reads the Bearer one for its metadata)."""
    r = Recording()
    r.post(1, req(1, "initialize", {}))
    challenges = [["WWW-Authenticate", 'Bearer resource_metadata="http://up/.well-known/oauth-protected-resource"'],
                  ["WWW-Authenticate", 'DPoP algs="ES256"']]
    r.add(Direction.SERVER_TO_CLIENT, 1, Kind.HTTP_RESPONSE, status=401, headers=[["Content-Type", "application/json"], *challenges])
    r.add(Direction.SERVER_TO_CLIENT, 1, Kind.RAW, data=b'{"error":"invalid_token"}')
    r.end(1)
    r.add(Direction.CLIENT_TO_SERVER, 2, Kind.HTTP_REQUEST, method="POST", path="/mcp",
          headers=[["Content-Type", "application/json"], ["Authorization", "Bearer T"]])
    r.add(Direction.CLIENT_TO_SERVER, 2, Kind.MESSAGE, req(1, "initialize", {}))
    cookies = [["Set-Cookie", "a=1"], ["Set-Cookie", "b=2"]]
    r.add(Direction.SERVER_TO_CLIENT, 2, Kind.HTTP_RESPONSE, status=200, headers=[["Content-Type", "application/json"], *cookies])
    r.add(Direction.SERVER_TO_CLIENT, 2, Kind.MESSAGE, res(1, {"protocolVersion": "2025-11-25"}))
    r.end(2)
    cassette = Cassette(Header("http", {"url": "http://up/mcp"}), r.frames)
    with replay_server(cassette) as server, httpx.Client(timeout=TIMEOUT) as http:
        refused = http.post(server.url, json=req(7, "initialize", {}), headers=ACCEPT)
        taken = http.post(server.url, json=req(7, "initialize", {}), headers={**ACCEPT, "Authorization": "Bearer T"})
    assert refused.status_code == 401 and [value for _, value in challenges] == refused.headers.get_list("www-authenticate")
    assert taken.status_code == 200 and taken.headers.get_list("set-cookie") == ["a=1", "b=2"]


def batch_recording(sse: bool) -> Cassette:
    r = Recording()
    r.post(1, [req(1, "tools/list"), req(2, "prompts/list")])
    r.head(1, 200, sse=sse)
    if sse:
        r.event(1, "1-1", res(1, {"tools": []}))
        r.event(1, "1-2", res(2, {"prompts": []}))
    else:
        r.add(Direction.SERVER_TO_CLIENT, 1, Kind.MESSAGE, [res(1, {"tools": []}), res(2, {"prompts": []})])
    r.end(1)
    return Cassette(Header("http", {"url": "http://up/mcp"}), r.frames)


def batch_answer(http: httpx.Client, url: str, batch: list[Any]) -> list[Any]:
    answer = http.post(url, json=batch, headers=ACCEPT)
    assert answer.status_code == 200
    if answer.headers["content-type"].startswith("text/event-stream"):
        return [json.loads(line[5:]) for line in answer.text.splitlines() if line.startswith("data:")]
    return answer.json()


@pytest.mark.parametrize("sse", [False, True], ids=["json", "sse"])
def test_a_batch_that_matches_in_part_gets_its_errors_and_no_answers_to_requests_not_made(sse: bool) -> None:
    with replay_server(batch_recording(sse)) as server, httpx.Client(timeout=TIMEOUT) as http:
        # one recorded request and one the recording does not have: the error comes in the same answer
        mixed = batch_answer(http, server.url, [req("a", "tools/list"), req("x", "resources/list")])
        assert server.report_lines == ["played 3 frames, 1 unmatched, 1 unused",
                                     "unmatched resources/list id 'x': no recorded request matches resources/list; "
                                     "nearest recorded is prompts/list #2 (frame 2), differing at /method: "
                                     '"prompts/list" → "resources/list"',
                                     "unused prompts/list #2 (frame 2)"]
    answer, error = sorted(mixed, key=lambda m: m["id"])
    assert answer == res("a", {"tools": []})
    assert error["id"] == "x" and error["error"]["code"] == NO_MATCH
    assert "nearest recorded is prompts/list" in error["error"]["message"]
    with replay_server(batch_recording(sse)) as server, httpx.Client(timeout=TIMEOUT) as http:
        # fewer requests than recorded: answered at once, without the answer to the one not made
        assert batch_answer(http, server.url, [req("p", "prompts/list")]) == [res("p", {"prompts": []})]


def stateless_flow(url: str) -> Any:
    async def run() -> Any:
        with anyio.fail_after(TIMEOUT):
            async with Client(url, read_timeout_seconds=TIMEOUT, cache=None) as client:
                echoed = await client.call_tool("echo", {"text": "stateless"})
                return [client.protocol_version, flows.dump(echoed)]

    return anyio.run(run)


def test_a_stateless_2026_07_28_session(resumable: str, tmp_path: Path) -> None:  # noqa: F811
    cassette, live = record_session(tmp_path / "stateless.tape", resumable, stateless_flow)
    assert live[0] == "2026-07-28"
    with replay_server(cassette) as server, httpx.Client(timeout=TIMEOUT) as http:
        assert stateless_flow(server.url) == live
        body = {"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": {"name": "echo", "arguments": {"text": "x"}}}
        modern = {**ACCEPT, "MCP-Protocol-Version": "2026-07-28"}
        mismatch = http.post(server.url, json=body, headers={**modern, "Mcp-Method": "tools/call", "Mcp-Name": "other"})
        assert mismatch.status_code == 400
        assert mismatch.json()["error"]["code"] == HEADER_MISMATCH and mismatch.json()["id"] == 9
        bad_version = http.post(server.url, json=body, headers={**ACCEPT, "MCP-Protocol-Version": "2099-01-01"})
        assert bad_version.status_code == 400
        no_stream = http.get(server.url, headers=modern)
        assert no_stream.status_code == 405 and "POST" in no_stream.headers["allow"]
        assert json.loads(no_stream.content)["error"]["message"].startswith("Method Not Allowed")


def test_a_browser_preflight_is_answered_when_the_recorded_server_allowed_cross_origin_requests() -> None:
    preflight = {"Origin": "http://localhost:6274", "Access-Control-Request-Method": "POST",
                 "Access-Control-Request-Headers": "content-type, mcp-protocol-version"}
    with replay_server(CASSETTES / "everything-http-2025-11-25.tape") as server, httpx.Client(timeout=TIMEOUT) as http:
        allowed = http.options(server.url, headers=preflight)
        assert allowed.status_code == 204, allowed.text
        assert allowed.headers["access-control-allow-origin"] == "*"  # as server-everything answered
        assert "POST" in allowed.headers["access-control-allow-methods"]
        assert allowed.headers["access-control-allow-headers"] == "content-type, mcp-protocol-version"
        assert http.options(server.url, headers={**preflight, "Origin": "http://evil.example"}).status_code == 403
        # the page then talks to it as to the recorded server
        opened = http.post(server.url, json={"jsonrpc": "2.0", "id": 1, "method": "ping"},
                           headers={**ACCEPT, "Origin": "http://localhost:6274"})
        assert opened.status_code == 400 and opened.headers["access-control-allow-origin"] == "*"
    # a server without CORS refused the browser; so does its replay, with a JSON-RPC error
    with replay_server(CASSETTES / "resumable-polling-http-2025-11-25.tape") as server, httpx.Client(timeout=TIMEOUT) as http:
        refused = http.options(server.url, headers=preflight)
        assert refused.status_code == 405 and "access-control-allow-origin" not in refused.headers
        assert refused.json()["error"]["message"].startswith("Method Not Allowed")


def test_a_legacy_session_takes_posts_only_while_its_sse_stream_is_open_and_refuses_garbage_with_400() -> None:
    cassette = CASSETTES / "everything-sse-2024-11-05.tape"
    initialize, initialized = [frame.payload for frame in load(cassette).frames
                               if frame.from_client and frame.kind is Kind.MESSAGE][:2]
    with replay_server(cassette) as server, httpx.Client(timeout=TIMEOUT) as http:
        endpoint = server.url.removesuffix("/sse") + "/message?sessionId=" + load(cassette).header.labels["sessions"]
        # before the GET: no live session has that id yet (nothing could read the answers)
        assert http.post(endpoint, content=initialize).status_code == 404
        with http.stream("GET", server.url) as stream:
            lines = stream.iter_lines()
            assert next(lines) == "event: endpoint"
            garbage = http.post(endpoint, content=b"{not json")
            assert garbage.status_code == 400 and garbage.json()["error"]["code"] == PARSE_ERROR  # as the SDK servers
            assert http.post(endpoint, content=initialize).status_code == 202
            answer = next(line for line in lines if line.startswith("data: {"))
            assert json.loads(answer[6:])["result"]["protocolVersion"] == "2024-11-05"  # the garbage left no event
        deadline = time.monotonic() + TIMEOUT
        while (after := http.post(endpoint, content=initialized)).status_code == 202 and time.monotonic() < deadline:
            pass  # the replayer notices the closed stream on its own loop
        assert after.status_code == 404 and "session not found" in after.text


def client_sent(cassette: Cassette, method: str) -> bytes:
    """The body of the first request the recorded client sent with this method."""
    return next(frame.payload for frame in cassette.frames
                if frame.kind is Kind.MESSAGE and (frame.message or {}).get("method") == method)


def test_a_recorded_session_id_is_unknown_until_its_opening_request_came() -> None:
    cassette = load(CASSETTES / "everything-http-2025-11-25.tape")
    session = {"Mcp-Session-Id": cassette.header.labels["sessions"], "MCP-Protocol-Version": "2025-11-25"}
    initialize = client_sent(cassette, "initialize")
    with replay_server(cassette) as server, httpx.Client(timeout=TIMEOUT, headers=ACCEPT) as http:
        # a client that read the id from the cassette cannot skip initialize (nor take the session from the one that opens it)
        early = http.post(server.url, json={"jsonrpc": "2.0", "id": 3, "method": "tools/list"}, headers=session)
        assert early.status_code == 404
        opened = http.post(server.url, content=initialize)
        assert opened.status_code == 200 and opened.headers["mcp-session-id"] == session["Mcp-Session-Id"]
        assert http.post(server.url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=session).status_code == 202
    # the refused request is a miss: the recording has no answer to it
    assert f"unmatched tools/list id 3: no live session has the id {session['Mcp-Session-Id']!r}" in server.report_lines
    assert not server.clean


def test_requests_no_session_takes_are_misses_but_a_probe_for_the_stateless_era_is_refused_as_a_server_would() -> None:
    cassette = load(CASSETTES / "everything-http-2025-11-25.tape")
    probed = next(frame.channel for frame in cassette.frames if (frame.message or {}).get("method") == "server/discover")
    unprobed = Cassette(cassette.header, [frame for frame in cassette.frames if frame.channel != probed])  # as the TS client records
    with replay_server(unprobed) as server, httpx.Client(timeout=TIMEOUT, headers=ACCEPT) as http:
        # a 2026-07-28 client probes first; a server of an initialize era refuses it, and the client initializes
        probe = http.post(server.url, json={"jsonrpc": "2.0", "id": 1, "method": "server/discover"})
        assert probe.status_code == 400 and "Mcp-Session-Id header is required" in probe.json()["error"]["message"]
        skipped = http.post(server.url, json={"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
        assert skipped.status_code == 400
        odd = http.post(server.url, json={"jsonrpc": "2.0", "id": 3, "method": "tools/list"},
                        headers={"MCP-Protocol-Version": "1999-01-01"})
        assert odd.status_code == 400 and "unsupported MCP-Protocol-Version" in odd.json()["error"]["message"]
    lines = server.report_lines
    assert ("adapted server/discover id 1: refused (400), as the recorded server would: it names no session, and "
            "opens none (the recorded sessions open with initialize)") in lines
    assert ("unmatched tools/list id 2: it names no session, and opens none (the recorded sessions open with "
            "initialize)") in lines
    assert "unmatched POST /mcp: Bad Request: unsupported MCP-Protocol-Version '1999-01-01'" in lines
    assert not server.clean


def test_a_batch_is_refused_at_a_version_without_batches_and_does_not_slip_past_the_header_checks() -> None:
    cassette = load(CASSETTES / "feed-http-2026-07-28.tape")
    call = client_sent(cassette, "tools/call")
    name = json.loads(call)["params"]["name"]
    with replay_server(cassette) as server, httpx.Client(timeout=TIMEOUT, headers=ACCEPT) as http:
        batch = http.post(server.url, content=b"[" + call + b"]", headers={"MCP-Protocol-Version": "2026-07-28"})
        assert batch.status_code == 400 and batch.json()["error"]["code"] == INVALID_REQUEST
        assert "2026-07-28" in batch.json()["error"]["message"]
        assert ("unmatched POST /mcp: Invalid Request: JSON-RPC batches are not part of protocol version '2026-07-28'"
                in server.report_lines)
        # nor one whose headers say other than its body
        mismatched = http.post(server.url, content=call, headers={"MCP-Protocol-Version": "2026-07-28",
                                                                  "Mcp-Method": "tools/list", "Mcp-Name": name})
        assert mismatched.status_code == 400 and mismatched.json()["error"]["code"] == HEADER_MISMATCH
        assert any(line.startswith(f"unmatched tools/call id {json.loads(call)['id']!r}: Header mismatch")
                   for line in server.report_lines)
        # the recorded call is still there for the client that sends it as 2026-07-28 says
        single = http.post(server.url, content=call, headers={"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call",
                                                              "Mcp-Name": name})
        assert single.status_code == 200 and single.json()["id"] == json.loads(call)["id"]


def test_a_head_request_is_refused_and_leaves_the_session_alone() -> None:
    cassette = load(CASSETTES / "everything-http-2025-11-25.tape")
    session = {"Mcp-Session-Id": cassette.header.labels["sessions"], "MCP-Protocol-Version": "2025-11-25"}
    initialize = client_sent(cassette, "initialize")
    with replay_server(cassette) as server, httpx.Client(timeout=TIMEOUT, headers=ACCEPT) as http:
        assert http.post(server.url, content=initialize).status_code == 200
        head = http.head(server.url, headers=session)  # starlette hands HEAD to the GET route
        assert head.status_code == 405 and head.headers["allow"] == "GET, POST, DELETE"
        assert http.post(server.url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=session).status_code == 202


def test_an_endpoint_whose_path_has_escapes_is_served_at_it() -> None:
    cassette = load(CASSETTES / "everything-http-2025-11-25.tape")
    escaped = Cassette(cassette.header, [
        frame._replace(info={**frame.info, "path": frame.info["path"].replace("/mcp", "/my%20server", 1)})
        if frame.kind is Kind.HTTP_REQUEST else frame for frame in cassette.frames])
    with replay_server(escaped) as server, httpx.Client(timeout=TIMEOUT, headers=ACCEPT) as http:
        assert server.url.endswith("/my%20server")
        opened = http.post(server.url, content=client_sent(cassette, "initialize"))
        assert opened.status_code == 200 and b'"protocolVersion"' in opened.content
        # the path as it reads decoded is another one, which the recording never saw
        assert http.post(server.url.replace("%20", "+"), content=client_sent(cassette, "initialize")).status_code == 404
    assert server.clean is False and any("the recording has no request to that path" in line for line in server.report_lines)


def test_a_redirect_to_the_recorded_server_leads_to_the_replay() -> None:
    """A recorded Location on the recorded server's origin (as its client saw it, or as the
    recorder reached it) is moved to the replay's: followed as recorded, it led the replay's
    client to the real server, or to a recorder long gone. Another origin's stays."""
    recorded = load(CASSETTES / "everything-http-2025-11-25.tape")
    server = recorded.header.server["url"].removesuffix("/mcp")
    first_head = next(f for f in recorded.frames if f.kind is Kind.HTTP_RESPONSE)
    moved = {**first_head.info, "headers": [*first_head.info["headers"], ("Location", f"{server}/mcp?again=1"),
                                            ("Content-Location", "https://elsewhere.example/doc")]}
    cassette = Cassette(recorded.header, [f._replace(info=moved) if f is first_head else f for f in recorded.frames])
    initialize = next(f for f in recorded.frames if f.from_client and f.kind is Kind.MESSAGE)
    with replay_server(cassette) as replay:
        answer = httpx.post(replay.url, content=initialize.payload, headers={**ACCEPT, "Content-Type": "application/json"})
    origin = replay.url.removesuffix("/mcp")
    assert answer.headers["location"] == f"{origin}/mcp?again=1"
    assert answer.headers["content-location"] == "https://elsewhere.example/doc"


@pytest.mark.parametrize("reason", ["upstream_error", "client_disconnect"])
def test_a_request_the_recorded_server_never_answered(reason: str) -> None:
    """Its exchange has no response head. Upstream down (the recorder's proxy answered 502): a 502
    again. The recorded client gave up waiting: no answer, until this client gives up too. It was
    a 500 Internal Server Error either way, which read as the replay crashing."""
    recorded = load(CASSETTES / "everything-http-2025-11-25.tape")
    channel = next(f.channel for f in recorded.frames if f.kind is Kind.HTTP_REQUEST)  # the initialize
    frames = [f._replace(info={"reason": reason}) if f.channel == channel and f.kind is Kind.STREAM_END else f
              for f in recorded.frames if f.channel != channel or f.from_client or f.kind is Kind.STREAM_END]
    initialize = next(f for f in recorded.frames if f.from_client and f.kind is Kind.MESSAGE)
    with replay_server(Cassette(recorded.header, frames)) as replay:
        def send() -> httpx.Response:
            return httpx.post(replay.url, content=initialize.payload, timeout=1.5,
                              headers={**ACCEPT, "Content-Type": "application/json"})

        if reason == "upstream_error":
            answer = send()
            assert answer.status_code == 502 and "did not answer" in answer.json()["error"]["message"]
        else:
            with pytest.raises(httpx.ReadTimeout):
                send()


def test_an_answer_the_upstream_cut_short_is_cut_where_it_was() -> None:
    """The head, the bytes of the body that came and the length the head promised, then the
    connection closed: as the recorded client got it. The replay cut at once, with no body."""
    recorded = load(CASSETTES / "everything-http-2025-11-25.tape")
    channel = recorded.frames[0].channel  # a JSON answer (400) to the client's server/discover probe
    answer = next(f for f in recorded.frames if f.channel == channel and f.kind is Kind.MESSAGE and not f.from_client)
    head = next(f for f in recorded.frames if f.channel == channel and f.kind is Kind.HTTP_RESPONSE)
    came = answer.payload[:20]
    frames = [f._replace(kind=Kind.RAW, message=None, data=came) if f is answer
              else f._replace(info={"reason": "upstream_error"}) if f.channel == channel and f.kind is Kind.STREAM_END
              else f for f in recorded.frames]
    probe = next(f for f in recorded.frames if f.channel == channel and f.kind is Kind.MESSAGE)
    received = b""
    with (replay_server(Cassette(recorded.header, frames)) as replay, httpx.Client() as client,
          client.stream("POST", replay.url, content=probe.payload, headers={**ACCEPT, "Content-Type": "application/json"}) as cut):
        assert cut.status_code == 400 and cut.headers.get("content-length") == header(head.info["headers"], "content-length")
        with pytest.raises(httpx.RemoteProtocolError):
            for chunk in cut.iter_raw():
                received += chunk
    assert received == came


@pytest.mark.parametrize("kept", [11, 14])  # the request, no answer; ... and a JSON answer's head, no body
def test_a_request_the_recording_stops_inside_gets_an_error_at_once(kept: int) -> None:
    """The recording (a killed recorder's, a truncated file) ends inside the exchange: the client
    waited for ever for a head that would never come, or got an empty body."""
    recorded = load(CASSETTES / "feed-http-2026-07-28.tape")
    cut = Cassette(recorded.header, recorded.frames[:kept])
    head = next(f for f in recorded.frames if f.channel == "http:3" and f.kind is Kind.HTTP_REQUEST)
    body = next(f for f in recorded.frames if f.channel == "http:3" and f.kind is Kind.MESSAGE)
    headers = {name: value for name, value in head.info["headers"] if name.lower() not in ("host", "content-length")}
    with replay_server(cut) as replay:
        answer = httpx.post(replay.url, content=body.payload, headers=headers, timeout=10)
    error = answer.json()["error"]
    assert error["code"] == NO_MATCH and "the recording stops before the answer to tools/call #2" in error["message"]


def test_a_request_the_recording_stops_inside_its_event_stream_gets_what_came_then_the_error_and_the_end() -> None:
    """Cut after the initialize answer's priming event: the client gets that event, then the error
    saying the recording stops there, and the end of the stream (it was left open for ever)."""
    recorded = load(CASSETTES / "everything-http-2025-11-25.tape")
    priming = next(f for f in recorded.frames if f.kind is Kind.SSE_EVENT)
    cut = Cassette(recorded.header, [f for f in recorded.frames if f.seq <= priming.seq])
    initialize = next(f for f in recorded.frames if f.channel == priming.channel and f.kind is Kind.MESSAGE)
    with replay_server(cut) as replay:
        answer = httpx.post(replay.url, content=initialize.payload, headers=ACCEPT, timeout=10)
    events = [line for line in answer.text.splitlines() if line.startswith(("id:", "data:"))]
    assert events[0] == f"id: {priming.info['id']}" and events[1] == "data:"
    error = json.loads(events[2].removeprefix("data: "))["error"]
    assert error["code"] == NO_MATCH and "the recording stops before the answer to initialize" in error["message"]
