"""A Ctrl-C that Python dropped while the command loaded.

Python raises a SIGINT's KeyboardInterrupt wherever the main thread is. Inside a `__del__` or a
weakref callback, which importlib's module locks run on every import, it cannot be passed on: it
is printed as "Exception ignored" and dropped. `tapes record --upstream` imports for most of a
second before it handles SIGINT itself, so a Ctrl-C then was lost and the recorder ran on.
The CLI watches for such drops; a command that handles SIGINT itself asks, once it does, whether
one was dropped before."""

from __future__ import annotations

import sys
from typing import Any

_dropped = False


def watch_dropped_ctrl_c() -> None:
    """Note a KeyboardInterrupt that Python drops, instead of printing it (it is no error)."""
    sys.unraisablehook = _note_dropped


def _note_dropped(unraisable: Any) -> None:
    global _dropped
    if issubclass(unraisable.exc_type, KeyboardInterrupt):
        _dropped = True
    else:
        sys.__unraisablehook__(unraisable)


def ctrl_c_dropped() -> bool:
    """Whether a Ctrl-C came and was dropped (see `watch_dropped_ctrl_c`)."""
    return _dropped
