"""A scripted stdio server for the recorder tests: `python recorder_peer.py MODE [ARG]`.

echo        copy stdin to stdout line by line, byte for byte (a last line without newline too)
exit CODE   write two lines on stderr and one message on stdout, then exit with CODE
kill SIG    kill itself with signal SIG
orphan      start a process that holds stdout and stderr for a minute, say its pid on stdout
            (then an unterminated line) and on stderr, and exit 5
signals     on SIGTERM/SIGINT/SIGHUP write "got NAME" on stderr and exit 0; says ready on stdout
stubborn    ignore SIGTERM, SIGINT, SIGHUP and the end of stdin; says ready on stdout, then waits a minute
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

READY = b'{"jsonrpc":"2.0","method":"notifications/message","params":{"data":"ready"}}\n'


def main(mode: str, *args: str) -> int:
    out = sys.stdout.buffer
    if mode == "echo":
        for line in sys.stdin.buffer:
            out.write(line)
            out.flush()
        return 0
    if mode == "exit":
        sys.stderr.write("stderr line 1\nstderr line 2\n")
        sys.stderr.flush()
        out.write(READY)
        out.flush()
        return int(args[0])
    if mode == "orphan":
        held = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])  # inherits our stdio
        out.write(b'{"jsonrpc":"2.0","method":"orphan","params":{"pid":%d}}\n{"partial' % held.pid)
        out.flush()
        sys.stderr.write(f"started {held.pid}\n")
        sys.stderr.flush()
        return 5
    if mode == "kill":
        os.kill(os.getpid(), int(args[0]))
        return 1  # only if the signal did not kill us
    if mode == "signals":

        def handle(signum: int, frame: object) -> None:
            os.write(2, f"got {signal.Signals(signum).name}\n".encode())
            os._exit(0)

        for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(signum, handle)
        out.write(READY)
        out.flush()
        while True:
            signal.pause()
    if mode == "stubborn":
        for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(signum, signal.SIG_IGN)
        out.write(READY)
        out.flush()
        sys.stdin.buffer.read()
        time.sleep(60)
        return 0
    raise SystemExit(f"unknown mode {mode!r}")


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
