// node --test weather.test.mjs   (TAPES_RECORD_MODE=once by default: records the first run, replays after)
import { test } from "node:test";
import assert from "node:assert/strict";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";

test("forecast for Paris", async () => {
  const transport = new StdioClientTransport({
    command: "tapes",
    args: ["replay", "weather.tape", "--record-mode", process.env.TAPES_RECORD_MODE ?? "once",
           "--", "python", "weather_server.py"],
  });
  const client = new Client({ name: "weather-test", version: "1.0.0" });
  await client.connect(transport);
  const result = await client.callTool({ name: "get_forecast", arguments: { city: "Paris" } });
  assert.match(result.content[0].text, /Paris/);
  await client.close();
});
