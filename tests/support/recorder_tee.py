"""A byte tap for the recorder tests: `python recorder_tee.py C2S_FILE S2C_FILE -- CMD...` runs
CMD on pipes, passes our stdin to it and its stdout to ours unchanged, and appends what passes
each way to the two files."""

from __future__ import annotations

import os
import subprocess
import sys
import threading


def copy(source: int, sink: int, tap: int) -> None:
    while chunk := os.read(source, 1 << 16):
        os.write(tap, chunk)
        view = memoryview(chunk)
        while view:
            view = view[os.write(sink, view) :]


def main() -> int:
    c2s_path, s2c_path, dashes, *command = sys.argv[1:]
    assert dashes == "--"
    c2s = os.open(c2s_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    s2c = os.open(s2c_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    child = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, bufsize=0)
    assert child.stdin is not None and child.stdout is not None

    def client_to_server() -> None:
        try:
            copy(0, child.stdin.fileno(), c2s)
        except BrokenPipeError:
            pass
        child.stdin.close()

    threading.Thread(target=client_to_server, daemon=True).start()
    copy(child.stdout.fileno(), 1, s2c)
    return child.wait()


if __name__ == "__main__":
    sys.exit(main())
