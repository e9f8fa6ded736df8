"""Before-record hooks: a user's function that sees every frame before it is written, and may
change it (scrub a secret, a timestamp) or drop it by returning None. Named "module:function"
on the command line (`tapes record --before-record`), in `[tool.tapes] before-record`, or in
the pytest marker. For placeholders that stay stable within a cassette, see tapes.cassette.redact."""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from types import ModuleType
from typing import Any

from tapes.cassette.frames import Direction, Frame, Kind
from tapes.cassette.store import frame_problem
from tapes.errors import UserError
from tapes.wire.jsonrpc import encode, parse

FrameHook = Callable[[Frame], Frame | None]


def load_hook(spec: str) -> FrameHook:
    return load_function(spec, "before-record hook")


def load_function(spec: str, what: str) -> Callable[..., Any]:
    """The user's function named by "module:function" (modules are also looked up in the current
    folder) or "path/to/file.py:function"; `what` names it in errors."""
    module_name, colon, function_name = spec.rpartition(":")
    if not colon or not module_name or not function_name:
        raise UserError(f"{what} {spec!r} is not module:function")
    try:
        if module_name.endswith(".py"):
            module = _module_from_file(Path(module_name))
        else:
            if str(Path.cwd()) not in sys.path:
                sys.path.insert(0, str(Path.cwd()))
            module = importlib.import_module(module_name)
        function = getattr(module, function_name)
    except (ImportError, OSError, SyntaxError) as error:
        raise UserError(f"{what} {spec!r}: module {module_name!r} cannot be imported ({error})") from None
    except AttributeError:
        raise UserError(f"{what} {spec!r}: {module_name} has no {function_name!r}") from None
    if not callable(function):
        raise UserError(f"{what} {spec!r} is not a function")
    return function


def function_spec(function: Callable[..., Any], what: str) -> str:
    """How another process loads `function` again: "path/to/file.py:name" (a module-level function)."""
    name = getattr(function, "__qualname__", "")
    source = inspect.getsourcefile(function) if inspect.isfunction(function) else None
    if not source or not name.isidentifier():
        raise UserError(f"{what} {name or function!r} must be a module-level function: a replay in a process of "
                        "its own loads it again from its file")
    return f"{source}:{name}"


def _module_from_file(path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"tapes_user_{path.stem}", path)
    if spec is None or spec.loader is None:
        raise ImportError(f"{path} is not a Python file")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def hook_label(hook: FrameHook) -> str:
    """How a cassette header names the hook among the redactions applied."""
    return f"hook:{getattr(hook, '__module__', '?')}:{getattr(hook, '__qualname__', '?')}"


class HookFailed(UserError):
    """The user's before-record hook raised, or gave back what is no frame: one sentence naming the frame."""


def hooks_named(labels: Iterable[str]) -> list[str]:
    """The before-record hooks (MODULE:FUNCTION) a cassette header's redaction labels name (`hook_label`)."""
    return [label.removeprefix("hook:") for label in labels if label.startswith("hook:")]


def run_hook(hook: FrameHook, frame: Frame) -> Frame | None:
    """What the hook makes of `frame` (None: dropped), checked as a loaded frame is: a hook that
    raises, returns anything but a Frame or None, or breaks the frame model raises HookFailed
    (the frame would otherwise be written, and break every reader of the cassette)."""
    try:
        changed = hook(frame)
    except Exception as error:  # the user's code: any exception, told in one sentence
        raise HookFailed(f"the before-record hook failed on frame {frame.seq} ({error!r:.200})") from None
    if changed is None:
        return None
    if not isinstance(changed, Frame):
        raise HookFailed(f"the before-record hook returned {type(changed).__name__} for frame {frame.seq}, not a Frame or None")
    if not (isinstance(changed.direction, Direction) and isinstance(changed.kind, Kind)):
        problem: str | None = "its direction or kind is not a Direction or a Kind"
    else:
        problem = frame_problem(changed.seq, changed.t, changed.channel, changed.kind, changed.message, changed.data,
                                changed.info)
    if problem:
        raise HookFailed(f"the before-record hook made frame {frame.seq} invalid: {problem}")
    if changed.message is not None and changed.data is not None and parse(changed.data) != changed.message:
        # The hook changed the message (anew or in place) and left the bytes it was recorded as,
        # which are what a replay sends: they would say what the hook took out.
        try:
            encode(changed.message)
        except (ValueError, UnicodeEncodeError):
            pass  # only bytes can carry this message (NaN, a lone surrogate)
        else:
            changed = changed._replace(data=None)
    return changed


def scrubbed(frames: Iterable[Frame], hook: FrameHook | None) -> list[Frame]:
    """The frames as the hook leaves them (all of them when there is no hook); HookFailed as `run_hook` says."""
    if hook is None:
        return list(frames)
    return [changed for frame in frames if (changed := run_hook(hook, frame)) is not None]
