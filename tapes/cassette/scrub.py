"""Before-record hooks: a user's function that sees every frame before it is written, and may
change it (scrub a secret, a timestamp) or drop it by returning None. Named "module:function"
on the command line (`tapes record --before-record`), in `[tool.tapes] before-record`, or in
the pytest marker. For placeholders that stay stable within a cassette, see tapes.cassette.redact."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Iterable
from pathlib import Path

from tapes.cassette.frames import Frame
from tapes.errors import UserError

FrameHook = Callable[[Frame], Frame | None]


def load_hook(spec: str) -> FrameHook:
    """The function named by "module:function" (modules are also looked up in the current folder)."""
    module_name, colon, function_name = spec.partition(":")
    if not colon or not module_name or not function_name:
        raise UserError(f"before-record hook {spec!r} is not module:function")
    if str(Path.cwd()) not in sys.path:
        sys.path.insert(0, str(Path.cwd()))
    try:
        hook = getattr(importlib.import_module(module_name), function_name)
    except ImportError as error:
        raise UserError(f"before-record hook {spec!r}: module {module_name!r} cannot be imported ({error})") from None
    except AttributeError:
        raise UserError(f"before-record hook {spec!r}: {module_name} has no {function_name!r}") from None
    if not callable(hook):
        raise UserError(f"before-record hook {spec!r} is not a function")
    return hook


def hook_label(hook: FrameHook) -> str:
    """How a cassette header names the hook among the redactions applied."""
    return f"hook:{getattr(hook, '__module__', '?')}:{getattr(hook, '__qualname__', '?')}"


def scrubbed(frames: Iterable[Frame], hook: FrameHook | None) -> list[Frame]:
    """The frames as the hook leaves them (all of them when there is no hook)."""
    if hook is None:
        return list(frames)
    kept = []
    for frame in frames:
        changed = hook(frame)
        if changed is not None:
            if not isinstance(changed, Frame):
                raise TypeError(f"the before-record hook returned {type(changed).__name__}, not a Frame or None")
            kept.append(changed)
    return kept
