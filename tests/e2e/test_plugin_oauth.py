"""The pytest plugin's `tape_url` with an OAuth-protected upstream: the first run records the
whole login (through `tapes record --upstream`) with the SDK's OAuth client provider, and a later
run replays it offline, handing out placeholders for the token and the client secret."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.paths import OAUTH_SERVER, ROOT
from tests.support.processes import Process

LOGIN = """
import sys
sys.path.insert(0, {root!r})
import pytest
from tests.support.oauth_clients import oauth_session

@pytest.mark.tape("oauth.tape", upstream={upstream!r})
def test_login(tape_url):
    session = oauth_session(tape_url)
    assert session.results[1][0]["text"] == "hello through OAuth"
    assert session.results[2][0]["text"] == "scopes=notes"
    Path = __import__("pathlib").Path
    Path("token.txt").write_text(session.storage.tokens.access_token + "\\n" + session.storage.client_info.client_secret)
"""


def test_tape_url_records_and_replays_an_oauth_login(pytester: pytest.Pytester) -> None:
    def run(mode: str, upstream: str) -> pytest.RunResult:
        pytester.makepyfile(test_login=LOGIN.format(root=str(ROOT), upstream=upstream))
        return pytester.runpytest_subprocess("-p", "no:cacheprovider", f"--tape-record-mode={mode}")

    server = Process(OAUTH_SERVER)
    try:
        upstream = server.wait_for(r"oauth server listening on (\S+)")[1]
        run("once", upstream).assert_outcomes(passed=1)
    finally:
        server.stop()
    live_token, live_secret = Path(pytester.path, "token.txt").read_text().splitlines()
    cassette = next(Path(pytester.path).rglob("oauth.tape")).read_bytes()
    assert live_token.encode() not in cassette and live_secret.encode() not in cassette

    run("none", upstream).assert_outcomes(passed=1)  # offline: the server is gone
    replayed_token, replayed_secret = Path(pytester.path, "token.txt").read_text().splitlines()
    assert replayed_token.startswith("<redacted:") and replayed_secret.startswith("<redacted:")
