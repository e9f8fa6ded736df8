"""tapes.wire.http: URLs from the wire, moved between origins and read for a legacy session, even
when they do not parse."""

from __future__ import annotations

import pytest

from tapes.wire.http import legacy_session_id, moved_to_origin, utf8_header

UNPARSABLE = "http://[::1/messages?sessionId=a"  # an IPv6 host without its "]"


def test_a_url_that_does_not_parse_is_left_as_it_is_and_names_no_session() -> None:
    assert moved_to_origin(UNPARSABLE, "http://up:1", "http://127.0.0.1:9") == UNPARSABLE
    assert moved_to_origin("/m", "http://[::1", "http://127.0.0.1:9") == "/m"
    assert legacy_session_id(UNPARSABLE) is None
    assert legacy_session_id("//[x/m?sessionId=a") is None  # a request target can be one too


@pytest.mark.parametrize(("url", "session"), [
    ("/message?sessionId=a", "a"), ("http://up:1/messages/?session_id=b", "b"),
    ("/m?session_id=c&sessionId=d", "d"), ("/m?other=e", None),
])
def test_a_legacy_endpoint_url_names_its_session(url: str, session: str | None) -> None:
    assert legacy_session_id(url) == session


def test_a_header_value_is_read_as_the_utf8_a_client_sent() -> None:
    # an ASGI server hands header bytes over decoded as latin-1
    assert utf8_header("évent-1".encode().decode("latin-1")) == "évent-1"
    assert utf8_header("plain") == "plain"
    assert utf8_header(b"\xe9\xff".decode("latin-1")) == "éÿ"  # no UTF-8: as latin-1 read it
    assert utf8_header("ü€") == "ü€"  # no latin-1 either (a str built otherwise): as it is
