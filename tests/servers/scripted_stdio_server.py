"""A stdio server that writes what a script says, byte for byte, for the recorder's hostile-wire
tests: `python scripted_stdio_server.py SCRIPT RECEIVED`.

SCRIPT is a msgpack map:
  "writes"      [[fd, bytes], ...]: written in this order to stdout (1) or stderr (2)
  "wait_stdin"  read stdin to its end before ending (else end once the writes are done)
  "ignore_term" ignore SIGTERM (set before the first write: a test waits for that write)
  "signal"      end by killing itself with this signal; else
  "exit"        exit with this code
Everything read from stdin is appended to the file RECEIVED as it comes.
"""

from __future__ import annotations

import os
import signal
import sys
import threading

import msgpack


def write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def copy_stdin(received: int) -> None:
    while chunk := os.read(0, 1 << 16):
        write_all(received, chunk)


def main(script_path: str, received_path: str) -> None:
    with open(script_path, "rb") as file:
        script = msgpack.unpackb(file.read())
    if script["ignore_term"]:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    received = os.open(received_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND)
    reader = threading.Thread(target=copy_stdin, args=(received,), daemon=True)
    reader.start()
    for fd, data in script["writes"]:
        write_all(fd, data)
    if script["wait_stdin"]:
        reader.join()
    if script["signal"] is not None:
        os.kill(os.getpid(), script["signal"])
    os._exit(script["exit"])  # not sys.exit: the reader may still be blocked on stdin


if __name__ == "__main__":
    main(*sys.argv[1:])
