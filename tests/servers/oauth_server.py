"""An OAuth-protected MCP server written with the official Python SDK (`mcp.server.auth`): the MCP
endpoint /mcp is a protected resource, and the same origin is its authorization server (metadata,
dynamic client registration, /authorize, /token), run over Streamable HTTP on 127.0.0.1.

    python tests/servers/oauth_server.py [--port N] [--separate-issuer | --no-resource-metadata]
                                         [--certfile PEM --keyfile PEM]

With --separate-issuer the authorization server has an origin of its own (a second port, same
process and provider), and the MCP server only verifies the tokens it issued; it prints
`authorization server listening on http://127.0.0.1:PORT` besides the usual line.

With --no-resource-metadata it is a 2025-03-26 server: no protected resource metadata and no
`resource_metadata` in its 401, so a client finds the authorization server at the MCP server's
origin (its metadata, or the default endpoints /authorize, /token, /register).

The authorization server approves every request at once (no login page): /authorize redirects
straight back to the client's redirect_uri with a fresh code, so a headless client completes the
flow. Codes, tokens and client secrets are random, as a real server's are. The server's own checks
are the SDK's: PKCE S256 at /token, the redirect_uri, the registered client's secret; and tokens
are bound to the `resource` the client asked for (validate_token_resource).

--client-document URL=REDIRECT_URI makes it a 2025-11-25 server that supports client ID metadata
documents (`client_id_metadata_document_supported`): the client whose id is URL needs no
registration. The test server does not fetch the document; it takes it to name REDIRECT_URI.

--machine ID:SECRET registers a client for the client_credentials grant (which the SDK's token
handler lacks: it is added in front of it).

- `echo(text)`     returns the text
- `whoami()`       the scopes of the token the call was made with
- `secret_note()`  needs the `admin` scope besides `notes`: called with a token without it, the
                   server answers 403 with `WWW-Authenticate: Bearer error="insufficient_scope"`
                   naming the scopes needed (2025-11-25 scope step-up), and the client authorizes
                   again for them
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import secrets
import sys
import time
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, unquote

sys.path.insert(0, str(Path(__file__).resolve().parent))

from mcp.server.auth.middleware.auth_context import get_access_token  # noqa: E402
from mcp.server.auth.provider import (  # noqa: E402
    AccessToken,
    AuthorizationCode,
    AuthorizationParams,
    ProviderTokenVerifier,
    RefreshToken,
    construct_redirect_uri,
)
from mcp.server.auth.routes import create_auth_routes  # noqa: E402
from mcp.server.auth.settings import AuthSettings, ClientRegistrationOptions  # noqa: E402
from mcp.server.mcpserver import MCPServer  # noqa: E402
from mcp.shared.auth import OAuthClientInformationFull, OAuthToken  # noqa: E402
from serving import listening_socket, serve  # noqa: E402
from pydantic import AnyHttpUrl  # noqa: E402
from starlette.applications import Starlette  # noqa: E402

SCOPE = "notes"
ADMIN = "admin"
STEP_UP_TOOL = "secret_note"


class ApprovingProvider:
    """An in-memory authorization server that approves every authorization request."""

    def __init__(self, documents: dict[str, str] | None = None) -> None:
        self.clients: dict[str, OAuthClientInformationFull] = {}
        for url, redirect_uri in (documents or {}).items():  # client ID metadata documents, as if fetched
            self.clients[url] = OAuthClientInformationFull(
                client_id=url, redirect_uris=[redirect_uri], token_endpoint_auth_method="none",  # type: ignore[list-item]
                grant_types=["authorization_code", "refresh_token"], response_types=["code"], scope=f"{SCOPE} {ADMIN}")
        self.codes: dict[str, AuthorizationCode] = {}
        self.tokens: dict[str, AccessToken] = {}
        self.refresh_tokens: dict[str, RefreshToken] = {}

    async def get_client(self, client_id: str) -> OAuthClientInformationFull | None:
        return self.clients.get(client_id)

    async def register_client(self, client_info: OAuthClientInformationFull) -> None:
        assert client_info.client_id is not None
        # every client may ask for every scope later (a step-up asks for admin)
        self.clients[client_info.client_id] = client_info.model_copy(update={"scope": f"{SCOPE} {ADMIN}"})

    async def authorize(self, client: OAuthClientInformationFull, params: AuthorizationParams) -> str:
        code = secrets.token_urlsafe(24)
        assert client.client_id is not None
        self.codes[code] = AuthorizationCode(
            code=code,
            scopes=params.scopes or [SCOPE],
            expires_at=time.time() + 300,
            client_id=client.client_id,
            code_challenge=params.code_challenge,
            redirect_uri=params.redirect_uri,
            redirect_uri_provided_explicitly=params.redirect_uri_provided_explicitly,
            resource=params.resource,
        )
        return construct_redirect_uri(str(params.redirect_uri), code=code, state=params.state)

    async def load_authorization_code(self, client: OAuthClientInformationFull, authorization_code: str) -> AuthorizationCode | None:
        return self.codes.get(authorization_code)

    async def exchange_authorization_code(self, client: OAuthClientInformationFull, authorization_code: AuthorizationCode) -> OAuthToken:
        del self.codes[authorization_code.code]
        return self.issue(authorization_code.client_id, authorization_code.scopes, authorization_code.resource)

    async def load_refresh_token(self, client: OAuthClientInformationFull, refresh_token: str) -> RefreshToken | None:
        return self.refresh_tokens.get(refresh_token)

    async def exchange_refresh_token(self, client: OAuthClientInformationFull, refresh_token: RefreshToken, scopes: list[str]) -> OAuthToken:
        del self.refresh_tokens[refresh_token.token]
        return self.issue(refresh_token.client_id, scopes or refresh_token.scopes, refresh_token.resource)

    async def load_access_token(self, token: str) -> AccessToken | None:
        return self.tokens.get(token)

    async def revoke_token(self, token: AccessToken | RefreshToken) -> None:
        self.tokens.pop(getattr(token, "token", ""), None)

    def issue(self, client_id: str, scopes: list[str], resource: str | None, refresh: bool = True) -> OAuthToken:
        access = secrets.token_urlsafe(32)
        self.tokens[access] = AccessToken(token=access, client_id=client_id, scopes=scopes, resource=resource)
        if not refresh:
            return OAuthToken(access_token=access, token_type="Bearer", expires_in=3600, scope=" ".join(scopes))
        refresh_token = secrets.token_urlsafe(32)
        self.refresh_tokens[refresh_token] = RefreshToken(token=refresh_token, client_id=client_id, scopes=scopes,
                                                          resource=resource)
        return OAuthToken(access_token=access, token_type="Bearer", expires_in=3600, scope=" ".join(scopes),
                          refresh_token=refresh_token)


REGISTRATION = ClientRegistrationOptions(enabled=True, valid_scopes=[SCOPE, ADMIN], default_scopes=[SCOPE])


def make_server(origin: str, provider: ApprovingProvider, issuer: str | None = None,
                resource_metadata: bool = True) -> MCPServer:
    """The MCP server; its own authorization server too unless `issuer` names another origin."""
    settings = AuthSettings(issuer_url=issuer or origin, resource_server_url=f"{origin}/mcp" if resource_metadata else None,
                            required_scopes=[SCOPE], validate_token_resource=resource_metadata,
                            client_registration_options=REGISTRATION)
    if issuer is None:
        server = MCPServer(name="oauth-notes", version="1.0.0", log_level="WARNING", auth_server_provider=provider,
                           auth=settings)
    else:
        server = MCPServer(name="oauth-notes", version="1.0.0", log_level="WARNING",
                           token_verifier=ProviderTokenVerifier(provider), auth=settings)

    @server.tool(description="Return the text.")
    def echo(text: str) -> str:
        return text

    @server.tool(description="The scopes of the caller's token.")
    def whoami() -> str:
        token = get_access_token()
        return "anonymous" if token is None else f"scopes={' '.join(token.scopes)}"

    @server.tool(description="A note only the admin scope may read.")
    def secret_note() -> str:
        token = get_access_token()
        return f"the secret note, read with scopes={' '.join(token.scopes) if token else ''}"

    return server


Answer = tuple[int, list[tuple[bytes, bytes]], bytes]


def _with_body(app: Any, answer: Any) -> Any:
    """An ASGI app that reads a POST's body, lets `answer(scope, body)` answer it (an Answer) or
    not (None), and otherwise hands the request with its body on to `app`."""

    async def wrapped(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["method"] != "POST":
            return await app(scope, receive, send)
        chunks, more = [], True
        while more:
            message = await receive()
            chunks.append(message.get("body", b""))
            more = message.get("more_body", False)
        body = b"".join(chunks)
        answered = answer(scope, body)
        if answered is not None:
            status, headers, content = answered
            await send({"type": "http.response.start", "status": status, "headers": headers})
            await send({"type": "http.response.body", "body": content})
            return
        pending = [{"type": "http.request", "body": body, "more_body": False}]

        async def replayed() -> dict[str, Any]:  # the body once more, then the connection's own events
            return pending.pop() if pending else await receive()

        await app(scope, replayed, send)

    return wrapped


def step_up(app: Any, provider: ApprovingProvider, origin: str) -> Any:
    """The MCP app, answering a call of STEP_UP_TOOL made with a token without the admin scope
    with 403 insufficient_scope (the SDK's middleware checks one scope set per endpoint only)."""
    challenge = (f'Bearer error="insufficient_scope", scope="{SCOPE} {ADMIN}", '
                 f'resource_metadata="{origin}/.well-known/oauth-protected-resource/mcp", '
                 f'error_description="{STEP_UP_TOOL} needs the {ADMIN} scope"').encode()

    def answer(scope: dict[str, Any], body: bytes) -> Answer | None:
        try:
            request = json.loads(body)
        except ValueError:
            return None
        authorization = dict(scope["headers"]).get(b"authorization", b"").decode()
        token = provider.tokens.get(authorization.removeprefix("Bearer "))
        if (isinstance(request, dict) and request.get("method") == "tools/call"
                and (request.get("params") or {}).get("name") == STEP_UP_TOOL and token is not None
                and ADMIN not in token.scopes):
            return 403, [(b"www-authenticate", challenge), (b"content-type", b"application/json")], b'{"error":"insufficient_scope"}'
        return None

    return _with_body(app, answer)


def advertising_documents(app: Any) -> Any:
    """The app, its authorization server metadata saying client_id_metadata_document_supported."""

    async def wrapped(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http" or not scope["path"].startswith("/.well-known/oauth-authorization-server"):
            return await app(scope, receive, send)
        start: dict[str, Any] = {}

        async def patched(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                start.update(message)
                return
            document = json.loads(message["body"]) | {"client_id_metadata_document_supported": True}
            body = json.dumps(document).encode()
            headers = [(k, v) for k, v in start["headers"] if k.lower() != b"content-length"]
            await send({**start, "headers": [*headers, (b"content-length", str(len(body)).encode())]})
            await send({"type": "http.response.body", "body": body})

        await app(scope, receive, patched)

    return wrapped


def client_credentials(app: Any, provider: ApprovingProvider, machines: dict[str, str]) -> Any:
    """The authorization server's app, with the client_credentials grant at /token (the SDK's
    token handler has none) for the pre-registered `machines` {client_id: secret}, authenticated
    with client_secret_basic or client_secret_post."""

    def answer(scope: dict[str, Any], body: bytes) -> Answer | None:
        form = dict(parse_qsl(body.decode("latin-1")))
        if scope["path"] != "/token" or form.get("grant_type") != "client_credentials":
            return None
        client_id, secret = form.get("client_id"), form.get("client_secret")
        basic = dict(scope["headers"]).get(b"authorization", b"").decode()
        if basic.startswith("Basic "):
            client_id, _, secret = base64.b64decode(basic[6:]).decode().partition(":")
            client_id, secret = unquote(client_id), unquote(secret)
        json_type = [(b"content-type", b"application/json"), (b"cache-control", b"no-store")]
        if client_id not in machines or not secrets.compare_digest(machines[client_id], secret or ""):
            return 401, json_type, b'{"error":"invalid_client"}'
        token = provider.issue(client_id, (form.get("scope") or SCOPE).split(), form.get("resource"), refresh=False)
        return 200, json_type, token.model_dump_json(exclude_none=True).encode()

    return _with_body(app, answer)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--separate-issuer", action="store_true", help="the authorization server on a port of its own")
    parser.add_argument("--no-resource-metadata", action="store_true", help="a 2025-03-26 server: no resource metadata")
    parser.add_argument("--client-document", action="append", default=[], metavar="URL=REDIRECT_URI",
                        help="a client ID metadata document the server trusts (2025-11-25)")
    parser.add_argument("--machine", action="append", default=[], metavar="ID:SECRET",
                        help="a client that may use the client_credentials grant")
    parser.add_argument("--certfile", help="serve HTTPS (both servers) with this certificate (chain) PEM")
    parser.add_argument("--keyfile", help="and this private key PEM")
    args = parser.parse_args()
    tls = {"certfile": args.certfile, "keyfile": args.keyfile}
    scheme = "https" if args.certfile else "http"
    sock = listening_socket(args.port)
    origin = f"{scheme}://127.0.0.1:{sock.getsockname()[1]}"
    provider = ApprovingProvider(dict(document.split("=", 1) for document in args.client_document))
    machines = dict(machine.split(":", 1) for machine in args.machine)
    if not args.separate_issuer:
        server = make_server(origin, provider, resource_metadata=not args.no_resource_metadata)
        app = client_credentials(step_up(server.streamable_http_app(), provider, origin), provider, machines)
        serve(advertising_documents(app) if args.client_document else app, "oauth server", sock=sock, **tls)
        return
    issuer_sock = listening_socket()
    # with its root path written: the SDK writes it so in the protected resource metadata
    issuer = f"{scheme}://127.0.0.1:{issuer_sock.getsockname()[1]}/"
    authorization_server = client_credentials(Starlette(routes=create_auth_routes(
        provider, issuer_url=AnyHttpUrl(issuer), client_registration_options=REGISTRATION)), provider, machines)  # type: ignore[arg-type]
    mcp_app = step_up(make_server(origin, provider, issuer).streamable_http_app(), provider, origin)

    async def both() -> None:
        await asyncio.gather(
            asyncio.to_thread(serve, authorization_server, "authorization server", sock=issuer_sock, path="", **tls),
            asyncio.to_thread(serve, mcp_app, "oauth server", sock=sock, **tls),
        )

    asyncio.run(both())


if __name__ == "__main__":
    main()
