"""`tapes view` pages opened in headless Chromium: every real cassette draws, and what the issue
asks to see is on screen (lanes, the event ids of a resumed stream, a cancellation).

Chromium is driven over the DevTools protocol on a pipe (`--remote-debugging-pipe`), so the test
needs nothing but the Debian `chromium` package (.ci/run installs it). Screenshots go to pytest's
tmp_path, or to $TAPES_VIEW_SCREENSHOTS when set (that is how docs/view.png is made).
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tapes.cassette.store import Cassette, CassetteWriter, Header, load
from tapes.cassette.frames import STDIO, Direction, Frame, Kind, http_channel
from tapes.render.view import Difference, render_comparison, render_page

from tests.support.browser import CHROMIUM, Browser
from tests.support.paths import ROOT, TAPES
from tests.support.samples import resumed_http_cassette

C2S, S2C = Direction.CLIENT_TO_SERVER, Direction.SERVER_TO_CLIENT
CASSETTES = sorted((ROOT / "cassettes").glob("**/*.tape"))

pytestmark = pytest.mark.skipif(
    not os.access(CHROMIUM, os.X_OK),
    reason="Chromium is not installed: `apt-get install chromium` (.ci/run installs it) to run the page tests",
)


# Whether an element is really on screen: scrolled into view, not hidden, and the topmost thing at
# its centre (not covered by a sticky header or the details panel).
VISIBLE = """(element) => {
  if (!element) return false;
  element.scrollIntoView({block: "center", inline: "nearest"});
  const box = element.getBoundingClientRect();
  if (box.width < 1 || box.height < 1) return false;
  const x = box.left + box.width / 2, y = box.top + box.height / 2;
  if (x < 0 || y < 0 || x > innerWidth || y > innerHeight) return false;
  const top = document.elementFromPoint(x, y);
  return element === top || element.contains(top);
}"""


def visible_texts(browser: Browser, selector: str) -> list[str]:
    """The texts of the elements matching `selector` that are on screen (each checked in turn)."""
    return browser.evaluate(
        f"[...document.querySelectorAll({json.dumps(selector)})]"
        f".filter({VISIBLE}).map((element) => element.textContent)"
    )


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Browser]:
    instance = Browser(tmp_path_factory.mktemp("chromium-profile"))
    yield instance
    instance.close()


@pytest.fixture
def screenshots(tmp_path: Path) -> Path:
    folder = Path(os.environ.get("TAPES_VIEW_SCREENSHOTS") or tmp_path)
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def open_page(browser: Browser, html: str, path: Path) -> None:
    path.write_text(html, encoding="utf-8")
    browser.open(path)
    assert browser.evaluate("document.querySelectorAll('.row').length") > 0, "the page drew no rows"


FIRST_CANCELLATION_CENTRED = """(async () => {
  const pane = document.querySelector('.scroll'), cancelled = () => document.querySelector('.row:has(.m-cancel)');
  for (let top = 0; !cancelled() && top < pane.scrollHeight; top += pane.clientHeight / 2) {
    pane.scrollTop = top;
    await new Promise((drawn) => requestAnimationFrame(drawn));
  }
  cancelled()?.scrollIntoView({block: 'center'});
})()"""

@pytest.mark.parametrize("cassette_path", CASSETTES, ids=lambda path: path.stem)
def test_every_cassette_draws_its_lanes_and_channels(
    browser: Browser, cassette_path: Path, tmp_path: Path, screenshots: Path
) -> None:
    cassette = load(cassette_path)
    open_page(browser, render_page(cassette, cassette_path.name), tmp_path / "page.html")
    assert browser.evaluate("document.querySelector('.count').textContent") == f"{len(cassette.frames)} frames"
    assert browser.evaluate("document.querySelectorAll('.row').length") <= len(cassette.frames)
    assert visible_texts(browser, ".heads .lane") == ["Client", "Server"]
    channels = list(dict.fromkeys(frame.channel for frame in cassette.frames))
    heads = browser.evaluate("[...document.querySelectorAll('.chhead')].map((head) => head.textContent)")
    assert [head.split(" ")[0] for head in heads] == channels
    # The screenshot shows the first cancellation, if there is one: only the rows on screen are
    # drawn, so the pane is scrolled down half a screen at a time until its row is.
    browser.evaluate(FIRST_CANCELLATION_CENTRED)
    browser.screenshot(screenshots / f"{cassette_path.stem}.png")


def test_the_stdio_cancellation_is_marked(browser: Browser, tmp_path: Path, screenshots: Path) -> None:
    path = ROOT / "cassettes" / "everything-stdio-2025-11-25.tape"
    open_page(browser, render_page(load(path), path.name), tmp_path / "page.html")
    cancel = "document.getElementById('s0f34')"  # notifications/cancelled for request 10
    assert browser.evaluate(f"({VISIBLE})({cancel}.querySelector('.m-cancel'))")
    assert browser.evaluate(f"{cancel}.querySelector('.m-cancel').textContent") == "✕ cancels #10"
    assert visible_texts(browser, "#s0f34 .m-race") == ["no response"]
    assert visible_texts(browser, "#s0f32 .m-cancel") == ["✕ cancelled"]
    assert visible_texts(browser, "#s0f38 .m-late") == ["after cancel"]  # progress went on
    browser.screenshot(screenshots / "cancellation.png")


def test_a_resumed_stream_shows_its_event_ids(browser: Browser, tmp_path: Path, screenshots: Path) -> None:
    open_page(browser, render_page(resumed_http_cassette(), "resumed.tape"), tmp_path / "page.html")
    assert visible_texts(browser, ".heads .lane") == ["Client", "Server"]
    assert visible_texts(browser, ".eid") == ["id e0", "id e1", "id e2", "id e3", "id e4"]
    assert visible_texts(browser, ".m-cut") == ["✂ stream cut"]
    assert visible_texts(browser, ".m-resume") == ["⟲ resumes http:1 after e2"]
    assert visible_texts(browser, ".m-resumed") == ["⟲ resumed by http:2"]
    assert visible_texts(browser, ".chhead") == ["http:1 POST tools/call #7", "http:2 GET resume"]
    # nothing from the cassette became markup or ran
    assert browser.evaluate("document.querySelectorAll('img, svg').length") == 0
    assert browser.evaluate("window.injected") is None
    browser.screenshot(screenshots / "resumed.png")


def test_clicking_a_frame_shows_its_json_and_http_head(browser: Browser, tmp_path: Path) -> None:
    open_page(browser, render_page(resumed_http_cassette(), "resumed.tape"), tmp_path / "page.html")
    browser.evaluate("document.getElementById('s0f11').click()")  # the result, on the resuming GET
    assert visible_texts(browser, "aside.details h2") == ["frame 11: result #7"]
    http = browser.evaluate("document.querySelector('aside.details pre.http').textContent")
    assert http.startswith("GET /mcp\nLast-Event-ID: e2") and "HTTP 200\nContent-Type: text/event-stream" in http
    frame = json.loads(browser.evaluate("document.querySelector('aside.details pre.json').textContent"))
    assert frame["message"]["id"] == 7 and frame["info"]["id"] == "e4"
    related = browser.evaluate("[...document.querySelectorAll('.row.related')].map((row) => row.id)")
    assert {"s0f2", "s0f5", "s0f10", "s0f11"} <= set(related)  # the request, its progress, its result


def test_a_page_whose_frames_cannot_be_read_says_so(browser: Browser, tmp_path: Path) -> None:
    page = render_page(resumed_http_cassette(), "resumed.tape")
    rows = len(resumed_http_cassette().frames)
    damaged = page.replace(f'"rows":{rows},', f'"rows":{rows + 1},')  # one frame more than the page holds
    assert damaged != page
    (tmp_path / "page.html").write_text(damaged, encoding="utf-8")
    browser.open(tmp_path / "page.html")
    said = browser.evaluate("document.querySelector('.unreadable')?.textContent")
    assert said.startswith("tapes view: this page's frames could not be read (byte ")


def test_the_filter_box_keeps_frames_of_one_id(browser: Browser, tmp_path: Path) -> None:
    path = ROOT / "cassettes" / "everything-stdio-2025-11-25.tape"
    open_page(browser, render_page(load(path), path.name), tmp_path / "page.html")
    shown = browser.evaluate(FILTER.replace("QUERY", json.dumps("#10")))
    # request 10, its progress and the cancellation that names it; not #1 or #11
    assert shown == [32, 33, 34, 38, 39, 40, 41]
    assert browser.evaluate("document.querySelector('.count').textContent") == "7 of 43 frames"
    assert [int(n) for n in browser.evaluate(FILTER.replace("QUERY", json.dumps("cancelled")))] == [34]


# Types into the filter box and resolves, once the count has changed, to the shown rows' seqs.
FILTER = """new Promise((done) => {
  const box = document.querySelector("input.filter"), count = document.querySelector(".count");
  new MutationObserver(() => done([...document.querySelectorAll(".row > .seq")].map((seq) => Number(seq.textContent))
    .sort((a, b) => a - b))).observe(count, {childList: true, characterData: true, subtree: true});
  box.value = QUERY;
  box.dispatchEvent(new Event("input"));
})"""


def test_two_sessions_side_by_side_with_their_differences(browser: Browser, tmp_path: Path, screenshots: Path) -> None:
    old = load(ROOT / "cassettes" / "everything-stdio-2025-11-25.tape")
    differences = [Difference("tools/call echo: result text changed", (18,), (11,), "changed"),
                   Difference("tools/call #11 removed", (35, 36), (), "breaking")]
    page = render_comparison(old, resumed_http_cassette(), differences, titles=("old.tape", "new.tape"))
    open_page(browser, page, tmp_path / "page.html")
    assert browser.evaluate("document.querySelectorAll('section.pane').length") == 2
    assert visible_texts(browser, "details.diffs summary") == ["2 differences"]
    browser.evaluate("document.querySelector('details.diffs button').click()")  # scrolls both sides to it
    assert visible_texts(browser, "#s0f18 .m-diff, #s1f11 .m-diff") == ["≠ tools/call echo: result text changed"] * 2
    assert browser.evaluate("document.querySelectorAll('.row.diff').length") == 4
    browser.screenshot(screenshots / "comparison.png")


def test_a_thousand_frames_over_many_streams_draw(browser: Browser, tmp_path: Path, screenshots: Path) -> None:
    """A long HTTP session: one channel per POST, so channels share columns (as few as overlap)."""
    exchange = resumed_http_cassette().frames
    frames = []
    for copy in range(1000 // len(exchange) + 1):
        for frame in exchange:
            channel = http_channel(int(frame.channel.split(":")[1]) + 2 * copy)
            frames.append(Frame(len(frames) + 1, len(frames) * 0.01, frame.direction, channel, frame.kind,
                                frame.message, frame.data, frame.info))
    open_page(browser, render_page(Cassette(Header("http", {"url": "http://x/mcp"}), frames[:1000]), "long.tape"),
              tmp_path / "page.html")
    assert browser.evaluate("document.querySelector('.count').textContent") == "1000 frames"
    assert browser.evaluate("document.querySelectorAll('.row').length") < 100  # only those on screen
    # each cut POST ends before the GET that resumes it starts: one column carries all 168 channels
    assert browser.evaluate("document.querySelectorAll('.chhead').length") == 1
    assert visible_texts(browser, "#s0f1 .chtag") == ["http:1"]
    browser.screenshot(screenshots / "long.png")


def test_tapes_diff_html_shows_the_cross_era_mapping(browser: Browser, tmp_path: Path, screenshots: Path) -> None:
    old, new = (str(ROOT / "cassettes" / f"notes-stdio-{era}.tape") for era in ("2025-11-25", "2026-07-28"))
    done = subprocess.run([*TAPES, "diff", old, new, "--format", "html"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 1 and done.stderr == ""
    open_page(browser, done.stdout, tmp_path / "diff.html")
    assert browser.evaluate("document.querySelectorAll('section.pane').length") == 2
    summaries = visible_texts(browser, "details.diffs summary")
    assert len(summaries) == 1 and summaries[0].endswith("differences")
    notes = browser.evaluate("[...document.querySelectorAll('details.diffs li')].map(li => li.textContent).join('\\n')")
    assert "tools/call ask_model: same behaviour, expressed as in 2026-07-28" in notes
    assert "protocol version" in notes
    assert "set aside (" in notes and "resultType \"complete\" on results" in notes  # as the text report lists them
    browser.screenshot(screenshots / "diff.png")


BIG = 50_000  # frames: far more rows than a page could hold in its DOM


def big_cassette(path: Path) -> None:
    """BIG frames of stdio traffic: tool calls with progress and a stderr line, and their results."""
    header = Header("stdio", {"command": ["python", "server.py"]})
    with CassetteWriter(path, header) as writer:
        for n in range(BIG // 4):
            seq, t = 4 * n + 1, n * 0.004
            writer.write([
                Frame(seq, t, C2S, STDIO, Kind.MESSAGE, {"jsonrpc": "2.0", "id": f"call-{n}", "method": "tools/call",
                      "params": {"name": "weather", "arguments": {"city": f"City {n}"}, "_meta": {"progressToken": n}}}),
                Frame(seq + 1, t + 0.001, S2C, STDIO, Kind.MESSAGE, {"jsonrpc": "2.0", "method": "notifications/progress",
                      "params": {"progressToken": n, "progress": 0.5}}),
                Frame(seq + 2, t + 0.002, S2C, STDIO, Kind.STDERR, data=f"fetching City {n}".encode()),
                Frame(seq + 3, t + 0.003, S2C, STDIO, Kind.MESSAGE,
                      {"jsonrpc": "2.0", "id": f"call-{n}", "result": {"content": [{"type": "text", "text": f"{n} C"}]}}),
            ])


def scrolled(browser: Browser, top: str) -> None:
    """Scroll the pane to `top` (a JS expression of the scroll element `s`) and wait until it is drawn."""
    browser.evaluate(f"(() => {{ const s = document.querySelector('.scroll'); s.scrollTop = {top}; }})()")
    browser.evaluate("new Promise((done) => requestAnimationFrame(() => requestAnimationFrame(done)))")


def test_a_big_cassette_keeps_only_the_rows_on_screen_in_the_page(browser: Browser, tmp_path: Path) -> None:
    big_cassette(tmp_path / "big.tape")
    done = subprocess.run([*TAPES, "view", str(tmp_path / "big.tape"), "-o", str(tmp_path / "big.html")],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    browser.open(tmp_path / "big.html")
    assert browser.evaluate("document.querySelector('.count').textContent") == f"{BIG} frames"
    assert 0 < browser.evaluate("document.querySelectorAll('.row').length") < 150
    assert visible_texts(browser, "#s0f1 .what") == ['request tools/call #"call-0"']

    scrolled(browser, "s.scrollHeight")  # the end: the last frames are drawn, and only a window of rows
    assert visible_texts(browser, f"#s0f{BIG} .what") == [f"result #\"call-{BIG // 4 - 1}\""]
    assert browser.evaluate("document.querySelectorAll('.row').length") < 150
    assert browser.evaluate("document.getElementById('s0f1')") is None

    # the filter finds a request deep in the file and its result, by id or by text in their JSON
    assert browser.evaluate(FILTER.replace("QUERY", json.dumps("#call-11111"))) == [44445, 44448]
    assert browser.evaluate("document.querySelector('.count').textContent") == f"2 of {BIG} frames"
    assert browser.evaluate(FILTER.replace("QUERY", json.dumps("city 12345"))) == [49381, 49383]  # text in the JSON

    browser.evaluate("document.getElementById('s0f49381').click()")  # expands the frame
    assert visible_texts(browser, "aside.details h2") == ['frame 49381: request tools/call #"call-12345"']
    frame = json.loads(browser.evaluate("document.querySelector('aside.details pre.json').textContent"))
    assert frame["message"]["params"]["arguments"] == {"city": "City 12345"}
    assert visible_texts(browser, "#s0f49381 .m-progress") == ["progress ×1"]

    browser.evaluate(FILTER.replace("QUERY", '""'))  # all rows again; the interaction's links jump to its result
    browser.evaluate("document.querySelector('aside.details .links a[data-target=\"49384\"]').click()")
    assert visible_texts(browser, ".row.selected .what") == ['result #"call-12345"']
    assert visible_texts(browser, "#s0f49381.related .what") == ['request tools/call #"call-12345"']
