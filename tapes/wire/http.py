"""HTTP head helpers, sans-IO: the one case-insensitive header lookup, moving a URL from one
origin to another (the legacy endpoint event behind a proxy, and in a replay), the session a
legacy endpoint URL names, and the check of a real server's URL a user gives. URLs come from the
wire: one that does not parse is left as it is."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from urllib.parse import SplitResult, parse_qs, urlsplit

from tapes.errors import UserError

LEGACY_SESSION_PARAMETERS = ("sessionId", "session_id")

HeaderFields = Sequence[tuple[str, str]] | Sequence[list[str]] | Iterable[Sequence[str]]


def media_type(content_type: str | None) -> str:
    """A Content-Type's media type, lowercase, without its parameters ("" for none)."""
    return (content_type or "").split(";", 1)[0].strip().lower()


def header(fields: HeaderFields | None, name: str) -> str | None:
    """The first value of header `name` (names compare case-insensitively), or None."""
    lowered = name.lower()
    return next((value for key, value in fields or () if key.lower() == lowered), None)


def utf8_header(value: str) -> str:
    """A header value as the UTF-8 text a client sent, where the server decoded its bytes as
    latin-1 (ASGI servers do): an SSE event id is UTF-8 text, and a client resuming echoes it in
    Last-Event-ID as it got it. Bytes that are no UTF-8 stay as latin-1 read them."""
    try:
        return value.encode("latin-1").decode("utf-8")
    except UnicodeError:
        return value


def moved_to_origin(url: str, old_origin: str | None, new_origin: str) -> str:
    """`url` with `old_origin` (scheme://host:port) replaced by `new_origin` when it is an absolute
    URL on `old_origin`; a relative URL, or one on another origin, is returned as it is."""
    try:
        target, old = urlsplit(url), urlsplit(old_origin or "")
    except ValueError:  # e.g. "http://[::1/x", an IPv6 host without its "]"
        return url
    if not target.scheme:
        return url
    if (target.scheme, target.netloc) != (old.scheme, old.netloc):
        return url
    return new_origin + url[len(f"{target.scheme}://{target.netloc}") :]


def legacy_session_id(url: str) -> str | None:
    """The session named in a legacy endpoint URL (`/message?sessionId=X`, `/messages/?session_id=X`);
    None when it names none, or does not parse."""
    try:
        query = parse_qs(urlsplit(url).query)
    except ValueError:
        return None
    for name in LEGACY_SESSION_PARAMETERS:
        if query.get(name):
            return query[name][0]
    return None


def upstream_url(url: str) -> SplitResult:
    """`url` split, when it can name a real server: http:// or https://, a host, a port that is
    one; otherwise a UserError that says which."""
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises for a port that is no number or out of range
    except ValueError as error:
        raise UserError(f"the upstream URL {url!r} is not valid ({error})") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise UserError(f"the upstream URL {url!r} is not an http:// or https:// URL with a host")
    return parts
