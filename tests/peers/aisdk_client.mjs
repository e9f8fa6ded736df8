// The Vercel AI SDK's MCP client (@ai-sdk/mcp, its own implementation of the protocol, not the
// official SDK) running one fixed scenario (tests/peers/scenarios.json), printing what it got as
// one canonical JSON document on stdout, as ts_client.mjs does.
//
//   node aisdk_client.mjs SCENARIO stdio COMMAND [ARGS...]
//   node aisdk_client.mjs SCENARIO http URL        (Streamable HTTP)
//   node aisdk_client.mjs SCENARIO sse URL         (legacy HTTP+SSE)
//
// With AISDK_PROBE=1 it connects as it does by default, probing with server/discover first (on
// stdio and Streamable HTTP; its SSE transport initializes at once); else it initializes.
//
// Tools are called as an AI SDK app calls them: through the `execute` of the tools built from the
// listed definitions. The client has no call for logging/setLevel (it refuses any method outside
// tools, resources, prompts and completions), so that step is left out; it never asks for progress
// (no progressToken), so a progress step reports the progress notifications that reached it anyway.
import { readFileSync } from "node:fs";
import { createMCPClient } from "@ai-sdk/mcp";
import { Experimental_StdioMCPTransport } from "@ai-sdk/mcp/mcp-stdio";

const TIMEOUT_MS = 30000;
const UNSUPPORTED = new Set(["logging/setLevel"]);

function transportFor(kind, target) {
  if (kind === "stdio") {
    return new Experimental_StdioMCPTransport({ command: target[0], args: target.slice(1), stderr: "inherit" });
  }
  if (kind === "http" || kind === "sse") return { type: kind, url: target[0] };
  throw new Error(`unknown transport ${kind}`);
}

function stable(value) {
  if (Array.isArray(value)) return value.map(stable);
  if (value && typeof value === "object") {
    return Object.fromEntries(
      Object.keys(value)
        .filter((key) => key !== "_meta")
        .sort()
        .map((key) => [key, stable(value[key])]),
    );
  }
  return value;
}

async function run(client, step) {
  const options = { timeout: TIMEOUT_MS };
  switch (step.method) {
    case "tools/list":
      listed = await client.listTools({ options });
      return listed;
    case "tools/call": {
      const tool = client.toolsFromDefinitions(listed)[step.name];
      progressSeen.length = 0;
      const result = await tool.execute(step.arguments, { toolCallId: `call-${step.name}`, messages: [] });
      return step.progress ? { result, progress: progressSeen.map((p) => [p.progress, p.total ?? null]) } : result;
    }
    case "resources/list":
      return await client.listResources({ options });
    case "resources/read":
      return await client.readResource({ uri: step.uri, options });
    case "prompts/list":
      return await client.listPrompts({ options });
    case "prompts/get":
      return await client.getPrompt({ name: step.name, arguments: step.arguments, options });
    default:
      throw new Error(`the scenario has a step this client cannot run: ${step.method}`);
  }
}

const [scenarioName, kind, ...target] = process.argv.slice(2);
const here = new URL(".", import.meta.url);
const steps = JSON.parse(readFileSync(new URL("scenarios.json", here), "utf8"))[scenarioName];
if (!steps) throw new Error(`no scenario ${scenarioName}`);

const client = await createMCPClient({
  transport: transportFor(kind, target),
  clientName: "mcp-tapes-aisdk-client",
  protocolVersionDiscovery: process.env.AISDK_PROBE === "1",
  initializationOptions: { timeout: TIMEOUT_MS },
  onUncaughtError: (error) => process.stderr.write(`aisdk client: ${error}\n`),
});
// what reached the client, read off its transport (it reports a notification only as an error)
let listed;
const progressSeen = [];
const deliver = client.transport.onmessage;
client.transport.onmessage = (message) => {
  if (message.method === "notifications/progress") progressSeen.push(message.params);
  deliver(message);
};
const out = {
  session: { server: client.serverInfo, capabilities: client.initializeResult.capabilities },
  steps: [],
};
for (const step of steps.filter((step) => !UNSUPPORTED.has(step.method))) {
  out.steps.push({ method: step.method, result: await run(client, step) });
}
await client.close();
process.stdout.write(JSON.stringify(stable(out)) + "\n");
