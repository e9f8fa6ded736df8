"""Reading the page `tapes view` writes: its data elements, parsed as view.js reads them."""

from __future__ import annotations

import json
import re
from typing import Any

TYPES = ("request", "notification", "result", "error", "batch", "invalid",
         "raw", "stderr", "http", "end", "sse", "exit")  # fmt: skip


def _strict(text: str) -> Any:
    """JSON as JSON.parse takes it: no NaN or Infinity."""

    def refuse(constant: str) -> None:
        raise AssertionError(f"{constant} in the page data")

    return json.loads(text, parse_constant=refuse)


def model_of(page: str) -> dict[str, Any]:
    """The diagram model of a page, one dict per row (`seq`, `t`, `dir`, `type`, `ch`, `what`, and
    when present `sum`, `eid`, `g`, `ids`, `marks` as [kind, text, target, explanation], `notes`,
    and `body`, the frame's JSON), put together from the page's chunks."""
    found = re.search(r'<script type="application/json" id="tapes-data">(.*?)</script>', page, re.S)
    assert found, "the page has no data element"
    model = _strict(found.group(1))
    for index, side in enumerate(model["sides"]):
        chunks = re.findall(rf'<script type="application/json" class="tapes-rows" data-side="{index}">(.*?)</script>', page, re.S)
        bodies = re.findall(rf'<script type="text/plain" class="tapes-bodies" data-side="{index}">(.*?)</script>', page, re.S)
        assert len(chunks) == len(bodies)
        rows: list[dict[str, Any]] = []
        marks: list[list[Any]] = []
        for text, lines in zip(chunks, bodies, strict=True):
            chunk = _strict(text)
            first = len(rows)
            for j, seq in enumerate(chunk["seq"]):
                row = {"seq": seq, "t": chunk["t"][j], "dir": "s" if chunk["k"][j] & 1 else "c",
                       "type": TYPES[chunk["k"][j] >> 1], "ch": chunk["ch"][j], "what": chunk["w"][j]}
                optional = {"sum": chunk["s"][j], "g": chunk["g"][j] if chunk["g"][j] >= 0 else None,
                            "ids": chunk["i"][j].split(" ") if chunk["i"][j] else None}
                row.update((key, value) for key, value in optional.items() if value is not None and value != "")
                rows.append(row)
            for j, line in enumerate(lines.split("\n")[: len(chunk["seq"])]):
                rows[first + j]["body"] = _strict(line)
            for at, eid in chunk["e"]:
                rows[at]["eid"] = eid
            for at, note in chunk["n"]:
                rows[at].setdefault("notes", []).append(note)
            marks += chunk["m"]
        for at, number, target, *args in sorted(marks, key=lambda mark: mark[0]):
            kind, text, explanation = model["marks"][number]

            def fill(template: str) -> str:
                return re.sub(r"\{(\d|t)\}", lambda key: str(target if key[1] == "t" else args[int(key[1])]), template)

            rows[at].setdefault("marks", []).append([kind, fill(text), target, fill(explanation)])
        assert len(rows) == side["rows"], "the chunks do not hold as many rows as the page says"
        side["rows"] = rows
    return model
