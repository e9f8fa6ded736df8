"""Recordings made beside a cassette, then put in its place: a run killed part way leaves no half
cassette at its name for the next run to replay. And quiet re-records: a new recording that behaves
as the cassette it would replace leaves that cassette byte for byte as it was, so a re-record (the
plugin's `all` and `rewrite` modes, `tapes replay --record-mode all`) shows up in review only when
something changed."""

from __future__ import annotations

import shutil
from pathlib import Path

from tapes.analysis.diff import diff_cassettes
from tapes.cassette.store import Cassette, load, replacing, unapplied_in_capture
from tapes.errors import UserError


def scratch_beside(cassette: Path, purpose: str) -> Path:
    """Where what goes to `cassette` is written first (`purpose`: "recording", or a new-episodes
    replay's "episodes"), to be `settle`d in its place: beside it, with its suffix, for the format
    follows the name. No replay reads it, and the next run writes over it."""
    return cassette.with_name(f"{cassette.stem}.{purpose}{cassette.suffix}")


def finished(recording: Path) -> bool:
    """Whether the recorder finished `recording`: it is there, and no stdio recorder's raw capture
    (left by a recorder killed, or unable to write its frames; unscrubbed if its hook failed)."""
    return recording.exists() and unapplied_in_capture(recording) is None


def same_recording(old: Cassette, new: Cassette) -> bool:
    """Whether `new` tells nothing `old` does not: the same transport, server and redaction rules
    (a rule added since must reach the file), and the same behaviour as `tapes diff` judges it."""
    facts = lambda header: (header.transport, header.server, header.redaction)  # noqa: E731
    return facts(old.header) == facts(new.header) and diff_cassettes(old, new).same


def settle(recording: Path, cassette: Path) -> bool:
    """Put the new `recording` in place of `cassette`, unless the cassette already holds the same
    (then the recording is deleted and the cassette left untouched); whether it was replaced. A
    cassette that cannot be read is replaced."""
    try:
        unchanged = cassette.exists() and same_recording(load(cassette), load(recording))
    except UserError:
        unchanged = False
    if unchanged:
        recording.unlink()
        return False
    # copied, not renamed: through a symlink its target is replaced, and what is no regular file
    # (/dev/null) is written into, never renamed over
    replacing(cassette, lambda out: shutil.copyfile(recording, out))
    recording.unlink()
    return True
