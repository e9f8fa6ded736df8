"""A tiny MCP weather server over stdio, with no dependencies: the bundled example that
`tapes record` wraps in the README. It answers initialize, tools/list, tools/call (with
progress when the client asks for it) and ping; it logs to stderr, never to stdout."""

import json
import sys

FORECASTS = {"Paris": "sunny, 21 °C", "Oslo": "snow, -3 °C", "Lima": "cloudy, 18 °C"}
TOOL = {
    "name": "get_forecast",
    "description": "Tomorrow's weather for a city",
    "inputSchema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
}


def send(message: dict) -> None:
    sys.stdout.write(json.dumps(message, ensure_ascii=False, separators=(",", ":")) + "\n")
    sys.stdout.flush()


def answer(request: dict) -> dict:
    method, params = request["method"], request.get("params") or {}
    if method == "initialize":
        return {
            "protocolVersion": "2025-06-18",
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "weather", "version": "1.0.0"},
        }
    if method == "tools/list":
        return {"tools": [TOOL]}
    if method == "tools/call":
        city = params["arguments"]["city"]
        token = (params.get("_meta") or {}).get("progressToken")
        if token is not None:
            send({"jsonrpc": "2.0", "method": "notifications/progress",
                  "params": {"progressToken": token, "progress": 1, "total": 1}})
        text = FORECASTS.get(city, "no forecast")
        return {"content": [{"type": "text", "text": f"{city}: {text}"}], "isError": city not in FORECASTS}
    return {}


print("weather server ready", file=sys.stderr, flush=True)
for line in sys.stdin:
    message = json.loads(line)
    if "id" in message and "method" in message:
        send({"jsonrpc": "2.0", "id": message["id"], "result": answer(message)})
print("weather server: stdin closed, bye", file=sys.stderr, flush=True)
