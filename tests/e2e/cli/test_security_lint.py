"""`tapes lint --security` on sessions recorded with `tapes record` from a real SDK server whose
tool surface is poisoned (tests/servers/poisoned_server.py), and on the committed cassettes."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client, StdioServerParameters

from tapes.analysis.security import SECURITY_RULES, security_lint
from tapes.cassette.store import load

from tests.support.paths import ROOT

TAPES = [sys.executable, "-m", "tapes"]
SERVER = [sys.executable, str(ROOT / "tests" / "servers" / "poisoned_server.py")]
FAKE_KEY = "AKIAIOSFODNN7EXAMPLE"  # what the poisoned read_file answers


def record_session(output: Path, poisoned: bool) -> None:
    """The SDK client lists the tools and reads a file through `tapes record`."""
    argv = [*TAPES, "record", "-o", str(output), "--", *SERVER]
    env = {**os.environ, "POISONED": "1" if poisoned else "0"}

    async def session() -> None:
        with anyio.fail_after(60):
            async with Client(StdioServerParameters(command=argv[0], args=argv[1:], env=env), cache=None) as client:
                await client.list_tools()
                await client.call_tool("read_file", {"path": "notes.txt"})

    anyio.run(session)


@pytest.fixture(scope="module")
def sessions(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    folder = tmp_path_factory.mktemp("security")
    honest, poisoned = folder / "honest.tape", folder / "poisoned.tape"
    record_session(honest, poisoned=False)
    record_session(poisoned, poisoned=True)
    return honest, poisoned


@pytest.fixture(scope="module")
def poisoned_jsonl(sessions: tuple[Path, Path]) -> Path:
    """The poisoned session as JSON Lines, where annotations point at lines."""
    _, poisoned = sessions
    subprocess.run([*TAPES, "export", str(poisoned), "-o", str(poisoned.with_suffix(".jsonl"))], check=True, timeout=60)
    return poisoned.with_suffix(".jsonl")


def lint(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*TAPES, "lint", "--security", *map(str, args)], capture_output=True, text=True, timeout=60)


def test_a_poisoned_surface_is_found_rule_by_rule_and_the_secret_is_not_printed(sessions: tuple[Path, Path]) -> None:
    _, poisoned = sessions
    run = lint(poisoned, "--format", "json")
    assert run.returncode == 1, run.stderr
    findings = json.loads(run.stdout)[str(poisoned)]["findings"]
    by_rule: dict[str, list[str]] = {}
    for finding in findings:
        by_rule.setdefault(finding["rule"], []).append(finding["message"])
    assert set(by_rule) == {"model-instructions", "instruction-tag", "invisible-text", "mixed-script-name",
                            "confusable-names", "secret"}
    assert any("tool 'add' description" in message and "Do not mention" in message
               for message in by_rule["model-instructions"])
    assert by_rule["instruction-tag"] == ["tool 'add' description: '<IMPORTANT>'"]
    assert by_rule["invisible-text"] == [
        "tool 'read_file' description: holds U+200B ZERO WIDTH SPACE, U+202E RIGHT-TO-LEFT OVERRIDE"]
    assert by_rule["mixed-script-name"] == ["tool 're\u0430d_file' mixes scripts (cyrillic, latin)"]
    assert by_rule["confusable-names"] == ["tools 'read_file', 're\u0430d_file' look the same"]
    assert all(message.startswith("AWS access key at result.") for message in by_rule["secret"])
    assert FAKE_KEY.encode() in poisoned.read_bytes()  # it is in the cassette ...
    assert FAKE_KEY not in run.stdout + run.stderr  # ... and never in the report


def test_the_honest_release_has_no_findings(sessions: tuple[Path, Path]) -> None:
    honest, _ = sessions
    run = lint(honest)
    assert (run.returncode, run.stdout) == (0, f"{honest} (2026-07-28): no findings\n"), run.stderr


def test_a_rug_pull_against_the_baseline_names_what_changed(sessions: tuple[Path, Path]) -> None:
    honest, poisoned = sessions
    findings = [f for f in security_lint(load(poisoned), load(honest)) if f.rule.endswith("-changed")]
    assert [(f.rule, f.message.split(":")[0]) for f in findings] == [
        ("description-changed", "tool 'add'"), ("description-changed", "tool 'read_file'"),
        ("schema-changed", "tool 'add'")]
    assert findings[2].message == "tool 'add': its inputSchema changed (added sidenote)"
    assert security_lint(load(honest), load(honest)) == []  # the same release is no rug pull
    run = lint(poisoned, "--baseline", honest)
    assert run.returncode == 1 and "description-changed: tool 'add'" in run.stdout


def test_github_annotations_point_at_the_frame_lines_of_a_jsonl_cassette(poisoned_jsonl: Path) -> None:
    poisoned = poisoned_jsonl
    run = lint(poisoned, "--format", "github")
    assert run.returncode == 1
    lines = poisoned.read_text(encoding="utf-8").splitlines()
    for command in run.stdout.splitlines():
        level, _, rest = command.partition(" ")
        assert level in ("::warning", "::error")
        properties, _, message = rest.partition("::")
        fields = dict(item.split("=", 1) for item in properties.split(","))
        assert fields["file"] == str(poisoned) and fields["title"].startswith("tapes lint%3A ")
        frame = json.loads(lines[int(fields["line"]) - 1])
        assert message.startswith(f"frame {frame['seq']}: ")
        assert "\n" not in message


def test_sarif_has_the_2_1_0_shape(poisoned_jsonl: Path) -> None:
    poisoned = poisoned_jsonl
    run = lint(poisoned, "--format", "sarif")
    assert run.returncode == 1
    log = json.loads(run.stdout)
    assert log["version"] == "2.1.0" and log["$schema"].endswith("sarif-2.1.0.json")
    (run_,) = log["runs"]
    driver = run_["tool"]["driver"]
    assert driver["name"] == "mcp-tapes"
    rule_ids = [rule["id"] for rule in driver["rules"]]
    assert all(rule["shortDescription"]["text"] == SECURITY_RULES[rule["id"]] for rule in driver["rules"])
    assert run_["results"]
    for result in run_["results"]:
        assert rule_ids[result["ruleIndex"]] == result["ruleId"]
        assert result["level"] in ("none", "note", "warning", "error")
        assert result["message"]["text"]
        (location,) = result["locations"]
        assert location["physicalLocation"]["artifactLocation"]["uri"] == str(poisoned)
        assert location["physicalLocation"]["region"]["startLine"] >= 2


def test_the_committed_cassettes_have_no_security_findings() -> None:
    cassettes = sorted((ROOT / "cassettes").glob("**/*.tape")) + sorted((ROOT / "cassettes").glob("*.jsonl"))
    assert len(cassettes) > 10
    assert {path.name: security_lint(load(path)) for path in cassettes} == {path.name: [] for path in cassettes}


@pytest.mark.parametrize("properties", [5, [{"x": 1}], [None], "abc"])
def test_a_schema_whose_properties_are_no_map_changes_without_a_crash(properties: object) -> None:
    """A tool's inputSchema.properties that is no map (a hostile or broken server's) is a schema
    change against the baseline, with no property named: never a traceback, nor letters of a
    string read as properties."""
    honest = load(ROOT / "cassettes" / "notes-stdio-2025-11-25.tape")

    def broken(frame: Any) -> Any:
        result = frame.message.get("result") if isinstance(frame.message, dict) else None
        if not isinstance(result, dict) or "tools" not in result:
            return frame
        tools = [{**tool, "inputSchema": {**tool["inputSchema"], "properties": properties}} for tool in result["tools"]]
        return frame._replace(message={**frame.message, "result": {**result, "tools": tools}}, data=None)

    changed = dataclasses.replace(honest, frames=[broken(frame) for frame in honest.frames])
    findings = [f for f in security_lint(changed, honest) if f.rule == "schema-changed"]
    assert findings and all("its inputSchema changed" in f.message and "added" not in f.message for f in findings)
    assert "tool 'add_note': its inputSchema changed (removed text, title)" in [f.message for f in findings]
