"""OAuth-protected servers end to end: the official SDK's `mcp.server.auth` server
(tests/servers/oauth_server.py; its authorization server on the same origin, or on another one
that the recorder routes under /tapes-as/1) logged in to by the
SDK's OAuth client (`mcp.client.auth.OAuthClientProvider`, run headless), recorded through
`tapes record --upstream` (or `--proxy`, the client reaching the real origins through it), then
replayed offline by `tapes replay --http` to a client that logs in from scratch."""

from __future__ import annotations

import base64
import functools
import json
import secrets
import re
import signal
import subprocess
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import TypeVar

import httpx
import pytest

from recorder.http import CA_FILE
from replayer.http import HttpReplayer, replay_server
from tapes.cassette.frames import Kind
from tapes.cassette.store import load
from tapes.errors import UserError
from tapes.wire.http import header

from tests.support.certificates import make_certificates
from tests.support.http_peers import Recorder
from tests.support.oauth_clients import (
    CLIENT_DOCUMENT,
    REDIRECT_URI,
    OAuthSession,
    machine_session,
    mcp_remote_session,
    oauth_session,
    ts_oauth_session,
)
from tests.support.paths import OAUTH_SERVER, TAPES
from tests.support.processes import Process
from tests.support.view_page import model_of

T = TypeVar("T")
ISSUERS = {"same-origin": [], "separate-issuer": ["--separate-issuer"]}
AS_PATHS = {"same-origin": "", "separate-issuer": "/tapes-as/1"}


@pytest.fixture(scope="module", params=list(ISSUERS))
def recorded(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, OAuthSession]]:
    """A login and three calls recorded through the reverse proxy; the server is gone afterwards."""
    server = Process([*OAUTH_SERVER, *ISSUERS[request.param]])
    cassette = tmp_path_factory.mktemp("oauth") / f"{request.param}.tape"
    try:
        upstream = server.wait_for(r"oauth server listening on (\S+)")[1]
        recorder = Recorder(cassette, upstream)
        try:
            live = oauth_session(recorder.url)
        finally:
            recorder.stop()
    finally:
        server.stop()
    yield cassette, live


def _issuer_kind(cassette: Path) -> str:
    return cassette.stem


def _record(cassette: Path, server_flags: list[str], drive: Callable[[str], T], upstream_host: str = "127.0.0.1",
            *recorder_flags: str) -> T:
    """`drive(url)` run through `tapes record --upstream` (with `recorder_flags`) in front of a fresh
    oauth server, its URL given with `upstream_host` (the server's documents name 127.0.0.1)."""
    server = Process([*OAUTH_SERVER, *server_flags])
    try:
        upstream = server.wait_for(r"oauth server listening on (\S+)")[1].replace("127.0.0.1", upstream_host)
        recorder = Recorder(cassette, upstream, *recorder_flags)
        try:
            return drive(recorder.url)
        finally:
            recorder.stop()
    finally:
        server.stop()


def _replayed_by(cassette: Path, drive: Callable[[str], T], *options: str) -> tuple[T, str, int, str]:
    """`drive` against `tapes replay --http` of `cassette` (with `options`): what it got, the URL it
    was given, and the replayer's exit status and stderr once it was stopped."""
    replayer = Process([*TAPES, "replay", str(cassette), "--http", "--listen", "127.0.0.1:0", *options])
    try:
        url = replayer.wait_for(r"tapes: replaying at (\S+)")[1]
        replayed = drive(url)
    finally:
        replayer.stop(signal.SIGINT)
    return replayed, url, replayer.proc.returncode, replayer.rest_of_stderr()


