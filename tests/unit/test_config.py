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
    ('match = ["x"]', "match is not a string"), ("before-record = {a = 1}", "before-record is not a string"),
    ("record-mode = true", "record-mode is not a string"), ("timing = [2]", "timing is not a string"),
])
def test_a_bad_value_is_one_sentence(tmp_path: Path, table: str, expected: str) -> None:
    with pytest.raises(UserError, match=expected):
        _config(tmp_path, table)


@pytest.mark.parametrize("document", ['tool = 1', '[tool]\ntapes = "x"'])
def test_a_tool_tapes_that_is_no_table_is_one_sentence(tmp_path: Path, document: str) -> None:
    (tmp_path / "pyproject.toml").write_text(document + "\n")
    with pytest.raises(UserError, match=r"pyproject\.toml: \[tool\.tapes\] is not a table$"):
        load_config(tmp_path)


def test_a_timing_written_as_a_number_is_its_speed_factor(tmp_path: Path) -> None:
    assert _config(tmp_path, "timing = 2").timing == "2"
