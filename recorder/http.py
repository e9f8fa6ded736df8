"""Recording HTTP sessions (Streamable HTTP and legacy HTTP+SSE) with mitmproxy as a library.

`record_http` runs a mitmproxy master in this process, as a reverse proxy in front of one
upstream URL or as a forward proxy (TLS intercepted with mitmproxy's CA), with `RecorderAddon`.

The forward path stays mitmproxy's: the addon's hooks only note what passed — a timestamp, the
exchange number and references to bytes mitmproxy already holds — on a queue. SSE responses are
streamed (mitmproxy would buffer them otherwise): each chunk is noted and handed straight back.
A writer thread drains the queue in batches, frames them (`tapes.cassette.http_framer`), and appends
them to the cassette, flushed per batch, so a killed recorder leaves a readable cassette.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import queue
import socket
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, TextIO

from mitmproxy import ctx, http, options
from mitmproxy.addons import default_addons
from mitmproxy.master import Master
from mitmproxy.net import encoding

from recorder.process import heeded_stop_signals
from tapes.cassette.http_framer import (
    CLIENT_DISCONNECT,
    CLOSED,
    UPSTREAM_ERROR,
    Fields,
    HttpFramer,
)
from tapes.cassette.redact import RedactionRules, Redactor
from tapes.cassette.scrub import FrameHook, HookFailed, hook_label, scrubbed
from tapes.cassette.store import (
    STDOUT,
    CassetteError,
    CassetteWriter,
    Header,
    RecordingFile,
    load,
    recording_stopped,
    replace_file,
)
from tapes.errors import UserError
from tapes.interrupts import ctrl_c_dropped
from tapes.wire.http import header, upstream_url
from tapes.wire.jsonrpc import not_mcp_answer
from tapes.wire.oauth import ProxyRoutes, is_mcp_answer
from tapes.wire.sse import EndpointRewriter, is_event_stream

EXCHANGE = "tapes.exchange"  # flow.metadata key: the exchange's number
BODY = "tapes.body"  # flow.metadata key: the chunks of a body passed on as it came
WHOLE = "tapes.whole"  # flow.metadata key: the request came whole (and is captured)
CA_FILE = "mitmproxy-ca-cert.pem"
DEFAULT_CONFDIR = "~/.mitmproxy"
_CLIENT_DISCONNECTED = "Client disconnected."  # mitmproxy's flow.error message for it


@dataclass(frozen=True)
class Upstream:
    """Where a reverse proxy forwards to, from the user's URL (e.g. https://host/mcp)."""

    url: str
    scheme: str
    host: str
    port: int
    path: str  # the path and query the client should use through the proxy

    @property
    def origin(self) -> str:
        return f"{self.scheme}://{self.host}:{self.port}"

    @classmethod
    def parse(cls, url: str) -> Upstream:
        parts = upstream_url(url)
        assert parts.hostname is not None
        path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
        return cls(url, parts.scheme, host, parts.port or (443 if parts.scheme == "https" else 80), path)


# --- the forward path: a mitmproxy addon ---------------------------------------------------------


