// A TypeScript SDK client that answers the server's sampling requests as 2025-11-25 tasks: it
// creates a task, answers with it at once, and completes it TASK_MS later; the server polls it
// (tasks/get) and fetches its result (tasks/result), which the SDK's task store answers.
// Usage: node sampling_task_client.mjs TASK_MS -- COMMAND...
// Calls server-everything's trigger-sampling-request-async and prints its result as one JSON line.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { InMemoryTaskStore } from "@modelcontextprotocol/sdk/experimental/tasks";
import { CallToolResultSchema, CreateMessageRequestSchema } from "@modelcontextprotocol/sdk/types.js";

const [taskMs, dashes, command, ...args] = process.argv.slice(2);
if (dashes !== "--") throw new Error("usage: node sampling_task_client.mjs TASK_MS -- COMMAND...");
const taskStore = new InMemoryTaskStore();
const client = new Client(
  { name: "sampling-task-client", version: "1.0.0" },
  { capabilities: { sampling: {}, tasks: { requests: { sampling: { createMessage: {} } } } }, taskStore },
);
client.setRequestHandler(CreateMessageRequestSchema, async (request, extra) => {
  const answer = { role: "assistant", content: { type: "text", text: "a sampled answer" }, model: "tapes-test-model" };
  if (!request.params.task) return answer;
  const task = await extra.taskStore.createTask({ ttl: request.params.task.ttl, pollInterval: 1000 });
  setTimeout(() => extra.taskStore.storeTaskResult(task.taskId, "completed", answer), Number(taskMs));
  return { task };
});
await client.connect(new StdioClientTransport({ command, args, stderr: "inherit" }));
const result = await client.request(
  { method: "tools/call", params: { name: "trigger-sampling-request-async", arguments: { prompt: "tides" } } },
  CallToolResultSchema,
);
process.stdout.write(JSON.stringify({ result }) + "\n");
await client.close();
taskStore.cleanup(); // its TTL timers would keep the process alive for the task's 5 minutes