def test_the_flow_passes_the_sdk_client_through_the_recorder(recorded: tuple[Path, OAuthSession]) -> None:
    cassette_path, live = recorded
    # The SDK's strict resource check passed (it raises otherwise) and the calls were authorized.
    assert live.results[0] == ["echo", "secret_note", "whoami"]
    assert live.results[2][0]["text"] == "scopes=notes"
    cassette = load(cassette_path)
    heads = [f.info for f in cassette.frames if f.kind is Kind.HTTP_REQUEST]
    paths = [(head["method"], head["path"].split("?")[0]) for head in heads]
    issuer_path = AS_PATHS[_issuer_kind(cassette_path)]
    for step in [("GET", "/.well-known/oauth-protected-resource/mcp"), ("GET", f"/.well-known/oauth-authorization-server{issuer_path}"),
                 ("POST", f"{issuer_path}/register"), ("GET", f"{issuer_path}/authorize"), ("POST", f"{issuer_path}/token")]:
        assert step in paths, paths
    origin = cassette.header.labels["origin"]
    documents = [f.payload for f in cassette.frames if f.kind is Kind.RAW and f.payload.startswith(b"{")]
    resource = next(json.loads(d) for d in documents if b'"authorization_servers"' in d)
    assert resource["resource"] == f"{origin}/mcp"
    assert [url.rstrip("/") for url in resource["authorization_servers"]] == [origin + issuer_path]
    issuer = next(json.loads(d) for d in documents if b'"issuer"' in d)
    assert issuer["issuer"].rstrip("/") == origin + issuer_path and issuer["token_endpoint"] == f"{origin}{issuer_path}/token"
    upstream = cassette.header.server["url"].rsplit("/", 1)[0]
    assert cassette.header.labels["rewritten"].startswith(f"{upstream} -> {origin}")
    # lint knows the flow: the refused request's retry and the non-MCP exchanges are no findings
    linted = subprocess.run([*TAPES, "lint", str(cassette_path)], capture_output=True, text=True)
    assert linted.returncode == 0 and "no findings" in linted.stdout, linted.stdout + linted.stderr


def test_the_flow_replays_offline_with_the_live_results(recorded: tuple[Path, OAuthSession]) -> None:
    cassette, live = recorded
    replayed, _, code, stderr = _replayed_by(cassette, oauth_session)

    assert replayed.results == live.results
    assert code == 0, stderr
    assert re.search(r"played \d+ frames, 0 unmatched, 0 unused", stderr), stderr
    assert "authorization flow: served 6 of 6 recorded exchanges, 0 unmatched" in stderr, stderr
    # The replay handed out the recorded (redacted) token and accepted it; the redirect carried the
    # replaying client's own state.
    assert replayed.storage.tokens is not None and replayed.storage.tokens.access_token.startswith("<redacted:")
    redirect = replayed.browser.redirects[0]
    assert "state=" in redirect and redirect.split("state=")[1] not in live.browser.redirects[0]


