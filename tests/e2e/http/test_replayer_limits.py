"""The HTTP replayer's connection limits (replayer.http_guard): request heads past a size or a
number of fields get 431, connections that do not send a head or a body in time are closed (408),
and none of it stops the replayer answering other clients. Also: the warning when it listens on
an address that is not loopback."""

from __future__ import annotations

import select
import signal
import socket
from collections.abc import Iterator
from urllib.parse import urlsplit

import httpx
import pytest

from replayer.http import ReplayOptions, ReplayServer, replay_server
from replayer.http_guard import MAX_HEAD, MAX_HEADERS, ConnectionLimits

from tests.support.paths import ROOT, TAPES
from tests.support.processes import TIMEOUT, Process

CASSETTE = ROOT / "cassettes" / "everything-http-2025-11-25.tape"
QUICK = ConnectionLimits(head_timeout=0.5, body_timeout=0.5)


@pytest.fixture
def server() -> Iterator[ReplayServer]:
    with replay_server(CASSETTE, options=ReplayOptions(limits=QUICK)) as running:
        yield running


def connect(server: ReplayServer) -> socket.socket:
    url = urlsplit(server.url)
    sock = socket.create_connection((url.hostname, url.port), timeout=TIMEOUT)
    return sock


def read_all(sock: socket.socket) -> bytes:
    """Everything the server sends until it closes the connection."""
    chunks = []
    try:
        while chunk := sock.recv(65536):
            chunks.append(chunk)
    except ConnectionResetError:
        pass
    return b"".join(chunks)


def still_serving(server: ReplayServer) -> None:
    """An ordinary client is answered by the replayer (400: a GET without a session)."""
    response = httpx.get(server.url, headers={"Accept": "text/event-stream"}, timeout=TIMEOUT)
    assert response.status_code == 400 and "Mcp-Session-Id" in response.text


def test_a_large_header_is_refused(server: ReplayServer) -> None:
    with connect(server) as sock:
        sock.sendall(b"GET /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: " + b"a" * (MAX_HEAD + 1) + b"\r\n\r\n")
        answer = read_all(sock)
    assert answer.startswith(b"HTTP/1.1 431 ") and f"larger than {MAX_HEAD} bytes".encode() in answer
    still_serving(server)
    # a request the recording does not have: counted, as any refusal is
    assert f"unmatched GET /mcp: answered 431: request head larger than {MAX_HEAD} bytes" in server.report_lines
    assert not server.clean


def test_a_16_mb_header_is_cut_off_without_being_read(server: ReplayServer) -> None:
    head = b"GET /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: " + b"a" * (16 * 1024 * 1024) + b"\r\n\r\n"
    sent = 0
    with connect(server) as sock:
        try:
            while sent < len(head):
                sent += sock.send(head[sent : sent + 65536])
        except (ConnectionResetError, BrokenPipeError):
            pass  # the server closed the connection with most of the head unread
        else:
            assert read_all(sock).startswith(b"HTTP/1.1 431 ")
    assert sent < len(head) // 2
    still_serving(server)


def test_too_many_header_fields_are_refused(server: ReplayServer) -> None:
    fields = b"".join(b"X-H%d: v\r\n" % i for i in range(20_000))
    with connect(server) as sock:
        sock.sendall(b"GET /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n" + fields + b"\r\n")
        answer = read_all(sock)
    assert answer.startswith(b"HTTP/1.1 431 ") and f"more than {MAX_HEADERS} header fields".encode() in answer
    many_but_allowed = {f"X-H{i}": "v" for i in range(MAX_HEADERS - 10)}
    response = httpx.get(server.url, headers=many_but_allowed, timeout=TIMEOUT)
    assert response.status_code == 400 and "Mcp-Session-Id" in response.text  # reached the replayer


def test_slowloris_connections_are_closed_and_others_are_served(server: ReplayServer) -> None:
    slow = [connect(server) for _ in range(50)]
    try:
        for sock in slow:
            sock.sendall(b"GET /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n")  # a head that never ends
        still_serving(server)
        answers = [read_all(sock) for sock in slow]
    finally:
        for sock in slow:
            sock.close()
    assert all(answer.startswith(b"HTTP/1.1 408 ") and b"request head did not arrive" in answer for answer in answers)


def test_a_client_dripping_its_head_is_cut_off(server: ReplayServer) -> None:
    head = b"GET /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: " + b"a" * 10_000 + b"\r\n\r\n"
    with connect(server) as sock:
        sent = 0
        # a byte every 20 ms, until the server says something
        while sent < len(head) and not select.select([sock], [], [], 0.02)[0]:
            sent += sock.send(head[sent : sent + 1])
        answer = read_all(sock)
    assert sent < len(head) and answer.startswith(b"HTTP/1.1 408 ")


def test_idle_connections_are_closed(server: ReplayServer) -> None:
    with connect(server) as sock:
        assert read_all(sock) == b""  # nothing of a request came: closed without an answer


def test_a_body_that_does_not_come_is_cut_off(server: ReplayServer) -> None:
    with connect(server) as sock:
        sock.sendall(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{")
        answer = read_all(sock)
    assert answer.startswith(b"HTTP/1.1 408 ") and b"request body did not arrive" in answer
    still_serving(server)
    assert [line for line in server.report_lines if line.startswith("unmatched")] == [
        "unmatched POST /mcp: answered 408: the request body did not arrive within 0.5 s"]


def test_keep_alive_requests_each_get_the_head_deadline_anew(server: ReplayServer) -> None:
    with httpx.Client(timeout=TIMEOUT) as client:
        for _ in range(3):  # one connection, three requests
            assert client.get(server.url).status_code == 400


def test_listening_beyond_loopback_warns() -> None:
    replayer = Process([*TAPES, "replay", str(CASSETTE), "--http", "--listen", "0.0.0.0:0"])
    try:
        replayer.wait_for(r"tapes: replaying at")
    finally:
        replayer.stop(signal.SIGINT)
    said = replayer.rest_of_stderr()
    assert "WARNING" in said and "0.0.0.0" in said and "every interface" in said


def test_loopback_does_not_warn() -> None:
    replayer = Process([*TAPES, "replay", str(CASSETTE), "--http", "--listen", "127.0.0.1:0"])
    try:
        replayer.wait_for(r"tapes: replaying at")
    finally:
        replayer.stop(signal.SIGINT)
    assert "WARNING" not in replayer.rest_of_stderr()
