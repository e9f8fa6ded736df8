"""Adapters that drive the replay engine over a transport."""
