"""Hostile but loadable cassettes, generated with hypothesis: cassettes of both transports with
every frame kind holding odd but legal values (ids of every JSON-RPC type, batches, deep or unicode
or surrogate strings, bytes where msgpack allows them, integers wider than 64 bits where JSON Lines
allows them, heads with odd headers, SSE events without data, unknown stream-end reasons, exits
without a code, frames in odd order), and committed cassettes with odd values put in. Each comes as
the bytes of the file a loader reads and its name; the sweeps of the commands that read cassettes
(tests/unit/analysis/test_commands_fuzz.py) and of those that serve or check them
(tests/unit/replay/test_hostile_cassettes.py) load them."""

from __future__ import annotations

import base64
import copy
import dataclasses
import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from functools import cache
from typing import Any

import msgpack
from hypothesis import strategies as st

from tapes.cassette.frames import STDIO, Direction, Frame, Kind
from tapes.cassette.store import (
    JSONL_VERSION, MAX_NESTING, RECURSION, Cassette, Header, frame_array, frame_problem, frame_record, load,
)  # fmt: skip
from tapes.wire.eras import STATELESS_VERSION_KEY, SUBSCRIPTION_ID_KEY

from tests.support.paths import CASSETTES

# A frame nests at most MAX_NESTING levels; a value goes into a message (about 5 levels down) and
# msgpack's packer writes no more than 511.
DEEPEST_JSONL, DEEPEST_MSGPACK = MAX_NESTING - 8, 500
C2S, S2C = Direction.CLIENT_TO_SERVER, Direction.SERVER_TO_CLIENT

# --- generated values ----------------------------------------------------------------------------

_ODD_TEXT = ["", "[/x]", "[bold red]boom", "</script><!--", "\x1b[31m", "a\nb", "\u2028", "\u202e", "<redacted:7>",
             "initialize", "2025-11-25", "2026-07-28", "Bearer sk-ant-aaaaaaaaaaaaaaaaaaaaaaaa", "t-1", "closed", "endpoint",
             "/mcp?sessionId=s1", "http://h/x", "é", "\U0001f600"]
_SURROGATES = ["\ud800", "x\udfff", "\\\ud800"]


def _scalars(wide: bool, surrogates: bool) -> st.SearchStrategy[Any]:
    """JSON scalars as a loader may give them: JSON Lines has integers wider than 64 bits and lone
    surrogates; msgpack has bytes; both have NaN and infinities."""
    limit = 2**70 if wide else 2**63 - 1
    text = st.one_of(st.text(max_size=5), st.sampled_from(_ODD_TEXT + (_SURROGATES if surrogates else [])))
    options = [st.none(), st.booleans(), st.integers(-limit, limit), st.floats(), text]
    if not wide:
        options.append(st.binary(max_size=4))
    return st.one_of(*options)


def _nested(levels: int) -> Any:
    value: Any = "x" * 100_000  # huge as well as deep
    for level in range(levels):
        value = [value] if level % 2 else {"a": value}
    return value


def _json(scalars: st.SearchStrategy[Any], keys: st.SearchStrategy[Any], deepest: int) -> st.SearchStrategy[Any]:
    """JSON values, now and then nested `deepest` levels (as deep as the cassette format allows)."""
    values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(keys, inner, max_size=3),
                          max_leaves=6)
    return st.one_of(values, values, values, values, values, values, values, values, st.just(_nested(deepest)))


_METHODS = ["initialize", "notifications/initialized", "notifications/cancelled", "notifications/progress",
            "tools/call", "tools/list", "prompts/list", "resources/read", "resources/subscribe", "ping",
            "server/discover", "subscriptions/listen", "notifications/subscriptions/acknowledged", "tasks/get",
            "tasks/result", "notifications/tasks/status", "sampling/createMessage", "[/x]", ""]
_PARAM_KEYS = ["_meta", "requestId", "progressToken", "progress", "total", "name", "uri", "taskId", "task",
               "notifications", "inputResponses", "requestState", "protocolVersion", "capabilities", "arguments"]
_RESULT_KEYS = ["protocolVersion", "capabilities", "tools", "prompts", "resources", "resourceTemplates", "task",
                "resultType", "inputRequests", "requestState", "serverInfo", "_meta", "content", "ttlMs"]
_META_KEYS = ["progressToken", STATELESS_VERSION_KEY, SUBSCRIPTION_ID_KEY, "io.modelcontextprotocol/clientCapabilities"]


