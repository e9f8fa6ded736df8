"""The official SDKs' OAuth clients run headless. Python: `mcp.client.auth.OAuthClientProvider`,
whose redirect handler reads the /authorize redirect with an HTTP client instead of a browser and
hands the code and state it carried to its callback handler. TypeScript: tests/peers/
ts_oauth_client.mjs, the same with the SDK's OAuthClientProvider interface. mcp-remote: as its
users run it, opening a browser, here a program (`BROWSER`) that follows the /authorize redirect
to mcp-remote's own callback server."""

from __future__ import annotations

import json
import shutil
import ssl
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import anyio
import httpx2
from mcp import Client, StdioServerParameters
from mcp.client.auth import OAuthClientProvider
from mcp.client.auth.extensions.client_credentials import ClientCredentialsOAuthProvider
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import AuthorizationCodeResult, OAuthClientInformationFull, OAuthClientMetadata, OAuthToken

from tests.support.interop import mcp_remote
from tests.support.paths import PEERS
from tests.support.processes import TIMEOUT

REDIRECT_URI = "http://127.0.0.1:9/callback"  # never reached: the redirect handler reads the Location
CLIENT_DOCUMENT = "https://client.example/tapes/oauth-client.json"  # a client ID metadata document's URL


@dataclass
class MemoryStorage:
    """The SDK's TokenStorage, in memory: a fresh one is a client that never logged in."""

    tokens: OAuthToken | None = None
    client_info: OAuthClientInformationFull | None = None

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client_info

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client_info = client_info


@dataclass
class HeadlessBrowser:
    """Plays the user's browser: opens the authorization URL and reads where it redirects."""

    redirects: list[str] = field(default_factory=list)
    proxy: str | None = None
    verify: ssl.SSLContext | bool = True

    async def open(self, authorization_url: str) -> None:
        async with httpx2.AsyncClient(proxy=self.proxy, verify=self.verify) as http:
            response = await http.get(authorization_url, follow_redirects=False)
        assert response.status_code in (302, 303, 307), (response.status_code, response.text)
        self.redirects.append(response.headers["location"])

    async def callback(self) -> AuthorizationCodeResult:
        query = parse_qs(urlsplit(self.redirects[-1]).query)
        return AuthorizationCodeResult(code=query["code"][0], state=query.get("state", [None])[0],
                                       iss=query.get("iss", [None])[0])


@dataclass
class OAuthSession:
    """What a logged-in session returned, and what the client holds afterwards."""

    results: list[Any]
    storage: MemoryStorage
    browser: HeadlessBrowser


def oauth_provider(url: str, storage: MemoryStorage, browser: HeadlessBrowser, document: str | None = None) -> OAuthClientProvider:
    metadata = OAuthClientMetadata(
        client_name="tapes oauth test",
        redirect_uris=[REDIRECT_URI],
        grant_types=["authorization_code", "refresh_token"],
        response_types=["code"],
        token_endpoint_auth_method="client_secret_post",
    )
    return OAuthClientProvider(url, metadata, storage, redirect_handler=browser.open, callback_handler=browser.callback,
                               client_metadata_url=document)


async def _session(url: str, step_up: bool, document: str | None, proxy: str | None, ca: Path | None) -> OAuthSession:
    verify = ssl.create_default_context(cafile=str(ca)) if ca else True
    storage, browser = MemoryStorage(), HeadlessBrowser(proxy=proxy, verify=verify)
    async with httpx2.AsyncClient(auth=oauth_provider(url, storage, browser, document), follow_redirects=True,
                                  proxy=proxy, verify=verify) as http:
        async with Client(streamable_http_client(url, http_client=http)) as client:
            calls = [await client.call_tool("echo", {"text": "hello through OAuth"}), await client.call_tool("whoami", {})]
            if step_up:
                calls.append(await client.call_tool("secret_note", {}))
            tools = await client.list_tools()
    results = [sorted(tool.name for tool in tools.tools), *([c.model_dump(mode="json") for c in call.content] for call in calls)]
    return OAuthSession(results, storage, browser)


