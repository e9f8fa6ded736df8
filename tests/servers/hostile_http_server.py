"""An upstream that answers every request with a hostile response, picked by the request's path
(`/NAME`, one of CASES): malformed event streams, bodies that are not JSON-RPC or not JSON, wrong
or missing Content-Type, bodies on statuses that have none, a reset or a stream that never ends.
Raw asyncio, so every byte on the wire is the script's. `/echo` answers with the request's body.

    python tests/servers/hostile_http_server.py    (prints "hostile listening on http://127.0.0.1:PORT/")

Each connection takes one request; the response is framed as its case says: "length"
(Content-Length), "chunked" (one HTTP chunk per chunk of the case), "close" (neither: the body
ends with the connection), "hints" (a 103 Early Hints first, then as "length"), "reset" (chunked,
then a TCP reset before the last chunk), "short" (a Content-Length the body never reaches, then
close) or "hang" (chunked, then nothing more until the client leaves).
"""

from __future__ import annotations

import asyncio
import socket
import struct
import sys
from dataclasses import dataclass

RPC = b'{"jsonrpc":"2.0","id":1,"result":{}}'
SSE = b"text/event-stream"
JSON = b"application/json"


@dataclass(frozen=True)
class Case:
    status: int
    content_type: bytes | None
    chunks: tuple[bytes, ...]
    framing: str = "length"
    headers: tuple[tuple[bytes, bytes], ...] = ()


CASES = {
    # event streams
    "sse-unterminated": Case(200, SSE, (b'data: {"jsonrpc":"2.0","method":"a"}\n\n', b"id: 7\ndata: " + RPC), "chunked"),
    "sse-line-ends": Case(200, SSE, (
        b"\xef\xbb\xbf: a comment\r\nid: 1\r", b"\ndata: " + RPC + b"\r\r",  # a BOM; CR and LF split across chunks
        b"event: x\ndata: one\rdata: two\r\n\r\n: ping\n\n", b"data:\n\n"), "chunked"),
    "sse-big-event": Case(200, SSE, (b'data: {"jsonrpc":"2.0","method":"big","params":{"s":"', b"x" * (3 << 20),
                                     b'"}}\n\n'), "chunked"),
    "sse-bad-utf8": Case(200, SSE, (b"data: \xff\xfe" + RPC + b"\n\n", b'data: {"s":"\xe2\x82', b'\xac"}\n\n'), "chunked"),
    "sse-bad-fields": Case(200, SSE, (b"id: a\x00b\ndata: 1\n\n", b"retry: soon\ndata: 2\n\n", b"retry: 10\nfoo: bar\n\n",
                                      b"id\ndata\n\n"), "chunked"),
    "sse-bad-endpoint": Case(200, SSE, (b"event: endpoint\ndata: http://[::1/messages?sessionId=1\n\n",
                                        b"event: endpoint\ndata: //x:99999/m?session_id=%zz\n\n"), "chunked"),
    "sse-reset": Case(200, SSE, (b'data: {"jsonrpc":"2.0","method":"a"}\n\n', b"data: cut", b"never sent\n\n"), "reset"),
    "sse-hang": Case(200, SSE, (b"id: 1\ndata: " + RPC + b"\n\n", b": still here\n"), "hang"),
    # bodies that are not JSON-RPC
    "json-not-rpc": Case(200, JSON, (b'{"a":[1,2,3]}',)),
    "json-invalid": Case(200, JSON, (b'{"jsonrpc":"2.0","id":1,"result":',)),
    "json-binary": Case(200, JSON, (b"\x00\xff\xfe\r\n\x1b[31m",)),
    "json-deep": Case(200, JSON, (b'{"jsonrpc":"2.0","id":1,"result":' + b"[" * 5000 + b"]" * 5000 + b"}",)),
    "json-big": Case(200, JSON, (b'{"jsonrpc":"2.0","id":1,"result":{"s":"' + b"y" * (2 << 20) + b'"}}',)),
    "json-chunked": Case(200, JSON, (RPC[:10], RPC[10:]), "chunked"),
    "json-close": Case(200, JSON, (RPC,), "close"),
    "sse-close": Case(200, SSE, (b"data: " + RPC + b"\n\n", b"data: 2\n\n"), "close"),
    "early-hints": Case(200, JSON, (RPC,), "hints"),
    "json-short": Case(200, JSON, (RPC[:10],), "short"),
    "json-bad-gzip": Case(200, JSON, (b"not gzip at all",), headers=((b"Content-Encoding", b"gzip"),)),
    # wrong or missing Content-Type
    "html-rpc": Case(200, b"text/html", (RPC,)),
    "no-type": Case(200, None, (RPC,)),
    "odd-type": Case(200, b"application/json; charset=latin-1; x=\"y", (RPC,)),
    # bodies on statuses
    "202-body": Case(202, JSON, (RPC,)),
    "204-body": Case(204, JSON, (RPC,)),
    "304-body": Case(304, JSON, (RPC,)),
    "204-sse": Case(204, SSE, (b"data: " + RPC + b"\n\n",)),
    "500-sse": Case(500, SSE, (b"data: " + RPC + b"\n\n",), "chunked"),
    "500-rpc": Case(500, JSON, (b'{"jsonrpc":"2.0","id":1,"error":{"code":-32603,"message":"boom"}}',)),
    "500-html": Case(500, b"text/html", (b"<html><body>502 Bad Gateway</body></html>",)),
}


