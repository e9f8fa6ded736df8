"""Cassettes: a header and the frames of a session, stored as a stream of msgpack objects
(appended and flushed as they come, so a killed recorder leaves a readable file) or as its
JSON Lines twin for review. Loading detects the format from the content and never runs code:
msgpack extension types are refused, there is no pickle.

Layouts, after the header map:
- msgpack v2 (written): one array per frame, `frame_array`: [seq, t, direction, channel, kind,
  message, data, info], trailing empty fields left out, direction and kind as small integers,
  a channel as its name the first time and as its number after. Arrays of small integers decode
  in less than half the time of v1's maps with string keys.
- msgpack v1 (still read): one map per frame with short keys, `frame_record`.
- JSON Lines: the v1 maps, one per line (the readable form; its header says format 1).
Which of the two a file is written in follows its name (`format_for`): `.jsonl` is JSON Lines.
- a raw stdio capture (a recorder that did not finish): see tapes.cassette.capture.
Every frame is checked against its kind as it is read (`frame_problem`). There is one reader:
`stream` reads the header at once and the frames as they are iterated (a big cassette is usable
before its end is read); `load` collects what a stream yields.
"""

from __future__ import annotations

import base64
import codecs
import contextlib
import gc
import io
import json
import math
import os
import stat
import sys
from collections.abc import Callable, Generator, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import Any, BinaryIO

import msgpack

from tapes import __version__
from tapes.cassette.capture import CAPTURE_KEY, CaptureFramer, first_bytes_of_a_record
from tapes.cassette.frames import Direction, Frame, Kind
from tapes.errors import UserError
from tapes.wire.eras import STATELESS_VERSION_KEY
from tapes.wire.jsonrpc import ID_TYPES, PARAMS_TYPES, MessageType, classify, deeper_than, shape_problem

FORMAT_VERSION = 2  # what the msgpack writer writes
JSONL_VERSION = 1  # the JSON Lines layout has not changed
READABLE_VERSIONS = (1, 2)
MAGIC = "mcp-tapes"  # first key of the header object
TRANSPORTS = ("stdio", "http")
JSONL_SUFFIX = ".jsonl"
STDOUT = "-"  # as an output path: standard output, where a cassette goes as JSON Lines
MAX_NESTING = 1024
"""How many levels of arrays and objects a frame's record holds at most: what msgpack's reader
allows (deeper is not valid msgpack to it), and JSON Lines is held to the same. Code that walks
frames recursively needs about this many Python frames per frame it walks (`RECURSION`)."""
RECURSION = 4 * MAX_NESTING  # for a walk of a frame at MAX_NESTING that takes up to three calls per level


def is_jsonl_path(path: str | os.PathLike[str]) -> bool:
    """Whether a cassette written at `path` is JSON Lines: its name ends in `.jsonl`. Any other name
    (`.tape`) is msgpack."""
    return os.fspath(path).endswith(JSONL_SUFFIX)


class CassetteError(UserError):
    """A cassette that cannot be read or written; the message is one sentence for the user."""


class FrameError(CassetteError):
    """A frame that loaded but that a replay cannot use (a message with no JSON form, a seq that
    comes twice, a head HTTP cannot carry): one sentence naming the frame; whoever opened the file
    names it (`in_file`)."""

    def in_file(self, name: str) -> CassetteError:
        return CassetteError(f"{name}: {self}")


class NoJsonForm(CassetteError):
    """A frame that JSON Lines cannot hold (bytes in its message or info, which msgpack has and JSON
    has not), said of the output; `number` is its place among the cassette's frames (from 1), for a
    conversion to name it in the file it was read from instead (`where_read`)."""

    def __init__(self, name: str, number: int, seq: int, problem: str) -> None:
        super().__init__(f"{name}: frame {seq} cannot be written as JSON ({problem})")
        self.number, self.problem = number, problem

    def where_read(self, path: str) -> CassetteError:
        """This frame named as damage in the msgpack cassette at `path`, which the frames were loaded
        from unchanged (a JSON Lines one cannot hold it): its byte offset is found again now."""
        try:
            with open(path, "rb") as file:
                offset = _offset_of_object(file, self.number)  # frame N is object N (the header is object 0)
        except OSError:
            return self
        return CassetteError(f"{path}: frame {self.number} (byte {offset}) cannot be written as JSON ({self.problem})")


class Unpackable(ValueError):
    """What a CassetteWriter cannot write as msgpack (a lone surrogate or an integer wider than
    64 bits outside a message, where no bytes can stand for it): which part, and why."""


def recording_stopped(path: str, reason: str) -> str:
    """What a recorder says when its cassette cannot be written any more (it goes on forwarding)."""
    return f"{path}: cannot be written ({reason}); the session goes on unrecorded and tapes record will exit non-zero"


