"""HTTP peers for the end-to-end tests: server-everything and the resumable server on free ports,
the notes server over HTTP, `tapes record` as a proxy, and a replay server's report."""

from __future__ import annotations

import shutil
import signal
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from tapes.cassette.store import Cassette, load

from tests.support.paths import EVERYTHING_JS, FEED_SERVER, NOTES_SERVER, RESUMABLE_SERVER, TAPES
from tests.support.processes import Process, free_port


def start_everything(mode: str) -> tuple[Process, str]:
    """server-everything over HTTP; it reads its port from $PORT (and binds every interface)."""
    node = shutil.which("node")
    if node is None or not EVERYTHING_JS.exists():
        pytest.fail("server-everything is not installed: run `npm install --prefix tests/peers`")
    port = free_port()
    server = Process([node, str(EVERYTHING_JS), mode], env={"PORT": str(port)})
    server.wait_for(r"listening on port|running on port")
    return server, f"http://127.0.0.1:{port}/{'sse' if mode == 'sse' else 'mcp'}"


def start_feed() -> tuple[Process, str]:
    """tests/servers/feed_server.py over Streamable HTTP on a free port."""
    server = Process([*FEED_SERVER, "--http"])
    return server, server.wait_for(r"listening on (\S+)")[1]


def start_resumable() -> tuple[Process, str]:
    server = Process(RESUMABLE_SERVER)
    return server, server.wait_for(r"listening on (\S+)")[1]


class Tapes:
    """`tapes record --upstream` or `tapes replay --http` on a free port (its URL from the line that
    starts with `banner`), stopped with Ctrl-C."""

    def __init__(self, *argv: str, banner: str) -> None:
        self.process = Process([*TAPES, *argv, "--listen", "127.0.0.1:0"])
        self.url = self.process.wait_for(rf"tapes: {banner} (http://\S+)")[1]

    def stop(self) -> tuple[int, str]:
        """Its exit code and what it said on stderr (a replay's summary)."""
        code = self.process.stop(signal.SIGINT)
        return code, self.process.rest_of_stderr()


class Recorder:
    """`tapes record` as a reverse proxy to `upstream` (or a forward proxy), on a free port."""

    def __init__(self, cassette: Path, upstream: str | None, *options: str) -> None:
        self.cassette = cassette
        target = ["--upstream", upstream] if upstream else ["--proxy"]
        self.process = Process([*TAPES, "record", "-o", str(cassette), *target, "--listen", "127.0.0.1:0", *options])
        banner = self.process.wait_for(r"tapes: recording (?:forward proxy at )?(http://[^\s/]+)(\S*)")
        self.origin = banner[1]
        self.url = banner[1] + banner[2]  # where the client goes instead of upstream

    def stop(self, signum: int = signal.SIGINT) -> Cassette:
        """Stop it as a user does (Ctrl-C, or SIGTERM from a supervisor): it exits 0, cassette complete."""
        assert self.process.stop(signum) == 0, self.process.rest_of_stderr()
        return load(self.cassette)


def record_session(path: Path, upstream: str, drive: Callable[[str], Any]) -> tuple[Cassette, Any]:
    """Run `drive(url)` through `tapes record --upstream`; the cassette and what `drive` returned."""
    recorder = Recorder(path, upstream)
    try:
        live = drive(recorder.url)
    finally:
        recorder.process.stop(signal.SIGINT)
    return load(path), live


def assert_clean(server: Any) -> None:
    assert all(" 0 unmatched, 0 unused" in line for line in server.report_lines if "played" in line), server.report_lines


@contextmanager
def notes_over_http(stderr: list[str] | None = None, transport: str = "--http") -> Iterator[str]:
    """A fresh notes server (its notes start empty) over Streamable HTTP (or legacy HTTP+SSE:
    `--sse`); its URL. What it wrote on stderr is added to `stderr` once it stopped."""
    server = Process([*NOTES_SERVER, transport])
    try:
        yield server.wait_for(r"listening on (\S+)")[1]
    finally:
        server.stop()
        if stderr is not None:
            stderr.append(server.rest_of_stderr())
