"""Cassettes: a header and the frames of a session, stored as a stream of msgpack objects
(appended and flushed as they come, so a killed recorder leaves a readable file) or as its
JSON Lines twin for review. Loading detects the format from the content and never runs code:
msgpack extension types are refused, there is no pickle.

Both formats store the header map, then one map per frame with short keys (`frame_record`).
"""

from __future__ import annotations

import base64
import gc
import io
import json
import os
import sys
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, fields, make_dataclass
from datetime import UTC, datetime
from typing import Any, BinaryIO

import msgpack

from tapes import __version__
from tapes.cassette.frames import Direction, Frame, Kind
from tapes.errors import UserError
from tapes.wire.eras import STATELESS_VERSION_KEY

FORMAT_VERSION = 1
MAGIC = "mcp-tapes"  # first key of the header object


class CassetteError(UserError):
    """A cassette that cannot be read or written; the message is one sentence for the user."""


@dataclass(frozen=True)
class Header:
    transport: str  # "stdio" or "http"
    server: dict[str, Any]  # {"command": [...]} or {"url": ...}; never the environment
    created: str = field(default_factory=lambda: datetime.now(UTC).isoformat(timespec="microseconds"))
    tool: str = f"mcp-tapes {__version__}"
    format: int = FORMAT_VERSION
    redaction: tuple[str, ...] = ()
    labels: dict[str, str] = field(default_factory=dict)

    def record(self) -> dict[str, Any]:
        fields = asdict(self)
        fields["redaction"] = list(self.redaction)
        return {MAGIC: fields.pop("format"), **fields}

    @classmethod
    def from_record(cls, record: dict[str, Any]) -> Header:
        fields = dict(record)
        version = fields.pop(MAGIC)
        if version != FORMAT_VERSION:
            raise ValueError(f"format version {version} is not supported (this is {FORMAT_VERSION})")
        for name, kind in (("transport", str), ("server", dict), ("created", str), ("tool", str)):
            if not isinstance(fields[name], kind):
                raise TypeError(f"its {name} is not a {'map' if kind is dict else 'string'}")
        return cls(
            transport=fields["transport"],
            server=fields["server"],
            created=fields["created"],
            tool=fields["tool"],
            format=version,
            redaction=tuple(fields.get("redaction", ())),
            labels=dict(fields.get("labels", {})),
        )


@dataclass
class Cassette:
    header: Header
    frames: list[Frame]
    warnings: list[str] = field(default_factory=list)

    @property
    def protocol_version(self) -> str | None:
        """The version the session negotiated: the result of the client's initialize request, or
        for stateless (2026-07-28+) sessions the version in a request's `_meta` (not that of
        server/discover, which asks what the server supports)."""
        initialize_ids = []
        for frame in self.frames:
            message = frame.message
            if type(message) is not dict:  # initialize never travels in a batch
                continue
            if frame.from_client:
                method = message.get("method")
                if method == "initialize" and "id" in message:
                    initialize_ids.append(message["id"])
                elif method != "server/discover" and "id" in message:
                    version = _stateless_version(message)
                    if version is not None:
                        return version
            elif "result" in message and message.get("id") in initialize_ids:
                version = message["result"].get("protocolVersion") if type(message["result"]) is dict else None
                if isinstance(version, str):
                    return version
        return None


def _stateless_version(request: dict[str, Any]) -> str | None:
    params = request.get("params")
    meta = params.get("_meta") if type(params) is dict else None
    version = meta.get(STATELESS_VERSION_KEY) if type(meta) is dict else None
    return version if isinstance(version, str) else None


# --- frames as stored -----------------------------------------------------------------------

_DIRECTIONS = {d.value: d for d in Direction}
_KINDS = {k.value: k for k in Kind}

# Frame is frozen, so its generated __init__ pays one object.__setattr__ per field: that was
# the largest cost of loading a big cassette. Loaded frames are built as this mutable twin with
# the very same slots, then retyped; what comes out is an ordinary, immutable Frame.
_MutableFrame = make_dataclass("_MutableFrame", [f.name for f in fields(Frame)], slots=True)


def frame_record(frame: Frame) -> dict[str, Any]:
    """The frame as stored, in both formats: a map with short keys, absent fields left out.
    (Direction and Kind are StrEnums: they are stored as their string values.)"""
    record: dict[str, Any] = {
        "seq": frame.seq,
        "t": frame.t,
        "dir": frame.direction,
        "ch": frame.channel,
        "kind": frame.kind,
    }
    if frame.message is not None:
        record["msg"] = frame.message
    if frame.data is not None:
        record["data"] = frame.data
    if frame.info is not None:
        record["info"] = frame.info
    return record


