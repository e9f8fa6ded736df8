"""Hostile HTTP requests to the HTTP replayer: methods the transport has no use for, bodies that
are not JSON (invalid UTF-8, chunked, empty), odd or enormous session, version and Last-Event-ID
headers, requests for sessions that never were or were deleted, GET before initialize, requests
racing a DELETE. Each gets an HTTP status with a JSON-RPC error body that names the problem, and
the replayer goes on serving its session and other clients. A cassette whose recorded head HTTP
cannot carry is refused before anything is served, in one sentence."""

from __future__ import annotations

import dataclasses
import signal
import socket
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from urllib.parse import urlsplit

import httpx

from replayer.http import replay_server
from tapes.cassette.frames import Kind
from tapes.cassette.store import load, save

from tests.support.paths import ROOT, TAPES
from tests.support.processes import TIMEOUT, Process

CASSETTE = ROOT / "cassettes" / "everything-http-2025-11-25.tape"
ACCEPT = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


def _raw(url: str, request: bytes) -> bytes:
    """What the server answers a request written byte by byte (closing the connection after it)."""
    parts = urlsplit(url)
    with socket.create_connection((parts.hostname, parts.port), timeout=TIMEOUT) as sock:
        sock.sendall(request)
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    return answer


def test_hostile_requests_get_a_status_and_a_json_rpc_error_and_the_replay_goes_on() -> None:
    client_messages = [frame.payload for frame in load(CASSETTE).frames if frame.from_client and frame.kind is Kind.MESSAGE]
    initialize = next(message for message in client_messages if b'"initialize"' in message)
    initialized = next(message for message in client_messages if b'"notifications/initialized"' in message)
    with replay_server(CASSETTE) as server, httpx.Client(timeout=TIMEOUT) as client:
        url, path = server.url, urlsplit(server.url).path
        before = client.get(url, headers={"Accept": "text/event-stream"})  # GET before initialize
        opened = client.post(url, content=initialize, headers=ACCEPT)
        session = {**ACCEPT, "Mcp-Session-Id": opened.headers["mcp-session-id"], "MCP-Protocol-Version": "2025-11-25"}
        refused = {
            "GET before initialize": before,
            "PUT": client.put(url, content=initialize, headers=session),
            "PATCH": client.patch(url, headers=session),
            "HEAD": client.head(url, headers=session),
            "invalid UTF-8": client.post(url, content=b'{"jsonrpc":"2.0","id":1,"method":"\xff"}', headers=session),
            "an empty body": client.post(url, content=b"", headers=session),
            "a chunked body that is no JSON": client.post(url, content=iter([b"hel", b"lo"]), headers=session),
            "an unknown session": client.delete(url, headers={"Mcp-Session-Id": "never-issued"}),
            "an enormous session id": client.post(url, content=initialized, headers={**session, "Mcp-Session-Id": "x" * 60_000}),
            "an enormous version": client.post(url, content=initialized, headers={**session, "MCP-Protocol-Version": "9" * 60_000}),
            "a Last-Event-ID never issued": client.get(url, headers={**session, "Last-Event-ID": "never-issued"}),
            "an enormous Last-Event-ID": client.get(url, headers={**session, "Last-Event-ID": "9" * 60_000}),
            "a session id that is no UTF-8": client.get(url, headers={**session, "Mcp-Session-Id": b"\xe9\xff"}),
            "a Last-Event-ID in UTF-8": client.get(url, headers={**session, "Last-Event-ID": "évent-1".encode()}),
            "a Last-Event-ID that is no UTF-8": client.get(url, headers={**session, "Last-Event-ID": b"\xe9\xff"}),
        }
        expected = {"GET before initialize": (400, "Mcp-Session-Id header is required"),
                    "PUT": (405, "Method Not Allowed: PUT"), "PATCH": (405, "Method Not Allowed: PATCH"),
                    "HEAD": (405, None), "invalid UTF-8": (400, "Parse error"), "an empty body": (400, "Parse error"),
                    "a chunked body that is no JSON": (400, "Parse error"), "an unknown session": (404, "session not found"),
                    "an enormous session id": (404, "session not found"),
                    "an enormous version": (400, "unsupported MCP-Protocol-Version"),
                    "a Last-Event-ID never issued": (400, "Last-Event-ID 'never-issued' names no event of this session"),
                    "an enormous Last-Event-ID": (400, "names no event of this session"),
                    "a session id that is no UTF-8": (404, "session not found"),
                    # named as the client wrote it (its bytes read as UTF-8, not latin-1), or as latin-1 reads them
                    "a Last-Event-ID in UTF-8": (400, "Last-Event-ID 'évent-1' names no event"),
                    "a Last-Event-ID that is no UTF-8": (400, "Last-Event-ID 'éÿ' names no event")}
        for what, response in refused.items():
            status, named = expected[what]
            assert response.status_code == status, (what, response.status_code, response.text)
            if named is not None:  # a HEAD answer has no body
                assert response.json()["jsonrpc"] == "2.0" and named in response.json()["error"]["message"], (what, response.text)
        # the same header twice: the first is the one read
        twice = _raw(url, (f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                           f"Accept: application/json, text/event-stream\r\nMcp-Session-Id: {session['Mcp-Session-Id']}\r\n"
                           f"Mcp-Session-Id: other\r\nMCP-Protocol-Version: 2025-11-25\r\nContent-Length: {len(initialized)}\r\n"
                           "Connection: close\r\n\r\n").encode() + initialized)
        assert twice.startswith(b"HTTP/1.1 202 "), twice
        # the session goes on, and ends with its DELETE; after that it is gone, for every method
        assert client.delete(url, headers=session).status_code == 200
        for gone in (client.delete(url, headers=session), client.post(url, content=initialized, headers=session),
                     client.get(url, headers=session)):
            assert gone.status_code == 404 and gone.json()["error"]["message"] == "Not Found: session not found"
        # and another client is still answered: the played session again, under a session id of its own
        again = client.post(url, content=initialize, headers=ACCEPT)
        assert again.status_code == 200 and b'"result"' in again.content, again.text
        assert again.headers["mcp-session-id"] == f"{opened.headers['mcp-session-id']}-again-1"
    assert any("Last-Event-ID 'never-issued'" in line for line in server.report_lines)


