"""subscriptions/listen (2026-07-28) in replay: the acknowledgment goes out at once, each event waits
for the client action recorded before it, a recorded close by the server comes after what caused
it, the live listen id is stamped on all the stream carries, and a live client may close the
stream first (over stdio: notifications/cancelled; over HTTP: closing the response stream)."""

from __future__ import annotations

import json
from typing import Any

from tapes.cassette.frames import Direction, Kind
from tapes.replay.engine import ReplayEngine, Repeats
from tapes.wire.eras import SUBSCRIPTION_ID_KEY

from tests.support.messages import note, req, res
from tests.support.recordings import Recording, recording, send

S = Direction.SERVER_TO_CLIENT
FILTER = {"notifications": {"resourcesListChanged": True}}


def tagged(message: dict[str, Any], listen_id: Any) -> dict[str, Any]:
    """The message as a listen stream carries it: its subscription id in its _meta."""
    member = "result" if "result" in message else "params"
    return {**message, member: {**(message.get(member) or {}), "_meta": {SUBSCRIPTION_ID_KEY: listen_id}}}


def ack(listen_id: Any) -> dict[str, Any]:
    return tagged(note("notifications/subscriptions/acknowledged", FILTER), listen_id)


def changed(listen_id: Any) -> dict[str, Any]:
    return tagged(note("notifications/resources/list_changed"), listen_id)


def closed(listen_id: Any) -> dict[str, Any]:
    return tagged(res(listen_id, {}), listen_id)


def stdio_session() -> list:
    return recording(
        ("c", req("listen-1", "subscriptions/listen", FILTER)), ("s", ack("listen-1")),
        ("c", req(2, "tools/call", {"name": "post"})), ("s", changed("listen-1")), ("s", res(2, "posted")),
        ("c", req(3, "tools/call", {"name": "close_feeds"})), ("s", closed("listen-1")), ("s", res(3, "closed")),
    )


def test_events_and_the_servers_close_wait_for_what_caused_them() -> None:
    engine = ReplayEngine(stdio_session())
    assert send(engine, req("listen-1", "subscriptions/listen", FILTER)) == [ack("listen-1")]
    assert send(engine, req(7, "tools/call", {"name": "post"})) == [changed("listen-1"), res(7, "posted")]
    assert send(engine, req(8, "tools/call", {"name": "close_feeds"})) == [closed("listen-1"), res(8, "closed")]
    assert engine.report.clean and engine.report.unused == []


def test_the_live_listen_id_is_the_subscription_id_of_everything_on_the_stream() -> None:
    engine = ReplayEngine(stdio_session())
    assert send(engine, req("sub-9", "subscriptions/listen", FILTER)) == [ack("sub-9")]
    assert send(engine, req(7, "tools/call", {"name": "post"}))[0] == changed("sub-9")
    assert send(engine, req(8, "tools/call", {"name": "close_feeds"}))[0] == closed("sub-9")


def test_a_live_client_may_close_the_stream_first() -> None:
    engine = ReplayEngine(stdio_session())
    send(engine, req("listen-1", "subscriptions/listen", FILTER))
    assert send(engine, note("notifications/cancelled", {"requestId": "listen-1"})) == []
    # the post still gets its answer; the stream's event and close no longer go out
    assert send(engine, req(7, "tools/call", {"name": "post"})) == [res(7, "posted")]
    assert send(engine, req(8, "tools/call", {"name": "close_feeds"})) == [res(8, "closed")]
    assert engine.report.clean


def test_a_recorded_close_by_the_client_is_played_as_recorded() -> None:
    frames = recording(
        ("c", req("listen-1", "subscriptions/listen", FILTER)), ("s", ack("listen-1")),
        ("c", note("notifications/cancelled", {"requestId": "listen-1"})),
        ("c", req(2, "tools/call", {"name": "post"})), ("s", res(2, "posted")),
    )
    engine = ReplayEngine(frames)
    send(engine, req("listen-1", "subscriptions/listen", FILTER))
    assert send(engine, note("notifications/cancelled", {"requestId": "listen-1"})) == []
    assert send(engine, req(7, "tools/call", {"name": "post"})) == [res(7, "posted")]
    assert engine.report.clean and engine.report.unused == []


def http_session() -> Recording:
    """2026-07-28 over Streamable HTTP: the listen POST's SSE stream carries the stream; each post is
    an exchange of its own."""
    r = Recording()
    r.post(1, req("listen-1", "subscriptions/listen", FILTER))
    r.head(1, 200)
    r.event(1, "", ack("listen-1"))
    r.post(2, req(2, "tools/call", {"name": "post"}))
    r.head(2, 200, sse=False)
    r.add(S, 2, Kind.MESSAGE, res(2, "posted"))
    r.event(1, "", changed("listen-1"))
    r.end(2)
    r.post(3, req(3, "tools/call", {"name": "close_feeds"}))
    r.head(3, 200, sse=False)
    r.add(S, 3, Kind.MESSAGE, res(3, "closed"))
    r.event(1, "", closed("listen-1"))
    r.end(1)
    r.end(3)
    return r


def released(engine: ReplayEngine, message: Any) -> list[tuple[str, Any]]:
    """(channel, message) of the JSON-RPC messages a live message released."""
    reception = engine.receive(json.dumps(message).encode())
    return [(action.frame.channel, json.loads(action.payload)) for action in reception.actions if action.frame.message is not None]


def test_over_http_the_listen_streams_events_wait_for_the_posts_that_caused_them() -> None:
    engine = ReplayEngine(http_session().frames)
    assert released(engine, req("listen-1", "subscriptions/listen", FILTER)) == [("http:1", ack("listen-1"))]
    assert released(engine, req(7, "tools/call", {"name": "post"})) == [("http:2", res(7, "posted")), ("http:1", changed("listen-1"))]
    assert released(engine, req(8, "tools/call", {"name": "close_feeds"})) == [("http:3", res(8, "closed")), ("http:1", closed("listen-1"))]
    assert engine.report.clean


def test_over_http_a_live_client_closing_the_listen_stream_is_no_miss() -> None:
    engine = ReplayEngine(http_session().frames)
    released(engine, req("listen-1", "subscriptions/listen", FILTER))
    engine.close_stream("http:1")
    assert released(engine, req(7, "tools/call", {"name": "post"})) == [("http:2", res(7, "posted"))]
    assert engine.report.clean


def test_a_repeated_listen_is_a_miss_even_under_repeats_allow() -> None:
    """Answered again, its stream would carry at once events that came of the client's later
    requests (and the server's close): a client would take them as happening now."""
    engine = ReplayEngine(stdio_session(), repeats=Repeats.ALLOW)
    send(engine, req("listen-1", "subscriptions/listen", FILTER))
    send(engine, req(7, "tools/call", {"name": "post"}))
    [error] = send(engine, req("listen-2", "subscriptions/listen", FILTER))
    assert "whose stream is not served again" in error["error"]["message"]
    assert send(engine, req(8, "tools/call", {"name": "post"})) == [res(8, "posted")]  # a short request is answered again
    assert len(engine.report.unmatched) == 1
