"""Hostile cassettes that load never break the commands that read without replaying: generated
cassettes of both transports (tests/support/hostile_cassettes.py), written as the file a loader
reads and loaded. Each of show, view, diff, lint (text, json, github, sarif, --security),
export/import, HAR export and redact then ends normally or with a UserError, and export -> import
gives the same frames back.

The example count comes from TAPES_FUZZ_EXAMPLES."""

from __future__ import annotations

import dataclasses
import io
import json
import math
import os
import re
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rich.console import Console

from tapes.analysis.diff import diff_cassettes, markdown, print_report
from tapes.analysis.lint import RULES, lint
from tapes.analysis.report import github_annotations, sarif
from tapes.analysis.security import SECURITY_RULES, security_lint
from tapes.cassette.frames import Frame, Kind
from tapes.cassette.post_redact import redact_cassette
from tapes.cassette.redact import RedactionRules, Redactor
from tapes.cassette.store import Cassette, CassetteError, dump, load, loads
from tapes.errors import UserError
from tapes.render.har import har_text
from tapes.render.show import print_timeline
from tapes.render.view import Side, render_diff, render_page, write_page

from tests.support.hostile_cassettes import cassettes, mutated_cassettes, recursion_as_in_the_cli
from tests.support.paths import CASSETTES
from tests.support.view_page import page_data

EXAMPLES = int(os.environ.get("TAPES_FUZZ_EXAMPLES", "40"))

# --- what the commands must do with them ---------------------------------------------------------


def same(a: Any, b: Any) -> bool:
    """Equal as the cassette's values: NaN equals NaN, and 1, 1.0 and True are three values."""
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        return a == b or (math.isnan(a) and math.isnan(b))
    if isinstance(a, dict):
        return list(a) == list(b) and all(same(a[key], b[key]) for key in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    return a == b


def _frame_values(frame: Frame) -> list[Any]:
    return [frame.seq, frame.t, frame.direction.value, frame.channel, frame.kind.value, frame.message, frame.data, frame.info]


def _round_trip(cassette: Cassette, jsonl: bool) -> None:
    out = io.BytesIO()
    try:
        dump(cassette, out, jsonl=jsonl, name="out")
    except CassetteError:
        return  # e.g. bytes in a message, which JSON cannot hold: said in one sentence
    again = loads(out.getvalue(), "out")
    assert again.header == cassette.header
    assert len(again.frames) == len(cassette.frames)
    for before, after in zip(cassette.frames, again.frames, strict=True):
        if not jsonl and before.message is not None and after.message is None:
            # what msgpack cannot hold in a message (a lone surrogate, an integer wider than 64 bits)
            # is kept as the bytes it stands for
            assert after.data == before.shown_payload
            assert after.kind is (Kind.SSE_EVENT if before.kind is Kind.SSE_EVENT else Kind.RAW)
            before = dataclasses.replace(before, kind=after.kind, message=None, data=after.data)
        assert same(_frame_values(before), _frame_values(after)), (before, after)


def _strict_json(text: str) -> Any:
    def refuse(constant: str) -> None:
        raise AssertionError(f"{constant} is no JSON")

    return json.loads(text, parse_constant=refuse)


def _check_page(page: str) -> None:
    opened = re.findall(r"<script([^>]*)>", page)
    assert page.count("</script") == len(opened) == page.count("<script")
    assert len([attributes for attributes in opened if "type=" not in attributes]) == 1
    page_data(page)  # its data is strict JSON, and its frames as many records as it has rows


def _console() -> Console:
    return Console(file=io.StringIO(), width=100, force_terminal=True)


def _commands(cassette: Cassette, other: Cassette, name: str) -> None:
    print_timeline(cassette, width=100, console=_console())
    print_timeline(cassette, width=20, console=_console())
    _check_page(render_page(cassette, name))
    out = io.BytesIO()
    write_page(out, name, [Side(cassette.header, iter(cassette.frames), lambda: cassette.warnings, name)])
    _check_page(out.getvalue().decode("utf-8"))
    for old, new in ((cassette, other), (other, cassette), (cassette, cassette)):
        report = diff_cassettes(old, new, old_name="old", new_name="new")
        json.dumps(report.to_json(), indent=2, ensure_ascii=False, default=str)
        markdown(report)
        print_report(report, _console())
        _check_page(render_diff(report, old, new))
    findings = sorted(lint(cassette) + security_lint(cassette, other), key=lambda finding: (finding.seq, finding.rule))
    rules = RULES | SECURITY_RULES
    for finding in findings:
        finding.describe().encode("utf-8", "backslashreplace")
    for jsonl in (False, True):
        located = {name: (cassette.frames, findings, jsonl)}
        "\n".join(github_annotations(located, rules))
        json.dumps(sarif(located, rules), indent=2, ensure_ascii=False)
    json.dumps({name: {"protocol": cassette.protocol_version,
                       "findings": [{"frame": f.seq, "rule": f.rule, "message": f.message} for f in findings]}},
               indent=2, ensure_ascii=False, default=str)
    try:
        har_text(cassette, name)
    except UserError:
        pass
    rules_ = RedactionRules.default(("X-Custom",), ("params.arguments", "result.*.text", "params.name"))
    redacted, replaced = redact_cassette(cassette, Redactor(rules_))
    for entry in replaced:
        entry.describe()
    for jsonl in (False, True):
        _round_trip(cassette, jsonl)
        _round_trip(redacted, jsonl)


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(cassettes(), cassettes())
def test_commands_end_normally_on_any_cassette_that_loads(first: tuple[bytes, str], second: tuple[bytes, str]) -> None:
    cassette, other = loads(*first), loads(*second)
    try:
        with recursion_as_in_the_cli():
            _commands(cassette, other, first[1])
    except UserError:
        pass


@settings(max_examples=max(EXAMPLES // 3, 1), deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(mutated_cassettes(), st.sampled_from(sorted(CASSETTES.glob("*.tape"))))
def test_commands_end_normally_on_committed_cassettes_with_odd_values(mutated: tuple[bytes, str], other: Path) -> None:
    cassette = loads(*mutated)
    try:
        with recursion_as_in_the_cli():
            _commands(cassette, load(other), mutated[1])
    except UserError:
        pass
