"""`[tool.tapes]` in pyproject.toml: project defaults for the CLI and the pytest plugin."""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from tapes.errors import UserError

RECORD_MODES = ("none", "once", "new_episodes", "all", "rewrite")
"""What a test run (the pytest plugin) or a replay (`tapes replay --record-mode`) does about recording."""
FORMATS = {"msgpack": ".tape", "jsonl": ".jsonl"}
"""The cassette formats, and the file name suffix that makes a cassette one."""
_LISTS = ("ignore", "faults", "redact_headers", "redact_paths")


@dataclass(frozen=True)
class Config:
    cassette_dir: str = "cassettes"  # relative to the test file's folder (plugin)
    record_mode: str | None = None  # None: `none` when CI is set, `once` otherwise
    match: str = "default"
    ignore: tuple[str, ...] = ()
    race: str = "recorded"
    repeats: str = "in-order"
    polls: str = "latest"
    timing: str = "instant"
    before_record: str | None = None  # "module:function" applied to every frame before it is written
    faults: tuple[str, ...] = ()  # JSON-RPC level faults for every replay (tapes.replay.faults)
    redact_headers: tuple[str, ...] = ()  # redacted in recordings besides the default secret headers
    redact_paths: tuple[str, ...] = ()  # JSON paths redacted in recorded messages (a.b.*.c)
    format: str = "msgpack"  # of the cassettes the plugin names: msgpack (.tape) or jsonl (.jsonl)
    source: Path | None = field(default=None, compare=False)  # the pyproject.toml it came from

    def control_settings(self) -> dict[str, Any]:
        return {"match": self.match, "ignore": self.ignore, "race": self.race, "repeats": self.repeats,
                "polls": self.polls, "timing": self.timing, "faults": self.faults}


def load_config(start: Path | None = None) -> Config:
    """The `[tool.tapes]` table of the nearest pyproject.toml at or above `start` (defaults if none)."""
    folder = (start or Path.cwd()).resolve()
    for candidate in [folder, *folder.parents]:
        pyproject = candidate / "pyproject.toml"
        if pyproject.is_file():
            tool = _read(pyproject).get("tool", {})
            table = tool.get("tapes", {}) if isinstance(tool, dict) else None
            if not isinstance(table, dict):
                raise UserError(f"{pyproject}: [tool.tapes] is not a table")
            return _from_table(table, pyproject)
    return Config()


def _read(path: Path) -> dict[str, Any]:
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as error:
        raise UserError(f"{path}: cannot be read as TOML ({error})") from None


def _from_table(table: dict[str, Any], source: Path) -> Config:
    known = {f.name.replace("_", "-"): f.name for f in fields(Config) if f.name != "source"}
    values: dict[str, Any] = {}
    for key, value in table.items():
        name = known.get(key) or (key if key in known.values() else None)
        if name is None:
            raise UserError(f"{source}: [tool.tapes] has no setting {key!r} (known: {', '.join(sorted(known))})")
        if name in _LISTS:
            if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
                raise UserError(f"{source}: [tool.tapes] {key} is not a list of strings")
            value = tuple(value)
        elif name == "timing" and type(value) in (int, float):  # a speed factor written as a number
            value = str(value)
        elif not isinstance(value, str):
            raise UserError(f"{source}: [tool.tapes] {key} is not a string")
        values[name] = value
    if values.get("format", "msgpack") not in FORMATS:
        raise UserError(f"{source}: [tool.tapes] format {values['format']!r} is not one of {', '.join(FORMATS)}")
    return Config(**values, source=source)
