"""Be the recorded server on stdin/stdout: client lines go into the replay engine, released
frames come out. stdout carries nothing but what the recorded server wrote there (and JSON-RPC
errors for requests that match nothing); the summary goes to stderr."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

from rich.console import Console

from tapes.cassette import Cassette
from tapes.control import ReplayControl
from tapes.engine import Action
from tapes.frames import Kind
from tapes.jsonrpc import LineSplitter

STDIN, STDOUT, STDERR = 0, 1, 2


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


class _Server:
    """Carries out engine actions on the process's own stdio."""

    def __init__(self, control: ReplayControl) -> None:
        self.control = control
        self.stdout_open = True
        self.exit_status: int | None = None  # set once the recorded server's exit is replayed

    def perform(self, actions: list[Action]) -> None:
        for action in actions:
            if delay := self.control.delay(action.gap):
                time.sleep(delay)
            frame = action.frame
            if frame is None or frame.kind in (Kind.MESSAGE, Kind.RAW):
                newline = b"" if frame is not None and frame.partial else b"\n"
                self._stdout(action.payload + newline)
            elif frame.kind is Kind.STDERR:
                _write_all(STDERR, action.payload + (b"" if frame.partial else b"\n"))
            elif frame.kind is Kind.STREAM_END and self.stdout_open:
                self.stdout_open = False
                os.close(STDOUT)
            elif frame.kind is Kind.EXIT:
                info = frame.info or {}
                code, sig = info.get("code"), info.get("signal")
                self.exit_status = 128 + sig if sig else (code or 0)

    def _stdout(self, data: bytes) -> None:
        if not self.stdout_open:
            return
        try:
            _write_all(STDOUT, data)
        except BrokenPipeError:  # the client stopped reading; keep consuming its input
            self.stdout_open = False


def replay_stdio(
    cassette: Cassette, *, strict: bool = True, control: ReplayControl | None = None, report_path: Path | None = None
) -> int:
    """Serve `cassette` until the client closes stdin (or the recorded server exits). Returns the
    exit code: 1 when something did not match and `strict`, else the recorded server's. The
    summary goes to stderr and, as JSON, to `report_path` when given (the pytest plugin reads it)."""
    control = control or ReplayControl()
    console = Console(stderr=True, highlight=False)
    for warning in cassette.warnings:
        console.print(f"[yellow]tapes replay: {warning}[/]")
    signal.signal(signal.SIGPIPE, signal.SIG_IGN)
    engine = control.engine(cassette.frames)
    server = _Server(control)
    server.perform(engine.start())
    splitter = LineSplitter()
    while server.exit_status is None:
        chunk = os.read(STDIN, 1 << 20)
        if not chunk:
            rest = splitter.finish()
            if rest is not None:
                server.perform(engine.receive(rest).actions)
            server.perform(engine.end())
            break
        for line in splitter.feed(chunk):
            server.perform(engine.receive(line).actions)
            if server.exit_status is not None:
                break
    report = engine.report
    if report_path is not None:
        report_path.write_text(json.dumps(report.as_json()))
    style = "green" if report.clean else "red"
    for number, line in enumerate(report.lines()):
        console.print(f"[{style if number == 0 else 'yellow'}]tapes replay: {line}[/]", soft_wrap=True)
    if strict and not report.clean:
        return 1
    return server.exit_status or 0
