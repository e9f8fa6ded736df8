"""End-to-end tests of `tapes record --upstream/--proxy`: real servers on 127.0.0.1 (the npm
server-everything in streamableHttp and legacy sse mode, and tests/servers/resumable_server.py),
the official SDK client or a plain HTTP client, and the recorder run as the `tapes` command."""

from __future__ import annotations

import functools
import json
import os
import re
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from mcp.client.sse import sse_client

from replayer.http import replay_server
from tapes.cassette.store import Cassette, load
from tapes.cassette.frames import Direction, Frame, Kind

from tests.support import flows
from tests.support.http_cassettes import channels, check_channel_shape, kinds
from tests.support.http_clients import RawSession, resumable_flow, run_flow, sdk_connector, speak_2024_11_05
from tests.support.http_peers import Recorder
from tests.support.paths import TAPES
from tests.support.processes import TIMEOUT, free_port

C2S, S2C = Direction.CLIENT_TO_SERVER, Direction.SERVER_TO_CLIENT


# --- clients -----------------------------------------------------------------------------------


def sse_events(response: httpx.Response) -> Iterator[tuple[str | None, str]]:
    """(id, data) of each event of a streamed response, as the client reads them."""
    event_id, data = None, []
    for line in response.iter_lines():
        if line == "":
            yield event_id, "\n".join(data)
            event_id, data = None, []
        elif line.startswith("id:"):
            event_id = line[3:].strip()
        elif line.startswith("data:"):
            data.append(line[5:].removeprefix(" "))


# --- cassette helpers --------------------------------------------------------------------------


def request_head(frames: list[Frame]) -> dict[str, Any]:
    assert frames[0].kind is Kind.HTTP_REQUEST
    return frames[0].info or {}


def response_head(frames: list[Frame]) -> dict[str, Any]:
    return next(f.info for f in frames if f.kind is Kind.HTTP_RESPONSE) or {}


def header(info: dict[str, Any], name: str) -> str | None:
    return next((value for key, value in info["headers"] if key.lower() == name.lower()), None)


def exchanges_calling(cassette: Cassette, tool: str) -> list[list[Frame]]:
    return [
        frames for frames in channels(cassette).values()
        if any(f.from_client and f.kind is Kind.MESSAGE and isinstance(f.message, dict)
               and f.message.get("params", {}).get("name") == tool for f in frames)
    ]


# --- the SDK client through the recorder --------------------------------------------------------


def direct_and_recorded(monkeypatch: pytest.MonkeyPatch, flow: Callable[..., Any], upstream: str,
                        record: Callable[..., Recorder]) -> tuple[Any, Cassette]:
    """Run `flow` against `upstream` directly, then through the recorder, which must not change what
    the client sees; what it saw, and the cassette."""
    direct = run_flow(monkeypatch, flow, upstream)
    recorder = record(upstream)
    assert run_flow(monkeypatch, flow, recorder.url) == direct
    return direct, recorder.stop()


def test_everything_streamable_http(monkeypatch: pytest.MonkeyPatch, everything_http: str, record: Callable[..., Recorder]) -> None:
    direct, cassette = direct_and_recorded(monkeypatch, flows.everything_flow, everything_http, record)

    assert cassette.header.transport == "http" and cassette.header.server == {"url": everything_http}
    assert cassette.protocol_version == "2025-11-25" == cassette.header.labels["protocol_version"]
    check_channel_shape(cassette)
    session = cassette.header.labels["sessions"]
    events = [f for f in cassette.frames if f.kind is Kind.SSE_EVENT]
    # The upstream's event ids (its event store's UUIDs), kept as sent; a priming event opens each POST stream.
    uuid = r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
    assert all(re.fullmatch(uuid, f.info["id"]) for f in events if f.info["id"] is not None)
    for frames in exchanges_calling(cassette, "trigger-long-running-operation")[:1]:
        assert header(request_head(frames), "Mcp-Session-Id") == session
        assert header(request_head(frames), "MCP-Protocol-Version") == "2025-11-25"
        sse = [f for f in frames if f.kind is Kind.SSE_EVENT]
        assert sse[0].data == b"" and sse[0].message is None and sse[0].info["id"]  # priming
        methods = [f.message.get("method") for f in sse[1:]]
        assert methods == ["notifications/progress"] * 3 + [None]
        assert frames[-1].info == {"reason": "closed"}
    # The standalone GET stream carried server->client requests; the client's DELETE ended the
    # session, and the server closed the stream.
    methods = {request_head(frames)["method"]: frames for frames in channels(cassette).values()}
    assert any(f.message and f.message.get("method") == "roots/list" for f in methods["GET"])
    assert methods["GET"][-1].info["reason"] == "closed" and response_head(methods["DELETE"])["status"] == 200


