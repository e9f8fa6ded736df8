"""Redaction at record time, sans-IO: secrets in HTTP headers, in the query of request paths and
URLs, in a URL's userinfo, and at JSON paths of messages are replaced by placeholders before
anything reaches a cassette. Headers whose value is the moment or a random id of the recorded
exchange (Date, X-Request-Id, ...) get one fixed placeholder, so that a re-record does not change
every response line of a cassette under review.

A placeholder is stable within a cassette: the same secret always becomes the same placeholder
(`<redacted:1>`, `<redacted:2>`, ... in order of first appearance), so a reader can still see
that two requests carried the same token, and no hash of the secret is ever written.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from typing import Any
from urllib.parse import unquote_plus, urlsplit, urlunsplit

from tapes.cassette.frames import Frame
from tapes.wire.jsonrpc import items, wire_form
from tapes.wire.oauth import SECRET_FIELDS, redact_body, redact_credentials, redact_url
from tapes.wire.text import is_digits

SECRET_HEADERS = ("authorization", "proxy-authorization", "cookie", "set-cookie")
# A header or query parameter name looks like it carries a credential when one of its words is
# one of these: X-Api-Key, X-Access-Key, X-Auth-Token, Api-Secret, X-Credentials, Authentication,
# ?api_key=, ?accessToken=, ?sig=. Whole words only, so WWW-Authenticate, Mcp-Session-Id and
# ?sessionId= are kept.
SECRET_WORDS = frozenset(
    {"key", "apikey", "token", "secret", "password", "passwd", "pwd", "auth", "authentication",
     "authorization", "credential", "credentials", "sig", "signature"}
)
_WORDS = re.compile(r"[A-Z]?[a-z0-9]+|[A-Z]+(?![a-z])")  # X-ApiKey -> X, Api, Key; accessToken -> access, Token
_SECRET_LIKE = "~secret-like(" + "|".join(sorted(SECRET_WORDS)) + ")"
SECRET_LIKE_RULE = "header" + _SECRET_LIKE
SECRET_QUERY_RULE = "query" + _SECRET_LIKE
USERINFO_RULE = "url:userinfo"
OAUTH_RULE = "oauth(" + "|".join(sorted(SECRET_FIELDS)) + ")"
_CREDENTIAL_HEADERS = frozenset({"authorization", "proxy-authorization"})
# Set by the moment or at random per exchange; the replayer sends its own Date, and the others
# are of no use to a client.
VOLATILE_HEADERS = ("date", "age", "x-request-id", "request-id", "cf-ray", "x-amzn-trace-id", "traceparent", "tracestate")
VOLATILE = "<volatile>"


def secret_like(name: str) -> bool:
    """Whether a header or query parameter name has a word that names a credential."""
    return any(word.lower() in SECRET_WORDS for word in _WORDS.findall(name))


class RedactionRuleError(ValueError):
    """A JSON path that cannot be used (the message says why)."""


@dataclass(frozen=True)
class RedactionRules:
    """What to redact: header names (case-insensitive), whether header names and query parameters
    that look like credentials count too (and a URL's userinfo), and JSON paths into messages
    (dotted keys, `*` for any key or array index, e.g. `params.arguments.password` or
    `result.content.*.text`)."""

    headers: frozenset[str] = frozenset(SECRET_HEADERS)
    secret_like_headers: bool = True
    secret_like_query: bool = True
    oauth: bool = True  # OAuth secrets in form and JSON bodies, redirect Locations and queries
    json_paths: tuple[tuple[str, ...], ...] = ()
    volatile_headers: frozenset[str] = frozenset(VOLATILE_HEADERS)

    @classmethod
    def default(cls, extra_headers: Iterable[str] = (), json_paths: Iterable[str] = ()) -> RedactionRules:
        return cls(
            headers=frozenset(SECRET_HEADERS) | {name.lower() for name in extra_headers},
            json_paths=tuple(dict.fromkeys(parse_path(path) for path in json_paths)),
        )

    def for_messages(self) -> RedactionRules:
        """These rules as they apply where there are no headers, queries or URLs (stdio): the JSON paths."""
        return replace(RedactionRules.none(), json_paths=self.json_paths)

    @classmethod
    def none(cls) -> RedactionRules:
        return cls(headers=frozenset(), secret_like_headers=False, secret_like_query=False, oauth=False,
                   volatile_headers=frozenset())

    @property
    def enabled(self) -> bool:
        return bool(self.headers or self.secret_like_headers or self.secret_like_query or self.oauth or self.json_paths
                    or self.volatile_headers)

    def names(self) -> tuple[str, ...]:
        """The rules as listed in a cassette header: `header:NAME`, `header~secret-like(...)`,
        `header~volatile(...)`, `query~secret-like(...)`, `url:userinfo`, `json:PATH`."""
        names = [f"header:{name}" for name in sorted(self.headers)]
        if self.secret_like_headers:
            names.append(SECRET_LIKE_RULE)
        if self.volatile_headers:
            names.append(f"header~volatile({'|'.join(sorted(self.volatile_headers))})")
        if self.secret_like_query:
            names += [SECRET_QUERY_RULE, USERINFO_RULE]
        if self.oauth:
            names.append(OAUTH_RULE)
        names += ["json:" + ".".join(path) for path in self.json_paths]
        return tuple(names)

    @staticmethod
    def named(labels: Iterable[str]) -> tuple[list[str], list[str]]:
        """The header names and JSON paths a cassette header's redaction labels name (`names`):
        what a recording must be given again to be redacted as that one was."""
        headers = [label.removeprefix("header:") for label in labels if label.startswith("header:")]
        paths = [label.removeprefix("json:") for label in labels if label.startswith("json:")]
        return headers, paths

    def redacts_header(self, name: str) -> bool:
        return name.lower() in self.headers or (self.secret_like_headers and secret_like(name))


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
        self._issued = 0  # the number of the last placeholder handed out

    def placeholder(self, secret: str) -> str:
        found = self._placeholders.get(secret)
        if found is None:
            self._issued += 1
            found = self._placeholders[secret] = f"<redacted:{self._issued}>"
        return found

    def keep(self, placeholder: str, number: int) -> None:
        """`placeholder`, `<redacted:number>` found in a cassette already, stands for itself; new
        placeholders are numbered after it."""
        self._placeholders[placeholder] = placeholder
        self._issued = max(self._issued, number)

    def headers(self, fields: Iterable[tuple[str, str]]) -> list[list[str]]:
        """Header fields as [[name, value], ...], in order and original case, secrets and volatile
        values replaced (a bearer token keeps its scheme: `Bearer <redacted:N>`, N as where the token
        was issued)."""
        return [[name, self._header_value(name, value)] for name, value in fields]

    def _header_value(self, name: str, value: str) -> str:
        lowered = name.lower()
        if self.rules.redacts_header(name):
            if self.rules.oauth and lowered in _CREDENTIAL_HEADERS:
                return redact_credentials(value, self.placeholder)
            return self.placeholder(value)
        if lowered in self.rules.volatile_headers:
            return VOLATILE
        if self.rules.oauth and lowered == "location":
            return redact_url(value, self.placeholder)
        return value

    def body(self, content_type: str | None, body: bytes) -> bytes:
        """A body that is not JSON-RPC (a form, a JSON document) with its OAuth secrets replaced."""
        return redact_body(content_type, body, self.placeholder) if self.rules.oauth else body

    def path(self, path: str) -> str:
        """A request target (`/mcp?api_key=...`) with the values of secret-like query parameters
        replaced; the rest is kept byte for byte."""
        if not (self.rules.secret_like_query or self.rules.oauth):
            return path
        return _with_secret_query(path, self.placeholder, self._secret_name)

    def url(self, url: str) -> str:
        """A URL with its userinfo (`user:password@`) and secret-like query parameters replaced."""
        if not self.rules.secret_like_query:
            return url
        parts = urlsplit(url)
        userinfo, at, host = parts.netloc.rpartition("@")
        netloc = f"{self.placeholder(userinfo)}@{host}" if at else parts.netloc
        return urlunsplit(parts._replace(netloc=netloc, query=_secret_query(parts.query, self.placeholder, self._secret_name)))

    def _secret_name(self, name: str) -> bool:
        return (self.rules.secret_like_query and secret_like(name)) or (self.rules.oauth and name in SECRET_FIELDS)

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

    def frames(self, frames: Iterable[Frame]) -> list[Frame]:
        """The frames with the JSON paths of their messages redacted (what a stdio recording can
        carry secrets in); a frame that changed loses its verbatim bytes, which still hold them."""
        redacted = []
        for frame in frames:
            if frame.message is not None:
                message, changed = self.message(frame.message)
                if changed:
                    frame = frame._replace(message=message, data=None)
            redacted.append(frame)
        return redacted

    def _redact_at(self, value: Any, path: tuple[str, ...]) -> bool:
        step, rest = path[0], path[1:]
        if isinstance(value, dict):
            keys = list(value) if step == "*" else [step] if step in value else []
        elif isinstance(value, list):
            keys = range(len(value)) if step == "*" else [int(step)] if is_digits(step) and int(step) < len(value) else []
        else:
            return False
        changed = False
        for key in keys:
            if rest:
                changed |= self._redact_at(value[key], rest)
            else:
                secret = value[key]
                value[key] = self.placeholder(secret if isinstance(secret, str) else wire_form(secret).decode())
                changed = True
        return changed


def _secret_query(query: str, replace: Callable[[str], str], secret: Callable[[str], bool] = secret_like) -> str:
    """A query string with the values of its secret-like parameters replaced by `replace(value)`."""
    if not query:
        return query
    fields = []
    for field in query.split("&"):
        name, equals, value = field.partition("=")
        fields.append(f"{name}={replace(unquote_plus(value))}" if equals and value and secret(unquote_plus(name)) else field)
    return "&".join(fields)


def _with_secret_query(target: str, replace: Callable[[str], str], secret: Callable[[str], bool]) -> str:
    path, question, query = target.partition("?")
    return path + question + _secret_query(query, replace, secret) if question else target

