"""mcp-tapes: record MCP traffic into cassettes and replay it deterministically.

`tapes` is the sans-IO core: framing, the frame model, cassettes, matching and the
replay engine. Adapters that touch pipes and sockets live in `recorder/` and `replayer/`.
"""

__version__ = "0.1.0"
