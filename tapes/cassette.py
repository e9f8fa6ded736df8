"""Cassettes: a header and the frames of a session, stored as a stream of msgpack objects
(appended and flushed as they come, so a killed recorder leaves a readable file) or as its
JSON Lines twin for review. Loading detects the format from the content and never runs code:
msgpack extension types are refused, there is no pickle.
"""

from __future__ import annotations

import base64
import json
import os
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, BinaryIO

import msgpack

from tapes import __version__
from tapes.errors import UserError
from tapes.frames import Direction, Frame, Kind
from tapes.jsonrpc import MessageType, classify

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
        """The version the session negotiated: from the initialize result, or for stateless
        (2026-07-28+) sessions from the first request's `_meta`."""
        for frame in self.frames:
            if frame.kind is not Kind.MESSAGE or isinstance(frame.message, list):
                continue
            message = frame.message
            if not frame.from_client and classify(message) is MessageType.RESULT:
                version = message["result"].get("protocolVersion") if isinstance(message["result"], dict) else None
                if isinstance(version, str):
                    return version
            if frame.from_client and classify(message) is MessageType.REQUEST:
                meta = (message.get("params") or {}).get("_meta") or {}
                version = meta.get("io.modelcontextprotocol/protocolVersion")
                if isinstance(version, str) and message["method"] != "server/discover":
                    return version
        return None


# --- records: the one dict shape both formats store --------------------------------------

_DIRECTIONS = {d.value: d for d in Direction}
_KINDS = {k.value: k for k in Kind}


def frame_record(frame: Frame) -> dict[str, Any]:
    record: dict[str, Any] = {
        "seq": frame.seq,
        "t": frame.t,
        "dir": frame.direction.value,
        "ch": frame.channel,
        "kind": frame.kind.value,
    }
    if frame.message is not None:
        record["msg"] = frame.message
    if frame.data is not None:
        record["data"] = frame.data
    if frame.info:
        record["info"] = frame.info
    return record


def frame_from_record(record: dict[str, Any]) -> Frame:
    data = record.get("data")
    if data is not None and not isinstance(data, bytes):
        raise TypeError("data is not bytes")
    return Frame(
        record["seq"],
        float(record["t"]),
        _DIRECTIONS[record["dir"]],
        record["ch"],
        _KINDS[record["kind"]],
        record.get("msg"),
        data,
        record.get("info"),
    )


# --- writing --------------------------------------------------------------------------------


def _refuse_extension(code: int, data: bytes) -> Any:
    raise ValueError(f"msgpack extension type {code} is not allowed in a cassette")


class CassetteWriter:
    """Appends frames to a msgpack cassette; every `write` call is flushed before it returns."""

    def __init__(self, path: str | os.PathLike[str] | BinaryIO, header: Header) -> None:
        self._file: BinaryIO = path if hasattr(path, "write") else open(path, "wb")  # type: ignore[assignment]
        self._packer = msgpack.Packer()
        self._file.write(self._packer.pack(header.record()))
        self._file.flush()

    def write(self, frames: Iterable[Frame]) -> None:
        pack = self._packer.pack
        chunks = []
        for frame in frames:
            try:
                chunks.append(pack(frame_record(frame)))
            except (OverflowError, ValueError, TypeError):
                # e.g. an integer wider than 64 bits: keep the exact bytes as a raw frame instead
                chunks.append(pack(frame_record(_as_raw(frame))))
        self._file.write(b"".join(chunks))
        self._file.flush()

    def close(self) -> None:
        self._file.close()

    def __enter__(self) -> CassetteWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _as_raw(frame: Frame) -> Frame:
    return Frame(frame.seq, frame.t, frame.direction, frame.channel, Kind.RAW, None, frame.payload, frame.info)


def save(cassette: Cassette, path: str | os.PathLike[str], *, jsonl: bool = False) -> None:
    if jsonl:
        with open(path, "w", encoding="utf-8") as out:
            out.write(_json_line(cassette.header.record()))
            for frame in cassette.frames:
                out.write(_json_line(_jsonable(frame_record(frame))))
        return
    with CassetteWriter(path, cassette.header) as writer:
        writer.write(cassette.frames)


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


def load(path: str | os.PathLike[str]) -> Cassette:
    """Read a cassette in either format. Raises CassetteError with one sentence naming the
    problem and, for damaged content, the byte offset."""
    name = str(path)
    try:
        content = Path(path).read_bytes()
    except FileNotFoundError:
        raise CassetteError(f"{name}: no such cassette file") from None
    except IsADirectoryError:
        raise CassetteError(f"{name}: is a directory, not a cassette file") from None
    except OSError as error:
        raise CassetteError(f"{name}: cannot be read ({error.strerror})") from None
    return loads(content, name)


def loads(content: bytes, name: str = "<cassette>") -> Cassette:
    if not content:
        raise CassetteError(f"{name}: is empty, not a cassette")
    if content[:1] == b"{":
        return _load_jsonl(content, name)
    first = content[0]
    if 0x80 <= first <= 0x8F or first in (0xDE, 0xDF):
        return _load_msgpack(content, name)
    raise CassetteError(f"{name}: is not a cassette (byte 0 starts neither a msgpack map nor a JSON object)")


def _header_at(record: Any, name: str) -> Header:
    if not isinstance(record, dict) or MAGIC not in record:
        raise CassetteError(f"{name}: is not a cassette (byte 0 holds no mcp-tapes header)")
    try:
        return Header.from_record(record)
    except (KeyError, TypeError, ValueError) as error:
        raise CassetteError(f"{name}: has an unusable header at byte 0 ({error})") from None


def _frame_at(record: Any, name: str, offset: int) -> Frame:
    try:
        if not isinstance(record, dict):
            raise TypeError("not a map")
        return frame_from_record(record)
    except (KeyError, TypeError, ValueError) as error:
        raise CassetteError(f"{name}: byte {offset} holds no valid frame ({error})") from None


def _load_msgpack(content: bytes, name: str) -> Cassette:
    unpacker = msgpack.Unpacker(raw=False, ext_hook=_refuse_extension, max_buffer_size=len(content) + 1)
    unpacker.feed(content)
    frames: list[Frame] = []
    warnings: list[str] = []
    offset = 0
    header: Header | None = None
    append = frames.append
    while True:
        try:
            record = unpacker.unpack()
        except msgpack.OutOfData:
            if offset < len(content):
                warnings.append(
                    f"{name}: the last frame is truncated at byte {offset} "
                    f"({len(content) - offset} bytes ignored); the {len(frames)} frames before it are kept"
                )
            break
        except (ValueError, msgpack.FormatError, msgpack.StackError) as error:
            raise CassetteError(f"{name}: byte {offset} is not valid msgpack ({error})") from None
        if header is None:
            header = _header_at(record, name)
        else:
            append(_frame_at(record, name, offset))
        offset = unpacker.tell()
    if header is None:
        raise CassetteError(f"{name}: is truncated inside its header (byte 0)")
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
        except (ValueError, UnicodeDecodeError) as error:
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
        frames.append(_frame_at(record, name, start))
    if header is None:
        raise CassetteError(f"{name}: holds no mcp-tapes header")
    return Cassette(header, frames, warnings)