def test_a_wrong_pkce_verifier_or_a_used_code_is_refused_in_replay(recorded: tuple[Path, OAuthSession]) -> None:
    """The authorization server's PKCE check still holds in replay: /token with a verifier that
    does not match the challenge of the /authorize that issued the code gets invalid_grant. The
    client here sends what the recorded one did, with a challenge of its own."""
    cassette_path, _ = recorded
    cassette = load(cassette_path)
    sent = {f.channel: f.payload for f in cassette.frames if f.from_client and f.kind is Kind.RAW}
    requests = {(f.info["method"], f.info["path"].split("?")[0]): f for f in cassette.frames if f.kind is Kind.HTTP_REQUEST}
    issuer_path = AS_PATHS[_issuer_kind(cassette_path)]
    register_body = sent[requests["POST", f"{issuer_path}/register"].channel]
    recorded_query = httpx.URL(requests["GET", f"{issuer_path}/authorize"].info["path"]).params
    with replay_server(cassette) as server, httpx.Client() as http:
        origin = server.url.rsplit("/", 1)[0]
        issuer = origin + issuer_path
        registered = http.post(f"{issuer}/register", content=register_body,
                               headers={"content-type": "application/json"}).json()
        query = dict(recorded_query) | {"state": "s1", "code_challenge": "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM",
                                        "resource": f"{origin}/mcp"}
        location = httpx.URL(http.get(f"{issuer}/authorize", params=query).headers["location"])
        assert location.params["state"] == "s1"
        form = {"grant_type": "authorization_code", "code": location.params["code"], "redirect_uri": query["redirect_uri"],
                "client_id": registered["client_id"], "client_secret": registered["client_secret"],
                "resource": f"{origin}/mcp"}
        wrong = http.post(f"{issuer}/token", data=form | {"code_verifier": "not-the-verifier"})
        right = http.post(f"{issuer}/token", data=form | {"code_verifier": "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk"})
        again = http.post(f"{issuer}/token", data=form | {"code_verifier": "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk"})
        fetched = http.get(f"{issuer}/token")
    assert wrong.status_code == 400 and wrong.json()["error"] == "invalid_grant", wrong.text
    assert "PKCE" in wrong.json()["error_description"]
    assert right.status_code == 200 and right.json()["access_token"].startswith("<redacted:"), right.text
    # a code is used once; /token takes no GET
    assert again.status_code == 400 and "used once" in again.json()["error_description"], again.text
    assert fetched.status_code == 405 and fetched.headers["allow"] == "POST", fetched.text


def test_no_token_or_secret_reaches_the_cassette_or_its_renderings(recorded: tuple[Path, OAuthSession], tmp_path: Path) -> None:
    cassette, live = recorded
    assert live.storage.tokens is not None and live.storage.client_info is not None
    code = httpx.URL(live.browser.redirects[0]).params["code"]
    secrets = [live.storage.tokens.access_token, live.storage.tokens.refresh_token, live.storage.client_info.client_secret,
               code]
    assert all(secrets)
    jsonl = tmp_path / "oauth.jsonl"
    subprocess.run([*TAPES, "export", str(cassette), "-o", str(jsonl)], check=True, capture_output=True)
    html = tmp_path / "oauth.html"
    subprocess.run([*TAPES, "view", str(cassette), "-o", str(html)], check=True, capture_output=True)
    show = subprocess.run([*TAPES, "show", str(cassette)], check=True, capture_output=True, text=True,
                          env={"COLUMNS": "1000", "PATH": "/usr/bin:/bin"}).stdout
    renderings = {"cassette": cassette.read_bytes().decode("latin-1"), "jsonl": jsonl.read_text(),
                  "view": json.dumps(model_of(html.read_text()), ensure_ascii=False), "show": show}  # the page as its script reads it
    assert "/token" in show and "<redacted:" in renderings["jsonl"]
    for name, text in renderings.items():
        for secret in secrets:
            assert secret not in text, f"a secret is in the {name}"


def test_tapes_redact_makes_an_unredacted_recording_safe_and_it_still_replays(tmp_path: Path) -> None:
    """Recorded with --no-redact, every secret is in the file; `tapes redact` takes them out of the
    headers, the redirect's query and the token bodies, and the flow replays offline from the result."""
    raw, safe = tmp_path / "raw.tape", tmp_path / "safe.tape"
    live = _record(raw, [], oauth_session, "127.0.0.1", "--no-redact")
    assert live.storage.tokens is not None and live.storage.client_info is not None
    code = httpx.URL(live.browser.redirects[0]).params["code"]
    secrets_seen = [live.storage.tokens.access_token, live.storage.tokens.refresh_token,
                    live.storage.client_info.client_secret, code]
    assert all(secret in raw.read_bytes().decode("latin-1") for secret in secrets_seen)
    redacting = subprocess.run([*TAPES, "redact", str(raw), "-o", str(safe)], capture_output=True, text=True, timeout=60)
    assert redacting.returncode == 0, redacting.stderr
    listing = redacting.stdout + redacting.stderr
    assert "body:" in listing and "header location:" in listing and "header Authorization:" in listing, listing
    written = safe.read_bytes().decode("latin-1")
    for secret in secrets_seen:
        assert secret not in written and secret not in listing
    with replay_server(safe) as replay:
        replayed = oauth_session(replay.url)
        lines = replay.report_lines
    assert replayed.results == live.results
    assert "authorization flow: served 6 of 6 recorded exchanges, 0 unmatched" in lines, lines


