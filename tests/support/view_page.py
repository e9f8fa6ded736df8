"""Reading the page `tapes view` writes: its model as the page's own script makes it (view_model.js,
run under Node by view_model.cjs) from the frames and data the page carries."""

from __future__ import annotations

import base64
import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import msgpack

READER = Path(__file__).with_name("view_model.cjs")


def _strict(text: str) -> Any:
    """JSON as JSON.parse takes it: no NaN or Infinity."""

    def refuse(constant: str) -> None:
        raise AssertionError(f"{constant} in the page data")

    return json.loads(text, parse_constant=refuse)


def model_of(page: str) -> dict[str, Any]:
    """The diagram model of a page: `sides`, each with `title`, `meta`, `warnings`, `channels`,
    `groups` and `rows`, one dict per row (`seq`, `t`, `dir`, `type`, `ch`, `what`, and when present
    `sum`, `eid`, `g`, `ids`, `marks` as [kind, text, target, explanation], `notes`, and `body`,
    the frame's JSON); and `differences`."""
    found = re.search(r'<script type="application/json" id="tapes-data">(.*?)</script>', page, re.DOTALL)
    assert found, "the page has no data element"
    _strict(found.group(1))
    node = shutil.which("node")
    assert node, "reading a page's model needs Node"
    done = subprocess.run([node, str(READER)], input=page.encode(), capture_output=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr.decode()
    return _strict(done.stdout.decode())


def page_data(page: str) -> tuple[dict[str, Any], list[bytes]]:
    """A page's data element, strict JSON, and each side's frame bytes, checked to hold as many
    msgpack records as the side has rows (what the page's script reads), without running it."""
    found = re.search(r'<script type="application/json" id="tapes-data">(.*?)</script>', page, re.DOTALL)
    assert found, "the page has no data element"
    data = _strict(found.group(1))
    frames = []
    for index, side in enumerate(data["sides"]):
        texts = re.findall(rf'<script type="application/octet-stream" class="tapes-frames" data-side="{index}">(.*?)</script>',
                           page, re.DOTALL)
        content = b"".join(base64.b64decode(text, validate=True) for text in texts)
        unpacker = msgpack.Unpacker(raw=False, strict_map_key=False)
        unpacker.feed(content)
        assert all(type(record) is list for _, record in zip(range(side["rows"]), unpacker, strict=False))
        frames.append(content)
    return data, frames
