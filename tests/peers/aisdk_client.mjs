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
import { TIMEOUT_MS, scenarioSteps, stable } from "./scenario.mjs";
import { createMCPClient } from "@ai-sdk/mcp";
import { Experimental_StdioMCPTransport } from "@ai-sdk/mcp/mcp-stdio";

const UNSUPPORTED = new Set(["logging/setLevel"]);

function transportFor(kind, target) {
  if (kind === "stdio") {
    return new Experimental_StdioMCPTransport({ command: target[0], args: target.slice(1), stderr: "inherit" });
  }
  if (kind === "http") return { type: kind, url: target[0], fetch: sessionlessGetAnsweredFirst() };
  if (kind === "sse") return { type: kind, url: target[0] };
  throw new Error(`unknown transport ${kind}`);
}

// The client opens its GET stream before it has initialized, and takes the Mcp-Session-Id of every
// answer, the refusal of that GET included: the Python SDK stamps its 400 with a session it opened
// for the GET and dropped. Should that 400 come in after the initialize answer, the client goes on
// with the dropped session (404 Session not found). What is sent is left as it is; the answers to
// the requests sent after a GET without a session reach the client after that GET's answer, as
// they do on an idle machine (tests/servers/late_refusal_server.py makes the other order certain).
function sessionlessGetAnsweredFirst() {
  const pending = [];
  return (url, init) => {
    const answer = fetch(url, init);
    answer.catch(() => undefined); // a failure is the caller's to see, not an unhandled rejection while it waits
    if (init.method === "GET" && !init.headers["mcp-session-id"]) {
      pending.push(answer.catch(() => undefined));
      return answer;
    }
    return Promise.all(pending).then(() => answer);
  };
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
const steps = scenarioSteps(scenarioName);

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