async def _read_request(reader: asyncio.StreamReader) -> tuple[str, bytes]:
    """The request's case name and its body."""
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    length = next((int(line.split(":", 1)[1]) for line in lines if line.lower().startswith("content-length:")), 0)
    return lines[0].split(" ")[1].lstrip("/"), await reader.readexactly(length)


def _head(case: Case, extra: list[bytes]) -> bytes:
    lines = [b"HTTP/1.1 %d Hostile" % case.status, b"Connection: close", *extra]
    if case.content_type is not None:
        lines.append(b"Content-Type: " + case.content_type)
    lines += [name + b": " + value for name, value in case.headers]
    return b"\r\n".join(lines) + b"\r\n\r\n"


def _chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


async def _answer(case: Case, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    body = b"".join(case.chunks)
    if case.framing == "close":  # the body ends when the connection does
        writer.write(_head(case, []) + body)
        await writer.drain()
        return
    if case.framing == "hints":
        writer.write(b"HTTP/1.1 103 Early Hints\r\nLink: </style.css>; rel=preload\r\n\r\n")
    if case.framing in ("length", "short", "hints"):
        size = len(body) + (100 if case.framing == "short" else 0)
        writer.write(_head(case, [b"Content-Length: %d" % size]) + body)
        await writer.drain()
        return
    writer.write(_head(case, [b"Transfer-Encoding: chunked"]))
    chunks = case.chunks[:-1] if case.framing == "reset" else case.chunks
    for data in chunks:
        writer.write(_chunk(data))
        await writer.drain()
    if case.framing == "reset":
        sock = writer.get_extra_info("socket")
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # close() sends RST
        writer.transport.abort()
    elif case.framing == "hang":
        await reader.read()  # until the client (or the proxy for it) leaves
    else:
        writer.write(b"0\r\n\r\n")
        await writer.drain()


async def _serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        name, body = await _read_request(reader)
        case = CASES.get(name)
        if name == "echo":  # the request body, as it arrived
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s" % (len(body), body))
        elif case is None:
            writer.write(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
        else:
            await _answer(case, reader, writer)
    except (ConnectionError, asyncio.IncompleteReadError):
        pass
    finally:
        writer.close()


async def main() -> None:
    server = await asyncio.start_server(_serve, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    sys.stderr.write(f"hostile listening on http://127.0.0.1:{port}/\n")
    sys.stderr.flush()
    await server.serve_forever()


if __name__ == "__main__":
    asyncio.run(main())