@dataclass(frozen=True)
class Header:
    transport: str  # one of TRANSPORTS
    server: dict[str, Any]  # {"command": [...]} or {"url": ...}; never the environment
    created: str = field(default_factory=lambda: datetime.now(UTC).isoformat(timespec="microseconds"))
    tool: str = f"mcp-tapes {__version__}"
    format: int = field(default=FORMAT_VERSION, compare=False)  # the layout it was read from
    redaction: tuple[str, ...] = ()
    labels: dict[str, str] = field(default_factory=dict)

    def record(self, version: int = FORMAT_VERSION) -> dict[str, Any]:
        fields = asdict(self)
        fields["redaction"] = list(self.redaction)
        del fields["format"]
        return {MAGIC: version, **fields}

    @classmethod
    def from_record(cls, record: dict[str, Any]) -> Header:
        fields = dict(record)
        version = fields.pop(MAGIC)
        if type(version) is not int:  # True and 1.0 are equal to 1, and would be read as format 1
            raise TypeError("its format version is not an integer")
        if version not in READABLE_VERSIONS:
            raise ValueError(f"format version {version!r:.20} is not supported (this reads {READABLE_VERSIONS[0]} to {FORMAT_VERSION})")
        for name, kind in (("transport", str), ("server", dict), ("created", str), ("tool", str)):
            if name not in fields:
                raise ValueError(f"it has no {name}")
            if not isinstance(fields[name], kind):
                raise TypeError(f"its {name} is not a {'map' if kind is dict else 'string'}")
        if fields["transport"] not in TRANSPORTS:
            raise ValueError(f"its transport {fields['transport']!r:.40} is neither {' nor '.join(map(repr, TRANSPORTS))}")
        redaction, labels = fields.get("redaction", []), fields.get("labels", {})
        if type(redaction) is not list or not all(type(label) is str for label in redaction):
            raise TypeError("its redaction is not a list of strings")
        if type(labels) is not dict or not all(type(value) is str for value in labels.values()):
            raise TypeError("its labels are not a map of strings")
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
        watch = VersionWatch()
        for frame in self.frames:
            if watch.see(frame):
                break
        return watch.version


class VersionWatch:
    """`Cassette.protocol_version` worked out frame by frame, as the frames stream past."""

    def __init__(self) -> None:
        self.version: str | None = None
        self._initialize_ids: set[Any] = set()  # a set: a cassette may hold any number of unanswered ones

    def see(self, frame: Frame) -> bool:
        """Take the next frame into account; whether the version is known."""
        message = frame.message
        if self.version is not None or type(message) is not dict:  # initialize never travels in a batch
            return self.version is not None
        if frame.from_client:
            method = message.get("method")
            if method == "initialize" and "id" in message:
                self._initialize_ids.add(message["id"])
            elif method != "server/discover" and "id" in message:
                self.version = _stateless_version(message)
        elif "result" in message and message.get("id") in self._initialize_ids:
            version = message["result"].get("protocolVersion") if type(message["result"]) is dict else None
            self.version = version if isinstance(version, str) else None
        return self.version is not None


def _stateless_version(request: dict[str, Any]) -> str | None:
    params = request.get("params")
    meta = params.get("_meta") if type(params) is dict else None
    version = meta.get(STATELESS_VERSION_KEY) if type(meta) is dict else None
    return version if isinstance(version, str) else None


# --- frames as stored -----------------------------------------------------------------------

_DIRECTIONS = {d.value: d for d in Direction}
_KINDS = {k.value: k for k in Kind}
# v2 numbers for directions and kinds: their position here, fixed forever (append only).
DIRECTION_CODES = (Direction.CLIENT_TO_SERVER, Direction.SERVER_TO_CLIENT)
KIND_CODES = (
    Kind.MESSAGE, Kind.RAW, Kind.STDERR, Kind.HTTP_REQUEST, Kind.HTTP_RESPONSE, Kind.SSE_EVENT, Kind.STREAM_END, Kind.EXIT,
)  # fmt: skip
_DIRECTION_NUMBER = {d: n for n, d in enumerate(DIRECTION_CODES)}
_KIND_NUMBER = {k: n for n, k in enumerate(KIND_CODES)}

# Loaded frames are made by tuple.__new__, in C: Frame(...) runs namedtuple's Python __new__,
# which was the largest cost of loading a big cassette.
_new_tuple = tuple.__new__


def frame_record(frame: Frame) -> dict[str, Any]:
    """The frame as a v1 / JSON Lines map with short keys, absent fields left out.
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
    naming what is wrong."""
    if type(record) is not dict:
        raise ValueError("it is not a map")
    for key in ("seq", "t", "dir", "ch", "kind"):
        if key not in record:
            raise ValueError(f"it has no {key}")
    named = [value if isinstance(value, str) else None for value in (record["dir"], record["kind"])]  # a list has no name
    direction, kind = _DIRECTIONS.get(named[0]), _KINDS.get(named[1])  # type: ignore[call-overload]
    if direction is None or kind is None:
        raise ValueError(f"its direction {record['dir']!r:.20} or kind {record['kind']!r:.20} is unknown")
    get = record.get
    return _checked(record["seq"], record["t"], direction, record["ch"], kind, get("msg"), get("data"), get("info"))


def frame_array(frame: Frame, channels: dict[str, int]) -> list[Any]:
    """The frame as a v2 array. `channels` numbers the channels already written to this file;
    a new one is written by name and numbered here."""
    number = channels.get(frame.channel)
    if number is None:
        channel: int | str = frame.channel
    else:
        channel = number
    array = [frame.seq, frame.t, _DIRECTION_NUMBER[frame.direction], channel, _KIND_NUMBER[frame.kind],
             frame.message, frame.data, frame.info]  # fmt: skip
    while array[-1] is None:
        array.pop()
    return array


def _checked(seq: Any, t: Any, direction: Direction, channel: Any, kind: Kind, message: Any, data: Any, info: Any) -> Frame:
    """A frame from decoded fields, once `frame_problem` finds nothing wrong with them."""
    if type(t) is int:
        t = float(t)
    if type(channel) is str:
        channel = sys.intern(channel)  # a handful of channels shared by millions of frames
    problem = frame_problem(seq, t, channel, kind, message, data, info)
    if problem:
        raise ValueError(problem)
    return _new_tuple(Frame, (seq, t, direction, channel, kind, message, data, info))


