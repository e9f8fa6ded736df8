// A TypeScript SDK client that answers the server's sampling and elicitation requests as
// 2025-11-25 tasks: it creates a task, answers with it at once, and completes it TASK_MS later;
// the server polls it (tasks/get) and fetches its result (tasks/result), which the SDK's task
// store answers.
// Usage: node client_task_client.mjs TASK_MS TOOL -- COMMAND...
// Calls TOOL (server-everything's trigger-sampling-request-async or trigger-elicitation-request-async)
// and prints its result as one JSON line.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { InMemoryTaskStore } from "@modelcontextprotocol/sdk/experimental/tasks";
import { CallToolResultSchema, CreateMessageRequestSchema, ElicitRequestSchema } from "@modelcontextprotocol/sdk/types.js";

const [taskMs, tool, dashes, command, ...args] = process.argv.slice(2);
if (dashes !== "--") throw new Error("usage: node client_task_client.mjs TASK_MS TOOL -- COMMAND...");
const taskStore = new InMemoryTaskStore();
const requests = { sampling: { createMessage: {} }, elicitation: { create: {} } };
const client = new Client(
  { name: "client-task-client", version: "1.0.0" },
  { capabilities: { sampling: {}, elicitation: { form: {} }, tasks: { requests } }, taskStore },
);

// Answer `request` with `answer`, as a task done TASK_MS later when the server asks for one.
function asTask(answer) {
  return async (request, extra) => {
    if (!request.params.task) return answer;
    const task = await extra.taskStore.createTask({ ttl: request.params.task.ttl, pollInterval: 1000 });
    setTimeout(() => extra.taskStore.storeTaskResult(task.taskId, "completed", answer), Number(taskMs));
    return { task };
  };
}

client.setRequestHandler(CreateMessageRequestSchema, asTask(
  { role: "assistant", content: { type: "text", text: "a sampled answer" }, model: "tapes-test-model" }));
client.setRequestHandler(ElicitRequestSchema, asTask(
  { action: "accept", content: { name: "Tapes", favoriteColor: "Blue", agreeToTerms: true } }));
await client.connect(new StdioClientTransport({ command, args, stderr: "inherit" }));
const result = await client.request({ method: "tools/call", params: { name: tool, arguments: { prompt: "tides" } } },
  CallToolResultSchema);
process.stdout.write(JSON.stringify({ result }) + "\n");
await client.close();
taskStore.cleanup(); // its TTL timers would keep the process alive for the task's minutes