@pytest.mark.parametrize("issuer, upstream_host", [("same-origin", "127.0.0.1"), ("separate-issuer", "127.0.0.1"),
                                                   ("same-origin", "localhost")])
def test_the_typescript_client_records_and_replays_the_flow(issuer: str, upstream_host: str, tmp_path: Path) -> None:
    """The TypeScript SDK's OAuth client: its strict resource and issuer checks pass through the
    recorder (also when the upstream URL names the server localhost and its documents 127.0.0.1),
    and a fresh login against the replay gets the live results, with placeholders for the secrets
    it was handed."""
    cassette = tmp_path / "ts.tape"
    live = _record(cassette, ISSUERS[issuer], ts_oauth_session, upstream_host)
    replayed, _, code, stderr = _replayed_by(cassette, ts_oauth_session)

    assert replayed["results"] == live["results"] and live["results"][2][0]["text"] == "scopes=notes"
    assert code == 0, stderr
    assert re.search(r"authorization flow: served (\d+) of \1 recorded exchanges, 0 unmatched", stderr), stderr
    written = cassette.read_bytes().decode("latin-1")
    for secret in ("accessToken", "refreshToken", "clientSecret", "code"):
        assert live[secret] not in written and replayed[secret].startswith("<redacted:"), secret


@pytest.mark.parametrize("issuer", list(ISSUERS))
def test_mcp_remote_records_and_replays_the_flow(issuer: str, tmp_path: Path) -> None:
    """mcp-remote, the bridge of hosts that speak only stdio, logs in through the recorder with
    its own discovery, registration and browser login, and again against the replay, offline,
    from scratch (a fresh config directory): the same results, every recorded exchange served."""
    cassette = tmp_path / "mcp-remote.tape"
    live = _record(cassette, ISSUERS[issuer], mcp_remote_session)
    replayed, _, code, stderr = _replayed_by(cassette, mcp_remote_session)

    assert replayed["results"] == live["results"] and live["results"][2][0]["text"] == "scopes=notes"
    assert code == 0, stderr
    assert re.search(r"authorization flow: served (\d+) of \1 recorded exchanges, 0 unmatched", stderr), stderr
    assert len(live["redirects"]) == len(replayed["redirects"]) == 1  # one browser login each
    written = cassette.read_bytes().decode("latin-1")
    for secret in ("access_token", "refresh_token"):
        assert live["tokens"][secret] not in written and replayed["tokens"][secret].startswith("<redacted:"), secret


# What each client's login returns, in that client's own form.
LOGINS: dict[str, Callable[[str], list]] = {
    "python": lambda url: oauth_session(url).results,
    "ts": lambda url: ts_oauth_session(url)["results"],
    "remote": lambda url: mcp_remote_session(url)["results"],
}


@pytest.mark.parametrize(("recorder", "replayer"), [("python", "ts"), ("remote", "ts"), ("python", "remote"), ("ts", "python")])
def test_a_login_one_client_recorded_replays_to_another(recorder: str, replayer: str, tmp_path: Path) -> None:
    """Another client registers other metadata (its name, type, URIs), may authenticate at /token
    otherwise and send a state or not: the replay registers it under the recorded client_id, as
    the server registers any client, and it gets what it gets from the live server. (mcp-remote
    opens a throwaway session first: the recorded session is served again to its real one.)"""
    cassette = tmp_path / f"{recorder}.tape"
    _record(cassette, ISSUERS["separate-issuer"], LOGINS[recorder])
    live = _record(tmp_path / f"{replayer}.tape", ISSUERS["separate-issuer"], LOGINS[replayer])
    replayed, _, code, stderr = _replayed_by(cassette, LOGINS[replayer])

    assert replayed == live and live[2][0]["text"] == "scopes=notes"
    assert code == 0, stderr
    assert re.search(r"authorization flow: served (\d+) of \d+ recorded exchanges, 0 unmatched", stderr), stderr
    assert re.search(r"adapted POST /tapes-as/1/register: registered the live client's metadata, which differs from the "
                     r"recorded client's in \S.*, under the recorded client_id", stderr), stderr