def test_everything_legacy_sse(monkeypatch: pytest.MonkeyPatch, everything_sse: str, record: Callable[..., Recorder]) -> None:
    speak_2024_11_05(monkeypatch)
    direct = run_flow(monkeypatch, flows.everything_flow, lambda: sse_client(everything_sse))
    recorder = record(everything_sse)
    assert recorder.url.endswith("/sse")
    assert run_flow(monkeypatch, flows.everything_flow, lambda: sse_client(recorder.url)) == direct
    cassette = recorder.stop()

    assert direct["session"]["protocol_version"] == cassette.protocol_version == "2024-11-05"
    check_channel_shape(cassette)
    stream = channels(cassette)["http:1"]
    assert request_head(stream)["method"] == "GET" and request_head(stream)["path"] == "/sse"
    endpoint = stream[2]
    assert endpoint.kind is Kind.SSE_EVENT and endpoint.info == {"id": None, "event": "endpoint", "retry": None}
    session = cassette.header.labels["sessions"]
    assert endpoint.data == f"/message?sessionId={session}".encode()
    messages = [f.message for f in stream if f.kind is Kind.SSE_EVENT and f.message is not None]
    assert {"jsonrpc", "id", "result"} <= set(messages[-1])  # every answer comes on the one stream
    posts = [frames for name, frames in channels(cassette).items() if name != "http:1"]
    assert posts and all(request_head(f)["path"] == f"/message?sessionId={session}" for f in posts)
    assert all(response_head(f)["status"] == 202 and f[3].data == b"Accepted" for f in posts)
    assert stream[-1].info["reason"] == "client_disconnect"


def test_resumable_server_2025_11_25(monkeypatch: pytest.MonkeyPatch, resumable: str, record: Callable[..., Recorder]) -> None:
    direct, cassette = direct_and_recorded(monkeypatch, resumable_flow, resumable, record)

    assert direct["session"] == cassette.protocol_version == "2025-11-25"
    check_channel_shape(cassette)
    events = [f for f in cassette.frames if f.kind is Kind.SSE_EVENT]
    assert all(re.fullmatch(r"[^/]+/\d+", f.info["id"]) for f in events)  # the event store's ids, as sent
    primings = [f for f in events if f.data == b""]
    assert primings and all(f.info["retry"] == 100 for f in primings)
    # poll: the server closed the POST stream after the first progress; the client came back
    # with a GET carrying Last-Event-ID, and the rest of the call arrived on that stream.
    [poll] = exchanges_calling(cassette, "poll")
    poll_events = [f for f in poll if f.kind is Kind.SSE_EVENT]
    assert poll_events[0].data == b"" and poll[-1].info == {"reason": "closed"}  # primed, then closed by the server
    cursor = poll_events[-1].info["id"]
    [resumed] = [frames for frames in channels(cassette).values() if header(request_head(frames), "Last-Event-ID") == cursor]
    assert request_head(resumed)["method"] == "GET"
    resumed_events = [f for f in resumed if f.kind is Kind.SSE_EVENT and f.message is not None]
    progress = [f.message["params"]["progress"] for f in poll_events + resumed_events
                if f.message and f.message.get("method") == "notifications/progress"]
    assert progress == [1, 2, 3]  # every step once, across the cut
    assert resumed_events[-1].message["result"]["content"][0]["text"] == "polled 3"
    assert all(f.info["id"].split("/")[0] == cursor.split("/")[0] for f in resumed_events)  # the same stream


