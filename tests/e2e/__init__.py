"""End-to-end tests: real peers (the MCP SDKs, server-everything, Chromium) and real processes."""