class RecorderAddon:
    """Notes each exchange on `capture` as tuples (see `_CassetteSink.handle`) and streams SSE.

    `rewrite` is (upstream origin, proxy origin) in reverse mode, for legacy endpoint events;
    `routes` moves the upstream's origin (and an authorization server's on another origin) into
    the proxy's in what an authorization flow hands the client (documents, WWW-Authenticate,
    Location), back in what the client sends upstream (the `resource` indicator), and routes the
    requests for the authorization server to it, so the whole flow goes through the proxy. The
    cassette keeps what the client saw and sent; `labels` gets what was rewritten."""

    def __init__(self, capture: Callable[[tuple[Any, ...]], None], start: float, labels: dict[str, str],
                 notices: TextIO = sys.stderr) -> None:
        self._capture = capture
        self._notices = notices
        self._start = start
        self._numbers = itertools.count(1)
        self.rewrite: tuple[str, str] | None = None
        self.routes: ProxyRoutes | None = None
        self._labels = labels
        self.stopping = False  # told to stop: the exchanges still open are cut by us, not by the upstream

    def requestheaders(self, flow: http.HTTPFlow) -> None:
        if flow.request.method != "CONNECT":  # a forward proxy's tunnel is not an exchange
            flow.metadata[EXCHANGE] = next(self._numbers)

    def request(self, flow: http.HTTPFlow) -> None:
        if (exchange := flow.metadata.get(EXCHANGE)) is None:
            return
        request = flow.request
        flow.metadata[WHOLE] = True
        self._capture(("request", time.monotonic() - self._start, exchange, request.data.method, request.data.path,
                       request.headers.fields, request.raw_content or b""))
        if self.routes is not None:
            if (routed := self.routes.route(request.path)) is not None:
                origin, target = routed
                request.url = origin + target
            upstream = self.routes.to_upstream()
            request.path = upstream.url(request.path)
            _rewrite_body(request, upstream.body)

    def responseheaders(self, flow: http.HTTPFlow) -> None:
        exchange = flow.metadata.get(EXCHANGE)
        response = flow.response
        if exchange is None or response is None:
            return
        if not is_event_stream(response.headers.get("content-type")):
            request = flow.request
            if is_mcp_answer(request.method, request.headers.get("content-type"), request.raw_content or b"",
                             response.status_code):
                # Passed on as it comes, so a body cut short reaches the client cut short (not as a
                # 502); the chunks are kept for the cassette, as mitmproxy would have kept them.
                body = flow.metadata[BODY] = []
                response.stream = lambda chunk: body.append(chunk) or chunk
            return
        capture, start = self._capture, self._start
        capture(("response", time.monotonic() - start, exchange, response.status_code, response.headers.fields, None))
        rewriter = self._endpoint_rewriter(flow)

        def stream(chunk: bytes) -> bytes:
            if chunk:
                capture(("chunk", time.monotonic() - start, exchange, chunk))
            return rewriter.feed(chunk) if rewriter else chunk

        response.stream = stream

    def response(self, flow: http.HTTPFlow) -> None:
        if (exchange := flow.metadata.get(EXCHANGE)) is None or flow.response is None:
            return
        response = flow.response
        t = time.monotonic() - self._start
        if not response.stream:
            if self.routes is not None:
                self._move_origins(response)
            self._capture(("response", t, exchange, response.status_code, response.headers.fields, response.raw_content))
        else:
            self._capture_streamed_body(flow, t)
        if problem := not_mcp_answer(flow.request.raw_content or b"", response.status_code, response.headers.get("content-type")):
            self._say(f"upstream answered {_target(flow)} (http:{exchange}) with {problem}, not MCP (recorded as it came)")
        self._capture(("end", t, exchange, CLOSED, None))

    def error(self, flow: http.HTTPFlow) -> None:
        if (exchange := flow.metadata.get(EXCHANGE)) is None or flow.error is None:
            return
        message = flow.error.msg
        reason = CLIENT_DISCONNECT if message == _CLIENT_DISCONNECTED else UPSTREAM_ERROR
        t = time.monotonic() - self._start
        if not flow.metadata.get(WHOLE):  # the client stopped sending its request (the upstream never had it): its head
            request = flow.request
            self._capture(("request", t, exchange, request.data.method, request.data.path, request.headers.fields, None))
            reason = CLIENT_DISCONNECT
        self._capture_streamed_body(flow, t)  # the client has its head and the part that came
        self._capture(("end", t, exchange, reason, message))
        if reason == UPSTREAM_ERROR and not self.stopping:  # the client only sees a 502 or a cut stream; the user hears why
            self._say(f"upstream error on {_target(flow)} (http:{exchange}): {message}")

    def _capture_streamed_body(self, flow: http.HTTPFlow, t: float) -> None:
        """A body passed on as it came (not an event stream's: its chunks were captured as they came)."""
        if (body := flow.metadata.pop(BODY, None)) is not None and flow.response is not None:
            response = flow.response
            self._capture(("response", t, flow.metadata[EXCHANGE], response.status_code, response.headers.fields,
                           b"".join(body)))

    def _say(self, notice: str) -> None:
        print(f"tapes: {notice}", file=self._notices, flush=True)

    def _move_origins(self, response: http.Response) -> None:
        assert self.routes is not None
        headers = response.headers
        if content := _content(response):
            self.routes.learn(headers.get("content-type"), content)
            self._labels["rewritten"] = self.routes.described()
        to_client = self.routes.to_client()
        for name in ("www-authenticate", "link"):
            if name in headers:
                headers.set_all(name, [to_client.text(value) for value in headers.get_all(name)])
        if "location" in headers:
            headers["location"] = to_client.url(headers["location"])
        _rewrite_body(response, to_client.body)

    def _endpoint_rewriter(self, flow: http.HTTPFlow) -> EndpointRewriter | None:
        # Only a legacy GET /sse stream starts with an endpoint event; Streamable HTTP GETs carry a session.
        if self.rewrite is None or flow.request.method != "GET" or "mcp-session-id" in flow.request.headers:
            return None
        return EndpointRewriter(*self.rewrite)


