"""Adapters that observe a live MCP exchange and feed its frames to a cassette."""
