"""`tapes lint --security`: rules on what a server shows the model (its tools, prompts, resources
and their descriptions) and on secrets a cassette should not hold.

- text aimed at the model instead of the user: imperatives such as "ignore previous instructions"
  or "do not tell the user", `<IMPORTANT>`-style tags, invisible or bidi control characters,
  descriptions too long for anyone to read;
- names that mix scripts or that fold to the same letters as another name (`reаd_file` with a
  Cyrillic а next to `read_file`);
- secret-looking strings anywhere in the cassette (messages, headers, raw bytes, stderr);
- with a baseline cassette: a tool of the same name whose description or input schema changed
  (a "rug pull": the tool the user approved is not the tool the model now sees).

The surface is read from the server's list results (`tools`, `prompts`, `resources`,
`resourceTemplates`), wherever they travel (a line, a JSON body or an SSE event). A finding
never prints a secret: only its kind, where it is and its first characters.
"""

from __future__ import annotations

import re
import unicodedata
from bisect import bisect_right
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import accumulate
from typing import Any

from tapes.analysis.lint import Finding
from tapes.cassette.frames import Frame
from tapes.cassette.store import Cassette
from tapes.wire.jsonrpc import items

LONG_DESCRIPTION = 1000  # characters

SECURITY_RULES: dict[str, str] = {
    "model-instructions": "descriptions describe; they give the model no orders (ignore instructions, hide from the user, "
                          "read files, send data)",
    "instruction-tag": "descriptions hold no <IMPORTANT>/<SYSTEM>-style tags addressed to the model",
    "invisible-text": "descriptions and names hold no invisible, zero-width or bidi control characters",
    "long-description": f"a description stays short enough for a person to review (at most {LONG_DESCRIPTION} characters)",
    "mixed-script-name": "a name uses one script (no Cyrillic or Greek letters among Latin ones)",
    "confusable-names": "two names never look the same once lookalike letters are folded",
    "secret": "a cassette holds no secret-looking strings (API keys, tokens, private keys)",
    "description-changed": "against the baseline: a tool keeps the description it had (rug pull)",
    "schema-changed": "against the baseline: a tool keeps the input schema it had (rug pull)",
}

_LISTS = {"tools": "tool", "prompts": "prompt", "resources": "resource", "resourceTemplates": "resource template"}

# Each order starts a word of _ORDER_FIRST_WORDS (keep the two together: `_orders` looks nowhere else).
_MODEL_INSTRUCTIONS = re.compile(
    r"\b(?:ignore|disregard|forget)\s+(?:all\s+|any\s+)?(?:the\s+)?(?:previous|prior|above|earlier|other)\s+"
    r"(?:instructions|rules|directions)"
    r"|\b(?:do\s+not|don't|never)\s+(?:tell|inform|mention|reveal|show|notify)\b[^.]{0,40}\b(?:user|human)"
    r"|\bwithout\s+(?:telling|informing|notifying)\s+the\s+(?:user|human)"
    r"|\bbefore\s+(?:using|calling)\s+this\s+tool\b[^.]{0,60}\b(?:read|call|send|pass|include)\b"
    r"|\b(?:read|cat|open)\s+[^.]{0,30}(?:~/|\.ssh|id_rsa|\.env\b|/etc/passwd|credentials|mcp\.json)"
    r"|\b(?:send|pass|include|append|exfiltrate|upload)\s+[^.]{0,40}\b(?:contents?|credentials|api[\s_-]?keys?|"
    r"passwords?|private\s+keys?|tokens?)\b[^.]{0,40}\b(?:as|in|to)\b"
    r"|\byou\s+(?:must|are\s+required\s+to)\s+(?:always\s+)?(?:call|use|run|read|send|first)\b"
    r"|\b(?:system\s+prompt|new\s+instructions)\s*:",
    re.IGNORECASE,
)
_ORDER_FIRST_WORDS = ("ignore", "disregard", "forget", "do", "never", "without", "before", "read", "cat", "open",
                      "send", "pass", "include", "append", "exfiltrate", "upload", "you", "system", "new")
_INSTRUCTION_TAG = re.compile(
    r"<\s*/?\s*(?:important|system|instructions?|secret|hidden|admin|assistant|prompt|context)\b[^>]{0,40}>"
    r"|\[/?(?:INST|SYSTEM)\]", re.IGNORECASE)