def _content(message: http.Message) -> bytes:
    """The body without its Content-Encoding; b"" when that cannot be undone (a body that says
    gzip and is not): such a body is passed on as it came."""
    try:
        return message.content or b""
    except ValueError:
        return b""


def _rewrite_body(message: http.Message, rewrite: Callable[[str | None, bytes], bytes]) -> None:
    """Give `message` the body `rewrite` makes of it, encoded as before; left as it came when unchanged."""
    if (content := _content(message)) and (rewritten := rewrite(message.headers.get("content-type"), content)) != content:
        message.content = rewritten


def _target(flow: http.HTTPFlow) -> str:
    """A request as a notice names it: without its query, which may hold a secret."""
    return f"{flow.request.method} {flow.request.path.split('?', 1)[0]}"


# --- off the forward path: the cassette writer thread --------------------------------------------

_STOP = ("stop",)


class _CassetteSink:
    """A thread that frames captured exchanges and appends them to the cassette, a batch at a time
    (to stdout as JSON Lines when the output is `-`)."""

    def __init__(self, output: str, header: Header, redactor: Redactor, before_record: FrameHook | None) -> None:
        self._output = output
        self._before_record = before_record
        self.failed = False
        self.labels: dict[str, str] = {}  # added to the header's labels at the end
        self._writer: CassetteWriter | None = None
        self._file: RecordingFile | None = None
        try:
            # raises CassetteError (a UserError) if it cannot be opened
            self._writer = (CassetteWriter(sys.stdout.buffer, header, jsonl=True) if output == STDOUT
                            else CassetteWriter(output, header))
        except OSError as error:
            self._fail(error)
        else:
            if output != STDOUT:
                self._file = RecordingFile(output, self._writer.fileno())
        self._framer = HttpFramer(redactor)
        self._queue: queue.SimpleQueue[tuple[Any, ...]] = queue.SimpleQueue()
        self.capture = self._queue.put
        self._thread = threading.Thread(target=self._run, name="cassette-writer", daemon=True)
        self._thread.start()

    def close(self) -> None:
        """Write what is queued, then put the session index (protocol version, sessions) in the
        header (not on stdout: what went out there stays as it is)."""
        self._queue.put(_STOP)
        self._thread.join()
        if self._output == STDOUT:
            return
        if self._writer is not None:
            self._writer.close()
        if self.failed:
            return
        assert self._file is not None
        try:
            put_back = self._file.put_back()
        except CassetteError as error:  # the recording is lost: said as a failed write is, and the exit code says so
            self.failed = True
            print(f"tapes: error: {error}", file=sys.stderr, flush=True)
            return
        if put_back:
            print(f"tapes: warning: {put_back}", file=sys.stderr, flush=True)
        cassette = load(self._output)
        labels = dict(cassette.header.labels) | self.labels
        if cassette.protocol_version:
            labels["protocol_version"] = cassette.protocol_version
        if self._framer.sessions:
            labels["sessions"] = " ".join(self._framer.sessions)
        if labels != cassette.header.labels:
            cassette.header = replace(cassette.header, labels=labels)
            replace_file(cassette, self._output)

    def _run(self) -> None:
        get, get_nowait = self._queue.get, self._queue.get_nowait
        stopping = False
        while not stopping:
            batch = [get()]
            try:
                while len(batch) < 4096:
                    batch.append(get_nowait())
            except queue.Empty:
                pass
            frames = []
            for item in batch:
                if item is _STOP:
                    stopping = True
                elif not self.failed:
                    try:
                        frames += self.handle(*item)
                    except Exception as error:  # a bug of ours must stop the recording loudly, not end this thread
                        self._fail(f"framing exchange {item[2]} failed ({type(error).__name__}: {error})")
            if self.failed:
                continue  # keep taking what the proxy captures, so it never waits on us
            try:
                frames = scrubbed(frames, self._before_record)
            except HookFailed as error:
                self._fail(str(error))
                continue
            try:
                self._writer.write(frames)  # type: ignore[union-attr]
            except OSError as error:  # e.g. the disk filled up
                self._fail(error)

    def _fail(self, error: OSError | str) -> None:
        """Say at once that the recording stopped; the proxy goes on, and the exit code will say so."""
        self.failed = True
        reason = error if isinstance(error, str) else error.strerror or str(error)
        where = "stdout" if self._output == STDOUT else self._output
        print(f"tapes: error: {recording_stopped(where, reason)}", file=sys.stderr, flush=True)

    def handle(self, what: str, t: float, exchange: int, *rest: Any) -> list[Any]:
        framer = self._framer
        if what == "chunk":
            return framer.chunk(t, exchange, rest[0])
        if what == "request":
            method, target, fields, body = rest
            headers = _fields(fields)
            # Latin-1, as a replay reads a live request's target: every byte kept (a client's need not be UTF-8)
            return framer.request(t, exchange, method.decode("latin-1"), target.decode("latin-1"), headers,
                                  None if body is None else _decoded_body(body, headers))
        if what == "response":
            status, fields, body = rest
            headers = _fields(fields)
            return framer.response(t, exchange, status, headers, None if body is None else _decoded_body(body, headers))
        reason, detail = rest
        return framer.end(t, exchange, reason, detail)


