"""uvicorn's httptools protocol with the limits it lacks: a request head is refused with 431 past
a size or a number of header fields, and a connection that does not complete a request head, or
then its body, in time is closed (408 when part of a request came and no answer started), so slow
or idle clients cannot hold connections.

uvicorn's own keep-alive timeout does not cover this: it is only armed after a response, and any
byte received disarms it. httptools itself accepts a head of any size.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

MAX_HEAD = 64 * 1024
"""Largest request head (request line and header fields), in bytes."""
MAX_HEADERS = 200
"""Most header fields in one request."""
HEAD_TIMEOUT = 10.0
"""Seconds a connection may take to send a whole request head (from its opening, or from the end
of the previous response)."""
BODY_TIMEOUT = 30.0
"""Seconds a request may take to send its body, once its head is in."""


@dataclass(frozen=True)
class ConnectionLimits:
    max_head: int = MAX_HEAD
    max_headers: int = MAX_HEADERS
    head_timeout: float = HEAD_TIMEOUT
    body_timeout: float = BODY_TIMEOUT


Refused = Callable[[str, str], None]
"""Told of each request refused here: what it was (its method and target, as far as they came)
and why, with the status sent."""


def guarded_protocol(limits: ConnectionLimits, refused: Refused) -> type[HttpToolsProtocol]:
    """The protocol class to give uvicorn (`Config(http=...)`), with these limits."""

    class GuardedHttpTools(_GuardedHttpTools):
        LIMITS = limits
        REFUSED = staticmethod(refused)

    return GuardedHttpTools


class _GuardedHttpTools(HttpToolsProtocol):
    LIMITS = ConnectionLimits()
    REFUSED: Refused

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._head_size: int | None = 0  # bytes received since the request head began; None while none is read
        self._head_read = 0  # bytes of it parsed (a chunk may hold a whole head and more)
        self._timer: asyncio.TimerHandle | None = None  # the head's or the body's deadline
        self._refusal: tuple[int, str] | None = None
        self._target = b""  # the request target as far as it came

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._start_timer(self.LIMITS.head_timeout, self._head_timed_out)

    def connection_lost(self, exc: Exception | None) -> None:
        self._stop_timer()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self._refusal is not None:
            return
        if self._head_size is not None:
            self._head_size += len(data)
        super().data_received(data)
        # Checked after parsing: the chunk may hold a whole small head and the start of a body.
        if self._refusal is None and self._head_size is not None and self._head_size > self.LIMITS.max_head:
            self._refusal = (431, f"request head larger than {self.LIMITS.max_head} bytes")
        if self._refusal is not None:
            self._send_refusal()

    # Once a request is refused, the parser callbacks do nothing more (no app call for it): the
    # refusal is sent when the parser is done with the chunk.

    def on_message_begin(self) -> None:
        self._target = b""
        super().on_message_begin()

    def on_url(self, url: bytes) -> None:
        self._head_read += len(url)
        self._target += url[: max(0, 2000 - len(self._target))]
        if self._refusal is None:
            super().on_url(url)

    def on_header(self, name: bytes, value: bytes) -> None:
        self._head_read += len(name) + len(value) + 4  # ": " and CRLF
        if self._refusal is None and len(self.headers) >= self.LIMITS.max_headers:
            self._refusal = (431, f"more than {self.LIMITS.max_headers} header fields")
        if self._refusal is None and self._head_read > self.LIMITS.max_head:
            self._refusal = (431, f"request head larger than {self.LIMITS.max_head} bytes")
        if self._refusal is None:
            super().on_header(name, value)

    def on_headers_complete(self) -> None:
        self._head_size = None
        self._head_read = 0
        self._start_timer(self.LIMITS.body_timeout, self._body_timed_out)
        if self._refusal is None:
            super().on_headers_complete()

    def on_body(self, body: bytes) -> None:
        if self._refusal is None:
            super().on_body(body)

    def on_message_complete(self) -> None:
        self._head_size = 0  # what comes next is the head of a pipelined request
        self._stop_timer()
        if self._refusal is None:
            super().on_message_complete()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if self.timeout_keep_alive_task is not None:  # uvicorn now waits for the next request: so do we
            self._start_timer(self.LIMITS.head_timeout, self._head_timed_out)

    # --- refusals and deadlines ----------------------------------------------------------------

    def _send_refusal(self) -> None:
        assert self._refusal is not None
        status, reason = self._refusal
        self._stop_timer()
        if self.transport.is_closing():
            return
        phrase = {408: "Request Timeout", 431: "Request Header Fields Too Large"}[status]
        method = self.parser.get_method().decode("latin-1") if self._target else "request"
        self.REFUSED(f"{method} {self._target.decode('latin-1')}".rstrip(), f"answered {status}: {reason}")
        body = f"{phrase}: {reason}".encode()
        self.transport.write(
            f"HTTP/1.1 {status} {phrase}\r\ncontent-type: text/plain; charset=utf-8\r\n"
            f"content-length: {len(body)}\r\nconnection: close\r\n\r\n".encode() + body
        )
        self.transport.close()

    def _start_timer(self, seconds: float, then: Callable[[], None]) -> None:
        self._stop_timer()
        self._timer = self.loop.call_later(seconds, then)

    def _stop_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _head_timed_out(self) -> None:
        self._timer = None
        if self.transport.is_closing():
            return
        if not self._head_size:
            self.transport.close()  # idle: nothing of a request came, nothing to answer
            return
        self._refusal = (408, f"the request head did not arrive within {self.LIMITS.head_timeout:g} s")
        self._send_refusal()

    def _body_timed_out(self) -> None:
        self._timer = None
        if self.transport.is_closing():
            return
        if self.cycle is not None and self.cycle.response_started:
            self.transport.close()  # too late for a 408: cut the answer short
            return
        self._refusal = (408, f"the request body did not arrive within {self.LIMITS.body_timeout:g} s")
        self._send_refusal()
