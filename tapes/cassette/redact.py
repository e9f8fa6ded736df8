"""Redaction at record time, sans-IO: secrets in HTTP headers and at JSON paths of messages are
replaced by placeholders before anything reaches a cassette.

A placeholder is stable within a cassette: the same secret always becomes the same placeholder
(`<redacted:1>`, `<redacted:2>`, ... in order of first appearance), so a reader can still see
that two requests carried the same token, and no hash of the secret is ever written.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from tapes.wire.jsonrpc import encode, items

SECRET_HEADERS = ("authorization", "proxy-authorization", "cookie", "set-cookie")
# Header names that look like they carry a credential: X-Api-Key, X-Auth-Token, Api-Secret, ...
# ("auth" only as a whole word, so WWW-Authenticate and Mcp-Session-Id are kept).
_SECRET_LIKE = re.compile(r"(?:^|[-_])(?:api[-_]?key|apikey|token|secret|password|passwd|auth)(?:$|[-_])", re.I)
SECRET_LIKE_RULE = "header~" + _SECRET_LIKE.pattern


class RedactionRuleError(ValueError):
    """A JSON path that cannot be used (the message says why)."""


@dataclass(frozen=True)
class RedactionRules:
    """What to redact: header names (case-insensitive), whether names that look like credentials
    count too, and JSON paths into messages (dotted keys, `*` for any key or array index, e.g.
    `params.arguments.password` or `result.content.*.text`)."""

    headers: frozenset[str] = frozenset(SECRET_HEADERS)
    secret_like_headers: bool = True
    json_paths: tuple[tuple[str, ...], ...] = ()

    @classmethod
    def default(cls, extra_headers: Iterable[str] = (), json_paths: Iterable[str] = ()) -> RedactionRules:
        return cls(
            headers=frozenset(SECRET_HEADERS) | {name.lower() for name in extra_headers},
            json_paths=tuple(parse_path(path) for path in json_paths),
        )

    @classmethod
    def none(cls) -> RedactionRules:
        return cls(headers=frozenset(), secret_like_headers=False)

    @property
    def enabled(self) -> bool:
        return bool(self.headers or self.secret_like_headers or self.json_paths)

    def names(self) -> tuple[str, ...]:
        """The rules as listed in a cassette header: `header:NAME`, `header~PATTERN`, `json:PATH`."""
        names = [f"header:{name}" for name in sorted(self.headers)]
        if self.secret_like_headers:
            names.append(SECRET_LIKE_RULE)
        names += ["json:" + ".".join(path) for path in self.json_paths]
        return tuple(names)

    def redacts_header(self, name: str) -> bool:
        lowered = name.lower()
        return lowered in self.headers or (self.secret_like_headers and _SECRET_LIKE.search(lowered) is not None)


def parse_path(path: str) -> tuple[str, ...]:
    parts = tuple(path.split("."))
    if not path or any(not part for part in parts):
        raise RedactionRuleError(f"the JSON path {path!r} has an empty step (use dotted keys, e.g. params.arguments.token)")
    return parts


class Redactor:
    """Applies RedactionRules, handing out the placeholders. Not thread-safe: one per cassette,
    used by its writer."""

    def __init__(self, rules: RedactionRules) -> None:
        self.rules = rules
        self._placeholders: dict[str, str] = {}

    def placeholder(self, secret: str) -> str:
        found = self._placeholders.get(secret)
        if found is None:
            found = self._placeholders[secret] = f"<redacted:{len(self._placeholders) + 1}>"
        return found

    def headers(self, fields: Iterable[tuple[str, str]]) -> list[list[str]]:
        """Header fields as [[name, value], ...], in order and original case, secrets replaced."""
        redacts = self.rules.redacts_header
        return [[name, self.placeholder(value) if redacts(name) else value] for name, value in fields]

    def message(self, message: Any) -> tuple[Any, bool]:
        """The message (or batch) with the JSON paths' values replaced, and whether anything was:
        the caller must then drop any verbatim copy of the original bytes."""
        if not self.rules.json_paths:
            return message, False
        redacted = copy.deepcopy(message)
        changed = False
        for item in items(redacted):
            for path in self.rules.json_paths:
                changed |= self._redact_at(item, path)
        return (redacted, True) if changed else (message, False)

    def _redact_at(self, value: Any, path: tuple[str, ...]) -> bool:
        step, rest = path[0], path[1:]
        if isinstance(value, dict):
            keys = list(value) if step == "*" else [step] if step in value else []
        elif isinstance(value, list):
            keys = range(len(value)) if step == "*" else [int(step)] if step.isdigit() and int(step) < len(value) else []
        else:
            return False
        changed = False
        for key in keys:
            if rest:
                changed |= self._redact_at(value[key], rest)
            else:
                secret = value[key]
                value[key] = self.placeholder(secret if isinstance(secret, str) else encode(secret).decode())
                changed = True
        return changed