def test_resumable_server_2026_07_28(monkeypatch: pytest.MonkeyPatch, resumable: str, record: Callable[..., Recorder]) -> None:
    direct, cassette = direct_and_recorded(monkeypatch, functools.partial(resumable_flow, mode="auto"), resumable, record)

    assert direct["session"] == cassette.protocol_version == "2026-07-28"
    check_channel_shape(cassette)
    requests = [(request_head(frames), frames[1].message) for frames in channels(cassette).values()
                if len(frames) > 1 and frames[1].kind is Kind.MESSAGE]
    assert requests[0][1]["method"] == "server/discover"
    for head, message in requests:
        assert header(head, "Mcp-Method") == message["method"]
    calls = [(head, message) for head, message in requests if message["method"] == "tools/call"]
    assert calls and all(header(head, "Mcp-Name") == message["params"]["name"] for head, message in calls)
    assert all(message["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"] == "2026-07-28"
               for _, message in calls)
    assert "sessions" not in cassette.header.labels  # stateless


def test_two_sessions_in_one_cassette_are_kept_apart(monkeypatch: pytest.MonkeyPatch, resumable: str, record: Callable[..., Recorder]) -> None:
    recorder = record(resumable)

    async def two_sessions() -> None:
        async with anyio.create_task_group() as tg:
            for _ in range(2):
                tg.start_soon(resumable_flow, [])

    with monkeypatch.context() as patch:
        patch.setattr(flows, "connect", sdk_connector(recorder.url))
        anyio.run(two_sessions)
    cassette = recorder.stop()
    sessions = cassette.header.labels["sessions"].split()
    assert len(sessions) == 2
    by_session: dict[str | None, list[str]] = {}
    for frames in channels(cassette).values():
        if frames[1].kind is Kind.MESSAGE and frames[1].message.get("method") == "tools/call":
            by_session.setdefault(header(request_head(frames), "Mcp-Session-Id"), []).append(frames[1].message["params"]["name"])
    assert by_session == {session: ["ticks", "poll", "echo"] for session in sessions}


# --- hand-driven HTTP: cuts, batches, liveness ---------------------------------------------------


def test_a_stream_cut_by_the_client_then_resumed(resumable: str, record: Callable[..., Recorder]) -> None:
    recorder = record(resumable)
    with httpx.Client(timeout=TIMEOUT) as client:
        session = RawSession(client, recorder.url)
        call = session.request("tools/call", {"name": "ticks", "arguments": {"n": 4, "interval": 0.15},
                                              "_meta": {"progressToken": "p"}})
        seen_before_cut: list[str | None] = []
        with session.stream(call) as response:
            for event_id, data in sse_events(response):
                seen_before_cut.append(event_id)
                if data:  # the first progress notification: cut the stream here
                    break
        cursor = seen_before_cut[-1]
        with client.stream("GET", recorder.url, headers=session.headers(**{"Last-Event-ID": cursor})) as response:
            seen_after: list[tuple[str | None, Any]] = []
            for event_id, data in sse_events(response):
                seen_after.append((event_id, json.loads(data) if data else None))
                if data and "result" in seen_after[-1][1]:
                    break
    cassette = recorder.stop()

    check_channel_shape(cassette)
    [post] = exchanges_calling(cassette, "ticks")
    assert post[-1].info == {"reason": "client_disconnect", "detail": "Client disconnected."}
    assert [f.info["id"] for f in post if f.kind is Kind.SSE_EVENT] == seen_before_cut  # the ids the client saw
    [resumed] = [frames for frames in channels(cassette).values() if header(request_head(frames), "Last-Event-ID")]
    assert header(request_head(resumed), "Last-Event-ID") == cursor
    assert request_head(resumed)["method"] == "GET" and response_head(resumed)["status"] == 200
    recorded = [(f.info["id"], f.message) for f in resumed if f.kind is Kind.SSE_EVENT]
    assert recorded == seen_after
    assert [m.get("method") for _, m in recorded if m] == ["notifications/progress"] * 3 + [None]
    assert resumed[-1].info["reason"] == "client_disconnect"


