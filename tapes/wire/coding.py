"""Undoing an HTTP Content-Encoding as a body streams in (sans-IO): an SSE stream sent gzipped is
forwarded as it came, and its events are read from what the decoder makes of each chunk."""

from __future__ import annotations

import zlib
from collections.abc import Callable
from typing import Protocol


class _Step(Protocol):
    def decompress(self, data: bytes) -> bytes: ...


class _Zlib:
    """gzip (members may follow one another) or deflate (zlib-wrapped, as RFC 9110 means it, or raw,
    as some servers send it)."""

    def __init__(self, wbits: int) -> None:
        self._wbits = wbits
        self._inflate = zlib.decompressobj(wbits=wbits)
        self._started = False

    def decompress(self, data: bytes) -> bytes:
        try:
            out = self._inflate.decompress(data)
        except zlib.error:
            if self._started or self._wbits != zlib.MAX_WBITS:
                raise ValueError("not in the coding its head names") from None
            self._wbits = -zlib.MAX_WBITS  # a raw deflate stream
            self._inflate = zlib.decompressobj(wbits=self._wbits)
            return self.decompress(data)
        self._started = True
        while self._inflate.eof and self._inflate.unused_data:  # the next gzip member
            rest = self._inflate.unused_data
            self._inflate = zlib.decompressobj(wbits=self._wbits)
            out += self.decompress(rest)
        return out


class _Library:
    """brotli or zstandard, mitmproxy's (the HTTP recorder, which streams, has them)."""

    def __init__(self, name: str) -> None:
        if name == "br":
            import brotli

            self._process, self._error = brotli.Decompressor().process, brotli.error
        else:
            import zstandard

            self._process, self._error = zstandard.ZstdDecompressor().decompressobj().decompress, zstandard.ZstdError

    def decompress(self, data: bytes) -> bytes:
        try:
            return bytes(self._process(data))
        except self._error:
            raise ValueError("not in the coding its head names") from None


_STEPS: dict[str, Callable[[], _Step]] = {
    "gzip": lambda: _Zlib(zlib.MAX_WBITS | 16),
    "x-gzip": lambda: _Zlib(zlib.MAX_WBITS | 16),
    "deflate": lambda: _Zlib(zlib.MAX_WBITS),
    "br": lambda: _Library("br"),
    "zstd": lambda: _Library("zstd"),
}


class StreamDecoder:
    """The codings of one body, undone in the reverse of the order they were applied. `decode`
    raises ValueError when a chunk is not in the coding the head named."""

    def __init__(self, steps: list[_Step]) -> None:
        self._steps = steps

    def decode(self, chunk: bytes) -> bytes:
        for step in self._steps:
            chunk = step.decompress(chunk)
        return chunk


def stream_decoder(content_encoding: str | None) -> StreamDecoder | None:
    """A decoder for a body with this Content-Encoding; None when there is nothing to undo, or a
    coding it does not know (the body is then kept as it came)."""
    codings = [coding.strip().lower() for coding in (content_encoding or "").split(",")]
    codings = [coding for coding in codings if coding and coding != "identity"]
    if not codings or any(coding not in _STEPS for coding in codings):
        return None
    try:
        return StreamDecoder([_STEPS[coding]() for coding in reversed(codings)])
    except ImportError:  # brotli or zstandard missing: kept as it came
        return None