def frame_from_record(record: dict[str, Any]) -> Frame:
    """The inverse of `frame_record`, checked (cassettes are untrusted input). Raises ValueError
    or TypeError naming what is wrong."""
    if type(record) is not dict:
        raise TypeError("it is not a map")
    try:
        seq, t, direction, channel, kind = record["seq"], record["t"], record["dir"], record["ch"], record["kind"]
    except KeyError as error:
        raise ValueError(f"it has no {error.args[0]}") from None
    try:
        direction = _DIRECTIONS[direction]
        kind = _KINDS[kind]
    except (KeyError, TypeError):
        raise ValueError(f"its direction {direction!r:.20} or kind {kind!r:.20} is unknown") from None
    get = record.get
    message, data, info = get("msg"), get("data"), get("info")
    if type(seq) is not int:
        raise ValueError("its seq is not an integer")
    if type(t) is not float:
        if type(t) is not int:
            raise ValueError("its time is not a number")
        t = float(t)
    if type(channel) is not str:
        raise ValueError("its channel is not a string")
    channel = sys.intern(channel)  # a handful of channels shared by millions of frames
    if data is not None and type(data) is not bytes:
        raise ValueError("its data is not bytes")
    if info is not None and type(info) is not dict:
        raise ValueError("its info is not a map")
    if kind is Kind.MESSAGE and message is None:
        raise ValueError("it is a message frame without a message")
    frame = _MutableFrame(seq, t, direction, channel, kind, message, data, info)
    frame.__class__ = Frame
    return frame  # type: ignore[return-value]


# --- writing --------------------------------------------------------------------------------


class CassetteWriter:
    """Appends frames to a msgpack cassette; every `write` call is flushed before it returns,
    so a crash can cut at most the frames of the call in progress."""

    def __init__(self, path: str | os.PathLike[str] | BinaryIO, header: Header) -> None:
        if hasattr(path, "write"):
            self._file: BinaryIO = path  # type: ignore[assignment]
        else:
            self._file = _open_for_writing(path, "wb")  # type: ignore[assignment]
        self._pack = msgpack.Packer().pack
        self._file.write(self._pack(header.record()))
        self._file.flush()

    def write(self, frames: Iterable[Frame]) -> None:
        self._file.write(b"".join([self._packed(frame) for frame in frames]))
        self._file.flush()

    def _packed(self, frame: Frame) -> bytes:
        try:
            return self._pack(frame_record(frame))
        except (OverflowError, ValueError, TypeError):
            # e.g. an integer wider than 64 bits: keep the exact bytes as a raw frame instead
            return self._pack(frame_record(_as_raw(frame)))

    def close(self) -> None:
        self._file.close()

    def __enter__(self) -> CassetteWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _as_raw(frame: Frame) -> Frame:
    return Frame(frame.seq, frame.t, frame.direction, frame.channel, Kind.RAW, None, frame.payload, frame.info)


def _open_for_writing(path: str | os.PathLike[str], mode: str, **options: Any) -> Any:
    try:
        return open(path, mode, **options)
    except OSError as error:
        raise CassetteError(f"{path}: cannot be written ({error.strerror})") from None


def save(cassette: Cassette, path: str | os.PathLike[str], *, jsonl: bool = False) -> None:
    if not jsonl:
        with CassetteWriter(path, cassette.header) as writer:
            writer.write(cassette.frames)
        return
    with _open_for_writing(path, "w", encoding="utf-8") as out:
        out.write(_json_line(cassette.header.record()))
        for frame in cassette.frames:
            try:
                out.write(_json_line(_jsonable(frame_record(frame))))
            except (TypeError, ValueError) as error:  # e.g. a lone surrogate, which UTF-8 cannot hold
                raise CassetteError(f"{path}: frame {frame.seq} cannot be written as JSON ({error})") from None


def replace_file(cassette: Cassette, path: str | os.PathLike[str]) -> None:
    """Write `cassette` over the file at `path` at once: written beside it first, then renamed over
    it, so a reader (or a crash) never sees half of it."""
    scratch = f"{os.fspath(path)}.tmp"
    save(cassette, scratch)
    os.replace(scratch, path)


def _json_line(value: dict[str, Any]) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")) + "\n"


def _jsonable(record: dict[str, Any]) -> dict[str, Any]:
    """Bytes become `text` when they are UTF-8 (readable in review), base64 `data` otherwise."""
    if "data" in record:
        data = record.pop("data")
        try:
            record["text"] = data.decode("utf-8")
        except UnicodeDecodeError:
            record["data"] = base64.b64encode(data).decode("ascii")
    return record


def _bytes_from_json(record: dict[str, Any], name: str, offset: int) -> None:
    if isinstance(record.get("text"), str):
        record["data"] = record.pop("text").encode("utf-8")
    elif isinstance(record.get("data"), str):
        try:
            record["data"] = base64.b64decode(record["data"], validate=True)
        except ValueError:
            raise CassetteError(f"{name}: byte {offset} has data that is not base64") from None


# --- reading --------------------------------------------------------------------------------

_MSGPACK_MAP_STARTS = frozenset(range(0x80, 0x90)) | {0xDE, 0xDF}
# Every stored frame is a map of 5 to 8 entries whose first key is "seq".
_FRAME_STARTS = [bytes([0x80 + size]) + msgpack.packb("seq") for size in range(5, 9)]


