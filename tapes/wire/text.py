"""Text from the wire (or a cassette) shown to a person on a terminal or in a CI log."""

from __future__ import annotations

# Cassettes are untrusted: no control character of theirs (ESC sequences that set a terminal's
# title or clear it, newlines that forge lines, C1 controls) reaches a terminal; each is shown as
# its \xNN escape.
_CONTROLS = {code: f"\\x{code:02x}" for code in [*range(0x20), *range(0x7F, 0xA0)]}


def printable(text: str) -> str:
    """`text` with its control characters as \\xNN escapes."""
    return text.translate(_CONTROLS)
