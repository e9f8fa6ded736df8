"""The pytest plugin's check that a cassette can be written, as pytest-xdist workers run it at once."""

from __future__ import annotations

import threading
from pathlib import Path

from tapes.pytest_plugin import _unwritable


def test_workers_checking_one_cassette_at_once_all_find_it_writable(tmp_path: Path) -> None:
    # Each check used one probe file beside the cassette: a worker removed it under another, whose
    # setup failed with "cannot record ...: No such file or directory".
    cassette = tmp_path / "cassettes" / "weather.tape"
    start = threading.Barrier(8)
    problems: list[str | None] = []

    def check() -> None:
        start.wait()
        problems.extend(_unwritable(cassette) for _ in range(300))

    workers = [threading.Thread(target=check) for _ in range(8)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    assert set(problems) == {None}
    assert list(cassette.parent.iterdir()) == []  # no probe left behind