# name -> (what each of its secrets starts with, pattern); each pattern matches the whole secret, so the location can
# show its start, and matches no NUL (`_secret_findings` puts one between strings).
SECRET_PATTERNS: dict[str, tuple[tuple[str, ...], re.Pattern[str]]] = {
    name: (starts, re.compile(pattern)) for name, (starts, pattern) in {
        "private key": (("-----BEGIN ",), r"-----BEGIN (?:[A-Z]+ )?PRIVATE KEY-----"),
        "AWS access key": (("AKIA", "ASIA"), r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"),
        "GitHub token": (("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"),
                         r"\b(?:gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{40,})\b"),
        "Slack token": (("xox",), r"\bxox[abposr]-[A-Za-z0-9-]{10,}\b"),
        "Anthropic API key": (("sk-ant-",), r"\bsk-ant-[A-Za-z0-9_-]{20,}"),
        "OpenAI-style API key": (("sk-",), r"\bsk-(?!ant-)(?:proj-)?[A-Za-z0-9_-]{20,}"),
        "Stripe key": (("rk_live_", "sk_live_"), r"\b[rs]k_live_[A-Za-z0-9]{16,}\b"),
        "Google API key": (("AIza",), r"\bAIza[0-9A-Za-z_-]{35}\b"),
        # a token starts where a run of its characters starts, and each part is taken whole: tried at
        # every "-eyJ" of a long run, the pattern took time quadratic in the run (minutes for a MB)
        "JSON Web Token": (("eyJ",),
                           r"(?<![A-Za-z0-9_-])eyJ[A-Za-z0-9_-]{8,}+\.eyJ[A-Za-z0-9_-]{8,}+\.[A-Za-z0-9_-]{8,}"),
        "bearer token": (("Bearer",), r"\bBearer\s+(?!<redacted)[A-Za-z0-9._~+/-]{20,}=*"),
    }.items()
}

# Letters of other scripts that look like Latin ones (Unicode's confusables, the usual suspects).
_LOOKALIKES = str.maketrans({
    "а": "a", "в": "b", "е": "e", "к": "k", "м": "m", "н": "h", "о": "o", "р": "p", "с": "c", "т": "t",
    "у": "y", "х": "x", "і": "i", "ј": "j", "ѕ": "s", "ԁ": "d", "ԛ": "q", "ԝ": "w", "ɡ": "g",
    "α": "a", "β": "b", "ε": "e", "ι": "i", "κ": "k", "ν": "v", "ο": "o", "ρ": "p", "τ": "t", "υ": "u",
    "χ": "x", "ϲ": "c", "0": "o", "1": "l", "I": "l",
})


@dataclass(frozen=True)
class Entry:
    """One tool, prompt or resource as a list result showed it."""

    kind: str  # "tool", "prompt", "resource", "resource template"
    name: str
    item: dict[str, Any]
    seq: int

    def texts(self) -> Iterator[tuple[str, str]]:
        """(where, text) for every description-like text the model reads about it."""
        for key in ("title", "description"):
            if isinstance(self.item.get(key), str):
                yield key, self.item[key]
        yield from _schema_texts(self.item.get("inputSchema"), "inputSchema")
        for index, argument in enumerate(self.item.get("arguments") or ()):
            if isinstance(argument, dict) and isinstance(argument.get("description"), str):
                yield f"arguments[{index}].description", argument["description"]

    @property
    def label(self) -> str:
        return f"{self.kind} {self.name!r}"


def _schema_texts(schema: Any, where: str) -> Iterator[tuple[str, str]]:
    if isinstance(schema, dict):
        for key, value in schema.items():
            if key in ("description", "title") and isinstance(value, str):
                yield f"{where}.{key}", value
            else:
                yield from _schema_texts(value, f"{where}.{key}")
    elif isinstance(schema, list):
        for index, value in enumerate(schema):
            yield from _schema_texts(value, f"{where}[{index}]")


def surface(cassette: Cassette) -> list[Entry]:
    """Every tool, prompt and resource the server listed, in order (repeats included)."""
    entries = []
    for frame in cassette.frames:
        if frame.from_client or frame.message is None:
            continue
        for message in items(frame.message):
            result = message.get("result") if isinstance(message, dict) else None
            if not isinstance(result, dict):
                continue
            for key, kind in _LISTS.items():
                listed = result.get(key)
                for item in listed if isinstance(listed, list) else ():
                    if isinstance(item, dict):
                        name = item.get("name") if kind in ("tool", "prompt") else item.get("uri", item.get("uriTemplate"))
                        entries.append(Entry(kind, str(name), item, frame.seq))
    return entries


def _latest(entries: list[Entry]) -> dict[tuple[str, str], Entry]:
    """Each (kind, name) as it was listed last."""
    return {(entry.kind, entry.name): entry for entry in entries}


def security_lint(cassette: Cassette, baseline: Cassette | None = None) -> list[Finding]:
    entries = list(_latest(surface(cassette)).values())
    findings = [*_description_findings(entries), *_name_findings(entries), *_secret_findings(cassette.frames)]
    if baseline is not None:
        findings += _rug_pulls(_latest(surface(baseline)), entries)
    return sorted(set(findings), key=lambda finding: (finding.seq, finding.rule, finding.message))


def _description_findings(entries: list[Entry]) -> Iterator[Finding]:
    for entry in entries:
        for where, text in entry.texts():
            if orders := [_quote(found[0]) for found in _orders(text)]:
                yield Finding(entry.seq, "model-instructions", f"{entry.label} {where}: {', '.join(orders)}")
            if found := _INSTRUCTION_TAG.search(text):
                yield Finding(entry.seq, "instruction-tag", f"{entry.label} {where}: {_quote(found[0])}")
            if hidden := _invisible(text):
                yield Finding(entry.seq, "invisible-text", f"{entry.label} {where}: holds {hidden}")
            if len(text) > LONG_DESCRIPTION:
                yield Finding(entry.seq, "long-description", f"{entry.label} {where}: {len(text)} characters")
        if hidden := _invisible(entry.name):
            yield Finding(entry.seq, "invisible-text", f"{entry.label} name: holds {hidden}")


def _matches(pattern: re.Pattern[str], text: str, starts: tuple[str, ...],
             folded: str | None = None) -> Iterator[re.Match[str]]:
    """What `pattern.finditer(text)` finds, for a pattern each match of which starts with one of `starts` (in `folded`,
    when given: `text` with its case folded, index for index). The pattern is tried only there: re tries a pattern
    that starts with \\b or a lookbehind at every position (0.1 µs each: seconds for a 30 MB tool list), where
    `str.find` skips to the next start at gigabytes a second."""
    looked_in = text if folded is None else folded
    positions = set()
    for start in starts:
        at = looked_in.find(start)
        while at != -1:
            positions.add(at)
            at = looked_in.find(start, at + 1)
    end = 0
    for at in sorted(positions):
        if at >= end and (found := pattern.match(text, at)):
            yield found
            end = found.end()


def _folded(text: str) -> str:
    """`text` in lowercase, but with each letter that matches an ASCII one under re.IGNORECASE made that letter, and
    with its indexes kept: lower() makes İ two characters, and keeps ı and ſ."""
    return text.replace("İ", "i").replace("ı", "i").replace("ſ", "s").lower()


def _orders(text: str) -> Iterator[re.Match[str]]:
    """_MODEL_INSTRUCTIONS.finditer(text), tried only where one of _ORDER_FIRST_WORDS is, in any case."""
    return _matches(_MODEL_INSTRUCTIONS, text, _ORDER_FIRST_WORDS, _folded(text))


def _quote(text: str) -> str:
    text = " ".join(text.split())
    return repr(text if len(text) <= 80 else text[:77] + "...")


def _invisible(text: str) -> str:
    """The invisible characters in `text`, named, or "" (format characters: zero-width, bidi
    controls, tag characters, the BOM; emoji joiners count too, they have no place in a name)."""
    if text.isascii():  # no format character is ASCII: a long text need not be read character by character
        return ""
    found = sorted(char for char in set(text) if unicodedata.category(char) == "Cf")
    return ", ".join(f"U+{ord(char):04X} {unicodedata.name(char, 'unnamed')}" for char in found)


def _scripts(name: str) -> set[str]:
    return {unicodedata.name(char, "UNKNOWN").split()[0] for char in name if char.isalpha()}


def _skeleton(name: str) -> str:
    return unicodedata.normalize("NFKC", name).translate(_LOOKALIKES).casefold()


def _name_findings(entries: list[Entry]) -> Iterator[Finding]:
    named = [entry for entry in entries if entry.kind in ("tool", "prompt")]
    for entry in named:
        scripts = _scripts(entry.name)
        if len(scripts) > 1:
            yield Finding(entry.seq, "mixed-script-name",
                          f"{entry.label} mixes scripts ({', '.join(sorted(scripts)).lower()})")
    by_skeleton: dict[tuple[str, str], list[Entry]] = {}
    for entry in named:
        by_skeleton.setdefault((entry.kind, _skeleton(entry.name)), []).append(entry)
    for group in by_skeleton.values():
        if len(group) > 1:
            last = max(group, key=lambda entry: entry.seq)
            yield Finding(last.seq, "confusable-names", f"{group[0].kind}s {', '.join(repr(e.name) for e in group)} "
                                                        "look the same")


def _strings(value: Any, where: str) -> Iterator[tuple[str, str]]:
    if isinstance(value, str):
        yield where, value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _strings(item, f"{where}.{key}" if where else str(key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _strings(item, f"{where}[{index}]")


def _frame_strings(frame: Frame) -> Iterator[tuple[str, str]]:
    if frame.message is not None:
        yield from _strings(frame.message, "")
    if frame.data is not None:
        yield "bytes", frame.data.decode("utf-8", "replace")
    for name, value in (frame.info or {}).get("headers") or ():
        yield f"header {name}", value


def _secret_findings(frames: list[Frame]) -> Iterator[Finding]:
    """Each kind of secret first found in each string of a frame. A big list result holds hundreds of thousands of
    strings, and searching them one by one for each kind cost more than the search: they are searched in runs, as
    one text with each string after a NUL (no pattern matches a NUL, and \\b takes it for the edge of a string)."""
    for frame in frames:
        for places in _runs(_frame_strings(frame)):
            text = "\0".join(string for _, string in places)
            offsets = list(accumulate((len(string) + 1 for _, string in places[:-1]), initial=0))
            for kind, (starts, pattern) in SECRET_PATTERNS.items():
                reported = set()
                for found in _matches(pattern, text, starts):
                    place = bisect_right(offsets, found.start()) - 1
                    if place not in reported:
                        reported.add(place)
                        shown = found[0][: min(6, len(found[0]) // 3)]
                        where = places[place][0] or "the message"
                        yield Finding(frame.seq, "secret", f"{kind} at {where} ({shown}..., "
                                                           f"{len(found[0])} characters)")


def _runs(places: Iterator[tuple[str, str]], length: int = 1 << 20) -> Iterator[list[tuple[str, str]]]:
    """`places` in runs of strings about `length` characters long in all, so that a run joined is a small copy (a
    longer string is a run of its own, which a join returns as it is)."""
    run: list[tuple[str, str]] = []
    run_length = 0
    for place in places:
        if run and run_length + len(place[1]) > length:
            yield run
            run, run_length = [], 0
        run.append(place)
        run_length += len(place[1])
    if run:
        yield run


def _rug_pulls(before: dict[tuple[str, str], Entry], entries: list[Entry]) -> Iterator[Finding]:
    for entry in entries:
        old = before.get((entry.kind, entry.name))
        if old is None or entry.kind != "tool":
            continue
        if old.item.get("description") != entry.item.get("description"):
            yield Finding(entry.seq, "description-changed", f"{entry.label}: {_quote(str(old.item.get('description')))}"
                                                            f" became {_quote(str(entry.item.get('description')))}")
        if old.item.get("inputSchema") != entry.item.get("inputSchema"):
            yield Finding(entry.seq, "schema-changed", f"{entry.label}: its inputSchema changed"
                                                       f"{_schema_change(old.item.get('inputSchema'), entry.item.get('inputSchema'))}")


def _property_names(schema: Any) -> set[str]:
    """The property names a tool's input schema declares (none when it is no object, or its
    properties are no map: the shape rule reports that)."""
    properties = schema.get("properties") if isinstance(schema, dict) else None
    return set(properties) if isinstance(properties, dict) else set()


def _schema_change(old: Any, new: Any) -> str:
    old_properties, new_properties = _property_names(old), _property_names(new)
    parts = []
    if added := sorted(new_properties - old_properties):
        parts.append("added " + ", ".join(added))
    if removed := sorted(old_properties - new_properties):
        parts.append("removed " + ", ".join(removed))
    return f" ({'; '.join(parts)})" if parts else ""