def test_sse_events_reach_the_client_live(resumable: str, record: Callable[..., Recorder]) -> None:
    recorder = record(resumable)
    with httpx.Client(timeout=TIMEOUT) as client:
        session = RawSession(client, recorder.url)
        call = session.request("tools/call", {"name": "ticks", "arguments": {"n": 3, "interval": 0.4},
                                              "_meta": {"progressToken": "p"}})
        arrivals: list[tuple[float, dict[str, Any]]] = []
        with session.stream(call) as response:
            for _, data in sse_events(response):
                if data:
                    arrivals.append((time.monotonic(), json.loads(data)))
    recorder.stop()
    first_progress, result = arrivals[0], arrivals[-1]
    assert first_progress[1]["method"] == "notifications/progress" and "result" in result[1]
    # The tool runs ~1.2 s and reports at 0.4 s: a buffering proxy would deliver both at the end.
    assert result[0] - first_progress[0] > 0.5


def test_a_2025_03_26_batch_is_recorded_as_a_batch(everything_http: str, record: Callable[..., Recorder]) -> None:
    recorder = record(everything_http)
    with httpx.Client(timeout=TIMEOUT) as client:
        session = RawSession(client, recorder.url, version="2025-03-26")
        batch = [session.request("tools/list", {}), session.request("tools/call", {"name": "echo", "arguments": {"message": "b"}})]
        response = client.post(recorder.url, json=batch, headers=session.headers())
    cassette = recorder.stop()

    [frames] = [f for f in channels(cassette).values() if len(f) > 1 and isinstance(f[1].message, list)]
    assert frames[1].kind is Kind.MESSAGE and frames[1].message == batch
    assert header(request_head(frames), "MCP-Protocol-Version") == "2025-03-26"
    assert response_head(frames)["status"] == response.status_code
    answered = [f.message for f in frames if f.kind in (Kind.SSE_EVENT, Kind.MESSAGE) and not f.from_client and f.message]
    assert answered  # whatever the server made of it, its answer is recorded too


def test_an_empty_post_is_recorded_and_replayed_as_the_server_answered_it(
    everything_http: str, record: Callable[..., Recorder]
) -> None:
    """A POST without a body gets the recorded server's answer on replay, not one of the replay's own."""
    recorder = record(everything_http)
    with httpx.Client(timeout=TIMEOUT) as client:
        session = RawSession(client, recorder.url)
        live = client.post(recorder.url, content=b"", headers=session.headers(**{"Content-Type": "application/json"}))
    cassette = recorder.stop()
    [frames] = [f for f in channels(cassette).values() if request_head(f)["method"] == "POST" and f[1].kind is Kind.RAW]
    assert frames[1].payload == b"" and response_head(frames)["status"] == live.status_code == 400

    with replay_server(cassette) as server, httpx.Client(timeout=TIMEOUT) as client:
        replayed = RawSession(client, server.url)
        again = client.post(server.url, content=b"", headers=replayed.headers(**{"Content-Type": "application/json"}))
    assert (again.status_code, again.json()) == (live.status_code, live.json())
    assert server.clean, server.report_lines


