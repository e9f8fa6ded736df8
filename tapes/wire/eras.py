"""The protocol eras: every version constant and per-era table, in one place."""

from __future__ import annotations

VERSIONS = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25", "2026-07-28")
KNOWN_VERSIONS = frozenset(VERSIONS)

BATCH_ERAS = ("2025-03-26",)  # the only revision with JSON-RPC batches
HEADER_ERAS = ("2025-06-18", "2025-11-25")  # MCP-Protocol-Version on every request after initialize
STATELESS_VERSION = "2026-07-28"  # from here on: no initialize, no sessions, standard request headers
STATELESS_ERAS = (STATELESS_VERSION,)
HANDSHAKE_METHOD = "initialize"  # how a session opens before 2026-07-28
HANDSHAKE_DONE = "notifications/initialized"  # the client's answer to the initialize result
LOG_LEVELS = frozenset(("debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"))  # RFC 5424's, every era
DISCOVER_METHOD = "server/discover"  # 2026-07-28: what a server supports; a legacy server answers Method not found
STATELESS_VERSION_KEY = "io.modelcontextprotocol/protocolVersion"  # stateless eras: in every request's _meta
SERVER_INFO_KEY = "io.modelcontextprotocol/serverInfo"  # stateless eras: in the _meta of the server/discover result
LATEST_HANDSHAKE_VERSION = "2025-11-25"  # the last revision that opens with initialize
CACHE_HINTS = ("ttlMs", "cacheScope")  # 2026-07-28 caching hints: how long to keep a result, not what it is
STATELESS_RESULT_MEMBERS = ("resultType", *CACHE_HINTS)  # what a 2026-07-28 result carries that no earlier one does
LISTENED_FLAGS = ("listChanged", "subscribe")
"""Capability flags whose notifications come, at 2026-07-28, on a subscriptions/listen stream."""

LONG_LIVED_METHODS = frozenset({"subscriptions/listen"})
"""Requests whose response is a stream that stays open until either side closes it (2026-07-28):
what comes on it is caused by what the client does later, and the client may end it at any time."""
SUBSCRIPTION_ID_KEY = "io.modelcontextprotocol/subscriptionId"  # in _meta: the listen request's id, on all it carries

TASK_ERAS = ("2025-11-25",)  # tasks: task-augmented requests, tasks/get|result|list|cancel, notifications/tasks/status

CAPABILITY_OF = {
    "tools/list": "tools", "tools/call": "tools",
    "prompts/list": "prompts", "prompts/get": "prompts",
    "resources/list": "resources", "resources/templates/list": "resources", "resources/read": "resources",
    "resources/subscribe": "resources", "resources/unsubscribe": "resources",
    "completion/complete": "completions", "logging/setLevel": "logging",
}  # fmt: skip
"""The server capability a request needs, every era: a server that did not declare it has no such method."""

CLIENT_CAPABILITY_OF = {"roots/list": "roots", "sampling/createMessage": "sampling", "elicitation/create": "elicitation"}
"""The client capability a server's request needs: a server does not ask a client that did not declare it."""

LIST_CHANGED = {
    "tools/list": "notifications/tools/list_changed", "prompts/list": "notifications/prompts/list_changed",
    "resources/list": "notifications/resources/list_changed",
    "resources/templates/list": "notifications/resources/list_changed",
}  # fmt: skip
"""The list requests, each with the notification a server sends when what it lists changes: until
it sends one, it lists the same again."""

NAME_PARAMS = {"tools/call": "name", "prompts/get": "name", "resources/read": "uri"}
"""The param a request's `Mcp-Name` header mirrors (2026-07-28), which is also what it is about."""

SUBJECT_PARAMS = {**NAME_PARAMS, "resources/subscribe": "uri", "resources/unsubscribe": "uri"}
"""The param naming what a request is about: a tool, a prompt, a resource."""
