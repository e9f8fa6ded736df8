"""Reading the page `tapes view` writes."""

from __future__ import annotations

import json
import re
from typing import Any


def model_of(page: str) -> dict[str, Any]:
    """The diagram model embedded in a page, parsed as strict JSON (no NaN, as JSON.parse wants)."""
    found = re.search(r'<script type="application/json" id="tapes-data">(.*?)</script>', page, re.S)
    assert found, "the page has no data element"

    def refuse(constant: str) -> None:
        raise AssertionError(f"{constant} in the page data")

    return json.loads(found.group(1), parse_constant=refuse)
