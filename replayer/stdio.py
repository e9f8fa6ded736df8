"""Be the recorded server on stdin/stdout: client lines go into the replay engine, released
frames come out. stdout carries nothing but what the recorded server wrote there (and JSON-RPC
errors for requests that match nothing); the summary goes to stderr.

With new episodes, the first client line the cassette has no answer for hands the session over
to the real server, run through `tapes record` and warmed up first (`tapes.replay.episodes`); what it
records from then on is spliced into the cassette when the session ends."""

from __future__ import annotations

import contextlib
import os
import select
import signal
import subprocess
import threading
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

from rich.console import Console

from recorder.process import TAPES
from replayer.console import print_summary, print_warnings, stderr_console, write_report
from tapes.cassette.frames import Frame, Kind
from tapes.cassette.store import Cassette, CassetteStream, load, replace_file
from tapes.interrupts import ctrl_c_dropped
from tapes.replay.control import ReplayControl
from tapes.replay.episodes import (
    WARM_UP_TIMEOUT,
    HandoverFailed,
    NewEpisodes,
    WarmUp,
    episode_frames,
    splice,
)
from tapes.replay.outcomes import LONGEST_WAIT, Action, Reception, answer_payload
from tapes.replay.session import ReplaySession, summary
from tapes.wire.jsonrpc import BoundedLineSplitter, Overlong

STDIN, STDOUT, STDERR = 0, 1, 2


def _pending(fd: int) -> bool:
    """Whether reading `fd` would not block (input, or its end, is there)."""
    try:
        return bool(select.select([fd], [], [], 0)[0])
    except OSError:  # closed: the read says so
        return True


def _first_ready(fd: int, other: int) -> bool:
    """Wait until `fd` or `other` can be read; whether `fd` was, and `other` not."""
    while True:
        try:
            ready = select.select([fd, other], [], [])[0]
        except OSError:  # `fd` closed: its read says so
            return True
        if other in ready:
            return False
        if ready:
            return True


LONGEST_LINE = 64 * 1024 * 1024
"""Bytes of one live client line the replay holds; a longer one gets an error (it could be endless)."""


def _read(fd: int) -> bytes:
    while True:
        try:
            return os.read(fd, 1 << 20)
        except BlockingIOError:  # a client may hand us a non-blocking descriptor: no input yet is no end
            select.select([fd], [], [])
        except OSError:  # a stdin that cannot be read (closed, an I/O error) has ended too
            return b""


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        try:
            view = view[os.write(fd, view) :]
        except BlockingIOError:  # a non-blocking stdout whose reader is behind: wait, nothing is dropped
            select.select([], [fd], [])


class _Server:
    """Carries out engine actions on the process's own stdio."""

    def __init__(self, control: ReplayControl, termination: _Termination) -> None:
        self.control = control
        self._termination = termination
        self.stdout_open = True
        self.exit_status: int | None = None  # set once the recorded server's exit is replayed
        self.client_gone = False  # the client closed its end of stdout
        self._lock = threading.RLock()  # a held answer is written from its timer's thread
        self._held: list[threading.Timer] = []

    def perform(self, reception: Reception) -> None:
        if reception.replies:
            self._stdout(answer_payload(reception.replies, reception.batch) + b"\n")
        for action in reception.actions:
            if delay := self.control.delay(action.gap):
                with self._termination.wait():
                    self._pause(delay)
            if action.hold:  # a delay fault: this answer goes later, the rest of the session does not wait
                timer = threading.Timer(action.hold, self._carry_out, [action])
                timer.start()
                self._held.append(timer)
                continue
            if action.frame.kind is Kind.STREAM_END and (action.frame.info or {}).get("reason") != "upstream_error":
                self.finish()  # the recorded server closes stdout after the answers held back (a drop does not wait)
            self._carry_out(action)

    def _pause(self, seconds: float) -> None:
        """Wait a recorded gap, cut short once the client has closed its end of stdout: there is
        no one left to wait for (the gaps of a long recording could keep an orphan alive for hours)."""
        if self.client_gone:
            return
        seconds = min(seconds, LONGEST_WAIT)  # a gap slowed down past it is waited as that
        if not self.stdout_open:  # the recorded server closed it: its exit keeps the recorded gap
            time.sleep(seconds)
        else:
            watch = select.poll()
            watch.register(STDOUT, 0)  # only the error and hang-up a closed reader raises
            self.client_gone = bool(watch.poll(seconds * 1000))

    def drop_held(self) -> None:
        """Told to stop: the answers still held never go out."""
        for timer in self._held:
            timer.cancel()

    def finish(self) -> None:
        """Let the answers still held go out."""
        for timer in self._held:
            timer.join()

    def _carry_out(self, action: Action) -> None:
        frame = action.frame
        with self._lock:
            if frame.kind in (Kind.MESSAGE, Kind.RAW):
                self._stdout(action.payload + (b"" if frame.partial else b"\n"))
            elif frame.kind is Kind.STDERR:
                with contextlib.suppress(OSError):  # a closed stderr loses the recorded server's log, no more
                    _write_all(STDERR, action.payload + (b"" if frame.partial else b"\n"))
            elif frame.kind is Kind.STREAM_END and self.stdout_open:
                self.stdout_open = False
                with contextlib.suppress(OSError):  # the client gave none
                    os.close(STDOUT)
            elif frame.kind is Kind.EXIT:
                info = frame.info or {}
                code, sig = info.get("code"), info.get("signal")
                status = 128 + sig if sig else (code or 0)
                # one no process exits with (a hand-written cassette's; 256 would read as success): a failure
                self.exit_status = status if 0 <= status <= 255 else 1

    def _stdout(self, data: bytes) -> None:
        with self._lock:
            if not self.stdout_open:
                return
            try:
                _write_all(STDOUT, data)
            except OSError:  # the client stopped reading (or gave a stdout that fails); keep consuming its input
                self.stdout_open = False
                self.client_gone = True