def test_a_delete_ends_a_stream_still_waiting_on_what_the_client_never_sent() -> None:
    # The recorded client cancelled its long-running call and the server ended the call's stream
    # after the DELETE. A live client that deletes the session without cancelling first still sees
    # the stream end: a server ending a session ends its streams.
    client_messages = [frame.payload for frame in load(CASSETTE).frames if frame.from_client and frame.kind is Kind.MESSAGE]
    initialize = next(message for message in client_messages if b'"initialize"' in message)
    long_call = next(message for message in client_messages if b'"id":10,' in message)
    with replay_server(CASSETTE) as server, httpx.Client(timeout=TIMEOUT) as client:
        opened = client.post(server.url, content=initialize, headers=ACCEPT)
        session = {**ACCEPT, "Mcp-Session-Id": opened.headers["mcp-session-id"], "MCP-Protocol-Version": "2025-11-25"}
        with client.stream("POST", server.url, content=long_call, headers=session) as call:
            events = call.iter_lines()
            assert call.status_code == 200 and any('"notifications/progress"' in line for line in events)
            assert client.delete(server.url, headers=session).status_code == 200
            rest = list(events)  # ends: the stream is closed, not left waiting for the cancel
        assert not any('"result"' in line for line in rest)


def test_a_cassette_with_a_head_http_cannot_send_is_refused_in_one_sentence(tmp_path: Path) -> None:
    recorded = load(CASSETTE)
    at = next(index for index, frame in enumerate(recorded.frames) if frame.kind is Kind.HTTP_RESPONSE)
    head = recorded.frames[at]
    frames = [*recorded.frames[:at], dataclasses.replace(head, info={**head.info, "status": 0}), *recorded.frames[at + 1 :]]
    save(dataclasses.replace(recorded, frames=frames), tmp_path / "odd.tape")
    run = subprocess.run([*TAPES, "replay", "--http", "--listen", "127.0.0.1:0", str(tmp_path / "odd.tape")],
                         capture_output=True, timeout=TIMEOUT)
    assert run.returncode == 2 and run.stdout == b""
    assert run.stderr.decode().splitlines() == [
        f"tapes: error: {tmp_path / 'odd.tape'}: frame {head.seq} is a response head with status 0, which HTTP cannot send"]


