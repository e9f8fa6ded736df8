"""Record the same client flows at older protocol eras, through `tapes record` over stdio, so that
`tapes diff` has one session per era to compare (the 2025-11-25 and 2026-07-28 stdio recordings
come from make_cassettes.py, the HTTP and legacy SSE ones from make_http_cassettes.py).
Run from the repository: `python -m tests.support.make_era_cassettes`.

The SDK client always offers its newest handshake version in `initialize`; pinning
`mcp.client.session.LATEST_HANDSHAKE_VERSION` makes it offer an older one instead, and the
servers (server-everything, the SDK notes server) agree to it.
"""

from __future__ import annotations

import functools
from dataclasses import replace
from unittest import mock

import anyio
import mcp.client.session

from tapes.cassette.store import Cassette, load, save

from tests.support.flows import everything_flow, notes_flow
from tests.support.make_cassettes import EVERYTHING, _relative
from tests.support.paths import CASSETTES, NOTES_SERVER, ROOT, TAPES

# name -> (flow, server argv, the handshake version the client offers)
ERA_SESSIONS = {
    "everything-stdio-2024-11-05": (everything_flow, EVERYTHING, "2024-11-05"),
    "everything-stdio-2025-06-18": (everything_flow, EVERYTHING, "2025-06-18"),
    "notes-stdio-2025-06-18": (notes_flow, NOTES_SERVER, "2025-06-18"),
}


def record(name: str) -> Cassette:
    flow, server, version = ERA_SESSIONS[name]
    path = CASSETTES / f"{name}.tape"
    with mock.patch.object(mcp.client.session, "LATEST_HANDSHAKE_VERSION", version):
        anyio.run(functools.partial(flow, [*TAPES, "record", "-o", str(path), "--", *server], mode="legacy"))
    cassette = load(path)
    return Cassette(replace(cassette.header, server={"command": _relative(cassette.header.server["command"])}),
                    cassette.frames)


def main() -> None:
    for name in ERA_SESSIONS:
        cassette = record(name)
        path = CASSETTES / f"{name}.tape"
        save(cassette, path)
        save(cassette, path.with_suffix(".jsonl"), jsonl=True)
        print(f"{path.relative_to(ROOT)}: {len(cassette.frames)} frames, protocol {cassette.protocol_version}")


if __name__ == "__main__":
    main()