@st.composite
def _documents(draw: st.DrawFn, values: st.SearchStrategy[Any], names: list[str]) -> dict[str, Any]:
    """An object whose members have the names MCP code looks at, holding anything (often objects
    or lists of objects of the same kind, so the code reading them goes deep)."""
    document: dict[str, Any] = {}
    for name in draw(st.lists(st.sampled_from(names), max_size=4, unique=True)):
        document[name] = draw(st.one_of(
            values,
            st.dictionaries(st.sampled_from(_META_KEYS + _PARAM_KEYS + _RESULT_KEYS + ["type", "properties", "required",
                                                                                     "description", "taskId", "status"]),
                            values, max_size=3),
            st.lists(st.dictionaries(st.sampled_from(["name", "uri", "description", "inputSchema", "taskId", "status",
                                                      "arguments"]), values, max_size=3), max_size=2),
        ))
    return document


@st.composite
def _items(draw: st.DrawFn, values: st.SearchStrategy[Any], scalars: st.SearchStrategy[Any]) -> dict[str, Any]:
    """One JSON-RPC message as `frame_problem` accepts it."""
    ids = st.one_of(st.none(), st.integers(-(2**63), 2**63 - 1), st.floats(), st.text(max_size=4),
                    st.sampled_from([0, 1, "1", 1.0, -0.0]))
    shape = draw(st.sampled_from(["request", "notification", "result", "error", "both"]))
    item: dict[str, Any] = {"jsonrpc": "2.0"}
    if shape in ("request", "notification"):
        item["method"] = draw(st.one_of(st.sampled_from(_METHODS), st.sampled_from(_METHODS), st.text(max_size=6)))
        if shape == "request":
            item["id"] = draw(ids)
        params = draw(st.one_of(st.none(), st.just({}), st.lists(values, max_size=2), _documents(values, _PARAM_KEYS)))
        if params is not None or draw(st.booleans()):
            item["params"] = params
    else:
        item["id"] = draw(ids)
        if shape in ("result", "both"):
            item["result"] = draw(st.one_of(values, _documents(values, _RESULT_KEYS)))
        if shape in ("error", "both"):
            error = {"code": draw(st.integers(-(2**31), 2**31)), "message": draw(st.text(max_size=5))}
            if draw(st.booleans()):
                error["data"] = draw(values)
            item["error"] = error if shape == "error" else draw(st.one_of(st.just(error), values))
    return item


def _headers(texts: st.SearchStrategy[str]) -> st.SearchStrategy[list[list[str]]]:
    names = st.one_of(texts, st.sampled_from(["Content-Type", "content-type", "MCP-Session-Id", "mcp-session-id",
                                              "Last-Event-ID", "Mcp-Method", "Mcp-Name", "MCP-Protocol-Version",
                                              "Host", "Location", "Authorization"]))
    values = st.one_of(texts, st.sampled_from(["application/json", "text/event-stream", "s1", "0", "2025-06-18",
                                               "http://x/y?token=abc", "Bearer abc"]))
    return st.lists(st.tuples(names, values).map(list), max_size=4)


@st.composite
def _info(draw: st.DrawFn, kind: Kind, values: st.SearchStrategy[Any], texts: st.SearchStrategy[str]) -> dict[str, Any] | None:
    small = st.one_of(st.none(), st.integers(-(2**31), 2**31))
    if kind is Kind.HTTP_REQUEST:
        info = {"method": draw(st.one_of(st.sampled_from(["GET", "POST", "DELETE"]), texts)),
                "path": draw(st.one_of(st.sampled_from(["/mcp", "/sse", "/messages/?session_id=s1", "http://h/mcp?a=1&key=x",
                                                        "/mcp?x"]), texts)),
                "headers": draw(_headers(texts))}
    elif kind is Kind.HTTP_RESPONSE:
        info = {"status": draw(st.one_of(st.sampled_from([200, 202, 404]), st.integers(-(2**63), 2**63 - 1))),
                "headers": draw(_headers(texts))}
    elif kind is Kind.SSE_EVENT:
        if draw(st.integers(0, 4)) == 0:
            return None
        info = {"id": draw(st.one_of(st.none(), texts)), "event": draw(st.one_of(st.none(), texts)), "retry": draw(small)}
        if draw(st.booleans()):
            info["data"] = False
    elif kind is Kind.STREAM_END:
        info = {"reason": draw(st.one_of(st.sampled_from(["closed", "client_disconnect", "upstream_error"]), texts))}
        if draw(st.booleans()):
            info["detail"] = draw(values)
    elif kind is Kind.EXIT:
        if draw(st.booleans()):
            return None
        info = {"code": draw(small), "signal": draw(small)}
    else:
        info = draw(st.one_of(st.none(), st.dictionaries(texts, values, max_size=2)))
    if info is not None and draw(st.integers(0, 5)) == 0:
        info["partial"] = draw(values)
    return info


