"""Numbers read from text (a flag, a JSON pointer, a redaction path, a recorded channel): ASCII
digits only, as int() reads them. str.isdigit also takes "²", on which int() raised ValueError: a
traceback for `--listen 127.0.0.1:²`, `--drop-after http:3:²`, a pointer or path step "²"."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from tapes.cassette.redact import RedactionRules, Redactor
from tapes.cli import main
from tapes.errors import UserError
from tapes.replay.streams import Faults
from tapes.wire.pointer import without
from tapes.wire.text import LINE_LIMIT, is_digits, printable, terminal_line

from tests.support.paths import CASSETTES


def test_only_ascii_digits_are_a_number() -> None:
    assert is_digits("0") and is_digits("65535")
    assert not any(is_digits(text) for text in ("", "²", "١٢", "1.0", "-1", " 1"))


def test_a_fault_position_in_other_digits_is_refused_in_one_sentence() -> None:
    with pytest.raises(UserError, match="--drop-after 'http:3:²' is not CHANNEL:N"):
        Faults.from_options(drop_after=["http:3:²"])
    with pytest.raises(UserError, match="--malformed 'http:²:1' is not CHANNEL:N"):
        Faults.from_options(malformed_after=["http:²:1"])


def test_no_bidi_control_or_line_separator_reaches_a_terminal() -> None:
    # U+202E shows the rest of a line reversed ("Trojan Source"); U+2028 breaks a line in some log viewers
    assert printable("abc\u202edcba \u2066x\u2069 a\u2028b\u2029 \u200f\u061c") == (
        "abc\\u202edcba \\u2066x\\u2069 a\\u2028b\\u2029 \\u200f\\u061c")
    assert printable("é \U0001f600 \u200d \u202f") == "é \U0001f600 \u200d \u202f"  # text, a joiner, a space stay


def test_a_terminal_line_is_printable_and_cut() -> None:
    assert terminal_line("a\x1b" + "x" * 3000) == "a\\x1b" + "x" * (LINE_LIMIT - 5) + "… (1005 more characters)"
    assert terminal_line("short") == "short"


def test_a_pointer_or_redaction_step_in_other_digits_names_no_index() -> None:
    assert without({"a": [1, 2]}, ["a", "²"]) == {"a": [1, 2]}
    message = {"jsonrpc": "2.0", "id": 1, "method": "m", "params": {"a": ["secret"]}}
    assert Redactor(RedactionRules.default(json_paths=["params.a.²"])).message(message) == (message, False)


def test_a_listen_port_in_other_digits_is_refused_in_one_sentence() -> None:
    run = CliRunner().invoke(main, ["replay", "--http", "--listen", "127.0.0.1:²",
                                    str(CASSETTES / "everything-http-2025-11-25.tape")])
    assert run.exit_code == 2 and isinstance(run.exception, SystemExit)  # said, not raised
    assert "--listen '127.0.0.1:²' is not HOST:PORT" in run.output
