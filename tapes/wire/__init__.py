"""The wire: JSON-RPC framing and classification, SSE, HTTP heads, protocol eras."""
