// The official TypeScript SDK's OAuth client (an OAuthClientProvider on the Streamable HTTP
// transport) logging in to an OAuth-protected MCP server headless: the "browser" is a fetch of the
// authorization URL that reads the redirect's Location instead of following it. Then it lists the
// tools and calls echo and whoami, and prints one JSON document on stdout:
//
//   node ts_oauth_client.mjs URL
//   -> {"results": [...], "accessToken": "...", "refreshToken": "...", "clientSecret": "...", "code": "..."}
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { UnauthorizedError } from "@modelcontextprotocol/sdk/client/auth.js";

const REDIRECT_URI = "http://127.0.0.1:9/callback"; // never reached: the Location is read instead

class HeadlessProvider {
  constructor() {
    this.saved = {};
    this.redirect = undefined;
  }
  get redirectUrl() { return REDIRECT_URI; }
  get clientMetadata() {
    return {
      client_name: "tapes ts oauth test",
      redirect_uris: [REDIRECT_URI],
      grant_types: ["authorization_code", "refresh_token"],
      response_types: ["code"],
      token_endpoint_auth_method: "client_secret_post",
    };
  }
  clientInformation() { return this.saved.client; }
  saveClientInformation(client) { this.saved.client = client; }
  tokens() { return this.saved.tokens; }
  saveTokens(tokens) { this.saved.tokens = tokens; }
  saveCodeVerifier(verifier) { this.saved.verifier = verifier; }
  codeVerifier() { return this.saved.verifier; }
  async redirectToAuthorization(url) {
    const response = await fetch(url, { redirect: "manual" });
    if (response.status < 300 || response.status >= 400) throw new Error(`authorize answered ${response.status}`);
    this.redirect = new URL(response.headers.get("location"));
  }
}

async function connect(url, provider) {
  const client = new Client({ name: "tapes-ts-oauth", version: "1.0.0" });
  await client.connect(new StreamableHTTPClientTransport(new URL(url), { authProvider: provider }));
  return client;
}

const url = process.argv[2];
const provider = new HeadlessProvider();
let client;
try {
  client = await connect(url, provider);
} catch (error) {
  if (!(error instanceof UnauthorizedError) || !provider.redirect) throw error;
  const transport = new StreamableHTTPClientTransport(new URL(url), { authProvider: provider });
  await transport.finishAuth(provider.redirect.searchParams.get("code"));
  client = new Client({ name: "tapes-ts-oauth", version: "1.0.0" });
  await client.connect(transport);
}
const tools = await client.listTools();
const echoed = await client.callTool({ name: "echo", arguments: { text: "hello through OAuth" } });
const who = await client.callTool({ name: "whoami", arguments: {} });
await client.close();
process.stdout.write(JSON.stringify({
  results: [tools.tools.map((tool) => tool.name).sort(), echoed.content, who.content],
  accessToken: provider.saved.tokens.access_token,
  refreshToken: provider.saved.tokens.refresh_token,
  clientSecret: provider.saved.client.client_secret,
  code: provider.redirect.searchParams.get("code"),
  state: provider.redirect.searchParams.get("state"),
}) + "\n");
