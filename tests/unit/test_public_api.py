"""The public API in `tapes/__init__.py`: what the README's Python examples use, loaded lazily."""

from pathlib import Path

import tapes

ROOT = Path(__file__).resolve().parents[2]


def test_every_public_name_resolves_and_is_listed() -> None:
    for name in tapes.__all__:
        assert getattr(tapes, name) is not None
    assert set(dir(tapes)) >= set(tapes.__all__)


def test_a_cassette_loads_through_the_public_api() -> None:
    cassette = tapes.load(ROOT / "cassettes" / "everything-stdio-2025-11-25.tape")
    assert cassette.frames and all(isinstance(frame, tapes.Frame) for frame in cassette.frames)
    assert {frame.kind for frame in cassette.frames} >= {tapes.Kind.MESSAGE}


def test_an_unknown_name_is_an_attribute_error() -> None:
    try:
        tapes.no_such_thing  # noqa: B018
    except AttributeError as error:
        assert "no_such_thing" in str(error)
    else:
        raise AssertionError("tapes.no_such_thing resolved")