def test_a_scope_step_up_replays_as_recorded(tmp_path: Path) -> None:
    """2025-11-25 scope step-up: a call made with a token without the scope it needs gets 403
    insufficient_scope; the client authorizes again for it and retries. In replay the call with
    the first (placeholder) token gets the 403 again, the second authorization hands out the
    second token, and the retried call gets the recorded result."""
    cassette = tmp_path / "step-up.tape"
    live = _record(cassette, [], functools.partial(oauth_session, step_up=True))
    assert live.results[3][0]["text"] == "the secret note, read with scopes=notes admin" and len(live.browser.redirects) == 2
    refusals = [f.info for f in load(cassette).frames if f.kind is Kind.HTTP_RESPONSE and f.info["status"] == 403]
    assert len(refusals) == 1 and 'error="insufficient_scope"' in str(refusals[0]["headers"])

    with replay_server(cassette) as replay:
        replayed = oauth_session(replay.url, step_up=True)
        lines = replay.report_lines
    assert replayed.results == live.results
    assert lines[-1] == "authorization flow: served 9 of 9 recorded exchanges, 0 unmatched", lines
    assert replayed.storage.tokens is not None and replayed.storage.tokens.scope == "notes admin"
    linted = subprocess.run([*TAPES, "lint", str(cassette)], capture_output=True, text=True)
    assert linted.returncode == 0, linted.stdout


def test_a_2025_03_26_server_without_resource_metadata(tmp_path: Path) -> None:
    """2025-03-26: no protected resource metadata (the client's probes get 404s, which are recorded
    and replayed too); the authorization server is found at the MCP server's origin."""
    cassette = tmp_path / "2025-03-26.tape"
    live = _record(cassette, ["--no-resource-metadata"], oauth_session)
    statuses = {(f.info["method"], f.info["path"].split("?")[0]): None for f in load(cassette).frames if f.kind is Kind.HTTP_REQUEST}
    assert ("GET", "/.well-known/oauth-authorization-server") in statuses and ("POST", "/register") in statuses
    with replay_server(cassette) as replay:
        replayed = oauth_session(replay.url)
        lines = replay.report_lines
    assert replayed.results == live.results and live.results[2][0]["text"] == "scopes=notes admin"
    assert re.fullmatch(r"authorization flow: served (\d+) of \1 recorded exchanges, 0 unmatched", lines[-1]), lines
    assert live.storage.tokens is not None and live.storage.tokens.access_token not in cassette.read_bytes().decode("latin-1")


def test_client_credentials_record_and_replay(tmp_path: Path) -> None:
    """The client_credentials grant (the SDK's ClientCredentialsOAuthProvider, client_secret_basic):
    no user and no redirect; the secret travels in a Basic header, which is redacted whole."""
    cassette = tmp_path / "machine.tape"
    secret = secrets.token_urlsafe(16)
    live = _record(cassette, ["--machine", f"robot:{secret}"], lambda url: machine_session(url, "robot", secret))
    assert live.results[1][0]["text"] == "scopes=notes"
    written = cassette.read_bytes()
    assert live.storage.tokens is not None
    for leaked in (secret, base64.b64encode(f"robot:{secret}".encode()).decode(), live.storage.tokens.access_token):
        assert leaked.encode() not in written
    with replay_server(cassette) as replay:
        replayed = machine_session(replay.url, "robot", secret)
        lines = replay.report_lines
    assert replayed.results == live.results
    assert lines[-1] == "authorization flow: served 4 of 4 recorded exchanges, 0 unmatched", lines


