"""Re-record the committed cassettes in cassettes/ from the real servers, through `tapes record`,
with their JSON Lines twins beside them. Run from the repository: `python -m tests.support.make_cassettes`."""

from __future__ import annotations

import functools
import subprocess
from dataclasses import replace
import sys
from pathlib import Path

import anyio

from tapes.cassette.store import Cassette, load, save

from tests.support.flows import everything_flow, notes_flow
from tests.support.paths import CASSETTES, EVERYTHING_JS, NOTES_SERVER, ROOT, TAPES

EXAMPLE = CASSETTES / "example"
EVERYTHING = ["node", str(EVERYTHING_JS), "stdio"]

# name -> (flow, server argv); the flow's connect mode picks the protocol era
STDIO_SESSIONS = {
    "everything-stdio-2025-11-25": (everything_flow, EVERYTHING),
    "notes-stdio-2025-11-25": (functools.partial(notes_flow, mode="legacy"), NOTES_SERVER),
    "notes-stdio-2026-07-28": (notes_flow, NOTES_SERVER),
}


def _relative(argv: list[str]) -> list[str]:
    """Record commands as a reader would type them, not with this machine's paths."""
    return [Path(a).name if a == sys.executable else str(Path(a).relative_to(ROOT)) if a.startswith(str(ROOT)) else a
            for a in argv]


def record_example() -> Path:
    path = EXAMPLE / "weather.tape"
    with open(EXAMPLE / "client.jsonl", "rb") as client:
        subprocess.run([*TAPES, "record", "-o", str(path), "--", sys.executable, "weather_server.py"],
                       stdin=client, stdout=subprocess.DEVNULL, cwd=EXAMPLE, check=True)
    return path


def main() -> None:
    paths = [record_example()]
    for name, (flow, server) in STDIO_SESSIONS.items():
        path = CASSETTES / f"{name}.tape"
        anyio.run(flow, [*TAPES, "record", "-o", str(path), "--", *server])
        paths.append(path)
    for path in paths:
        commit(path)


def commit(path: Path) -> None:
    """Make a fresh recording fit to commit: its server command as a reader would type it, and its
    JSON Lines twin beside it."""
    cassette = load(path)
    if "command" in cassette.header.server:
        command = _relative(cassette.header.server["command"])
        cassette = Cassette(replace(cassette.header, server={"command": command}), cassette.frames)
    save(cassette, path)
    save(cassette, path.with_suffix(".jsonl"), jsonl=True)
    print(f"{path.relative_to(ROOT)}: {len(cassette.frames)} frames, protocol {cassette.protocol_version}")


if __name__ == "__main__":
    main()