def test_a_legacy_endpoint_event_that_is_not_utf8_is_sent_with_replacement() -> None:
    recorded = load(ROOT / "cassettes" / "everything-sse-2024-11-05.tape")
    at = next(index for index, frame in enumerate(recorded.frames) if (frame.info or {}).get("event") == "endpoint")
    endpoint = recorded.frames[at]
    odd = dataclasses.replace(endpoint, data=endpoint.data + b"&x=\xff")
    with replay_server(dataclasses.replace(recorded, frames=[*recorded.frames[:at], odd, *recorded.frames[at + 1 :]])) as server:
        with httpx.stream("GET", server.url, headers={"Accept": "text/event-stream"}, timeout=TIMEOUT) as response:
            lines = response.iter_lines()
            first, second = next(lines), next(lines)
    assert response.status_code == 200 and first == "event: endpoint"
    assert second == f"data: {endpoint.data.decode()}&x=\ufffd"


def test_requests_racing_a_delete_get_their_answer_or_a_404_and_others_are_served() -> None:
    client_messages = [frame.payload for frame in load(CASSETTE).frames if frame.from_client and frame.kind is Kind.MESSAGE]
    initialize = next(message for message in client_messages if b'"initialize"' in message)
    later = client_messages[client_messages.index(initialize) + 1 :]
    with replay_server(CASSETTE) as server, httpx.Client(timeout=TIMEOUT) as client:
        opened = client.post(server.url, content=initialize, headers=ACCEPT)
        session = {**ACCEPT, "Mcp-Session-Id": opened.headers["mcp-session-id"], "MCP-Protocol-Version": "2025-11-25"}
        with ThreadPoolExecutor(max_workers=4) as pool:
            racing = [pool.submit(client.post, server.url, content=message, headers=session) for message in later]
            deleted = pool.submit(client.delete, server.url, headers=session)
            answers = [future.result() for future in racing]
        assert deleted.result().status_code == 200
        for answer in answers:
            assert answer.status_code in (200, 202, 404), answer.text
            if answer.status_code == 404:
                assert answer.json()["error"]["message"] == "Not Found: session not found"
        assert client.get(server.url, headers={"Accept": "text/event-stream"}).status_code == 400  # still serving


