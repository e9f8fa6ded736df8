"""`tapes show`: the timeline of a cassette, rendered into a fixed-width console."""

from __future__ import annotations

import io
from collections.abc import Iterator

import pytest
from rich.console import Console

from tapes.cassette.store import Cassette
from tapes.cassette.frames import STDIO, Direction, Frame, Kind
from tapes.render.show import print_frames, print_timeline

from tests.support.samples import TIMELINE_FRAMES, TIMELINE_HEADER

C2S, S2C = Direction.CLIENT_TO_SERVER, Direction.SERVER_TO_CLIENT
WIDTH = 120
WARNING = "a.tape: the last frame is truncated at byte 905 (12 bytes ignored); the 15 frames before it are kept"


def _render(cassette: Cassette, width: int | None = WIDTH, console_width: int = WIDTH) -> list[str]:
    console = Console(file=io.StringIO(), width=console_width, color_system=None)
    print_timeline(cassette, width=width, console=console)
    output = console.file.getvalue()  # type: ignore[attr-defined]
    # No control characters (terminal escapes), not even the cassette's own: only newlines.
    assert not [char for char in output if char != "\n" and (ord(char) < 0x20 or 0x7F <= ord(char) < 0xA0)]
    # Nor spaces at line ends: a timeline pasted from a terminal (a README, an issue) has none.
    assert [line for line in output.splitlines() if line != line.rstrip()] == []
    return output.splitlines()


@pytest.fixture(scope="module")
def lines() -> list[str]:
    return _render(Cassette(TIMELINE_HEADER, TIMELINE_FRAMES, [WARNING]))


def _row(lines: list[str], seq: int) -> str:
    (row,) = [line for line in lines if line.split(" ", 1)[0] == str(seq) or line.startswith(f" {seq} ")]
    return row


def test_header_block(lines: list[str]) -> None:
    header = "\n".join(lines[: lines.index(next(line for line in lines if "summary" in line))])
    assert "transport    stdio" in header
    assert "server       python 'weather server.py' --units metric" in header
    assert "created      2026-01-02T03:04:05.000006+00:00" in header
    assert "protocol     2025-06-18" in header
    assert "frames       15" in header
    assert "suite=[bold]weather[/]" in header  # cassette text is never rich markup
    assert "warning      a.tape: the last frame is truncated at byte 905" in header


def test_one_row_per_frame_within_the_width(lines: list[str]) -> None:
    heading = next(index for index, line in enumerate(lines) if "summary" in line)
    assert lines[heading].split() == ["#", "time", "dir", "channel", "what", "summary"]
    rows = lines[heading + 1 :]
    assert [int(row.split()[0]) for row in rows] == [frame.seq for frame in TIMELINE_FRAMES]
    assert all(len(line) <= WIDTH for line in lines)


@pytest.mark.parametrize(
    ("seq", "pieces"),
    [
        (1, ["+0.000s", "C→S", "stdio", "request initialize #0", "{}"]),
        (2, ["+0.012s", "S→C", "result #0", '{"protocolVersion":"2025-06-18"}']),
        (3, ["C→S", "request tools/call #4", '{"name":"get_weather","arguments":{"city":"Oslo"}}']),
        (4, ["notification notifications/progress", '{"progressToken":4,"progress":0.5}']),
        (5, ["result #4", '{"content":[{"text":"-3 C"}]}']),
        (6, ['error #"x7" -32601', "Method not found"]),
        (7, ["batch [3]", "request ping #5, request tools/list #6, notification"]),
        (8, ["raw 13 B", "Server ready\ufffd"]),
        (9, ["stderr", "INFO \\x1b[31mred\\x1b[0m listening"]),
        (10, ["http:1", "http request", 'method="POST" path="/mcp"']),
        (11, ["http response", "status=202"]),
        (12, ["http:2", "sse event", 'id="ev-9" event=null retry=500 data=""']),  # a priming event
        (13, ["raw 16 B (partial)", '{"jsonrpc":"2.0"']),
        (14, ["stream end", 'reason="eof"']),
        (15, ["+12.250s", "exit", "code=0 signal=null"]),
    ],
)
def test_row_says_what_the_frame_is(lines: list[str], seq: int, pieces: list[str]) -> None:
    row = _row(lines, seq)
    for piece in pieces:
        assert piece in row


