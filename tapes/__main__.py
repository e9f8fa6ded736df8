"""The `tapes` command (and `python -m tapes`). Loading the CLI's modules takes about a tenth of a
second: a Ctrl-C then ends the command as a Ctrl-C later does (exit 130), not with a traceback,
nor dropped (`tapes.interrupts`)."""

import sys

from tapes.interrupts import watch_dropped_ctrl_c


def run() -> None:
    watch_dropped_ctrl_c()
    try:
        from tapes.cli import main
    except KeyboardInterrupt:
        sys.exit(130)
    main()


if __name__ == "__main__":
    run()