@st.composite
def cassettes(draw: st.DrawFn) -> tuple[bytes, str]:
    """The bytes of a cassette file (msgpack v2, or JSON Lines) and its name."""
    jsonl = draw(st.booleans())
    scalars = _scalars(wide=jsonl, surrogates=jsonl)
    texts = st.one_of(st.text(max_size=5), st.sampled_from(_ODD_TEXT + (_SURROGATES if jsonl else [])))
    keys = st.one_of(texts, st.binary(max_size=3)) if not jsonl else texts
    values = _json(scalars, keys, DEEPEST_JSONL if jsonl else DEEPEST_MSGPACK)
    transport = draw(st.sampled_from(["stdio", "http"]))
    channels = [STDIO] if transport == "stdio" else ["http:1", "http:2", "http:3"]
    channels += draw(st.lists(texts, max_size=1))
    frames = []
    for number in range(draw(st.integers(0, 10))):
        kind = draw(st.sampled_from(list(Kind)))
        message = None
        if kind is Kind.MESSAGE or (kind is Kind.SSE_EVENT and draw(st.booleans())):
            message = draw(_items(values, scalars)) if draw(st.integers(0, 4)) else \
                draw(st.lists(_items(values, scalars), min_size=1, max_size=3))
        data = draw(st.one_of(st.none(), st.binary(max_size=6), st.sampled_from([b"", b"\xff[/x]\n", b"<redacted:12>"])))
        seq = draw(st.one_of(st.just(number + 1), st.integers(-(2**31), 2**31)))
        t = draw(st.floats(allow_nan=False, allow_infinity=False, width=64))
        frame = Frame(seq, t, draw(st.sampled_from([C2S, S2C])), draw(st.sampled_from(channels)), kind, message, data,
                      draw(_info(kind, values, texts)))
        assert frame_problem(frame.seq, frame.t, frame.channel, frame.kind, frame.message, frame.data, frame.info) is None, frame
        frames.append(frame)
    if transport == "http" and draw(st.booleans()):  # each exchange opened by its request head, as recorded
        heads = [Frame(0, 0.0, C2S, channel, Kind.HTTP_REQUEST, info=draw(_info(Kind.HTTP_REQUEST, values, texts)))
                 for channel in dict.fromkeys(frame.channel for frame in frames)]
        frames = heads + frames
    server = draw(st.sampled_from([{"command": ["python", "s.py"]}, {"url": "http://127.0.0.1:9/mcp"}, {}]))
    created = draw(st.sampled_from(["2026-01-01T00:00:00.000000+00:00", "yesterday", ""]))
    header = Header(transport, server, created=created, labels=draw(st.dictionaries(texts, texts, max_size=1)))
    return _file(header, frames, jsonl)


def _file(header: Header, frames: list[Frame], jsonl: bool) -> tuple[bytes, str]:
    """The bytes of a cassette file as a recorder could have left them (its own writer would keep
    what msgpack cannot hold as raw bytes: not here) and a name for it."""
    if jsonl:
        lines = [header.record(JSONL_VERSION)] + [_jsonl_record(frame) for frame in frames]
        return b"".join(json.dumps(line).encode() + b"\n" for line in lines), "fuzz.jsonl"
    channel_numbers: dict[str, int] = {}
    packed = [msgpack.packb(header.record())]
    for frame in frames:
        packed.append(msgpack.packb(frame_array(frame, channel_numbers)))
        channel_numbers.setdefault(frame.channel, len(channel_numbers))
    return b"".join(packed), "fuzz.tape"


@cache
def committed() -> list[Cassette]:
    return [load(path) for path in sorted(CASSETTES.glob("*.tape"))]


