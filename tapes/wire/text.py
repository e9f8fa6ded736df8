"""Text from the wire (or a cassette) shown to a person on a terminal or in a CI log, and text
from anywhere read as a number."""

from __future__ import annotations

# Cassettes are untrusted: no control character of theirs (ESC sequences that set a terminal's
# title or clear it, newlines that forge lines, C1 controls) reaches a terminal; each is shown as
# its \xNN escape. Nor does a bidi control (U+202E turns the rest of a line around, as in "Trojan
# Source") or a line or paragraph separator (a line break in some log viewers): \uNNNN.
_CONTROLS = {code: f"\\x{code:02x}" for code in [*range(0x20), *range(0x7F, 0xA0)]}
_CONTROLS |= {code: f"\\u{code:04x}" for code in [0x061C, 0x200E, 0x200F, *range(0x2028, 0x202F), *range(0x2066, 0x206A)]}


def is_digits(text: str) -> bool:
    """Whether `text` is a non-negative integer in ASCII digits, as int() reads it (str.isdigit
    also takes "²", which int() refuses, and int() also takes other scripts' digits)."""
    return text.isascii() and text.isdigit()


def printable(text: str) -> str:
    """`text` with its control characters as \\xNN escapes, its bidi controls and line separators as
    \\uNNNN."""
    return text.translate(_CONTROLS)


LINE_LIMIT = 2000
"""Characters of a line shown on a terminal: a megabyte tool name from the wire is for the JSON
outputs, not for a log."""


def terminal_line(text: str) -> str:
    """A line quoting the wire or a cassette as a terminal may show it: `printable`, and no longer
    than LINE_LIMIT characters."""
    line = printable(text)
    return line if len(line) <= LINE_LIMIT else f"{line[:LINE_LIMIT]}… ({len(line) - LINE_LIMIT} more characters)"
