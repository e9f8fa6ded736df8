// The official TypeScript SDK client (1.x, which opens with initialize) calling the notes server's
// tools that need input from the client: ask_model (sampling) and list_client_roots (roots). It
// answers the server's requests itself and prints the tool results as JSON on stdout.
//
//   node input_client.mjs COMMAND [ARGS...]      (a stdio server)
//   node input_client.mjs http://HOST:PORT/mcp   (a Streamable HTTP server)
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { CreateMessageRequestSchema, ListRootsRequestSchema } from "@modelcontextprotocol/sdk/types.js";
import { TIMEOUT_MS } from "./scenario.mjs";

const [command, ...args] = process.argv.slice(2);
const client = new Client({ name: "input-client", version: "1.0.0" }, { capabilities: { sampling: {}, roots: {} } });
client.setRequestHandler(CreateMessageRequestSchema, async (request) => ({
  role: "assistant", model: "tapes-test-model", stopReason: "endTurn",
  content: { type: "text", text: `You asked: ${request.params.messages[0].content.text}` },
}));
client.setRequestHandler(ListRootsRequestSchema, async () => ({ roots: [{ uri: "file:///elsewhere", name: "elsewhere" }] }));
await client.connect(/^https?:/.test(command) ? new StreamableHTTPClientTransport(new URL(command))
  : new StdioClientTransport({ command, args, stderr: "inherit" }));
const results = {};
for (const [name, args] of [["ask_model", { question: "Which note is the oldest?" }], ["list_client_roots", {}]]) {
  results[name] = (await client.callTool({ name, arguments: args }, undefined, { timeout: TIMEOUT_MS })).content;
}
process.stdout.write(JSON.stringify(results) + "\n");
await client.close();