def test_a_client_that_stops_mid_body_is_recorded_as_its_disconnect_not_an_upstream_error(
    everything_http: str, record: Callable[..., Recorder]
) -> None:
    """The exchange was left with its end alone (no request head), said to be the upstream's failure."""
    recorder = record(everything_http)
    with httpx.Client(timeout=TIMEOUT) as client:
        session = RawSession(client, recorder.url)
        with socket.create_connection(("127.0.0.1", int(recorder.url.split(":")[2].split("/")[0])), timeout=TIMEOUT) as sock:
            sock.sendall(f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                         f"Mcp-Session-Id: {session.session}\r\nContent-Length: 100\r\n\r\n{{\"json".encode())
        session.post(session.request("tools/list", {}))
    cassette = recorder.stop()
    assert "upstream error" not in recorder.process.rest_of_stderr()
    check_channel_shape(cassette)
    [cut] = [frames for frames in channels(cassette).values() if frames[-1].info["reason"] == "client_disconnect"]
    assert kinds(cut) == [Kind.HTTP_REQUEST, Kind.STREAM_END]
    assert header(request_head(cut), "Content-Length") == "100"

    with replay_server(cassette) as server, httpx.Client(timeout=TIMEOUT) as client:
        replayed = RawSession(client, server.url)
        assert "tools" in replayed.post(replayed.request("tools/list", {})).text
    assert server.clean, server.report_lines


def test_streams_still_open_when_the_recorder_is_stopped_are_not_said_to_be_upstream_errors(
    everything_http: str, record: Callable[..., Recorder]
) -> None:
    """The recorder cuts them as it stops; each was said as "upstream error ... incomplete chunked read"."""
    recorder = record(everything_http)
    with httpx.Client(timeout=TIMEOUT) as client:
        session = RawSession(client, recorder.url)
        with client.stream("GET", recorder.url, headers=session.headers(Accept="text/event-stream")) as stream:
            assert stream.status_code == 200
            cassette = recorder.stop()
    said = recorder.process.rest_of_stderr()
    assert "upstream error" not in said and "Traceback" not in said, said
    [get] = [frames for frames in channels(cassette).values() if request_head(frames)["method"] == "GET"]
    assert kinds(get) == [Kind.HTTP_REQUEST, Kind.HTTP_RESPONSE, Kind.STREAM_END]


# --- secrets -------------------------------------------------------------------------------------


def test_an_authorization_secret_never_reaches_the_cassette(resumable: str, record: Callable[..., Recorder]) -> None:
    secret = "tok-" + os.urandom(8).hex()
    recorder = record(resumable, "--redact-path", "params.arguments.text", "--redact-path", "result.content.*.text",
                      "--redact-path", "result.structuredContent.result")
    with httpx.Client(timeout=TIMEOUT, headers={"Authorization": f"Bearer {secret}", "X-Api-Key": secret}) as client:
        session = RawSession(client, recorder.url)
        session.post(session.request("tools/call", {"name": "echo", "arguments": {"text": f"my key is {secret}"}}))
    cassette = recorder.stop()

    assert secret.encode() not in recorder.cassette.read_bytes()
    heads = [request_head(frames) for frames in channels(cassette).values()]
    # The same secret, the same placeholder, across requests and header names (the bearer keeps its scheme):
    assert {header(h, "Authorization") for h in heads} == {"Bearer <redacted:1>"}
    assert {header(h, "X-Api-Key") for h in heads} == {"<redacted:1>"}
    assert "json:params.arguments.text" in cassette.header.redaction


