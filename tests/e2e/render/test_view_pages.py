"""The frames a `tapes view` page carries, as its script reads them (run under Node): a v2
cassette's records copied as they are stored, anything else packed as the writer packs it, and
either way the same rows; a cut-off file, odd values and hostile cassettes."""

from __future__ import annotations

import io
import tempfile
from pathlib import Path

import msgpack
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tapes.cassette.frames import STDIO, Direction, Frame, Kind
from tapes.cassette.store import Cassette, CassetteError, CassetteWriter, Header, load, save, stream
from tapes.render.view import Side, render_page, write_page

from tests.support.hostile_cassettes import cassettes, mutated_cassettes, recursion_as_in_the_cli
from tests.support.paths import CASSETTES
from tests.support.view_page import model_of, page_data

C2S, S2C = Direction.CLIENT_TO_SERVER, Direction.SERVER_TO_CLIENT


def streamed_page(path: Path) -> str:
    """The page as `tapes view` writes it: the cassette read as a stream."""
    out = io.BytesIO()
    with stream(path) as frames:
        write_page(out, path.name, [Side.of_stream(frames, str(path), path.name)])
    return out.getvalue().decode()


@pytest.mark.parametrize("path", sorted(CASSETTES.glob("*.tape")), ids=lambda path: path.name)
def test_a_v2_cassette_is_copied_as_stored_and_reads_as_its_frames_packed_anew(path: Path) -> None:
    page = streamed_page(path)
    with stream(path) as frames:
        assert frames.v2_frames_at is not None
        stored = path.read_bytes()[frames.v2_frames_at :]
    assert page_data(page)[1] == [stored]  # the file's own bytes, not packed again
    assert model_of(page)["sides"][0]["rows"] == model_of(render_page(load(path), path.name))["sides"][0]["rows"]


def test_a_jsonl_cassette_reads_as_its_msgpack_twin(tmp_path: Path) -> None:
    source = CASSETTES / "everything-http-2025-11-25.tape"
    save(load(source), tmp_path / "twin.jsonl")
    twin = model_of(streamed_page(tmp_path / "twin.jsonl"))["sides"][0]
    original = model_of(streamed_page(source))["sides"][0]
    assert twin["rows"] == original["rows"] and twin["channels"] == original["channels"]


def test_a_cut_off_cassette_shows_its_whole_frames_and_says_the_last_was_cut(tmp_path: Path) -> None:
    source = CASSETTES / "everything-stdio-2025-11-25.tape"
    cut = tmp_path / "cut.tape"
    cut.write_bytes(source.read_bytes()[:-7])  # the last frame loses its end, as a killed recorder leaves it
    side = model_of(streamed_page(cut))["sides"][0]
    whole = model_of(streamed_page(source))["sides"][0]
    assert side["rows"] == whole["rows"][:-1]
    assert any("truncated" in warning for warning in side["warnings"])


def test_values_json_has_no_word_for_keep_their_meaning(tmp_path: Path) -> None:
    """A `__proto__` key is a key like any other (the npm msgpack decoder refuses the whole input
    for one), and so are Object.prototype's names and keys that are not ASCII (the page caches
    ASCII keys by their bytes); integers past 2^53 keep their digits in the filter's ids, and as a
    frame's seq or time are as near as a number gets; msgpack bytes as keys and values are named
    with their base64, as `tapes export` names them."""
    big = 2**63 + 5
    frames = [
        Frame(1, 0.0, C2S, STDIO, Kind.MESSAGE, {"jsonrpc": "2.0", "id": big, "method": "tools/call",
                                                 "params": {"__proto__": {"polluted": True}, b"\x01": b"\x00\xff"}}),
        Frame(2, 0.1, S2C, STDIO, Kind.MESSAGE, {"jsonrpc": "2.0", "id": big, "result": {"constructor": 1, "é": 2, "Ã©": 3}}),
        Frame(2**63 - 1, 0.2, S2C, STDIO, Kind.STDERR, data=b"a frame number past 2^53"),
    ]
    path = tmp_path / "odd.tape"
    with CassetteWriter(path, Header("stdio", {"command": ["server"]})) as writer:
        writer.write(frames)
    with path.open("ab") as file:  # a time stored as an integer, wider than 2^53 (the loader takes it)
        file.write(msgpack.packb([3, 2**62, 1, 0, 2, None, b"late"]))
    rows = model_of(streamed_page(path))["sides"][0]["rows"]
    assert [row["what"] for row in rows] == [f"request tools/call #{big}", f"result #{big}", "stderr", "stderr"]
    assert float(rows[3]["t"]) == float(2**62)
    assert float(rows[2]["seq"]) == float(2**63 - 1)  # as near as the page's numbers hold it
    assert rows[0]["ids"] == [str(big)] and rows[0]["g"] == rows[1]["g"] == 0  # tied by their (exact) id
    params = rows[0]["body"]["message"]["params"]
    assert params == {"__proto__": {"polluted": True}, "<1 bytes: AQ==>": "<2 bytes: AP8=>"}
    assert rows[1]["body"]["message"]["result"] == {"constructor": 1, "é": 2, "Ã©": 3}


def test_channels_a_jsonl_cassette_names_with_a_lone_surrogate_keep_their_frames(tmp_path: Path) -> None:
    """Such a channel has no msgpack form: the page names it escaped, and every frame on it, packed
    as it is or shown escaped, stays on it (the channels are numbered as the page reads them)."""
    odd, other = "http:\udfff", "http:2"
    weird = {"jsonrpc": "2.0", "id": 1, "method": "m", "params": {"text": "\ud800"}}  # no msgpack form either
    plain = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    channels = [odd, odd, "http:\udffe", odd, other, other]
    messages = [weird, plain, plain, weird, plain, plain]
    frames = [Frame(n, n / 10, C2S, channel, Kind.MESSAGE, message)
              for n, (channel, message) in enumerate(zip(channels, messages, strict=True), start=1)]
    save(Cassette(Header("http", {"url": "http://x/mcp"}), frames), tmp_path / "odd.jsonl")
    side = model_of(streamed_page(tmp_path / "odd.jsonl"))["sides"][0]
    names = [side["channels"][row["ch"]]["name"] for row in side["rows"]]
    assert names == ["http:\\udfff", "http:\\udfff", "http:\\udffe", "http:\\udfff", other, other]


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.one_of(cassettes(), mutated_cassettes()))
def test_the_page_s_script_reads_every_frame_of_any_cassette_that_loads(file: tuple[bytes, str]) -> None:
    content, name = file
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / name
        path.write_bytes(content)
        try:
            loaded = load(path)
        except CassetteError:  # refused by view too (test_damaged_cassettes)
            return
        with recursion_as_in_the_cli():
            page = streamed_page(path)
    side = model_of(page)["sides"][0]
    assert [(row["seq"], row["dir"]) for row in side["rows"]] == \
        [(frame.seq, "c" if frame.from_client else "s") for frame in loaded.frames]
