"""Peer processes for the end-to-end tests: started with their stderr read line by line on a
thread, so every wait on them is bounded."""

from __future__ import annotations

import os
import queue
import re
import signal
import socket
import subprocess
import threading
import time

TIMEOUT = 20.0


class Process:
    """A subprocess whose stderr is read line by line on a thread, so waits on it are bounded."""

    def __init__(self, argv: list[str], env: dict[str, str] | None = None, *, read_stdout: bool = False) -> None:
        """`read_stdout`: its stdout is read with its stderr, as one stream (for a peer that logs there)."""
        self.argv = argv
        streams = {"stdout": subprocess.PIPE, "stderr": subprocess.STDOUT} if read_stdout else {"stdout": subprocess.DEVNULL, "stderr": subprocess.PIPE}
        self.proc = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, **streams,
            env={**os.environ, **(env or {})},
        )
        self.stderr: list[str] = []
        self._lines: queue.SimpleQueue[str | None] = queue.SimpleQueue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        output = self.proc.stderr or self.proc.stdout
        assert output is not None
        with output:  # closed at its end, not left to the collector (a ResourceWarning)
            for line in output:
                self._lines.put(line.decode(errors="replace"))
        self._lines.put(None)

    def wait_for(self, pattern: str, timeout: float = TIMEOUT) -> re.Match[str]:
        deadline = time.monotonic() + timeout
        while True:
            try:
                line = self._lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                raise AssertionError(f"{self.argv[:4]} printed no {pattern!r} in {timeout} s: {self.stderr}") from None
            if line is None:
                raise AssertionError(f"{self.argv[:4]} exited ({self.proc.wait()}) before {pattern!r}: {self.stderr}")
            self.stderr.append(line)
            if match := re.search(pattern, line):
                return match

    def stop(self, signum: int = signal.SIGTERM) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signum)
        try:
            return self.proc.wait(TIMEOUT)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()

    def rest_of_stderr(self) -> str:
        self.proc.wait(TIMEOUT)
        while (line := self._lines.get(timeout=TIMEOUT)) is not None:
            self.stderr.append(line)
        return "".join(self.stderr)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]
