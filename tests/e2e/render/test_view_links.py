"""`tapes view`'s page ties frames to requests in a pass of its own, in its script (view_model.js,
run here under Node; it cannot hold the replay index of a million frames); these tests hold it to the replay index's ownership rules: for every
message frame, the page groups it under the request the index ties it to, in every committed
cassette and in generated stdio sessions that interleave requests, progress, server requests,
answers and cancellations, with ids and tokens reused."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tapes.cassette.frames import Frame
from tapes.cassette.store import Cassette, Header, load
from tapes.render.view import render_page
from tapes.replay.index import RecordingIndex
from tapes.replay.sessions import split_sessions

from tests.support.messages import note, progress, req, res
from tests.support.paths import CASSETTES
from tests.support.recordings import recording
from tests.support.view_page import model_of

NOBODY = -1  # a frame tied to no request


def view_owners(cassette: Cassette) -> dict[int, int]:
    """Each drawn message frame's seq -> the seq of the request the page groups it under."""
    rows = model_of(render_page(cassette, "t"))["sides"][0]["rows"]
    request_of_group: dict[int, int] = {}
    for row in rows:
        if row.get("g", NOBODY) != NOBODY and row["dir"] == "c" and row["type"] == "request":
            request_of_group.setdefault(row["g"], row["seq"])
    return {row["seq"]: request_of_group.get(row.get("g", NOBODY), NOBODY) for row in rows}


def index_owners(frames: list[Frame]) -> dict[int, int]:
    """Each message frame's seq -> the seq of the request the replay index ties its first item to."""
    owners: dict[int, int] = {}
    for session in split_sessions(frames):
        index = RecordingIndex.of(session.frames)
        for interaction in index.interactions:
            for seq, _ in interaction.client_items + interaction.cancel_items:
                owners.setdefault(seq, interaction.frame_seq)
        for item in index.server_items:
            if item.frame.message is not None:
                first = item.owners[0] if item.owners else None
                owners[item.frame.seq] = first.frame_seq if first is not None else NOBODY
    return owners


def assert_same_owners(cassette: Cassette) -> None:
    drawn, indexed = view_owners(cassette), index_owners(cassette.frames)
    for frame in cassette.frames:
        if frame.message is None or not isinstance(frame.message, dict):
            continue  # heads, ends, raw lines; a batch's row is grouped by its first item only
        assert drawn[frame.seq] == indexed.get(frame.seq, NOBODY), (frame.seq, frame.message)


@pytest.mark.parametrize("path", sorted(CASSETTES.glob("**/*.tape")), ids=lambda path: path.stem)
def test_every_committed_cassette_is_grouped_as_the_replay_index_ties_it(path: Path) -> None:
    assert_same_owners(load(path))


_IDS = st.sampled_from([1, 2, 3, "a"])  # few, so that ids are reused
_SERVER_IDS = st.sampled_from([10, 11])
_EVENTS = st.one_of(
    st.builds(lambda id_, token: ("c", req(id_, "tools/call", {"name": "x"}, token=token)), _IDS,
              st.sampled_from([None, "t1", "t2"])),
    st.builds(lambda id_: ("s", res(id_, {})), _IDS),
    st.builds(lambda token: ("s", progress(token, 1)), st.sampled_from(["t1", "t2"])),
    st.builds(lambda id_: ("s", req(id_, "sampling/createMessage", {})), _SERVER_IDS),
    st.builds(lambda id_: ("c", res(id_, {})), _SERVER_IDS),
    st.builds(lambda id_: ("c", note("notifications/cancelled", {"requestId": id_})), _IDS),
    st.builds(lambda id_: ("s", note("notifications/cancelled", {"requestId": id_})), _SERVER_IDS),
)


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(st.lists(_EVENTS, max_size=12))
def test_generated_stdio_sessions_are_grouped_as_the_replay_index_ties_them(events: list[tuple[str, Any]]) -> None:
    assert_same_owners(Cassette(Header(transport="stdio", server={"command": ["server"]}), recording(*events)))
