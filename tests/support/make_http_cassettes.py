"""Re-record the committed HTTP cassettes in cassettes/ from server-everything, driving the SDK
client through `tapes record --upstream`, with their JSON Lines twins beside them.
Run from the repository: `python -m tests.support.make_http_cassettes`."""

from __future__ import annotations

import functools
from dataclasses import replace
from urllib.parse import urlsplit

import pytest
from mcp.client.sse import sse_client

from tapes.cassette.store import Cassette, save
from tapes.cassette.frames import Frame, Kind

from tests.support.flows import everything_flow
from tests.support.http_clients import run_flow, speak_2024_11_05
from tests.support.http_peers import Recorder, start_everything
from tests.support.paths import CASSETTES, ROOT

# name -> (server-everything mode, how the SDK client reaches a URL, the 2024-11-05 era or not)
HTTP_SESSIONS = {
    "everything-http-2025-11-25": ("streamableHttp", lambda url: url, False),
    "everything-sse-2024-11-05": ("sse", lambda url: lambda: sse_client(url), True),
}
STABLE_URL = {"streamableHttp": "http://127.0.0.1:3001/mcp", "sse": "http://127.0.0.1:3001/sse"}


def stable_host(frame: Frame, url: str, stable_url: str) -> Frame:
    """The free port of this run says nothing: show the server's default address instead."""
    if frame.kind is not Kind.HTTP_REQUEST:
        return frame
    host, stable_host = urlsplit(url).netloc, urlsplit(stable_url).netloc
    headers = [[name, stable_host if name.lower() == "host" and value == host else value]
               for name, value in frame.info["headers"]]
    return replace(frame, info={**frame.info, "headers": headers})


def main() -> None:
    for name, (mode, client_target, era_2024) in HTTP_SESSIONS.items():
        path = CASSETTES / f"{name}.tape"
        server, url = start_everything(mode)
        try:
            recorder = Recorder(path, url)
            with pytest.MonkeyPatch.context() as patch:
                flow = everything_flow
                if era_2024:  # initialize only, offering 2024-11-05: no server/discover probe first
                    speak_2024_11_05(patch)
                    flow = functools.partial(everything_flow, mode="legacy")
                run_flow(patch, flow, client_target(recorder.url))
            cassette = recorder.stop()
        finally:
            server.stop()
        cassette = Cassette(replace(cassette.header, server={"url": STABLE_URL[mode]}),
                            [stable_host(frame, url, STABLE_URL[mode]) for frame in cassette.frames])
        save(cassette, path)
        save(cassette, path.with_suffix(".jsonl"), jsonl=True)
        print(f"{path.relative_to(ROOT)}: {len(cassette.frames)} frames, protocol {cassette.protocol_version}")


if __name__ == "__main__":
    main()
