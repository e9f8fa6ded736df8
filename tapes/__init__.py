"""mcp-tapes: record MCP traffic into cassettes and replay it deterministically.

The public API, for scripts and tests (loaded lazily, so `import tapes` stays cheap):

    import tapes
    cassette = tapes.load("session.tape")            # or tapes.loads(data), or tapes.stream(path) to iterate
    for frame in cassette.frames: ...                 # tapes.Frame, tapes.Kind, tapes.Direction
    with tapes.replay_server("session.tape") as server:   # an HTTP replay on a free local port
        ...                                           # server.url, server.report_lines
    tapes.register_matcher("loose", predicate)        # a matcher by name, for match="loose"
    redactor = tapes.Redactor(tapes.RedactionRules.default())

`tapes` itself is the sans-IO core (wire/, cassette/, replay/, analysis/, render/); adapters
that touch pipes and sockets live in `recorder/` and `replayer/`.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

_PUBLIC = {
    "load": "tapes.cassette.store",
    "loads": "tapes.cassette.store",
    "stream": "tapes.cassette.store",
    "save": "tapes.cassette.store",
    "Cassette": "tapes.cassette.store",
    "CassetteError": "tapes.cassette.store",
    "Frame": "tapes.cassette.frames",
    "Kind": "tapes.cassette.frames",
    "Direction": "tapes.cassette.frames",
    "replay_server": "replayer.http",
    "ReplayOptions": "replayer.http",
    "register_matcher": "tapes.replay.matching",
    "Matcher": "tapes.replay.matching",
    "RedactionRules": "tapes.cassette.redact",
    "Redactor": "tapes.cassette.redact",
}
__all__ = ["__version__", *_PUBLIC]

if TYPE_CHECKING:
    from replayer.http import ReplayOptions, replay_server
    from tapes.cassette.frames import Direction, Frame, Kind
    from tapes.cassette.redact import RedactionRules, Redactor
    from tapes.cassette.store import Cassette, CassetteError, load, loads, save, stream
    from tapes.replay.matching import Matcher, register_matcher


def __getattr__(name: str) -> Any:
    module = _PUBLIC.get(name)
    if module is None:
        raise AttributeError(f"module 'tapes' has no attribute {name!r}")
    value = getattr(import_module(module), name)
    globals()[name] = value  # looked up once
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