def test_a_client_id_metadata_document_replaces_registration(tmp_path: Path) -> None:
    """2025-11-25: the authorization server supports client ID metadata documents, so the client's
    id is its document's URL and there is no registration; the flow records and replays as such."""
    cassette = tmp_path / "cimd.tape"
    live = _record(cassette, ["--client-document", f"{CLIENT_DOCUMENT}={REDIRECT_URI}"],
                   functools.partial(oauth_session, document=CLIENT_DOCUMENT))
    assert live.storage.client_info is not None and live.storage.client_info.client_id == CLIENT_DOCUMENT
    paths = [f.info["path"] for f in load(cassette).frames if f.kind is Kind.HTTP_REQUEST]
    assert not any(path.startswith("/register") for path in paths)
    assert any(path.startswith("/authorize?") and "client_id=https%3A%2F%2Fclient.example" in path for path in paths)
    with replay_server(cassette) as replay:
        replayed = oauth_session(replay.url, document=CLIENT_DOCUMENT)
        lines = replay.report_lines
    assert replayed.results == live.results
    assert lines[-1] == "authorization flow: served 5 of 5 recorded exchanges, 0 unmatched", lines


@pytest.fixture(scope="module", params=[*ISSUERS, "separate-issuer over tls"])
def forwarded(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, OAuthSession, str]]:
    """A login and three calls recorded through `tapes record --proxy`: the client reaches the real
    origins through it (plain HTTP in absolute form; or HTTPS, which the recorder intercepts); the
    cassette, the live session, the MCP URL."""
    directory = tmp_path_factory.mktemp("forward")
    issuer, _, tls = request.param.partition(" over ")
    live, upstream = _record_through_proxy(directory / f"{issuer}.tape", ISSUERS[issuer], oauth_session,
                                           directory if tls else None)
    yield directory / f"{issuer}.tape", live, upstream


def _record_through_proxy(cassette: Path, server_flags: list[str], drive: Callable[..., T],
                          tls: Path | None = None) -> tuple[T, str]:
    """`drive(url, proxy=...)` run against a fresh oauth server through `tapes record --proxy`;
    what it returned, and the server's URL. With `tls` (a directory for the certificates), the
    server speaks HTTPS and the client trusts the recorder's CA."""
    ca, cert, key = make_certificates(tls) if tls else (None, None, None)
    server = Process([*OAUTH_SERVER, *server_flags, *(["--certfile", str(cert), "--keyfile", str(key)] if tls else [])])
    try:
        upstream = server.wait_for(r"oauth server listening on (\S+)")[1]
        recorder = Recorder(cassette, None, *(["--ca-dir", str(tls / "mitm"), "--upstream-ca", str(ca)] if tls else []))
        try:
            return drive(upstream, proxy=recorder.origin, ca=tls / "mitm" / CA_FILE if tls else None), upstream
        finally:
            recorder.stop()
    finally:
        server.stop()


