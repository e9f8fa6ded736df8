// The official TypeScript SDK client running one fixed scenario (tests/peers/scenarios.json)
// against an MCP server, printing what it got as one canonical JSON document on stdout.
//
//   node ts_client.mjs SCENARIO stdio COMMAND [ARGS...]
//   node ts_client.mjs SCENARIO http URL        (Streamable HTTP)
//   node ts_client.mjs SCENARIO sse URL         (legacy HTTP+SSE)
//
// Every request is awaited before the next, as the SDK's users do; the SDK opens its standalone
// GET stream only after its `initialized` notification was accepted. `_meta` is left out of
// results (it carries per-connection stamps, not results).
//
// With TS_SDK=2 it runs the SDK's 2.x line (`@modelcontextprotocol/client`), whose client has the
// same API under other module names (but for callTool's arguments).
import { TIMEOUT_MS, scenarioSteps, stable } from "./scenario.mjs";

const SDK_2 = process.env.TS_SDK === "2";
const { Client, StdioClientTransport, StreamableHTTPClientTransport, SSEClientTransport } = SDK_2
  ? { ...(await import("@modelcontextprotocol/client")), ...(await import("@modelcontextprotocol/client/stdio")) }
  : {
      ...(await import("@modelcontextprotocol/sdk/client/index.js")),
      ...(await import("@modelcontextprotocol/sdk/client/stdio.js")),
      ...(await import("@modelcontextprotocol/sdk/client/streamableHttp.js")),
      ...(await import("@modelcontextprotocol/sdk/client/sse.js")),
    };

function transportFor(kind, target) {
  if (kind === "stdio") {
    return new StdioClientTransport({ command: target[0], args: target.slice(1), stderr: "inherit" });
  }
  if (kind === "http") return new StreamableHTTPClientTransport(new URL(target[0]));
  if (kind === "sse") return new SSEClientTransport(new URL(target[0]));
  throw new Error(`unknown transport ${kind}`);
}


async function run(client, step) {
  const options = { timeout: TIMEOUT_MS };
  switch (step.method) {
    case "logging/setLevel":
      return await client.setLoggingLevel(step.level, options);
    case "tools/list":
      return await client.listTools({}, options);
    case "tools/call": {
      // The SDK hands progress to `onprogress` a tick later than the response it precedes, and
      // drops it once the response is in; what reached the client is read off the transport.
      const onprogress = step.progress ? () => {} : undefined;
      progressSeen.length = 0;
      const params = { name: step.name, arguments: step.arguments };
      // 1.x takes a result schema before the options; 2.x takes the options second
      const result = await (SDK_2 ? client.callTool(params, { ...options, onprogress })
                                  : client.callTool(params, undefined, { ...options, onprogress }));
      return step.progress ? { result, progress: progressSeen.map((p) => [p.progress, p.total ?? null]) } : result;
    }
    case "resources/list":
      return await client.listResources({}, options);
    case "resources/read":
      return await client.readResource({ uri: step.uri }, options);
    case "prompts/list":
      return await client.listPrompts({}, options);
    case "prompts/get":
      return await client.getPrompt({ name: step.name, arguments: step.arguments }, options);
    default:
      throw new Error(`the scenario has a step this client cannot run: ${step.method}`);
  }
}

const [scenarioName, kind, ...target] = process.argv.slice(2);
const steps = scenarioSteps(scenarioName);

const client = new Client({ name: "mcp-tapes-ts-client", version: "1.0.0" });
const transport = transportFor(kind, target);
await client.connect(transport, { timeout: TIMEOUT_MS });
const progressSeen = [];
const deliver = transport.onmessage;
transport.onmessage = (message, extra) => {
  if (message.method === "notifications/progress") progressSeen.push(message.params);
  deliver(message, extra);
};
const out = {
  session: { server: client.getServerVersion(), capabilities: client.getServerCapabilities() },
  steps: [],
};
for (const step of steps) {
  out.steps.push({ method: step.method, result: await run(client, step) });
}
await client.close();
process.stdout.write(JSON.stringify(stable(out)) + "\n");
