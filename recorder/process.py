"""`tapes record --upstream` as a child process, for what records on the side: the pytest plugin's
HTTP recordings, `tapes verify --upstream`, and an HTTP replay's hand-over to the real server."""

from __future__ import annotations

import re
import select
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from tapes.errors import UserError

TAPES = [sys.executable, "-m", "tapes"]
# What ends a recording, over stdio (passed on to the server) and HTTP alike: Ctrl-C, a kill, the
# terminal closing. The cassette is finished.
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def heeded_stop_signals() -> tuple[signal.Signals, ...]:
    """The STOP_SIGNALS this process heeds: all but a SIGHUP it was started ignoring (`nohup`),
    which stays ignored, by the recorder and, over stdio, by the server, which inherits that. An
    ignored SIGINT is heeded: a script's background job starts with it ignored only so that the
    terminal's Ctrl-C passes it by, and `kill -INT` is how scripts (and our pytest plugin) stop
    a recorder as Ctrl-C does."""
    ignored_hangup = signal.getsignal(signal.SIGHUP) is signal.SIG_IGN
    return tuple(signum for signum in STOP_SIGNALS if not (signum == signal.SIGHUP and ignored_hangup))


class HttpRecorderProcess:
    """`tapes record -o OUTPUT --upstream URL` on a free port of 127.0.0.1; `url` is where a
    client goes. `stop` ends it the way Ctrl-C does, so the cassette is complete. It also ends
    when we die, however (a CI timeout's SIGKILL): its stdin is a pipe only we hold, which the
    kernel closes then. Not PR_SET_PDEATHSIG: that fires when the thread that started it ends
    (a replay's hand-over starts it in a worker thread), needs preexec_fn, and is Linux's alone."""

    def __init__(self, output: Path, upstream: str, flags: list[str], timeout: float = 30.0) -> None:
        command = [*TAPES, "record", "-o", str(output), "--upstream", upstream, "--listen", "127.0.0.1:0",
                   "--until-stdin-closes", *flags]
        self._process = subprocess.Popen(command, stdin=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            self.url = self._banner_url(timeout)
        except BaseException:
            self.stop()
            raise
        # Keep its stderr flowing (to the real stderr, which outlives any capture): a pipe nobody
        # reads would fill and stall the recorder.
        threading.Thread(target=shutil.copyfileobj, args=(self._process.stderr, sys.__stderr__), daemon=True).start()

    def _banner_url(self, timeout: float) -> str:
        """The client URL from the recorder's banner line on stderr."""
        stderr = self._process.stderr
        assert stderr is not None
        deadline = time.monotonic() + timeout
        seen = []
        while (left := deadline - time.monotonic()) > 0:
            ready, _, _ = select.select([stderr], [], [], left)
            line = stderr.readline() if ready else ""
            if not line and self._process.poll() is not None:
                break
            seen.append(line)
            if found := re.search(r"tapes: recording (http://\S+)", line):
                return found[1]
        raise UserError("tapes record did not start: " + "".join(seen).strip())

    def stop(self) -> int:
        """Stop it as Ctrl-C does (it flushes the cassette); its exit status."""
        if self._process.poll() is None:
            self._process.send_signal(signal.SIGINT)
        try:
            return self._process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self._process.kill()
            return self._process.wait()
        finally:
            assert self._process.stdin is not None
            self._process.stdin.close()