def _fields(fields: tuple[tuple[bytes, bytes], ...]) -> Fields:
    # Latin-1 maps every byte: nothing is lost, and the result is always valid JSON text.
    return [(name.decode("latin-1"), value.decode("latin-1")) for name, value in fields]


def _decoded_body(body: bytes, headers: Fields) -> bytes:
    """The body without its Content-Encoding (gzip, br, ...); as sent if that cannot be undone."""
    coding = header(headers, "content-encoding")
    if not body or not coding or coding.lower() == "identity":
        return body
    try:
        decoded = encoding.decode(body, coding)
    except ValueError:
        return body
    return decoded if isinstance(decoded, bytes) else body


# --- running it ----------------------------------------------------------------------------------


def record_http(
    output: str,
    *,
    upstream: str | None,
    listen: tuple[str, int],
    rules: RedactionRules,
    confdir: str = DEFAULT_CONFDIR,
    upstream_ca: str | None = None,
    banner: TextIO = sys.stderr,
    before_record: FrameHook | None = None,
    until_stdin_closes: bool = False,
) -> int:
    """Record through a reverse proxy to `upstream`, or a forward proxy when `upstream` is None,
    until SIGINT or SIGTERM (or, with `until_stdin_closes`, the end of stdin); returns the exit code.

    `upstream_ca` (a PEM file) replaces the default CA bundle for verifying HTTPS upstreams."""
    target = Upstream.parse(upstream) if upstream is not None else None
    redactor = Redactor(rules)
    # The URL's password and query token go neither in the header nor on the banner (logs keep it);
    # redacted here, before the writer thread owns the redactor, with the placeholders it goes on with.
    shown = (redactor.url(target.url), redactor.path(target.path)) if target else None
    header = Header(
        transport="http",
        server={"url": shown[0]} if shown else {"proxy": True},
        redaction=rules.names() + ((hook_label(before_record),) if before_record else ()),
    )
    _check_listen(*listen)  # before the cassette is opened: a mistake here leaves the one there was
    if target is None:
        _check_ca_dir(confdir)
    sink = _CassetteSink(output, header, redactor, before_record)
    try:
        code = asyncio.run(_serve(sink, target, shown, listen, confdir, banner, upstream_ca, until_stdin_closes))
    finally:
        sink.close()
    return 1 if sink.failed else code


async def _serve(
    sink: _CassetteSink,
    target: Upstream | None,
    shown: tuple[str, str] | None,
    listen: tuple[str, int],
    confdir: str,
    banner: TextIO,
    upstream_ca: str | None = None,
    until_stdin_closes: bool = False,
) -> int:
    host, port = listen
    opts = options.Options(
        listen_host=host,
        listen_port=port,
        mode=[f"reverse:{target.origin}" if target else "regular"],
        confdir=confdir,
    )
    master = Master(opts)
    addon = RecorderAddon(sink.capture, time.monotonic(), sink.labels, banner)
    master.addons.add(*default_addons())
    master.addons.add(addon, _Startup(master, addon, sink, target, shown, confdir, banner))
    # Reverse mode connects to the upstream URL but, by default, sends its host as Host; the
    # client's own Host goes upstream instead, so the upstream's DNS-rebinding protection judges
    # what the client sent.
    opts.update(keep_host_header=True)
    # Connect upstream per request, not when the client connects: an upstream that is down
    # then fails that request with a 502 (recorded), not the client's connection.
    opts.update(connection_strategy="lazy")
    if upstream_ca is not None:
        opts.update(ssl_verify_upstream_trusted_ca=os.path.abspath(os.path.expanduser(upstream_ca)))
    loop = asyncio.get_running_loop()

    def stop() -> None:
        addon.stopping = True
        master.shutdown()

    heeded = heeded_stop_signals()
    for signum in heeded:
        loop.add_signal_handler(signum, stop)
    if ctrl_c_dropped():  # while the modules loaded: as one that comes now
        stop()
    if until_stdin_closes:
        threading.Thread(target=_stop_at_eof, args=(lambda: loop.call_soon_threadsafe(stop),), daemon=True).start()
    try:
        await master.run()
    finally:
        for signum in heeded:
            loop.remove_signal_handler(signum)
    startup = master.addons.get("_startup")
    if startup.failure:
        raise UserError(startup.failure)
    return 0