def test_big_payload_is_cut_to_one_line() -> None:
    result = {"content": [{"type": "text", "text": "x" * 5_000_000}], "nested": [[[[[]]]]] * 100_000}
    frames = [Frame(1, 0.0, S2C, STDIO, Kind.MESSAGE, {"jsonrpc": "2.0", "id": 1, "result": result})]
    row = _render(Cassette(TIMELINE_HEADER, frames))[-1]
    assert row.endswith("…")
    assert len(row) == WIDTH
    assert '{"content":[{"type":"text","text":"xxx' in row


def test_message_carried_by_an_sse_event_is_described() -> None:
    message = {"jsonrpc": "2.0", "id": 3, "result": {}}
    frames = [Frame(1, 0.0, S2C, "http:3", Kind.SSE_EVENT, message, info={"id": "1"})]
    assert "sse event result #3" in _render(Cassette(TIMELINE_HEADER, frames))[-1]


def test_control_characters_from_the_cassette_are_escaped() -> None:
    message = {"jsonrpc": "2.0", "id": 1, "method": "evil\n\x9b2J", "params": {"x": "\x1b]0;title\x07\x9b31m"}}
    row = _render(Cassette(TIMELINE_HEADER, [Frame(1, 0.0, C2S, "ch\r", Kind.MESSAGE, message)]))[-1]
    assert "ch\\x0d" in row
    assert "request evil\\x0a\\x9b2J #1" in row
    assert '{"x":"\\u001b]0;title\\u0007\\x9b31m"}' in row


@pytest.mark.parametrize("width", [30, 60])
def test_narrow_widths(width: int) -> None:
    assert all(len(line) <= width for line in _render(Cassette(TIMELINE_HEADER, TIMELINE_FRAMES), width=width))


def test_wide_console() -> None:
    cassette = Cassette(TIMELINE_HEADER, TIMELINE_FRAMES)
    wide = _render(cassette, width=None, console_width=200)  # the console's width
    assert '{"name":"get_weather","arguments":{"city":"Oslo"}}' in _row(wide, 3)


def test_empty_cassette() -> None:
    lines = _render(Cassette(TIMELINE_HEADER, []))
    assert "frames       0" in lines
    assert "protocol     unknown" in lines
    assert lines[-1] == "(no frames)"


def test_a_stream_of_frames_is_printed_as_it_is_read() -> None:
    """Rows come a chunk at a time, long before the last frame is read; what is known only at the
    end (how many frames, the warnings) follows them."""
    read = 0

    def frames() -> Iterator[Frame]:
        nonlocal read
        for seq in range(1, 3001):
            read = seq
            yield Frame(seq, seq / 1000, C2S, STDIO, Kind.MESSAGE, {"jsonrpc": "2.0", "id": seq, "method": "ping"})

    read_by_first_row = []

    class Terminal(io.StringIO):
        def write(self, text: str) -> int:
            if "request ping #1" in text and not read_by_first_row:
                read_by_first_row.append(read)
            return super().write(text)

    console = Console(file=Terminal(), width=WIDTH, color_system=None)
    print_frames(TIMELINE_HEADER, frames(), lambda: [WARNING], console=console)
    lines = [line.rstrip() for line in console.file.getvalue().splitlines()]  # type: ignore[attr-defined]
    assert read_by_first_row == [1000]  # one chunk read of 3000
    heading = next(index for index, line in enumerate(lines) if "summary" in line)
    assert not any(line.startswith("frames") for line in lines[:heading])
    assert [int(line.split()[0]) for line in lines[heading + 1 : heading + 3001]] == list(range(1, 3001))
    assert lines[heading + 3001 :] == ["frames       3000", "protocol     unknown", f"warning      {WARNING}"[:WIDTH]]