def load(path: str | os.PathLike[str]) -> Cassette:
    """Read a cassette in either format. Raises CassetteError with one sentence naming the
    problem and, for damaged content, the byte offset."""
    name = str(path)
    try:
        with open(path, "rb") as file:
            return _load(file, os.fstat(file.fileno()).st_size, name)
    except FileNotFoundError:
        raise CassetteError(f"{name}: no such cassette file") from None
    except IsADirectoryError:
        raise CassetteError(f"{name}: is a directory, not a cassette file") from None
    except OSError as error:
        raise CassetteError(f"{name}: cannot be read ({error.strerror})") from None


def loads(content: bytes, name: str = "<cassette>") -> Cassette:
    """`load` for content already in memory; `name` stands for the file in messages."""
    return _load(io.BytesIO(content), len(content), name)


def _load(file: BinaryIO, size: int, name: str) -> Cassette:
    first = file.read(1)
    if not first:
        raise CassetteError(f"{name}: is empty, not a cassette")
    file.seek(0)
    with _gc_paused():
        if first == b"{":
            return _load_jsonl(file.read(), name)
        if first[0] in _MSGPACK_MAP_STARTS:
            return _load_msgpack(file, size, name)
    raise CassetteError(f"{name}: is not a cassette (byte 0 starts neither a msgpack map nor a JSON object)")


@contextmanager
def _gc_paused() -> Iterator[None]:
    """Loading makes millions of acyclic containers; the cyclic collector would scan them again
    and again as they pile up (it doubled the load time) and could free none of them."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _header_at(record: Any, name: str) -> Header:
    if not isinstance(record, dict) or MAGIC not in record:
        raise CassetteError(f"{name}: is not a cassette (byte 0 holds no mcp-tapes header)")
    try:
        return Header.from_record(record)
    except (KeyError, TypeError, ValueError) as error:
        raise CassetteError(f"{name}: has an unusable header at byte 0 ({error})") from None


def _refuse_extension(code: int, data: bytes) -> Any:
    raise ValueError("it holds a msgpack extension type, which a cassette never contains")


def _msgpack_problem(error: ValueError) -> str:
    text = str(error)
    if "max_ext_len" in text:  # extension types with a payload (timestamps too) stop here
        return "it holds a msgpack extension type, which a cassette never contains"
    return text or "malformed msgpack"


def _load_msgpack(file: BinaryIO, size: int, name: str) -> Cassette:
    unpacker = msgpack.Unpacker(
        file,
        raw=False,
        max_buffer_size=0,  # the largest allowed (4 GiB): one frame may be a huge tool result
        max_ext_len=0,  # timestamps bypass ext_hook; this refuses them too
        ext_hook=_refuse_extension,
    )
    try:
        record = next(unpacker)
    except StopIteration:
        raise CassetteError(f"{name}: is truncated inside its header (byte 0)") from None
    except ValueError:  # not msgpack after all, e.g. a PNG (0x89 also starts a msgpack map)
        record = None
    header = _header_at(record, name)

    frames: list[Frame] = []
    append = frames.append
    tell = unpacker.tell
    offset = tell()  # where the object being read starts
    try:
        for record in unpacker:
            try:
                append(frame_from_record(record))
            except (ValueError, TypeError) as error:
                raise CassetteError(f"{name}: byte {offset} holds no valid frame ({error})") from None
            offset = tell()
    except ValueError as error:  # FormatError, StackError, BufferFull, bad UTF-8, refused extensions
        raise CassetteError(f"{name}: byte {offset} is not valid msgpack ({_msgpack_problem(error)})") from None

    warnings = []
    if offset < size:
        # A cut can only leave the start of a frame; anything else there is damage, not a crash.
        file.seek(offset)
        start = file.read(len(_FRAME_STARTS[0]))
        if not any(frame_start.startswith(start) for frame_start in _FRAME_STARTS):
            raise CassetteError(f"{name}: byte {offset} does not start a frame (the file is damaged there)")
        warnings.append(
            f"{name}: the last frame is truncated at byte {offset} "
            f"({size - offset} bytes ignored); the {len(frames)} frames before it are kept"
        )
    return Cassette(header, frames, warnings)


def _load_jsonl(content: bytes, name: str) -> Cassette:
    frames: list[Frame] = []
    warnings: list[str] = []
    header: Header | None = None
    offset = 0
    lines = content.split(b"\n")
    for number, line in enumerate(lines):
        start, offset = offset, offset + len(line) + 1
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except ValueError as error:  # UnicodeDecodeError included
            if number == len(lines) - 1:  # unterminated last line: a writer stopped mid-line
                warnings.append(
                    f"{name}: the last line is truncated at byte {start}; the {len(frames)} frames before it are kept"
                )
                break
            raise CassetteError(f"{name}: byte {start} (line {number + 1}) is not valid JSON ({error})") from None
        if header is None:
            header = _header_at(record, name)
            continue
        if isinstance(record, dict):
            _bytes_from_json(record, name, start)
        try:
            frames.append(frame_from_record(record))
        except (ValueError, TypeError) as error:
            raise CassetteError(f"{name}: byte {start} (line {number + 1}) holds no valid frame ({error})") from None
    if header is None:
        raise CassetteError(f"{name}: holds no mcp-tapes header")
    return Cassette(header, frames, warnings)
