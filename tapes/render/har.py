"""`tapes export --format har`: an HTTP cassette as a HAR 1.2 log (browser devtools, Charles and
Fiddler open it). One entry per recorded exchange: its request with the body, its response with
the body (an SSE body as the event stream's text, re-encoded from the recorded events), and the
timings the frames' time offsets give: wait = request to response head, receive = head to the
last frame of the exchange. Times are offsets from the cassette's creation time."""

from __future__ import annotations

import base64
import json
from datetime import datetime, timedelta
from http import HTTPStatus
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from tapes import __version__
from tapes.cassette.frames import Frame, Kind
from tapes.cassette.store import Cassette
from tapes.errors import UserError
from tapes.wire.http import header
from tapes.wire.sse import encode_event, recorded_event

HAR_VERSION = "1.2"
HTTP_VERSION = "HTTP/1.1"  # a cassette keeps heads, not the protocol version; the recorders speak 1.1


def to_har(cassette: Cassette, name: str) -> dict[str, Any]:
    """The HAR log of an HTTP cassette (`name` names it in errors)."""
    if cassette.header.transport != "http":
        raise UserError(f"{name}: is a {cassette.header.transport} recording; HAR holds HTTP exchanges only")
    try:
        started = datetime.fromisoformat(cassette.header.created)
    except ValueError:
        raise UserError(f"{name}: its created time {cassette.header.created!r:.60} is not an ISO 8601 time, "
                        "which HAR needs to date the exchanges") from None
    exchanges: dict[str, list[Frame]] = {}
    for frame in cassette.frames:
        if frame.channel.startswith("http:"):
            exchanges.setdefault(frame.channel, []).append(frame)
    try:
        entries = [entry for frames in exchanges.values() if (entry := _entry(frames, started, _origin(cassette)))]
    except OverflowError:  # a frame time that, added to the created time, is no date any more
        raise UserError(f"{name}: a frame's time is too far from the created time to be a date in HAR") from None
    return {"log": {"version": HAR_VERSION, "creator": {"name": "mcp-tapes", "version": __version__},
                    "pages": [], "entries": entries, "comment": f"{name}, recorded by {cassette.header.tool}"}}


def har_text(cassette: Cassette, name: str) -> bytes:
    """`to_har` as the file holds it: UTF-8 JSON, a lone surrogate (a JSON Lines cassette may hold
    one) as its \\u escape."""
    return (json.dumps(to_har(cassette, name), indent=1, ensure_ascii=False) + "\n").encode("utf-8", "backslashreplace")


def _origin(cassette: Cassette) -> str:
    url = cassette.header.server.get("url")
    if not isinstance(url, str):
        return ""
    try:
        parts = urlsplit(url)
    except ValueError:  # no URL after all (an unclosed IPv6 bracket, say)
        return ""
    return f"{parts.scheme}://{parts.netloc}"


def _entry(frames: list[Frame], started: datetime, origin: str) -> dict[str, Any] | None:
    request_head = next((f for f in frames if f.kind is Kind.HTTP_REQUEST), None)
    if request_head is None:  # a cassette cut before this exchange's request head
        return None
    response_head = next((f for f in frames if f.kind is Kind.HTTP_RESPONSE), None)
    sent = [f for f in frames if f.from_client and f.kind in (Kind.MESSAGE, Kind.RAW)]
    received = [f for f in frames if not f.from_client and f.kind in (Kind.MESSAGE, Kind.RAW, Kind.SSE_EVENT)]
    wait = (response_head.t - request_head.t) if response_head else 0.0
    receive = (frames[-1].t - response_head.t) if response_head else 0.0
    timings = {"blocked": -1, "dns": -1, "connect": -1, "ssl": -1,
               "send": 0.0, "wait": _ms(wait), "receive": _ms(receive)}
    entry = {
        "startedDateTime": (started + timedelta(seconds=request_head.t)).isoformat(timespec="milliseconds"),
        "time": timings["send"] + timings["wait"] + timings["receive"],
        "request": _request(request_head, sent, origin),
        "response": _response(response_head, received),
        "cache": {},
        "timings": timings,
        "comment": request_head.channel,  # the exchange as `tapes show` names it
    }
    if (end := next((f for f in frames if f.kind is Kind.STREAM_END), None)) and end.info:
        detail = end.info.get("detail")
        entry["comment"] += f", stream end: {end.info.get('reason')}" + (f" ({detail})" if detail else "")
    return entry


def _ms(seconds: float) -> float:
    return round(max(seconds, 0.0) * 1000, 3)


def _headers(fields: list[list[str]]) -> list[dict[str, str]]:
    return [{"name": name, "value": value} for name, value in fields]


def _request(head: Frame, body_frames: list[Frame], origin: str) -> dict[str, Any]:
    info = head.info or {}
    fields = info.get("headers", [])
    path = info.get("path", "/")
    if not path.startswith(("http://", "https://")):  # a reverse-proxy recording keeps the path only
        host = header(fields, "host")
        path = (f"{origin.partition('://')[0] or 'http'}://{host}" if host else origin) + path
    body = b"".join(frame.shown_payload for frame in body_frames)
    request: dict[str, Any] = {
        "method": info.get("method", "GET"),
        "url": path,
        "httpVersion": HTTP_VERSION,
        "cookies": [],
        "headers": _headers(fields),
        "queryString": [{"name": k, "value": v} for k, v in parse_qsl(_query(path), keep_blank_values=True)],
        "headersSize": -1,
        "bodySize": len(body),
    }
    if body_frames:
        request["postData"] = {"mimeType": header(fields, "content-type") or "", "text": body.decode("utf-8", "replace")}
    return request


def _query(url: str) -> str:
    """The query of a URL, found without parsing its host (a recorded Host header can be anything)."""
    return url.partition("?")[2].partition("#")[0]


def _body(frame: Frame) -> bytes:
    if frame.kind is not Kind.SSE_EVENT:
        return frame.shown_payload
    # the data's bytes as the server sent them, UTF-8 or not; a lone surrogate (JSON Lines) as its escape
    return encode_event(recorded_event(frame.shown_payload.decode("utf-8", "surrogateescape"), frame.info or {}),
                        "backslashreplace")


def _content_text(body: bytes) -> dict[str, str]:
    """A response body as HAR 1.2 carries it: its text, or base64 for bytes that are not UTF-8."""
    try:
        return {"text": body.decode("utf-8")}
    except UnicodeDecodeError:
        return {"text": base64.b64encode(body).decode("ascii"), "encoding": "base64"}


def _response(head: Frame | None, body_frames: list[Frame]) -> dict[str, Any]:
    info = (head.info if head else None) or {}
    fields = info.get("headers", [])
    status = info.get("status", 0)  # 0: no response head was recorded (the exchange broke first)
    body = b"".join(_body(frame) for frame in body_frames)
    try:
        reason = HTTPStatus(status).phrase
    except ValueError:
        reason = ""
    return {
        "status": status,
        "statusText": reason,
        "httpVersion": HTTP_VERSION,
        "cookies": [],
        "headers": _headers(fields),
        "content": {"size": len(body), "mimeType": header(fields, "content-type") or "", **_content_text(body)},
        "redirectURL": header(fields, "location") or "",
        "headersSize": -1,
        "bodySize": len(body),
    }
