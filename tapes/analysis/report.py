"""Lint findings for CI: GitHub workflow annotations and SARIF 2.1.0 (code scanning).

A finding points at a frame; in a JSON Lines cassette that frame is a line of the file (the
header is line 1), so the annotation lands on it. In a msgpack cassette it points at the file.
The caller says which files are JSON Lines (the content decides, not the name).
"""

from __future__ import annotations

from typing import Any

from tapes import __version__
from tapes.analysis.lint import Finding
from tapes.cassette.frames import Frame
from tapes.wire.text import printable

SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
# Secrets and rug pulls are errors; the rest asks for a look.
ERROR_RULES = frozenset({"secret", "description-changed", "schema-changed"})

# path -> (its frames, its findings, whether it is JSON Lines)
Located = dict[str, tuple[list[Frame], list[Finding], bool]]


def _lines(frames: list[Frame], jsonl: bool) -> dict[int, int]:
    """seq -> line of the file, for a JSON Lines cassette (one frame a line after the header)."""
    return {frame.seq: index + 2 for index, frame in enumerate(frames)} if jsonl else {}


def _level(rule: str) -> str:
    return "error" if rule in ERROR_RULES else "warning"


def _escape(text: str, *, property_value: bool = False) -> str:
    text = text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
    return text.replace(":", "%3A").replace(",", "%2C") if property_value else text


def github_annotations(located: Located, rules: dict[str, str]) -> list[str]:
    """One `::warning file=...::` (or `::error`) workflow command per finding."""
    commands = []
    for path, (frames, findings, jsonl) in located.items():
        lines = _lines(frames, jsonl)
        for finding in findings:
            properties = [f"file={_escape(path, property_value=True)}"]
            if finding.seq in lines:
                properties.append(f"line={lines[finding.seq]}")
            properties.append(f"title={_escape(f'tapes lint: {finding.rule}', property_value=True)}")
            message = f"frame {finding.seq}: {finding.message} ({rules[finding.rule]})"
            commands.append(f"::{_level(finding.rule)} {','.join(properties)}::{_escape(printable(message))}")
    return commands


def sarif(located: Located, rules: dict[str, str]) -> dict[str, Any]:
    """A SARIF 2.1.0 log with one run: the rules that fired and one result per finding."""
    fired = sorted({finding.rule for _, findings, _ in located.values() for finding in findings})
    index = {rule: position for position, rule in enumerate(fired)}
    results = []
    for path, (frames, findings, jsonl) in located.items():
        lines = _lines(frames, jsonl)
        for finding in findings:
            location: dict[str, Any] = {"artifactLocation": {"uri": path}}
            if finding.seq in lines:
                location["region"] = {"startLine": lines[finding.seq]}
            results.append({
                "ruleId": finding.rule,
                "ruleIndex": index[finding.rule],
                "level": _level(finding.rule),
                "message": {"text": f"frame {finding.seq}: {finding.message}"},
                "locations": [{"physicalLocation": location}],
                "properties": {"frame": finding.seq},
            })
    driver = {
        "name": "mcp-tapes",
        "version": __version__,
        "rules": [{"id": rule, "shortDescription": {"text": rules[rule]},
                   "defaultConfiguration": {"level": _level(rule)}} for rule in fired],
    }
    return {"$schema": SARIF_SCHEMA, "version": "2.1.0", "runs": [{"tool": {"driver": driver}, "results": results}]}
