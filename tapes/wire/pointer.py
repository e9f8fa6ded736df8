"""JSON pointers (RFC 6901) as matching, redaction and diff noise rules use them, with `*` for
any key or index."""

from __future__ import annotations

from typing import Any

from tapes.wire.text import is_digits

REMOVED = object()
"""What `without` returns when the pointer names the whole value."""


def tokens(pointer: str) -> list[str]:
    """The unescaped reference tokens of `pointer` ("" is the whole document)."""
    return [token.replace("~1", "/").replace("~0", "~") for token in pointer.split("/")[1:]]


def escape(token: str) -> str:
    return token.replace("~", "~0").replace("/", "~1")


def without(value: Any, path: list[str]) -> Any:
    """`value` without the members `path` (tokens) points at, `*` matching any key or index;
    copied only along the path. `REMOVED` when `path` is empty."""
    if not path:
        return REMOVED
    head, rest = path[0], path[1:]
    if isinstance(value, dict):
        keys = list(value) if head == "*" else [head] if head in value else []
        if not keys:
            return value
        copy = dict(value)
        for key in keys:
            inner = without(value[key], rest)
            if inner is REMOVED:
                del copy[key]
            else:
                copy[key] = inner
        return copy
    if isinstance(value, list):
        indexes = range(len(value)) if head == "*" else [int(head)] if is_digits(head) and int(head) < len(value) else []
        if not indexes:
            return value
        if not rest:
            return [item for index, item in enumerate(value) if index not in indexes]
        return [without(item, rest) if index in indexes else item for index, item in enumerate(value)]
    return value