@st.composite
def mutated_cassettes(draw: st.DrawFn) -> tuple[bytes, str]:
    """A committed cassette (every era and transport, so every era's checks run) with odd values
    put into its messages and heads, members taken out, and frames moved."""
    original = draw(st.sampled_from(committed()))
    jsonl = draw(st.booleans())
    texts = st.one_of(st.text(max_size=5), st.sampled_from(_ODD_TEXT + (_SURROGATES if jsonl else [])))
    values = _json(_scalars(wide=jsonl, surrogates=jsonl), st.one_of(texts, st.binary(max_size=3)) if not jsonl else texts,
                   DEEPEST_JSONL if jsonl else DEEPEST_MSGPACK)
    frames = list(original.frames)
    for _ in range(draw(st.integers(1, 8))):
        index = draw(st.integers(0, len(frames) - 1))
        frame = frames[index]
        field = "message" if frame.message is not None and draw(st.integers(0, 3)) else "info"
        original_value = getattr(frame, field)
        if not isinstance(original_value, (dict, list)) or not original_value:
            continue
        target = container = copy.copy(original_value)  # copied along the path only: values may be deep
        for _ in range(draw(st.integers(0, 5))):
            keys = list(container) if isinstance(container, dict) else list(range(len(container)))
            inner = [key for key in keys if isinstance(container[key], (dict, list)) and container[key]]
            if not inner:
                break
            step = draw(st.sampled_from(inner))
            container[step] = copy.copy(container[step])
            container = container[step]
        keys = list(container) if isinstance(container, dict) else list(range(len(container)))
        key = draw(st.one_of(st.sampled_from(keys), st.sampled_from(_PARAM_KEYS + _RESULT_KEYS + _META_KEYS)))
        if isinstance(container, list) and not isinstance(key, int):
            continue
        if isinstance(container, dict) and draw(st.integers(0, 4)) == 0:
            container.pop(key, None)
        else:
            container[key] = draw(values)
        candidate = dataclasses.replace(frame, **{field: target})
        if frame_problem(candidate.seq, candidate.t, candidate.channel, candidate.kind, candidate.message, candidate.data,
                         candidate.info) is None:
            frames[index] = candidate
    if draw(st.booleans()):  # frames out of order, and their times with them
        a, b = draw(st.integers(0, len(frames) - 1)), draw(st.integers(0, len(frames) - 1))
        frames[a], frames[b] = frames[b], frames[a]
    return _file(original.header, frames, jsonl)


def _jsonl_record(frame: Frame) -> dict[str, Any]:
    record = frame_record(frame)
    if frame.data is not None:
        del record["data"]
        try:
            record["text"] = frame.data.decode("utf-8")
        except UnicodeDecodeError:
            record["data"] = base64.b64encode(frame.data).decode("ascii")
    return record


@contextmanager
def recursion_as_in_the_cli() -> Iterator[None]:
    """The recursion the CLI allows (tapes.cli.main), so that walks as deep as a frame nests work."""
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, RECURSION))
    try:
        yield
    finally:
        sys.setrecursionlimit(limit)


def hostile_notes() -> Cassette:
    """The committed notes session (stdio, 2025-11-25) with odd recorded shapes put in, each one a
    replay or a verify once broke on: its progress token an object (in the request and its progress
    notifications), a progress notification and a cancellation whose params are arrays, a
    cancellation naming an object, a recorded request whose params hold msgpack bytes (kept with the
    bytes the client wrote), and no end: the recorded server never closed its side or exited."""
    recorded = load(CASSETTES / "notes-stdio-2025-11-25.tape")
    odd_token = {"t": [1]}
    frames: list[Frame] = []
    for frame in recorded.frames:
        if frame.kind in (Kind.STREAM_END, Kind.EXIT):
            continue
        message = frame.message
        if isinstance(message, dict) and message.get("method") == "notifications/progress":
            message = {**message, "params": {**message["params"], "progressToken": odd_token}}
        elif isinstance(message, dict) and message.get("method") == "tools/call" and "_meta" in message["params"]:
            message = {**message, "params": {**message["params"], "_meta": {"progressToken": odd_token}}}
        frames.append(dataclasses.replace(frame, message=message))
        if isinstance(message, dict) and message.get("method") == "notifications/initialized":
            t = frame.t
            frames += [Frame(0, t, S2C, STDIO, Kind.MESSAGE, {"jsonrpc": "2.0", "method": "notifications/progress",
                                                            "params": [odd_token, 1]}),
                       Frame(0, t, S2C, STDIO, Kind.MESSAGE, {"jsonrpc": "2.0", "method": "notifications/cancelled",
                                                            "params": {"requestId": odd_token}}),
                       Frame(0, t, C2S, STDIO, Kind.MESSAGE, {"jsonrpc": "2.0", "method": "notifications/cancelled",
                                                            "params": [1]}),
                       Frame(0, t, C2S, STDIO, Kind.MESSAGE,
                             {"jsonrpc": "2.0", "id": 90, "method": "tools/call", "params": {"name": "x", b"k": b"\0"}},
                             b'{"jsonrpc":"2.0","id":90,"method":"tools/call","params":{"name":"x"}}')]
    numbered = [dataclasses.replace(frame, seq=seq) for seq, frame in enumerate(frames, start=1)]
    return dataclasses.replace(recorded, frames=numbered)
