"""End-to-end tests of `tapes record` over TLS: an HTTPS upstream (tests/servers/resumable_server.py
with a certificate from a CA made for the run, tests/support/certificates.py) behind the reverse
proxy (`--upstream https://...`), and reached through the forward proxy (`--proxy`), which
intercepts TLS with mitmproxy's CA."""

from __future__ import annotations

import json
import ssl
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import httpx2
import pytest
from mcp.client.streamable_http import streamable_http_client

from tapes.cassette.frames import Kind

from tests.support.certificates import make_certificates
from tests.support.http_cassettes import channels, check_channel_shape
from tests.support.http_clients import RawSession, resumable_flow, run_flow
from tests.support.http_peers import Recorder
from tests.support.paths import RESUMABLE_SERVER
from tests.support.processes import TIMEOUT, Process


# --- the HTTPS server, with a certificate from a CA made here ------------------------------------


class HttpsUpstream:
    def __init__(self, directory: Path) -> None:
        self.ca, cert, key = make_certificates(directory)
        self.process = Process([*RESUMABLE_SERVER, "--certfile", str(cert), "--keyfile", str(key)])
        self.url = self.process.wait_for(r"listening on (https://\S+)")[1]


@pytest.fixture(scope="module")
def https_upstream(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HttpsUpstream]:
    upstream = HttpsUpstream(tmp_path_factory.mktemp("tls"))
    yield upstream
    upstream.process.stop()


def trusting(ca: Path) -> ssl.SSLContext:
    return ssl.create_default_context(cafile=str(ca))


def sdk_https(url: str, ca: Path) -> Callable[[], Any]:
    """A transport factory for `run_flow`: the SDK's Streamable HTTP client trusting `ca`."""

    @asynccontextmanager
    async def transport() -> AsyncIterator[Any]:
        timeout = httpx2.Timeout(TIMEOUT, read=300.0)
        async with (
            httpx2.AsyncClient(verify=trusting(ca), timeout=timeout) as http,
            streamable_http_client(url, http_client=http) as streams,
        ):
            yield streams

    return transport


def echoed(cassette: Any, text: str) -> bool:
    return any(f.kind in (Kind.SSE_EVENT, Kind.MESSAGE) and not f.from_client and isinstance(f.message, dict)
               and f.message.get("result", {}).get("content") == [{"type": "text", "text": text}]
               for f in cassette.frames)


# --- the reverse proxy in front of an HTTPS upstream ----------------------------------------------


def test_https_upstream(monkeypatch: pytest.MonkeyPatch, https_upstream: HttpsUpstream,
                        record: Callable[..., Recorder]) -> None:
    direct = run_flow(monkeypatch, resumable_flow, sdk_https(https_upstream.url, https_upstream.ca))
    recorder = record(https_upstream.url, "--upstream-ca", str(https_upstream.ca))
    assert recorder.url.startswith("http://127.0.0.1:") and recorder.url.endswith("/mcp")
    # The client speaks plain HTTP to the recorder, which forwards over TLS.
    assert run_flow(monkeypatch, resumable_flow, recorder.url) == direct
    cassette = recorder.stop()

    assert cassette.header.server == {"url": https_upstream.url}
    assert cassette.protocol_version == "2025-11-25" and cassette.header.labels["sessions"]
    check_channel_shape(cassette)
    assert echoed(cassette, "after")
    assert all(f.info["reason"] != "upstream_error" for f in cassette.frames if f.kind is Kind.STREAM_END)


def test_https_upstream_is_verified(https_upstream: HttpsUpstream, record: Callable[..., Recorder]) -> None:
    """Without --upstream-ca the test CA is not trusted: the request fails with a 502, recorded."""
    recorder = record(https_upstream.url)
    with httpx.Client(timeout=TIMEOUT) as client:
        response = client.post(recorder.url, json={"jsonrpc": "2.0", "id": 1, "method": "ping"})
    assert response.status_code == 502
    cassette = recorder.stop()
    (frames,) = channels(cassette).values()
    assert frames[-1].kind is Kind.STREAM_END and frames[-1].info["reason"] == "upstream_error"
    assert "certificate" in frames[-1].info["detail"].lower()


# --- the forward proxy intercepting TLS ---------------------------------------------------------


def test_forward_proxy_intercepts_tls(https_upstream: HttpsUpstream, record: Callable[..., Recorder],
                                      tmp_path: Path) -> None:
    recorder = record(None, "--ca-dir", str(tmp_path / "ca"), "--upstream-ca", str(https_upstream.ca))
    mitm_ca = tmp_path / "ca" / "mitmproxy-ca-cert.pem"
    assert str(mitm_ca) in "".join(recorder.process.stderr) and mitm_ca.exists()
    with httpx.Client(timeout=TIMEOUT, proxy=recorder.origin, verify=trusting(mitm_ca)) as client:
        session = RawSession(client, https_upstream.url)
        response = session.post(session.request("tools/call", {"name": "echo", "arguments": {"text": "over tls"}}))
    assert "over tls" in response.text
    cassette = recorder.stop()

    assert cassette.header.server == {"proxy": True}
    assert cassette.header.labels["sessions"] == session.session
    check_channel_shape(cassette)
    # Decrypted: the JSON-RPC request and its answer, not an opaque CONNECT tunnel.
    requests = [f.message for f in cassette.frames if f.from_client and f.kind is Kind.MESSAGE]
    assert [m.get("method") for m in requests] == ["initialize", "notifications/initialized", "tools/call"]
    assert requests[-1]["params"] == {"name": "echo", "arguments": {"text": "over tls"}}
    assert echoed(cassette, "over tls")
    heads = [f.info for f in cassette.frames if f.kind is Kind.HTTP_REQUEST]
    assert all(h["method"] == "POST" and h["path"] == "/mcp" for h in heads), json.dumps(heads)
