"""Which recorded HTTP sessions only opened: a connection check before the real session (mcp-remote
opens one), which a live client matching no session exactly is led past."""

from __future__ import annotations

import pytest

from tapes.replay.sessions import only_opened


@pytest.mark.parametrize(("methods", "opened"), [
    ({"initialize", "notifications/initialized"}, True),
    ({"initialize", "notifications/initialized", "ping", None}, True),  # None: the client's answers
    (set(), True),  # a legacy stream opened and left
    ({"initialize", "notifications/initialized", "tools/list"}, False),
    ({"initialize", "notifications/cancelled"}, False),
])
def test_a_session_only_opened_when_its_client_sent_nothing_but_its_handshake(methods: set, opened: bool) -> None:
    assert only_opened(methods) is opened