def oauth_session(url: str, step_up: bool = False, document: str | None = None, proxy: str | None = None,
                  ca: Path | None = None) -> OAuthSession:
    """Log in to the MCP server at `url` from scratch (discovery, registration, authorization code
    with PKCE, token), call two of its tools, and list them. With `step_up`, call secret_note too,
    which needs a scope the first token lacks: 403 insufficient_scope, a second authorization.
    With `document`, the client's id is that client ID metadata document URL (no registration
    when the server supports them). With `proxy`, the client and its browser reach every origin
    through that HTTP proxy (a forward-proxy recorder); with `ca`, they trust that CA's certificates
    (the recorder's, which intercepts TLS)."""
    return anyio.run(_session, url, step_up, document, proxy, ca)


async def _machine_session(url: str, client_id: str, secret: str) -> OAuthSession:
    storage = MemoryStorage()
    issuer = url.split("/mcp", 1)[0]  # the authorization server is the MCP server's origin
    provider = ClientCredentialsOAuthProvider(url, storage, client_id, secret, scope="notes", issuer=issuer)
    async with httpx2.AsyncClient(auth=provider) as http:
        async with Client(streamable_http_client(url, http_client=http)) as client:
            calls = [await client.call_tool("echo", {"text": "hello, machine"}), await client.call_tool("whoami", {})]
    return OAuthSession([[c.model_dump(mode="json") for c in call.content] for call in calls], storage, HeadlessBrowser())


def machine_session(url: str, client_id: str, secret: str) -> OAuthSession:
    """The SDK's client_credentials provider (client_secret_basic): no user, no redirect."""
    return anyio.run(_machine_session, url, client_id, secret)


def ts_oauth_session(url: str) -> dict[str, Any]:
    """The TypeScript SDK's client logging in to `url` from scratch and making the same calls:
    {"results": [...], "accessToken", "refreshToken", "clientSecret", "code"}."""
    node = shutil.which("node")
    assert node is not None, "node is not installed"
    done = subprocess.run([node, str(PEERS / "ts_oauth_client.mjs"), url], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


# The user's browser for mcp-remote: it opens the authorization URL, which the test server approves
# at once, and follows the redirect to mcp-remote's callback server, as a browser would. mcp-remote
# opens the browser before its callback server listens (a person is slower than that): the
# callback is tried again while its port refuses, for up to 20 s.
_BROWSER = """
import sys, time, httpx
authorization = httpx.get(sys.argv[1])
assert authorization.status_code in (302, 303, 307), authorization
with open(sys.argv[0] + ".redirects", "a") as redirects:
    print(authorization.headers["location"], file=redirects)
for attempt in range(200):
    try:
        httpx.get(authorization.headers["location"]).raise_for_status()
        break
    except httpx.ConnectError:
        time.sleep(0.1)
else:
    sys.exit("mcp-remote's callback server never listened")
"""


async def _mcp_remote_session(url: str, config: Path, browser: Path) -> list[Any]:
    server = mcp_remote(url, "http-first", str(config), browser)
    with anyio.fail_after(TIMEOUT * 3):
        async with Client(StdioServerParameters(command=server[0], args=server[1:]), mode="legacy") as client:
            calls = [await client.call_tool("echo", {"text": "hello through OAuth"}), await client.call_tool("whoami", {})]
            tools = await client.list_tools()
    return [sorted(tool.name for tool in tools.tools), *([c.model_dump(mode="json") for c in call.content] for call in calls)]


def mcp_remote_session(url: str) -> dict[str, Any]:
    """mcp-remote logging in to `url` from scratch (its own discovery, registration and login
    through the browser) and making the calls of `oauth_session` for the Python SDK's client in
    front of it: {"results": [...], "redirects": [the /authorize redirects], "tokens": {what it stored}}."""
    with tempfile.TemporaryDirectory() as home:
        browser = Path(home) / "browser"
        browser.write_text(f"#!{sys.executable}\n{_BROWSER}")
        browser.chmod(0o755)
        results = anyio.run(_mcp_remote_session, url, Path(home) / "config", browser)
        [tokens] = (Path(home) / "config").rglob("*_tokens.json")
        return {"results": results, "redirects": Path(f"{browser}.redirects").read_text().split(),
                "tokens": json.loads(tokens.read_text())}
