"""The same subscriptions in two eras: tests/servers/feed_server.py followed by the Python SDK client
through resources/subscribe (2025-11-25) and through subscriptions/listen (2026-07-28), recorded
with `tapes record`. `tapes diff` maps the two forms onto each other (the listen and its
acknowledgment ↔ resources/subscribe, the client closing the listen ↔ resources/unsubscribe, the
server closing it ↔ nothing on the older wire) and finds no behaviour change; a client that heard
fewer events is a change. The committed 2025-11-25 cassette replays to the real client."""

from __future__ import annotations

import functools
import json
import subprocess
from pathlib import Path
from typing import Any

import anyio
import pytest

from tests.support.flows import feed_flow, feed_subscribe_flow
from tests.support.http_peers import record_session, start_feed
from tests.support.paths import CASSETTES, FEED_SERVER, ROOT, TAPES

SUBSCRIBED = CASSETTES / "feed-stdio-2025-11-25.tape"
PROTOCOL_VERSION = ("session", "protocol version")


def diff(old: Path, new: Path) -> dict[str, Any]:
    done = subprocess.run([*TAPES, "diff", str(old), str(new), "--format", "json"], capture_output=True, text=True,
                          cwd=ROOT, timeout=60)
    assert done.returncode in (0, 1), done.stderr
    return json.loads(done.stdout)


def changes(report: dict[str, Any]) -> set[tuple[str, str]]:
    return {(change["section"], change["subject"]) for change in report["changes"]}


def forms(report: dict[str, Any]) -> dict[str, tuple[tuple[str, ...], tuple[str, ...]]]:
    return {equivalence["subject"]: (tuple(equivalence["old_form"]), tuple(equivalence["new_form"]))
            for equivalence in report["equivalences"]}


def record_stdio(path: Path, flow: Any, leave_early: bool) -> dict[str, Any]:
    return anyio.run(functools.partial(flow, [*TAPES, "record", "-o", str(path), "--", *FEED_SERVER], leave_early=leave_early))


def record_http(path: Path, leave_early: bool) -> dict[str, Any]:
    server, url = start_feed()
    try:
        _, live = record_session(path, url, lambda proxy: anyio.run(functools.partial(feed_flow, proxy, leave_early=leave_early)))
    finally:
        server.stop()
    return live


@pytest.mark.parametrize("listened", ["feed-stdio-2026-07-28", "feed-http-2026-07-28"])
def test_the_committed_recordings_of_both_eras_are_the_same_behaviour(listened: str) -> None:
    report = diff(SUBSCRIBED, CASSETTES / f"{listened}.tape")
    transport = {("transport", "transport")} if "http" in listened else set()
    assert changes(report) == {PROTOCOL_VERSION, *transport}
    assert report["old"]["protocol"] == "2025-11-25" and report["new"]["protocol"] == "2026-07-28"
    assert forms(report)["resources/subscribe feed://latest"] == (("resources/subscribe",), ("subscriptions/listen",))
    assert any("closed by the server" in fold for fold in report["folds"]["new"])
    assert report["matched"] == 7  # handshake, the subscription, 4 tool calls, tools/list


@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_a_client_that_leaves_early_unsubscribes_in_either_era(transport: str, tmp_path: Path) -> None:
    subscribed, listened = tmp_path / "subscribe.tape", tmp_path / f"listen-{transport}.tape"
    old = record_stdio(subscribed, feed_subscribe_flow, leave_early=True)
    new = record_http(listened, True) if transport == "http" else record_stdio(listened, feed_flow, leave_early=True)
    assert old["posted"] == new["posted"] and len(old["events"]) == len(new["events"]) == 1

    report = diff(subscribed, listened)
    transport_change = {("transport", "transport")} if transport == "http" else set()
    assert {change for change in changes(report) if change[0] != "notification"} == {PROTOCOL_VERSION, *transport_change}
    # over stdio the client cancels the listen; over HTTP it drops the listen's stream
    assert forms(report)["resources/unsubscribe feed://latest"] == (("resources/unsubscribe",),
                                                                    ("subscriptions/listen closed by the client",))
    # The SDK client's close of a listen goes out after its next request (unlike resources/unsubscribe,
    # which it awaits): the events of that post may reach the stream before the server sees the close.
    # What diff shows of that race is the truth of the wire: events the 2026 client heard, never fewer.
    raced = [change for change in report["changes"] if change["section"] == "notification"]
    assert all(change["kind"] == "added" for change in raced)
    assert {change["subject"] for change in raced} <= {"server notifications/resources/list_changed",
                                                      "server notifications/resources/updated"}


def test_a_client_that_heard_less_is_a_behaviour_change(tmp_path: Path) -> None:
    """A 2025-11-25 client that unsubscribes after the first post, against the committed 2026-07-28
    recording that follows the feed until the server closes it: the second post's events are new,
    and the unsubscribe is gone."""
    subscribed = tmp_path / "subscribe.tape"
    record_stdio(subscribed, feed_subscribe_flow, leave_early=True)
    report = diff(subscribed, CASSETTES / "feed-stdio-2026-07-28.tape")
    assert changes(report) == {PROTOCOL_VERSION, ("interaction", "resources/unsubscribe feed://latest"),
                               ("notification", "server notifications/resources/list_changed"),
                               ("notification", "server notifications/resources/updated")}
    kinds = {change["subject"]: (change["kind"], change["severity"]) for change in report["changes"]}
    assert kinds["resources/unsubscribe feed://latest"] == ("removed", "breaking")
    assert kinds["server notifications/resources/updated"] == ("added", "changed")
    text = subprocess.run([*TAPES, "diff", str(subscribed), str(CASSETTES / "feed-stdio-2026-07-28.tape")],
                          capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert text.returncode == 1 and "+ server notifications/resources/updated [changed]" in text.stdout


def test_the_subscribed_recording_replays_to_the_real_client(tmp_path: Path) -> None:
    real = anyio.run(feed_subscribe_flow, FEED_SERVER)
    report = tmp_path / "report.json"
    live = anyio.run(feed_subscribe_flow, [*TAPES, "replay", str(SUBSCRIBED), "--report", str(report)])
    assert live == real
    assert live["events"] == [["notifications/resources/list_changed", "notifications/resources/updated feed://latest"]] * 2
    summary = json.loads(report.read_text())
    assert summary["unmatched"] == [] and summary["unused"] == []