def _stop_at_eof(stop: Callable[[], None]) -> None:
    """Read stdin to its end, then `stop`: the parent holding its other end has closed it, or died."""
    try:
        while os.read(0, 4096):
            pass
    except OSError:  # a stdin that cannot be read has ended too
        pass
    stop()


def _check_listen(host: str, port: int) -> None:
    """Raise the UserError the proxy's listener would fail with on `host`:`port` (a port in use, a
    host that names no address of this machine), now."""
    try:
        family, kind, protocol, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
        with socket.socket(family, kind, protocol) as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as mitmproxy's listener
            sock.bind(address)
    except OSError as error:
        raise UserError(f"cannot listen on {host}:{port} ({_reason(error)})") from None


def _check_ca_dir(confdir: str) -> None:
    """Raise a UserError unless the forward proxy can keep its CA in `confdir` (mitmproxy creates
    it there; where it cannot, every HTTPS handshake fails without a word)."""
    folder = os.path.expanduser(confdir)
    try:
        os.makedirs(folder, exist_ok=True)
        if not os.path.exists(os.path.join(folder, CA_FILE)) and not os.access(folder, os.W_OK):
            raise PermissionError(13, os.strerror(13))
    except OSError as error:
        reason = "it is not a folder" if isinstance(error, FileExistsError | NotADirectoryError) else _reason(error)
        raise UserError(f"--ca-dir {confdir}: the forward proxy cannot keep its CA there ({reason})") from None


def _reason(error: Exception) -> str:
    """Why a listener failed, in a few words (mitmproxy's own message suggests its CLI flags)."""
    if isinstance(error, socket.gaierror):
        return str(error.strerror).lower()
    if isinstance(error, OSError) and error.errno:
        return os.strerror(error.errno).lower()
    return str(error).splitlines()[0]


class _Startup:
    """Once mitmproxy's servers are up: print the banner, or stop if the listener failed.
    `shown` is the upstream URL and the proxy path as the banner shows them (secrets redacted)."""

    name = "_startup"

    def __init__(self, master: Master, addon: RecorderAddon, sink: _CassetteSink, target: Upstream | None,
                 shown: tuple[str, str] | None, confdir: str, banner: TextIO):
        self._master = master
        self._addon = addon
        self._sink = sink
        self._target = target
        self._shown = shown
        self._confdir = confdir
        self._banner = banner
        self.failure: str | None = None

    def running(self) -> None:
        proxyserver = ctx.master.addons.get("proxyserver")
        addresses = proxyserver.listen_addrs()
        if not addresses:
            errors = [_reason(server.last_exception) for server in proxyserver.servers if server.last_exception]
            self.failure = f"cannot listen on {ctx.options.listen_host}:{ctx.options.listen_port} ({'; '.join(errors) or 'unknown error'})"
            self._master.shutdown()
            return
        host, port = addresses[0][:2]
        proxy_origin = f"http://{f'[{host}]' if ':' in host else host}:{port}"
        if self._target is None:
            ca = os.path.join(os.path.expanduser(self._confdir), CA_FILE)
            print(
                f"tapes: recording forward proxy at {proxy_origin} (set HTTP_PROXY/HTTPS_PROXY to it); "
                f"HTTPS is intercepted with the CA {ca}: trust it in the client "
                f"(e.g. SSL_CERT_FILE, REQUESTS_CA_BUNDLE or NODE_EXTRA_CA_CERTS={ca})",
                file=self._banner,
                flush=True,
            )
        else:
            assert self._shown is not None
            self._addon.rewrite = (self._target.origin, proxy_origin)
            routes = self._addon.routes = ProxyRoutes(self._target.origin, proxy_origin)
            # what a replay moves to its own origin (a URL's userinfo or query is not part of it)
            self._sink.labels["origin"] = proxy_origin
            self._sink.labels["rewritten"] = routes.described()
            url, path = self._shown
            print(f"tapes: recording {proxy_origin}{path} -> {url}", file=self._banner, flush=True)