def test_query_secrets_userinfo_and_credential_headers_are_redacted_and_replay_still_works(
        resumable: str, record: Callable[..., Recorder]) -> None:
    secret, password = "q-" + os.urandom(8).hex(), "pw-" + os.urandom(8).hex()
    upstream = resumable.replace("http://", f"http://ann:{password}@") + f"?api_key={secret}"
    recorder = record(upstream)
    live_url = f"{recorder.origin}/mcp?api_key={secret}&cursor=c1"  # the client sends its token itself
    credentials = {"X-Access-Key": secret, "Authentication": f"Token {secret}", "X-Credentials": password}
    with httpx.Client(timeout=TIMEOUT, headers=credentials) as client:
        session = RawSession(client, live_url)
        session.post(session.request("tools/call", {"name": "echo", "arguments": {"text": "hi"}}))
    cassette = recorder.stop()
    banner = recorder.process.rest_of_stderr()

    for text in (recorder.cassette.read_bytes(), banner.encode()):
        assert secret.encode() not in text and password.encode() not in text
    assert cassette.header.server["url"] == resumable.replace("http://", "http://<redacted:1>@") + "?api_key=<redacted:2>"
    assert f"/mcp?api_key=<redacted:2> -> {cassette.header.server['url']}" in banner
    heads = [request_head(frames) for frames in channels(cassette).values()]
    assert {head["path"] for head in heads} == {"/mcp?api_key=<redacted:2>&cursor=c1"}
    assert {header(head, "X-Access-Key") for head in heads} == {"<redacted:2>"}
    assert {header(head, "Authentication") for head in heads} == {"<redacted:3>"}
    assert {header(head, "X-Credentials") for head in heads} == {"<redacted:4>"}

    # Replayed, the live client's real token (or another one: a fresh token every run) still matches.
    with replay_server(cassette) as server, httpx.Client(timeout=TIMEOUT, headers=credentials) as client:
        session = RawSession(client, server.url + f"?api_key=other-{secret}&cursor=c1")
        answer = session.post(session.request("tools/call", {"name": "echo", "arguments": {"text": "hi"}}))
        assert "hi" in answer.text
    assert server.clean, server.report_lines


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP], ids=["kill", "terminal closed"])
def test_a_recording_stopped_by_a_signal_is_finished_like_one_stopped_by_ctrl_c(
        signum: int, resumable: str, record: Callable[..., Recorder]) -> None:
    recorder = record(resumable)
    with httpx.Client(timeout=TIMEOUT) as client:
        RawSession(client, recorder.url)
    cassette = recorder.stop(signum)  # exit 0
    assert cassette.header.labels["origin"] and cassette.header.labels["sessions"]  # written when it finishes
    assert not cassette.warnings


def test_a_signal_ignored_when_the_recorder_started_stays_ignored(resumable: str, record: Callable[..., Recorder]) -> None:
    """As under `nohup`: the terminal closing (SIGHUP) does not end the recording."""
    previous = signal.signal(signal.SIGHUP, signal.SIG_IGN)  # the recorder inherits it
    try:
        recorder = record(resumable)
    finally:
        signal.signal(signal.SIGHUP, previous)
    recorder.process.proc.send_signal(signal.SIGHUP)
    with httpx.Client(timeout=TIMEOUT) as client:
        RawSession(client, recorder.url)
    cassette = recorder.stop(signal.SIGINT)
    assert cassette.header.labels["sessions"]


def test_no_redact_keeps_secrets_and_warns(resumable: str, record: Callable[..., Recorder]) -> None:
    recorder = record(resumable, "--no-redact")
    with httpx.Client(timeout=TIMEOUT, headers={"Authorization": "Bearer visible"}) as client:
        RawSession(client, recorder.url)
    cassette = recorder.stop(signal.SIGTERM)
    assert "WARNING" in recorder.process.rest_of_stderr()
    assert cassette.header.redaction == ()
    assert b"Bearer visible" in recorder.cassette.read_bytes()


# --- failures ------------------------------------------------------------------------------------


def serve_once_forever(answer: bytes | None) -> tuple[socket.socket, threading.Thread]:
    """A TCP server on 127.0.0.1 that reads a request and answers `answer` (None: closes at once)."""
    listener = socket.create_server(("127.0.0.1", 0))

    def serve() -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            with conn:
                if answer is not None:
                    conn.recv(65536)
                    conn.sendall(answer)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    return listener, thread


