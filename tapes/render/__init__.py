"""Rendering cassettes for people: `show` (terminal) and `view` (HTML)."""
