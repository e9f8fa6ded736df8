"""What every replayer adapter says on stderr: the cassette's warnings and the end-of-replay
summary. Text from cassettes and the wire is printed as it is, never read as Rich markup."""

from __future__ import annotations

import contextlib
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rich.console import Console

from tapes.cassette.store import Cassette, CassetteStream, replacing
from tapes.errors import UserError
from tapes.wire.text import terminal_line

PREFIX = "tapes replay: "


class _LossyStderr:
    """stderr, where a write that fails (a client closed its end) loses the text, not the replay
    and its exit code."""

    def write(self, text: str) -> int:
        with contextlib.suppress(OSError):
            sys.stderr.write(text)
        return len(text)

    def flush(self) -> None:
        with contextlib.suppress(OSError):
            sys.stderr.flush()

    def __getattr__(self, name: str) -> Any:  # isatty, encoding...: stderr's, for Rich to decide on colours
        return getattr(sys.stderr, name)


def stderr_console() -> Console:
    return Console(file=_LossyStderr(), highlight=False)  # type: ignore[arg-type]


def print_warnings(console: Console, cassette: Cassette | CassetteStream) -> None:
    for warning in cassette.warnings:
        console.print(PREFIX + terminal_line(warning), style="yellow", soft_wrap=True, markup=False)


def print_summary(console: Console, lines: Sequence[str], clean: bool) -> bool:
    """Print the summary `lines` (`tapes.replay.session.summary`), in green when the replay was
    `clean`; returns `clean`."""
    for number, line in enumerate(lines):
        console.print(PREFIX + terminal_line(line), style=("green" if clean else "red") if number == 0 else "yellow",
                      soft_wrap=True, markup=False)
    return clean


def write_report(path: Path, report: dict[str, Any], *, complete: bool = True) -> None:
    """The summary as JSON, replaced at once (a reader never sees half of it). Not `complete`: the
    cassette was not all read, so its `unused` covers only the part read so far."""
    text = json.dumps({**report, "complete": complete})
    try:
        replacing(path, lambda name: Path(name).write_text(text))
    except OSError as error:  # a full disk: said with the report's name (a write error names no file)
        raise UserError(f"--report {path}: cannot be written ({error.strerror or error})") from None