@pytest.mark.parametrize("upstream", ["down", "hangs up", "garbage"])
def test_upstream_failures(upstream: str, record: Callable[..., Recorder]) -> None:
    listener = None
    if upstream == "down":
        port = free_port()  # nothing listens there
    else:
        listener, _ = serve_once_forever(None if upstream == "hangs up" else b"\x00\x01 not http at all\r\n\r\n")
        port = listener.getsockname()[1]
    try:
        recorder = record(f"http://127.0.0.1:{port}/mcp")
        with httpx.Client(timeout=TIMEOUT) as client:
            for _ in range(2):  # the recorder keeps serving after a failure
                response = client.post(recorder.url, json={"jsonrpc": "2.0", "id": 1, "method": "ping"})
                assert response.status_code == 502 and response.text
        cassette = recorder.stop()
    finally:
        if listener is not None:
            listener.close()
    for frames in channels(cassette).values():
        assert kinds(frames) == [Kind.HTTP_REQUEST, Kind.MESSAGE, Kind.STREAM_END]
        assert frames[-1].info["reason"] == "upstream_error" and frames[-1].info["detail"]
    assert len(channels(cassette)) == 2
    said = recorder.process.rest_of_stderr()  # the user hears of each failure, not only the client
    assert said.count("tapes: upstream error on POST /mcp") == 2, said
    assert frames[-1].info["detail"] in said and "Traceback" not in said


def test_an_upstream_answering_html_is_forwarded_recorded_and_said(record: Callable[..., Recorder]) -> None:
    page = b"<html><body>502 from the gateway</body></html>"
    listener, _ = serve_once_forever(b"HTTP/1.1 502 Bad Gateway\r\nContent-Type: text/html\r\nContent-Length: %d\r\n\r\n%s"
                                     % (len(page), page))
    try:
        recorder = record(f"http://127.0.0.1:{listener.getsockname()[1]}/mcp")
        with httpx.Client(timeout=TIMEOUT) as client:
            answer = client.post(recorder.url, json={"jsonrpc": "2.0", "id": 1, "method": "ping"})
        cassette = recorder.stop()
    finally:
        listener.close()
    assert answer.status_code == 502 and answer.content == page  # forwarded as it came
    [frames] = channels(cassette).values()
    assert kinds(frames) == [Kind.HTTP_REQUEST, Kind.MESSAGE, Kind.HTTP_RESPONSE, Kind.RAW, Kind.STREAM_END]
    said = recorder.process.rest_of_stderr()
    assert "tapes: upstream answered POST /mcp (http:1) with 502 text/html, not MCP" in said, said


def test_an_upstream_closing_mid_stream_is_forwarded_recorded_and_said(record: Callable[..., Recorder]) -> None:
    event = b'id: 1\ndata: {"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":1,"progress":1}}\n\n'
    head = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
    # one whole chunk holding an event, then a chunk announced as 0x100 bytes that stops short
    listener, _ = serve_once_forever(head + b"%x\r\n%s\r\n" % (len(event), event) + b"100\r\nid: 2\ndata: {")
    try:
        recorder = record(f"http://127.0.0.1:{listener.getsockname()[1]}/mcp")
        with httpx.Client(timeout=TIMEOUT) as client, client.stream(
                "POST", recorder.url, json={"jsonrpc": "2.0", "id": 1, "method": "ping"}) as response:
            got = b""
            with pytest.raises(httpx.RemoteProtocolError):
                for chunk in response.iter_raw():
                    got += chunk
        cassette = recorder.stop()
    finally:
        listener.close()
    assert got.startswith(event) and got.endswith(b"id: 2\ndata: {")  # forwarded as it came
    [frames] = channels(cassette).values()
    assert kinds(frames) == [Kind.HTTP_REQUEST, Kind.MESSAGE, Kind.HTTP_RESPONSE, Kind.SSE_EVENT, Kind.RAW, Kind.STREAM_END]
    assert frames[-1].info["reason"] == "upstream_error"
    said = recorder.process.rest_of_stderr()
    assert "tapes: upstream error on POST /mcp" in said and frames[-1].info["detail"] in said, said


def test_a_killed_recorder_leaves_a_readable_cassette(resumable: str, record: Callable[..., Recorder]) -> None:
    recorder = record(resumable)
    with httpx.Client(timeout=TIMEOUT) as client:
        session = RawSession(client, recorder.url)
        session.post(session.request("tools/call", {"name": "echo", "arguments": {"text": "x"}}))
    # The writer flushes per batch: poll (bounded) until the last exchange's end is on disk, then kill.
    deadline = time.monotonic() + TIMEOUT
    while len([f for f in load(recorder.cassette).frames if f.kind is Kind.STREAM_END]) < 3:
        assert time.monotonic() < deadline
        time.sleep(0.01)
    recorder.process.stop(signal.SIGKILL)
    cassette = load(recorder.cassette)
    assert len(channels(cassette)) == 3 and not cassette.warnings