def test_a_client_still_sending_its_body_when_the_replay_stops_is_cut_without_a_traceback() -> None:
    """The replay stopped waiting out uvicorn's grace period for such a client, then logged the
    cancelled request as an exception in the application."""
    replayer = Process([*TAPES, "replay", str(CASSETTE), "--http", "--listen", "127.0.0.1:0"])
    try:
        parts = urlsplit(replayer.wait_for(r"tapes: replaying at (\S+)")[1])
        with socket.create_connection((parts.hostname, parts.port), timeout=TIMEOUT) as sock:
            sock.sendall(f"POST {parts.path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                         "Expect: 100-continue\r\nContent-Length: 100\r\n\r\n".encode())
            assert sock.recv(100).startswith(b"HTTP/1.1 100 ")  # sent once the replay reads the body
            sock.sendall(b'{"jsonrpc":')
            assert replayer.stop(signal.SIGINT) == 0
            while sock.recv(65536):  # the connection is closed
                pass
    finally:
        replayer.stop(signal.SIGKILL)
    said = replayer.rest_of_stderr()
    assert "Traceback" not in said and "Exception in ASGI application" not in said, said


def test_a_legacy_post_that_names_no_session_is_told_where_to_post() -> None:
    recorded = load(ROOT / "cassettes" / "everything-sse-2024-11-05.tape")
    endpoint = next(frame for frame in recorded.frames if (frame.info or {}).get("event") == "endpoint")
    message_path = urlsplit(endpoint.payload.decode()).path
    initialize = next(frame.payload for frame in recorded.frames if frame.from_client and frame.kind is Kind.MESSAGE)
    with replay_server(recorded) as server:
        base = server.url.removesuffix(urlsplit(server.url).path)
        answer = httpx.post(base + message_path, content=initialize, timeout=TIMEOUT,
                            headers={"Content-Type": "application/json"})
    assert answer.status_code == 400
    assert answer.json()["error"]["message"] == ("Bad Request: no session named: a legacy HTTP+SSE client posts to "
                                                 "the URL its SSE stream's endpoint event gave, which carries the session id")


def test_a_stream_resumes_from_an_event_id_that_is_not_ascii() -> None:
    # the same recording, with every event id made non-ASCII: a client echoes an id in
    # Last-Event-ID as the UTF-8 it got on the stream
    recorded = load(CASSETTE)
    frames = [frame._replace(info={**frame.info, "id": f"é-{frame.info['id']}"})
              if frame.kind is Kind.SSE_EVENT and (frame.info or {}).get("id") else frame for frame in recorded.frames]
    client_messages = [frame.payload for frame in frames if frame.from_client and frame.kind is Kind.MESSAGE]
    initialize = next(message for message in client_messages if b'"initialize"' in message)
    initialized = next(message for message in client_messages if b'"notifications/initialized"' in message)
    echo = next(message for message in client_messages if b'"echo"' in message)
    with replay_server(dataclasses.replace(recorded, frames=frames)) as server, httpx.Client(timeout=TIMEOUT) as client:
        opened = client.post(server.url, content=initialize, headers=ACCEPT)
        session = {**ACCEPT, "Mcp-Session-Id": opened.headers["mcp-session-id"], "MCP-Protocol-Version": "2025-11-25"}
        assert client.post(server.url, content=initialized, headers=session).status_code == 202
        with client.stream("POST", server.url, content=echo, headers=session) as cut:
            event_id = next(line for line in cut.iter_lines() if line.startswith("id: ")).removeprefix("id: ")
        # the client dropped the stream after its first event: it resumes there
        resumed = client.get(server.url, headers={**session, "Accept": "text/event-stream",
                                                  "Last-Event-ID": event_id.encode()})
    assert event_id.startswith("é-")
    assert resumed.status_code == 200, resumed.text
    assert '"result"' in resumed.text and "Echo: " in resumed.text


def test_a_legacy_stream_asked_for_with_a_last_event_id_opens_a_new_session() -> None:
    """A legacy HTTP+SSE server resumes no stream (the SDKs' ignore Last-Event-ID there): the GET
    opens the first recorded session, noted as adapted, not a session left claimed and unplayed."""
    recorded = load(ROOT / "cassettes" / "everything-sse-2024-11-05.tape")
    with replay_server(recorded) as server, httpx.Client(timeout=TIMEOUT) as client:
        with client.stream("GET", server.url, headers={"Accept": "text/event-stream", "Last-Event-ID": "bogus"}) as stream:
            assert stream.status_code == 200
            lines = stream.iter_lines()
            assert next(lines) == "event: endpoint"
            endpoint = next(lines).removeprefix("data: ")
    recorded_endpoint = next(frame for frame in recorded.frames if (frame.info or {}).get("event") == "endpoint").payload.decode()
    assert endpoint == recorded_endpoint
    lines = server.report_lines
    assert "adapted GET /sse with Last-Event-ID 'bogus': served as a new session, as a legacy HTTP+SSE server, " \
           "which resumes no stream, does" in lines, lines
    assert not any("unmatched" in line and "Last-Event-ID" in line for line in lines), lines