class _Episode:
    """The real server, run through `tapes record`, taking the session over: warmed up with what
    the live client sent so far, then given every client line, its output passed on to stdout.
    Raises HandoverFailed (its recording gone) when the server exits during the warm-up."""

    def __init__(self, plan: NewEpisodes, session: ReplaySession, console: Console) -> None:
        self.recording = plan.cassette.with_name(plan.cassette.name + ".episode")
        self.warm_up = WarmUp([line for line, _ in session.sent], session.replayed)
        self._warming = True
        self._changed = threading.Condition()
        command = [*TAPES, "record", "-o", str(self.recording), *plan.record_flags, "--", *plan.real_server]
        # its stderr is the real server's (the recorder passes it on): the client's to see
        self._process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        # readable once the real server's output has ended: the session ends with it
        self.ended, self._ending = os.pipe()
        self._reader = threading.Thread(target=self._pump, daemon=True)
        self._reader.start()
        self._warm(console)
        if self._process.poll() is not None:
            self.finish()
            self.recording.unlink(missing_ok=True)
            raise HandoverFailed(f"it exited with {self._process.returncode} during the warm-up")

    def _pump(self) -> None:
        assert self._process.stdout is not None
        stdout_open = True
        for line in iter(self._process.stdout.readline, b""):
            with self._changed:
                if self._warming:
                    self.warm_up.server_line(line.rstrip(b"\r\n"))
                    self._changed.notify_all()
                    continue
            if stdout_open:
                try:
                    _write_all(STDOUT, line)
                except OSError:  # the client stopped reading; keep draining the server
                    stdout_open = False
        os.write(self._ending, b"\0")

    def _warm(self, console: Console) -> None:
        deadline = time.monotonic() + WARM_UP_TIMEOUT
        while True:
            with self._changed:
                lines = self.warm_up.lines_to_send()
                if not lines:
                    left = deadline - time.monotonic()
                    if self.warm_up.done or left <= 0 or self._process.poll() is not None:
                        if not self.warm_up.done and self._process.poll() is None:
                            console.print(self.warm_up.unfinished(), style="yellow", soft_wrap=True, markup=False)
                        self._warming = False
                        return
                    self._changed.wait(min(left, 0.1))
                    continue
            for line in lines:  # written outside the lock: the reader must be free to drain the server
                self.send(line)

    def send(self, line: bytes) -> None:
        assert self._process.stdin is not None
        try:
            self._process.stdin.write(line + b"\n")
            self._process.stdin.flush()
        except BrokenPipeError:  # the server is gone; its exit is in the recording
            pass

    def finish(self, signum: int | None = None) -> int:
        """End the client's input, wait for the server (and its recorder) to exit; its exit code.
        `signum`: the signal that ended the replay, passed on (the recorder passes it to the server)."""
        assert self._process.stdin is not None
        if signum is not None and self._process.poll() is None:
            self._process.send_signal(signum)
        try:
            self._process.stdin.close()
        except BrokenPipeError:
            pass
        code = self._process.wait()
        self._reader.join()
        os.close(self.ended)
        os.close(self._ending)
        return code

    def splice_into(self, cassette: Cassette, played: set[int], path: Path) -> int:
        """Put the recorded episode into the cassette at `path` (replaced atomically); its frame count
        (the recorded frames it replaces are counted apart)."""
        episode = episode_frames(load(self.recording), self.warm_up)
        replace_file(splice(cassette, played, episode), path)
        self.recording.unlink()
        return len(episode)


class _Terminated(Exception):
    pass