# --- the forward proxy ---------------------------------------------------------------------------


def test_forward_proxy(resumable: str, record: Callable[..., Recorder], tmp_path: Path) -> None:
    recorder = record(None, "--ca-dir", str(tmp_path / "ca"))
    banner = "".join(recorder.process.stderr)
    ca = tmp_path / "ca" / "mitmproxy-ca-cert.pem"
    assert str(ca) in banner and ca.exists()
    with httpx.Client(timeout=TIMEOUT, proxy=recorder.origin) as client:
        session = RawSession(client, resumable)
        session.post(session.request("tools/call", {"name": "echo", "arguments": {"text": "via proxy"}}))
    cassette = recorder.stop()
    assert cassette.header.server == {"proxy": True}
    assert cassette.header.labels["sessions"] == session.session
    assert any(f.kind is Kind.SSE_EVENT and f.message and f.message.get("result", {}).get("content")
               == [{"type": "text", "text": "via proxy"}] for f in cassette.frames)


# --- user errors ---------------------------------------------------------------------------------


def tapes_record(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*TAPES, "record", *args], capture_output=True, text=True, timeout=TIMEOUT)


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--upstream", "ftp://x/y"], "is not an http:// or https:// URL"),
        (["--upstream", "http://host:99999/"], "is not valid"),
        (["--upstream", "http://h/", "--listen", "nowhere"], "is not HOST:PORT"),
        (["--upstream", "http://h/", "--proxy"], "exactly one of"),
        ([], "exactly one of"),
        (["--upstream", "http://h/", "--no-redact", "--redact-header", "X"], "cannot be combined"),
        (["--upstream", "http://h/", "--redact-path", "a..b"], "empty step"),
    ],
)
def test_user_errors(args: list[str], says: str, tmp_path: Path) -> None:
    result = tapes_record("-o", str(tmp_path / "x.tape"), *args)
    assert result.returncode == 2 and result.stderr.startswith("tapes: error: ") and says in result.stderr
    assert "Traceback" not in result.stderr and len(result.stderr.strip().splitlines()) == 1


def test_unwritable_output_and_port_in_use(tmp_path: Path) -> None:
    result = tapes_record("-o", str(tmp_path / "no" / "x.tape"), "--upstream", "http://127.0.0.1:1/")
    assert result.returncode == 2 and "cannot be written" in result.stderr and "Traceback" not in result.stderr
    with socket.create_server(("127.0.0.1", 0)) as busy:
        port = busy.getsockname()[1]
        result = tapes_record("-o", str(tmp_path / "x.tape"), "--upstream", "http://127.0.0.1:1/", "--listen", f"127.0.0.1:{port}")
    assert result.returncode == 2 and f"cannot listen on 127.0.0.1:{port}" in result.stderr
    assert "Traceback" not in result.stderr and len(result.stderr.strip().splitlines()) == 1


def test_a_cassette_that_cannot_be_written_keeps_the_proxy_going_and_exits_non_zero(
    resumable: str, tmp_path: Path
) -> None:
    recorder = Recorder(Path("/dev/full"), resumable)
    try:
        said = "".join(recorder.process.stderr)  # up to the banner: the error comes first, at once
        assert "tapes: error: /dev/full: cannot be written (No space left on device); the session goes on" in said
        with httpx.Client(timeout=TIMEOUT) as client:
            session = RawSession(client, recorder.url)
            response = session.post(session.request("tools/call", {"name": "echo", "arguments": {"text": "x"}}))
            assert response.status_code == 200
    finally:
        code = recorder.process.stop(signal.SIGINT)
    assert code == 1
    everything = recorder.process.rest_of_stderr()
    assert "Traceback" not in everything and everything.count("cannot be written") == 1  # said once