def frame_problem(seq: Any, t: Any, channel: Any, kind: Kind, message: Any, data: Any, info: Any) -> str | None:
    """What is wrong with these frame fields for a frame of this kind (the README's frame model,
    what every reader of frames relies on), or None."""
    if type(seq) is not int:
        return "its seq is not an integer"
    if not -(2**63) <= seq < 2**64:  # what msgpack can hold (a JSON Lines cassette can hold more)
        return "its seq is out of range"
    if type(t) is not float:
        return "its time is not a number"
    if not math.isfinite(t):
        return f"its time is {t}, not a finite number"
    if type(channel) is not str:
        return "its channel is not a string"
    if data is not None and type(data) is not bytes:
        return "its data is not bytes"
    if info is not None and type(info) is not dict:
        return "its info is not a map"
    if kind is Kind.MESSAGE or (kind is Kind.SSE_EVENT and message is not None):
        if message is None:
            return "it is a message frame without a message"
        if classify(message) is MessageType.INVALID:
            return "its message is not a JSON-RPC message or batch"
        if problem := shape_problem(message):
            return f"its message has {problem}"
    elif message is not None:
        return f"it has a message, which no {kind} frame has"
    checks = _INFO_CHECKS.get(kind)
    return checks(info or {}) if checks else None


def _fields_problem(info: dict[str, Any], required: dict[str, tuple[type, ...]]) -> str | None:
    for name, types in required.items():
        if type(info.get(name)) not in types:
            if name not in info:
                return f"its info has no {name}"
            wanted = " or ".join(_JSON_TYPE_NAMES[t] for t in types)
            return f"its info {name} is {_JSON_TYPE_NAMES.get(type(info[name]), 'of another type')}, not {wanted}"
    return None


# What a user knows a value as: JSON's names (msgpack adds bytes), not Python's.
_JSON_TYPE_NAMES: dict[type, str] = {
    type(None): "null", bool: "a boolean", int: "an integer", float: "a number", str: "a string",
    bytes: "bytes", list: "an array", tuple: "an array", dict: "an object",
}


def _headers_problem(info: dict[str, Any]) -> str | None:
    headers = info.get("headers")
    if type(headers) is not list or not all(
        type(pair) in (list, tuple) and len(pair) == 2 and type(pair[0]) is str and type(pair[1]) is str
        for pair in headers
    ):
        return "its headers are not a list of [name, value] strings"
    return None


_NONE = type(None)
_INFO_CHECKS = {
    Kind.HTTP_REQUEST: lambda info: _fields_problem(info, {"method": (str,), "path": (str,)}) or _headers_problem(info),
    Kind.HTTP_RESPONSE: lambda info: _fields_problem(info, {"status": (int,)}) or _headers_problem(info),
    Kind.SSE_EVENT: lambda info: _fields_problem(info, {"id": (str, _NONE), "event": (str, _NONE), "retry": (int, _NONE)}),
    Kind.STREAM_END: lambda info: _fields_problem(info, {"reason": (str,)}),
    Kind.EXIT: lambda info: _fields_problem(info, {"code": (int, _NONE), "signal": (int, _NONE)}),
}


# --- writing --------------------------------------------------------------------------------


