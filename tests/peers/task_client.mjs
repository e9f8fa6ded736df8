// A TypeScript SDK client that runs one tool as a 2025-11-25 task and polls it on its own clock:
// tools/call with `task`, tasks/get every POLL_MS until the task is terminal, then tasks/result.
// Usage: node task_client.mjs POLL_MS TOOL ARGS_JSON (--url URL | -- COMMAND...)
// Prints one JSON line on stdout: the statuses it saw and the final result.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { CallToolResultSchema, CreateTaskResultSchema } from "@modelcontextprotocol/sdk/types.js";

const [pollMs, tool, argsJson, how, ...rest] = process.argv.slice(2);
const transport = how === "--url"
  ? new StreamableHTTPClientTransport(new URL(rest[0]))
  : new StdioClientTransport({ command: rest[0], args: rest.slice(1), stderr: "inherit" });
const client = new Client({ name: "task-client", version: "1.0.0" }, { capabilities: {} });
await client.connect(transport);

const created = await client.request(
  { method: "tools/call", params: { name: tool, arguments: JSON.parse(argsJson), task: { ttl: 60000 } } },
  CreateTaskResultSchema,
);
const taskId = created.task.taskId;
const statuses = [created.task.status];
const terminal = new Set(["completed", "failed", "cancelled"]);
let task = created.task;
while (!terminal.has(task.status)) {
  await new Promise((resolve) => setTimeout(resolve, Number(pollMs)));
  task = await client.experimental.tasks.getTask(taskId);
  statuses.push(task.status);
}
const result = await client.experimental.tasks.getTaskResult(taskId, CallToolResultSchema);
process.stdout.write(JSON.stringify({ statuses, result }) + "\n");
await client.close();
