"""`[tool.tapes]`: the cassette format and the redaction keys."""

from __future__ import annotations

from pathlib import Path

import pytest

from tapes.config import load_config
from tapes.errors import UserError


def _config(tmp_path: Path, table: str):  # noqa: ANN202
    (tmp_path / "pyproject.toml").write_text(f"[tool.tapes]\n{table}\n")
    return load_config(tmp_path)


def test_format_and_redaction_keys(tmp_path: Path) -> None:
    config = _config(tmp_path, 'format = "jsonl"\nredact-headers = ["X-Tenant"]\nredact_paths = ["params.arguments.token"]')
    assert (config.format, config.redact_headers, config.redact_paths) == ("jsonl", ("X-Tenant",), ("params.arguments.token",))


@pytest.mark.parametrize(("table", "expected"), [
    ('format = "yaml"', "format 'yaml' is not one of msgpack, jsonl"),
    ('redact-paths = "params.token"', "redact-paths is not a list of strings"),
])
def test_a_bad_value_is_one_sentence(tmp_path: Path, table: str, expected: str) -> None:
    with pytest.raises(UserError, match=expected):
        _config(tmp_path, table)