class CassetteWriter:
    """Appends frames to a cassette, msgpack or JSON Lines (`jsonl`; by default as the path's name
    says, msgpack for a file object); every `write` call is on disk (in the page cache) before it
    returns, so a crash can cut at most the frames of the call in progress.

    Opening a path that cannot be opened raises CassetteError; a write that fails (a full disk,
    an I/O error) raises OSError, the header's too, and leaves nothing to flush at close."""

    def __init__(self, path: str | os.PathLike[str] | BinaryIO, header: Header, *, jsonl: bool | None = None) -> None:
        if hasattr(path, "write"):
            self._file: BinaryIO = path  # type: ignore[assignment]
        else:
            jsonl = is_jsonl_path(path) if jsonl is None else jsonl
            self._file = _open_for_writing(path, "wb", buffering=0)  # type: ignore[assignment]
        self._pack = msgpack.Packer().pack
        self._encoded = _json_frame if jsonl else FramePacker().packed
        try:
            self._put(_json_line(header.record(JSONL_VERSION)) if jsonl else self._packed_header(header))
        except (OSError, Unpackable):
            self.close()
            raise

    def write(self, frames: Iterable[Frame]) -> None:
        self._put(b"".join([self._encoded(frame) for frame in frames]))

    def _put(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            view = view[self._file.write(view) :]
        self._file.flush()

    def _packed_header(self, header: Header) -> bytes:
        try:
            return self._pack(header.record())
        except ValueError as error:  # a lone surrogate (a JSON Lines header can hold one)
            raise Unpackable(f"its header cannot be written as msgpack ({error})") from None

    def fileno(self) -> int:
        return self._file.fileno()

    def close(self) -> None:
        self._file.close()

    def __enter__(self) -> CassetteWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class FramePacker:
    """Frames as the v2 records of one file (`frame_array`): a channel is named the first time and
    numbered after, so one packer serves one file. A frame with no msgpack form (an integer wider
    than 64 bits, a lone surrogate) is packed as `instead` makes it: by default, its message as
    the exact bytes it stands for."""

    def __init__(self, instead: Callable[[Frame], Frame] | None = None) -> None:
        self._pack = msgpack.Packer().pack
        self._channels: dict[str, int] = {}
        self._instead = instead or as_bytes

    def packed(self, frame: Frame) -> bytes:
        """Raises Unpackable for a frame with no msgpack form."""
        channels = self._channels
        try:
            packed = self._pack(frame_array(frame, channels))
        except (OverflowError, ValueError, TypeError):
            frame = self._instead(frame)  # its channel as written, if `instead` changes that too
            try:
                packed = self._pack(frame_array(frame, channels))
            except (OverflowError, ValueError, TypeError) as error:  # not in the message: in its info, say
                raise Unpackable(f"frame {frame.seq} cannot be written as msgpack ({error})") from None
        if frame.channel not in channels:
            channels[frame.channel] = len(channels)
        return packed


def _json_frame(frame: Frame) -> bytes:
    """A frame as one JSON line; raises TypeError or ValueError when it has no JSON form. A message
    nested deeper than a cassette holds is written as the bytes it stands for, as msgpack's is."""
    line = _json_line(_jsonable(frame_record(frame)))
    # MAX_NESTING - 1: the frame's map is a level too
    if frame.message is not None and _may_nest_too_deeply(line) and deeper_than(frame.message, MAX_NESTING - 1):
        return _json_line(_jsonable(frame_record(as_bytes(frame))))
    return line


def _may_nest_too_deeply(line: bytes) -> bool:
    """Whether a JSON line can nest deeper than MAX_NESTING (a cheap count first: few lines can)."""
    return line.count(b"[") + line.count(b"{") > MAX_NESTING


def as_bytes(frame: Frame) -> Frame:
    """The frame with its message replaced by the bytes it stands for: a MESSAGE frame becomes RAW,
    an SSE event stays one (with those bytes as its data)."""
    kind = Kind.SSE_EVENT if frame.kind is Kind.SSE_EVENT else Kind.RAW
    return Frame(frame.seq, frame.t, frame.direction, frame.channel, kind, None, frame.shown_payload, frame.info)


def _open_for_writing(path: str | os.PathLike[str], mode: str, name: str | None = None, **options: Any) -> Any:
    try:
        return open(path, mode, **options)
    except OSError as error:
        raise CassetteError(f"{name or path}: cannot be written ({error.strerror})") from None


def save(cassette: Cassette, path: str | os.PathLike[str], *, jsonl: bool | None = None, name: str | None = None) -> None:
    """Write `cassette` to `path`, in the format its name says (`is_jsonl_path`) unless `jsonl` is
    given; `name` stands for the path in errors."""
    with _open_for_writing(path, "wb", name) as out:
        dump(cassette, out, jsonl=is_jsonl_path(path) if jsonl is None else jsonl, name=name or str(path))


def dump(cassette: Cassette, out: BinaryIO, *, jsonl: bool, name: str = "<output>") -> None:
    """Write `cassette` to an open binary file (stdout, say); `name` stands for it in errors."""
    try:
        if not jsonl:
            try:
                CassetteWriter(out, cassette.header).write(cassette.frames)
            except Unpackable as error:
                raise CassetteError(f"{name}: {error}") from None
            return
        lines = [_json_line(cassette.header.record(JSONL_VERSION))]
        for number, frame in enumerate(cassette.frames, 1):
            try:
                lines.append(_json_frame(frame))
            except (TypeError, ValueError) as error:
                problem = "it holds bytes, which JSON has no form for" if "bytes" in str(error) else str(error)
                raise NoJsonForm(name, number, frame.seq, problem) from None
        out.write(b"".join(lines))
        out.flush()
    except BrokenPipeError:  # the reader of a pipe went away: for the caller to judge
        raise
    except OSError as error:  # a full disk, an I/O error
        raise CassetteError(f"{name}: cannot be written ({error.strerror or error})") from None


def replace_file(cassette: Cassette, path: str | os.PathLike[str]) -> None:
    """Write `cassette` over the file at `path` at once, in the format the name says (`replacing`)."""
    replacing(path, lambda out: save(cassette, out, jsonl=is_jsonl_path(path), name=os.fspath(path)))


def replacing(path: str | os.PathLike[str], write: Callable[[str], None]) -> None:
    """Have `write(name)` write what goes at `path` to a file beside it, then rename that over
    it, so a reader (or a crash) never sees half of it. Through a symlink its target is replaced;
    what is no regular file (/dev/stdout, a FIFO) is written into."""
    if _is_special(path):
        write(os.fspath(path))
        return
    target = os.path.realpath(path)
    scratch = f"{target}.tmp"
    try:
        write(scratch)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(scratch)
        raise
    os.replace(scratch, target)


class RecordingFile:
    """The cassette file a recorder appends to while the session runs, held open for reading too:
    if its path stops naming it meanwhile (deleted, moved away, replaced by a test's cleanup or a
    `git checkout`), what was recorded is still in the file, and `put_back` writes it there again.
    Inert for what is no regular file (/dev/null, a FIFO) and for a file its owner cannot read."""

    def __init__(self, path: str, written: int) -> None:
        """`written`: the descriptor the recorder appends through."""
        self._path = path
        self._reader: int | None = None
        if not stat.S_ISREG(os.fstat(written).st_mode):
            return
        try:
            reader = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            return
        if _same_file(os.fstat(reader), os.fstat(written)):
            self._reader = reader
        else:  # replaced already between the two opens
            os.close(reader)

    def put_back(self) -> str | None:
        """Once the recording is written: if the path no longer names the file, write its content
        there (over what took its place: the recorder was told to record there); the sentence
        saying so, or None. Raises CassetteError, the recording lost, when that cannot be written."""
        reader, self._reader = self._reader, None
        if reader is None:
            return None
        try:
            try:
                now: os.stat_result | None = os.stat(self._path)
            except OSError:
                now = None
            if now is not None and _same_file(now, os.fstat(reader)):
                return None
            what = "was deleted or moved away" if now is None else "was replaced by another file"
            if now is not None and not stat.S_ISREG(now.st_mode):  # a FIFO would hold the recorder until read
                raise CassetteError(f"{self._path} {what}, no regular one, during the recording: the recording is lost")
            try:
                replacing(self._path, lambda scratch: _copy_out(reader, scratch))
            except OSError as error:
                raise CassetteError(f"{self._path} {what} during the recording and cannot be written again "
                                    f"({error.strerror or error}): the recording is lost") from None
            return f"{self._path} {what} during the recording; the recording was written there again"
        finally:
            os.close(reader)


def _same_file(a: os.stat_result, b: os.stat_result) -> bool:
    return (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino)


def _copy_out(source: int, path: str) -> None:
    with open(path, "wb") as out:
        offset = 0
        while chunk := os.pread(source, _READ_SIZE, offset):
            out.write(chunk)
            offset += len(chunk)


def _is_special(path: str | os.PathLike[str]) -> bool:
    """Whether `path` is there, through symlinks, and no regular file (a device, a FIFO, a pipe)."""
    try:
        return not stat.S_ISREG(os.stat(path).st_mode)
    except OSError:
        return False


def _json_line(value: dict[str, Any]) -> bytes:
    line = json.dumps(value, ensure_ascii=False, separators=(",", ":")) + "\n"
    try:
        return line.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate, which UTF-8 cannot hold: as a JSON escape then
        return json.dumps(value, separators=(",", ":")).encode("ascii") + b"\n"


def _jsonable(record: dict[str, Any]) -> dict[str, Any]:
    """Bytes become `text` when they are UTF-8 (readable in review), base64 `data` otherwise."""
    if "data" in record:
        data = record.pop("data")
        try:
            record["text"] = data.decode("utf-8")
        except UnicodeDecodeError:
            record["data"] = base64.b64encode(data).decode("ascii")
    return record


def _bytes_from_json(record: dict[str, Any], name: str, where: str) -> None:
    """A JSON Lines frame's bytes, from its `text` (UTF-8) or its `data` (base64), into `data`."""
    if "text" in record and ("data" in record or not isinstance(record["text"], str)):
        raise CassetteError(f"{name}: {where} has " + ("both text and data" if "data" in record else "text that is not a string"))
    if isinstance(record.get("text"), str):
        try:
            record["data"] = record.pop("text").encode("utf-8")
        except UnicodeEncodeError:  # a lone surrogate, which a \u escape can say
            raise CassetteError(f"{name}: {where} has text that is not UTF-8 (a lone surrogate)") from None
    elif isinstance(record.get("data"), str):
        try:
            record["data"] = base64.b64decode(record["data"], validate=True)
        except ValueError:
            raise CassetteError(f"{name}: {where} has data that is not base64") from None


# --- reading --------------------------------------------------------------------------------

_MSGPACK_MAP_STARTS = frozenset(range(0x80, 0x90)) | {0xDE, 0xDF}
# What a cut last frame can start with: a v1 map of 5 to 8 entries whose first key is "seq";
# a v2 array of 5 to 8 fields.
_V1_FRAME_STARTS = [bytes([0x80 + size]) + msgpack.packb("seq") for size in range(5, 9)]
_V2_FRAME_STARTS = frozenset(range(0x95, 0x99))
_READ_SIZE = 1 << 20
_NIL = b"\xc0"


class CassetteStream:
    """A cassette read as it is iterated, so a big one is usable before its end is read. `header`
    is read at once (`stream` raises what is wrong with it); iterating yields the checked frames
    in order and raises, when it reaches a damaged frame, the CassetteError `load` would (one
    sentence naming the frame and its byte offset); `warnings` (a truncated last frame, a raw
    capture framed now) are complete once the iteration has ended. It iterates once. The file
    is closed when the iteration ends, or by `close` (a with block)."""

    def __init__(self, header: Header, frames: Generator[Frame], warnings: list[str], file: BinaryIO,
                 v2_frames_at: int | None = None) -> None:
        self.header = header
        self.warnings = warnings
        self.v2_frames_at = v2_frames_at  # where the frames begin, when the file holds them as v2 records (one each)
        self._frames = frames
        self._file = file

    def __iter__(self) -> Iterator[Frame]:
        return self._frames

    def close(self) -> None:
        self._frames.close()
        self._file.close()

    def __enter__(self) -> CassetteStream:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def stream(path: str | os.PathLike[str]) -> CassetteStream:
    """Open a cassette in either format for reading as it is iterated (`CassetteStream`). Raises
    CassetteError with one sentence when the file cannot be read or its header is unusable."""
    name = str(path)
    try:
        file = open(path, "rb")  # the stream owns it, and closes it
    except OSError as error:
        raise _unreadable(name, error) from None
    try:
        return _stream(file, os.fstat(file.fileno()).st_size, name)
    except BaseException as error:
        file.close()
        if isinstance(error, OSError):
            raise _unreadable(name, error) from None
        raise


def load(path: str | os.PathLike[str]) -> Cassette:
    """Read a whole cassette in either format. Raises CassetteError with one sentence naming the
    problem and, for damaged content, the frame and its byte offset."""
    with stream(path) as frames:
        return _collected(frames)


def loads(content: bytes, name: str = "<cassette>") -> Cassette:
    """`load` for content already in memory; `name` stands for the file in messages."""
    with _stream(io.BytesIO(content), len(content), name) as frames:
        return _collected(frames)


def _collected(frames: CassetteStream) -> Cassette:
    with gc_paused():
        return Cassette(frames.header, list(frames), frames.warnings)


def _unreadable(name: str, error: OSError) -> CassetteError:
    if isinstance(error, FileNotFoundError):
        return CassetteError(f"{name}: no such cassette file")
    if isinstance(error, IsADirectoryError):
        return CassetteError(f"{name}: is a directory, not a cassette file")
    return CassetteError(f"{name}: cannot be read ({error.strerror})")


_BOM = codecs.BOM_UTF8  # json.loads reads past it


def _starts_as_jsonl(first: bytes) -> bool:
    """Whether a file starting with `first` is JSON Lines (perhaps from an editor that starts UTF-8 with a BOM)."""
    return first.startswith((b"{", _BOM + b"{"))


def is_jsonl_file(path: str | os.PathLike[str]) -> bool:
    """Whether the cassette at `path` is in the JSON Lines form, by its content (not its name)."""
    try:
        with open(path, "rb") as file:
            return _starts_as_jsonl(file.read(len(_BOM) + 1))
    except OSError as error:
        raise _unreadable(os.fspath(path), error) from None


def unapplied_in_capture(path: str | os.PathLike[str]) -> list[str] | None:
    """None unless the file at `path` is a stdio recorder's raw capture, not its frames (what a
    recorder leaves when it did not finish: killed, or its frames could not be written or
    scrubbed); then the redaction rules and before-record hook its frames have not been through."""
    try:
        with open(path, "rb") as file:
            head = next(msgpack.Unpacker(file, raw=False), None)
    except (OSError, ValueError, msgpack.UnpackException):  # no msgpack at its start: no capture either
        return None
    if not isinstance(head, dict) or CAPTURE_KEY not in head:
        return None
    return _unapplied_of(head[CAPTURE_KEY])


def _stream(file: BinaryIO, size: int, name: str) -> CassetteStream:
    first = file.read(len(_BOM) + 1)
    if not first:
        raise CassetteError(f"{name}: is empty, not a cassette")
    file.seek(0)
    warnings: list[str] = []
    v2_frames_at = None
    if _starts_as_jsonl(first):
        header, frames = _jsonl_stream(file, name, warnings)
    elif first[0] in _MSGPACK_MAP_STARTS:
        header, frames, v2_frames_at = _msgpack_stream(file, size, name, warnings)
    else:
        raise CassetteError(f"{name}: is not a cassette (byte 0 starts neither a msgpack map nor a JSON object)")
    return CassetteStream(header, frames, warnings, file, v2_frames_at)


@contextmanager
def gc_paused() -> Iterator[None]:
    """Loading (and indexing what was loaded) makes millions of acyclic containers; the cyclic collector would scan them again
    and again as they pile up (it doubled the load time) and could free none of them. What was made goes to the
    collector's oldest generation when the pause ends (`freeze` then `unfreeze` puts every object there): left young,
    the next young collection, and the one after it in the middle generation, traverse all of it (1.4 s after a
    million frames were loaded), and would find nothing to free. Collected in full collections, as old objects are."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        gc.unfreeze()
        if enabled:
            gc.enable()


def _header_at(record: Any, name: str) -> Header:
    if not isinstance(record, dict) or MAGIC not in record:
        raise CassetteError(f"{name}: is not a cassette (byte 0 holds no mcp-tapes header)")
    try:
        return Header.from_record({key: value for key, value in record.items() if key != CAPTURE_KEY})
    except (KeyError, TypeError, ValueError) as error:
        raise CassetteError(f"{name}: has an unusable header at byte 0 ({error})") from None


def _refuse_extension(code: int, data: bytes) -> Any:
    raise ValueError("it holds a msgpack extension type, which a cassette never contains")


def _msgpack_problem(error: ValueError) -> str:
    text = str(error)
    if "max_ext_len" in text:  # extension types with a payload (timestamps too) stop here
        return "it holds a msgpack extension type, which a cassette never contains"
    return text or "malformed msgpack"


class _BadFrame(Exception):
    """A decoded object that is no valid frame: what is wrong with it."""


class _Damage(Exception):
    """Object `number` (the header is object 0) is not valid msgpack or not a valid frame."""

    def __init__(self, number: int, error: Exception) -> None:
        super().__init__(number, error)
        self.number, self.error = number, error


# A reader turns the decoded objects after the header into frames, yielding them; it raises
# _Damage for a bad object and returns how many frames it made.
Reader = Callable[[BinaryIO, msgpack.Unpacker], Generator[Frame, None, int]]


def _msgpack_stream(
    file: BinaryIO, size: int, name: str, warnings: list[str]
) -> tuple[Header, Generator[Frame], int | None]:
    # Fed rather than reading the file itself: at the end, one more byte fed tells whether the
    # last object was whole, with no tell() per frame (`_whole_at_end`).
    unpacker = msgpack.Unpacker(
        raw=False,
        max_buffer_size=0,  # the largest allowed (4 GiB): one frame may be a huge tool result
        max_ext_len=0,  # timestamps bypass ext_hook; this refuses them too
        ext_hook=_refuse_extension,
    )
    head: Any = None
    try:
        while (head := next(unpacker, None)) is None:
            chunk = file.read(_READ_SIZE)
            if not chunk:
                raise CassetteError(f"{name}: is truncated inside its header (byte 0)")
            unpacker.feed(chunk)
    except ValueError:  # not msgpack after all, e.g. a PNG (0x89 also starts a msgpack map)
        head = None
    header = _header_at(head, name)
    capture = head.get(CAPTURE_KEY)
    read: Reader
    v2_frames_at = None
    if capture is not None:
        read, may_start = _capture_reader(capture, name, warnings), _may_start_a_capture_record
    elif header.format == 1:
        read, may_start = _v1_frames, _may_start_a_v1_frame
    else:
        read, may_start = _v2_frames, _may_start_a_v2_frame
        v2_frames_at = unpacker.tell()
    return header, _msgpack_frames(file, size, name, unpacker, read, may_start, warnings), v2_frames_at


def _msgpack_frames(
    file: BinaryIO, size: int, name: str, unpacker: msgpack.Unpacker, read: Reader,
    may_start: Callable[[bytes], bool], warnings: list[str],
) -> Generator[Frame]:  # fmt: skip
    try:
        try:
            count = yield from read(file, unpacker)
        except _Damage as damage:
            where = f"{name}: frame {damage.number} (byte {_offset_of_object(file, damage.number)})"
            if isinstance(damage.error, _BadFrame):
                raise CassetteError(f"{where} is not a valid frame ({damage.error})") from None
            if "strict_map_key" in str(damage.error):  # valid msgpack, but JSON's keys are strings, and so are a frame's
                raise CassetteError(f"{where} is not a valid frame (it holds a map key that is not a string)") from None
            raise CassetteError(f"{where} is not valid msgpack ({_msgpack_problem(damage.error)})") from None
        if not _whole_at_end(unpacker):
            # A cut can only leave the start of a frame; anything else there is damage, not a crash.
            offset = _offset_of_object(file, read.objects if isinstance(read, _capture_reader) else count + 1)
            file.seek(offset)
            if not may_start(file.read(len(_V1_FRAME_STARTS[0]))):
                raise CassetteError(f"{name}: byte {offset} does not start a frame (the file is damaged there)")
            warnings.append(
                f"{name}: the last frame is truncated at byte {offset} "
                f"({size - offset} bytes ignored); the {count} frames before it are kept"
            )
        if isinstance(read, _capture_reader):
            yield from read.finish()
    except OSError as error:
        raise _unreadable(name, error) from None
    finally:
        file.close()


def _fed(file: BinaryIO, unpacker: msgpack.Unpacker) -> Iterator[None]:
    """Feeds the rest of the file to `unpacker` a chunk at a time, the first time before its buffer is read."""
    yield
    while chunk := file.read(_READ_SIZE):
        unpacker.feed(chunk)
        yield


def _whole_at_end(unpacker: msgpack.Unpacker) -> bool:
    """Whether the bytes fed so far ended with a whole object. A nil fed now decodes as that very
    nil only when no object was begun: in a begun one it would be a part (an element, a byte)."""
    unpacker.feed(_NIL)
    try:
        return next(unpacker, _NIL) is None
    except ValueError:
        return False


def _may_start_a_v2_frame(start: bytes) -> bool:
    return start[0] in _V2_FRAME_STARTS


def _may_start_a_capture_record(start: bytes) -> bool:
    return first_bytes_of_a_record(start[0])


def _may_start_a_v1_frame(start: bytes) -> bool:
    return any(frame_start.startswith(start) for frame_start in _V1_FRAME_STARTS)


def _offset_of_object(file: BinaryIO, index: int) -> int:
    """Where the object after the first `index` (the header is object 0) starts. Found again
    only when something is wrong there: noting every offset as it goes slowed loading."""
    file.seek(0)
    unpacker = msgpack.Unpacker(file, max_buffer_size=0)
    for _ in range(index):
        unpacker.skip()
    return unpacker.tell()


def _converted(
    file: BinaryIO, unpacker: msgpack.Unpacker, convert: Callable[[Any], Sequence[Frame]]
) -> Generator[Frame, None, int]:
    """A Reader that makes each decoded object after the header into frames with `convert`
    (which raises ValueError naming what is wrong with the object)."""
    objects, count = 1, 0  # the header is object 0
    try:
        for _ in _fed(file, unpacker):
            for record in unpacker:
                try:
                    frames = convert(record)
                except ValueError as error:
                    raise _BadFrame(error) from None
                objects += 1
                yield from frames
                count += len(frames)
    except (_BadFrame, ValueError) as error:  # ValueError: FormatError, StackError, bad UTF-8, refused extensions
        raise _Damage(objects, error) from None
    return count


def _v1_frames(file: BinaryIO, unpacker: msgpack.Unpacker) -> Generator[Frame, None, int]:
    return (yield from _converted(file, unpacker, lambda record: (frame_from_record(record),)))


def _v2_frames(file: BinaryIO, unpacker: msgpack.Unpacker) -> Generator[Frame, None, int]:
    """The hot loop of loading: the common frame is checked inline, and anything unusual goes
    through `frame_problem` (which also names what is wrong)."""
    count = 0
    channels: dict[int, str] = {}  # by number, as the file numbers them
    # Looked up by value: 1.0 or True would find 1 too, and make the same frame as 1 does.
    directions, kinds = dict(enumerate(DIRECTION_CODES)), dict(enumerate(KIND_CODES))
    message_kind, stderr_kind, raw_kind = Kind.MESSAGE, Kind.STDERR, Kind.RAW
    new, frame_class, isfinite = _new_tuple, Frame, math.isfinite
    id_types, params_types = ID_TYPES, PARAMS_TYPES
    try:
        for _ in _fed(file, unpacker):
            for record in unpacker:
                size = len(record) if type(record) is list else 0
                if size == 6:  # trailing empty fields are left out: most frames have 6 or 7
                    seq, t, direction, channel, kind, message = record
                    data = info = None
                elif size == 7:
                    seq, t, direction, channel, kind, message, data = record
                    info = None
                elif size == 8:
                    seq, t, direction, channel, kind, message, data, info = record
                elif size == 5:
                    seq, t, direction, channel, kind = record
                    message = data = info = None
                else:
                    raise _BadFrame("it is not an array of 5 to 8 fields")
                try:
                    direction, kind = directions[direction], kinds[kind]
                except (KeyError, TypeError):
                    raise _BadFrame(f"its direction {direction!r:.20} or kind {kind!r:.20} is unknown") from None
                try:
                    channel = channels[channel]
                except (KeyError, TypeError):
                    if type(channel) is not str:
                        problem = "its channel is not a string" if type(channel) is not int else \
                            f"its channel number {channel} was never named"
                        raise _BadFrame(problem) from None
                    channel = channels[len(channels)] = sys.intern(channel)
                # The common frames, a subset of what `frame_problem` accepts: a request, notification,
                # result or error (verbatim bytes or not); a stderr or raw line.
                if type(seq) is int and type(t) is float and isfinite(t) and info is None and (
                    (kind is message_kind and (data is None or type(data) is bytes) and type(message) is dict
                     and message.get("jsonrpc") == "2.0" and type(message.get("id")) in id_types
                     and type(message.get("params")) in params_types
                     and (type(message.get("method")) is str if "method" in message else "id" in message and (
                         "result" in message or (type(error := message.get("error")) is dict
                                                 and type(error.get("code")) is int and type(error.get("message")) is str))))
                    or ((kind is stderr_kind or kind is raw_kind) and message is None and type(data) is bytes)
                ):  # fmt: skip
                    frame = new(frame_class, (seq, t, direction, channel, kind, message, data, info))
                else:
                    try:
                        frame = _checked(seq, t, direction, channel, kind, message, data, info)
                    except ValueError as error:
                        raise _BadFrame(error) from None
                yield frame
                count += 1
    except (_BadFrame, ValueError) as error:  # ValueError: FormatError, StackError, bad UTF-8, refused extensions
        raise _Damage(count + 1, error) from None
    return count


def _unapplied_of(capture: Any) -> list[str]:
    """The labels of the rules and hook a capture's header says its frames have not been through."""
    unapplied = capture.get("unapplied") if type(capture) is dict else None
    return [label for label in unapplied if type(label) is str] if type(unapplied) is list else []


class _capture_reader:
    """Reads a raw stdio capture (a recorder that did not finish) into frames: a Reader, whose
    frames are counted apart from the records (`objects`) they are made of."""

    def __init__(self, capture: Any, name: str, warnings: list[str]) -> None:
        self._name = name
        self._warnings = warnings
        self._unapplied = _unapplied_of(capture)
        self._framer = CaptureFramer()
        self.objects = 1  # the header

    def __call__(self, file: BinaryIO, unpacker: msgpack.Unpacker) -> Generator[Frame, None, int]:
        return (yield from _converted(file, unpacker, self._framed))

    def _framed(self, record: Any) -> list[Frame]:
        frames = self._framer.record(record)
        self.objects += 1
        return frames

    def finish(self) -> Iterator[Frame]:
        yield from self._framer.finish()
        unapplied = f"; {', '.join(self._unapplied)} was not applied to it" if self._unapplied else ""
        if not self._framer.exited:
            self._warnings.append(f"{self._name}: the recorder stopped before the server exited, so this cassette is "
                                  f"its raw capture, framed now{unapplied}")
        elif unapplied:  # the recorder could not make it into frames (its hook failed, a full disk): unscrubbed
            self._warnings.append(f"{self._name}: the recorder did not finish this cassette, so it is its raw capture, "
                                  f"framed now{unapplied}")


def _jsonl_stream(file: BinaryIO, name: str, warnings: list[str]) -> tuple[Header, Generator[Frame]]:
    records = _jsonl_records(file, name, warnings)
    _, _, record = next(records)  # the file starts with "{": its first line is the header, or an error
    return _header_at(record, name), _jsonl_frames(file, records, name)


def _jsonl_records(file: BinaryIO, name: str, warnings: list[str]) -> Iterator[tuple[int, int, Any]]:
    """(line number, byte offset, decoded value) for each line that is not blank."""
    offset = records = 0
    try:
        for number, line in enumerate(file, 1):
            start, offset = offset, offset + len(line)
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except (ValueError, RecursionError) as error:  # UnicodeDecodeError included
                what = f"frame {records} (byte {start}, line {number})" if records else f"byte {start} (line {number})"
                if (cr := _cr_line_end(line)) is not None:
                    raise CassetteError(f"{name}: {what} ends in CR alone at byte {start + cr} (an old Mac's line end), "
                                        "but JSON Lines lines end in LF") from None
                if not line.endswith(b"\n"):  # unterminated last line: a writer stopped mid-line
                    if not records:
                        raise CassetteError(f"{name}: is truncated inside its header (byte 0)") from None
                    warnings.append(
                        f"{name}: the last line is truncated at byte {start}; the {records - 1} frames before it are kept"
                    )
                    return
                problem = ("nested too deeply" if isinstance(error, RecursionError)
                           # the decoder's own line and column would count within this line, confusingly
                           else f"{error.msg} at its character {error.pos + 1}" if isinstance(error, json.JSONDecodeError)
                           else error)
                raise CassetteError(f"{name}: {what} is not valid JSON ({problem})") from None
            if _may_nest_too_deeply(line) and deeper_than(record, MAX_NESTING):
                raise CassetteError(f"{name}: byte {start} (line {number}) nests arrays and objects deeper than "
                                    f"{MAX_NESTING} levels, which no cassette holds")
            yield number, start, record
            records += 1
    except OSError as error:
        raise _unreadable(name, error) from None


def _cr_line_end(line: bytes) -> int | None:
    """Where a line that is not JSON has a CR after a whole JSON value: a line end of an old Mac's,
    which JSON Lines (whose lines end in LF, CRLF being LF after JSON's whitespace) does not use. It is
    refused rather than read: a line without its LF is how the reader tells a cut from a whole file."""
    cr = line.find(b"\r")
    if cr < 0:
        return None
    try:
        json.loads(line[:cr])
    except (ValueError, RecursionError):
        return None
    return cr


def _jsonl_frames(file: BinaryIO, records: Iterator[tuple[int, int, Any]], name: str) -> Generator[Frame]:
    try:
        for count, (number, start, record) in enumerate(records, 1):
            where = f"frame {count} (byte {start}, line {number})"
            if isinstance(record, dict):
                _bytes_from_json(record, name, where)
            try:
                frame = frame_from_record(record)
            except ValueError as error:
                raise CassetteError(f"{name}: {where} is not a valid frame ({error})") from None
            yield frame
    finally:
        file.close()