class _Termination:
    """A client's SIGTERM ends the replay between two steps, never inside one: it interrupts a
    wait (for input, for a recorded delay) at once, and is acted on after engine work. Raised in
    the middle of indexing or of reading the cassette, it would leave a half-filed frame behind,
    and a report that lacks it without saying so. A Ctrl-C (SIGINT) and a closed terminal
    (SIGHUP) end it the same way, unless they were ignored when the replay started (nohup)."""

    SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)

    def __init__(self) -> None:
        self.signal: int | None = None  # the one that ended the replay
        self._waiting = False
        for signum in self.SIGNALS:
            if signal.getsignal(signum) is not signal.SIG_IGN:
                signal.signal(signum, self)
        if ctrl_c_dropped() and signal.getsignal(signal.SIGINT) is self:  # while the modules loaded: as one now
            self.signal = signal.SIGINT

    @property
    def requested(self) -> bool:
        return self.signal is not None

    def __call__(self, signum: int, frame: object) -> None:
        self.signal = signum
        signal.signal(signum, signal.SIG_DFL)  # the report may still read a big cassette's rest: told twice, stop
        if self._waiting:
            raise _Terminated

    @contextmanager
    def wait(self) -> Iterator[None]:
        """A wait the signal may cut short (set before the check, so no signal falls between)."""
        self._waiting = True
        try:
            if self.requested:
                raise _Terminated
            yield
        finally:
            self._waiting = False


def replay_stdio(
    cassette: Cassette | CassetteStream,
    *,
    strict: bool = True,
    control: ReplayControl | None = None,
    report_path: Path | None = None,
    new_episodes: NewEpisodes | None = None,
) -> int:
    """Serve `cassette` until the client closes stdin (or the recorded server exits). Returns the
    exit code: 1 when something did not match and `strict`, else the recorded server's (or the real
    one's, after a hand-over to it). The summary goes to stderr and, as JSON, to `report_path` when
    given (the pytest plugin reads it; marked incomplete while the rest of a stream is read).

    A `CassetteStream` is read as the replay goes (new episodes, which splice the cassette, need
    it loaded): the rest is indexed while the client is idle, a damaged frame raises its
    CassetteError when it is reached, and the warnings are printed once the end is read."""
    control = control or ReplayControl()
    console = stderr_console()
    warned = isinstance(cassette, Cassette)  # a stream's warnings are known once its end is read
    if isinstance(cassette, Cassette):
        frames: Iterable[Frame] = cassette.frames
        print_warnings(console, cassette)
    else:
        assert new_episodes is None
        frames = cassette
    signal.signal(signal.SIGPIPE, signal.SIG_IGN)
    # A client that stops waiting for the recorded server's end (SDK clients send SIGTERM a while
    # after closing stdin; under a timing the recorded end may be later) still gets the report.
    termination = _Termination()
    session = ReplaySession(frames, control.for_cassette(cassette.header), may_hand_over=new_episodes is not None)
    server = _Server(control, termination)
    splitter = BoundedLineSplitter(LONGEST_LINE)
    episode: _Episode | None = None

    def receive(line: bytes | Overlong) -> None:
        nonlocal episode
        if isinstance(line, Overlong):  # dropped as it came: nothing of it to match or hand over
            server.perform(session.overlong(line.size, LONGEST_LINE))
            return
        if episode is not None:
            episode.send(line)
            return
        reception = session.receive(line, line=True)
        if reception.missed and session.may_hand_over:
            assert new_episodes is not None
            console.print("tapes replay: the cassette has no answer here: handing the session over to the real server",
                          soft_wrap=True, markup=False)
            try:
                episode = _Episode(new_episodes, session, console)
            except HandoverFailed as failure:
                console.print(failure.notice(), style="red", soft_wrap=True, markup=False)
                session.may_hand_over = False
                server.perform(reception)  # the miss's error, naming the nearest recorded request
                return
            session.handed_over(reception.missed)
            episode.send(line)
            return
        server.perform(reception)

    try:
        server.perform(session.start())
        while server.exit_status is None:
            if not warned and session.indexed:
                print_warnings(console, cassette)
                warned = True
            if termination.requested:
                raise _Terminated
            if not session.indexed and not _pending(STDIN):
                server.perform(session.advance())
                continue
            with termination.wait():
                if episode is not None and not _first_ready(STDIN, episode.ended):
                    break  # the real server's output ended: the client sees its end, as it would the server's
                chunk = _read(STDIN)
            if not chunk:
                rest = splitter.finish()
                if rest is not None:
                    receive(rest)
                if episode is None:
                    if report_path is not None and not session.indexed:
                        # what the client missed is known now; reading the rest of a big cassette
                        # may outlast the client's patience (SDK clients kill a server seconds
                        # after closing its stdin)
                        write_report(report_path, session.report.as_json(), complete=False)
                    server.perform(session.end())
                break
            for line in splitter.feed(chunk):
                receive(line)
                if server.exit_status is not None:
                    break
    except _Terminated:
        assert termination.signal is not None
        server.exit_status = 128 + termination.signal
        server.drop_held()
    server.finish()
    if not warned:  # a stream: read to its end by the session's end, or now (the report needs all of it)
        session.index_all()
        print_warnings(console, cassette)
    if episode is not None:
        code = episode.finish(termination.signal)
        if not termination.requested:  # a replay ended by a signal exits 128 + its number
            server.exit_status = code
        assert new_episodes is not None
        session.episode_recorded(episode.splice_into(cassette, session.played_frames, new_episodes.cassette))
    if report_path is not None:
        write_report(report_path, session.report.as_json())
    clean = print_summary(console, *summary([session]))
    if strict and not clean:
        return 1
    return server.exit_status or 0