def test_a_flow_recorded_through_the_forward_proxy_replays_offline(forwarded: tuple[Path, OAuthSession, str]) -> None:
    """Nothing was rewritten: the cassette names the MCP server's origin and the authorization
    server's. The replay derives what a reverse proxy would have made of them (the MCP server's
    origin becomes the replayer's, the other one the replayer's under /tapes-as/1), and a client
    pointed at the replayer logs in offline and gets the live results."""
    cassette, live, upstream = forwarded
    assert live.results[2][0]["text"] == "scopes=notes"
    recorded = load(cassette)
    assert recorded.header.server == {"proxy": True} and "rewritten" not in recorded.header.labels
    hosts = {header(f.info["headers"], "host") for f in recorded.frames if f.kind is Kind.HTTP_REQUEST}
    assert len(hosts) == len(ISSUERS[_issuer_kind(cassette)]) + 1 and upstream.split("/")[2] in hosts, hosts

    replayed, url, code, stderr = _replayed_by(cassette, oauth_session)

    assert url.endswith("/mcp") and replayed.results == live.results
    assert code == 0, stderr
    assert re.search(r"played \d+ frames, 0 unmatched, 0 unused", stderr), stderr
    assert "authorization flow: served 6 of 6 recorded exchanges, 0 unmatched" in stderr, stderr
    # the banner says which recorded origin is the MCP server's and where each one is served
    scheme = upstream.split(":")[0]  # recorded over TLS: named https:// by the flow, served over http://
    origin, issuer = url.removesuffix("/mcp"), f"; {scheme}" + r"://127\.0\.0\.1:\d+ -> " + re.escape(url.removesuffix("/mcp") + "/tapes-as/1")
    served = re.escape(f"tapes: the recorded origins are served as {upstream.removesuffix('/mcp')} -> {origin}")
    assert re.search(served + (issuer if ISSUERS[_issuer_kind(cassette)] else "") + "\n", stderr), stderr
    # the replay handed out the recorded (redacted) token, and the redirect carried the live state
    assert replayed.storage.tokens is not None and replayed.storage.tokens.access_token.startswith("<redacted:")
    redirect = replayed.browser.redirects[0]
    assert "state=" in redirect and redirect.split("state=")[1] not in live.browser.redirects[0]


def test_a_forward_proxy_recording_of_two_mcp_servers_is_refused(forwarded: tuple[Path, OAuthSession, str]) -> None:
    """JSON-RPC spoken to two origins (here the recording's MCP exchanges again, to another Host):
    which one the replay would be is not for it to guess."""
    cassette = load(forwarded[0])
    speaking = {f.channel for f in cassette.frames if f.from_client and f.kind is Kind.MESSAGE}
    other = [replace(f, channel=f"{f.channel}0", info=f.info | {"headers": [["Host", "mcp.example"]]})
             if f.kind is Kind.HTTP_REQUEST else replace(f, channel=f"{f.channel}0")
             for f in cassette.frames if f.channel in speaking]
    with pytest.raises(UserError, match=r"MCP traffic to several servers \(https?://127\.0\.0\.1:\d+, http://mcp\.example\)"):
        HttpReplayer(replace(cassette, frames=cassette.frames + other))


@pytest.mark.parametrize("flags, drive, exchanges", [
    (["--separate-issuer"], functools.partial(oauth_session, step_up=True), 9),
    (["--no-resource-metadata"], oauth_session, 7),
    (["--client-document", f"{CLIENT_DOCUMENT}={REDIRECT_URI}"], functools.partial(oauth_session, document=CLIENT_DOCUMENT), 5),
], ids=["step-up-separate-issuer", "2025-03-26", "client-document"])
def test_the_other_flows_recorded_through_the_forward_proxy_replay(flags: list[str], drive: Callable[..., OAuthSession],
                                                                   exchanges: int, tmp_path: Path) -> None:
    """A scope step-up against an authorization server on another origin, a 2025-03-26 server (the
    authorization server found at the MCP server's origin) and a client ID metadata document, each
    recorded through `--proxy` and replayed offline."""
    cassette = tmp_path / "forward.tape"
    live, _ = _record_through_proxy(cassette, flags, drive)
    with replay_server(cassette) as replay:
        replayed = drive(replay.url)
        lines = replay.report_lines
    assert replayed.results == live.results and live.results[2][0]["text"].startswith("scopes=notes")
    assert lines[-1] == f"authorization flow: served {exchanges} of {exchanges} recorded exchanges, 0 unmatched", lines
