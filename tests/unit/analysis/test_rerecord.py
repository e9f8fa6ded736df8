"""Recordings made beside a cassette, put in its place once finished; quiet re-records: a recording
that behaves as the cassette does leaves it byte for byte."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import msgpack

from tapes.analysis.rerecord import finished, same_recording, scratch_beside, settle
from tapes.cassette.capture import CAPTURE_KEY
from tapes.cassette.store import Cassette, load, save

from tests.support.samples import TIMELINE_FRAMES, TIMELINE_HEADER


def _later(frames: list, shift: float) -> list:
    return [dataclasses.replace(frame, t=frame.t + shift) for frame in frames]


def _another_answer() -> list:
    return [dataclasses.replace(frame, message={**frame.message, "result": {"changed": True}})
            if type(frame.message) is dict and "result" in frame.message else frame for frame in TIMELINE_FRAMES]


def test_other_times_and_a_new_creation_time_are_the_same_recording() -> None:
    old = Cassette(TIMELINE_HEADER, TIMELINE_FRAMES)
    new = Cassette(dataclasses.replace(TIMELINE_HEADER, created="2030-01-01T00:00:00+00:00"),
                   _later(TIMELINE_FRAMES, 0.25))
    assert same_recording(old, new)


def test_another_answer_another_server_or_new_redaction_rules_are_not() -> None:
    old = Cassette(TIMELINE_HEADER, TIMELINE_FRAMES)
    assert not same_recording(old, Cassette(TIMELINE_HEADER, _another_answer()))
    assert not same_recording(old, Cassette(dataclasses.replace(TIMELINE_HEADER, server={"command": ["other"]}),
                                            TIMELINE_FRAMES))
    assert not same_recording(old, Cassette(dataclasses.replace(TIMELINE_HEADER, redaction=("json:params.x",)),
                                            TIMELINE_FRAMES))


def test_settle_keeps_the_old_file_when_nothing_changed_and_replaces_it_otherwise(tmp_path: Path) -> None:
    cassette, recording = tmp_path / "a.jsonl", tmp_path / "a.recording.jsonl"
    save(Cassette(TIMELINE_HEADER, TIMELINE_FRAMES), cassette)
    before = cassette.read_bytes()
    save(Cassette(dataclasses.replace(TIMELINE_HEADER, created="2030-01-01T00:00:00+00:00"),
                  _later(TIMELINE_FRAMES, 0.25)), recording)
    assert not settle(recording, cassette)
    assert cassette.read_bytes() == before and not recording.exists()

    save(Cassette(TIMELINE_HEADER, _another_answer()), recording)
    assert settle(recording, cassette)
    assert load(cassette).frames == _another_answer() and not recording.exists()


def test_settle_replaces_a_cassette_that_cannot_be_read_or_is_missing(tmp_path: Path) -> None:
    cassette, recording = tmp_path / "a.tape", tmp_path / "a.recording.tape"
    cassette.write_bytes(b"not a cassette")
    save(Cassette(TIMELINE_HEADER, TIMELINE_FRAMES), recording)
    assert settle(recording, cassette) and load(cassette).frames == TIMELINE_FRAMES
    cassette.unlink()
    save(Cassette(TIMELINE_HEADER, TIMELINE_FRAMES), recording)
    assert settle(recording, cassette) and cassette.exists()


def test_settle_through_a_symlink_replaces_its_target(tmp_path: Path) -> None:
    """A cassette kept elsewhere and linked into the tests stays a link to the new recording."""
    target, cassette, recording = tmp_path / "kept" / "a.tape", tmp_path / "a.tape", tmp_path / "a.recording.tape"
    target.parent.mkdir()
    save(Cassette(TIMELINE_HEADER, TIMELINE_FRAMES), target)
    cassette.symlink_to(target)
    save(Cassette(TIMELINE_HEADER, _another_answer()), recording)
    assert settle(recording, cassette)
    assert cassette.is_symlink() and load(target).frames == _another_answer() and not recording.exists()


def test_a_recording_is_finished_once_its_recorder_made_frames_of_it(tmp_path: Path) -> None:
    """What a stdio recorder killed, or unable to write or scrub its frames, leaves is its raw capture."""
    cassette = tmp_path / "a.jsonl"
    recording = scratch_beside(cassette, "recording")
    assert recording.name == "a.recording.jsonl"  # the format follows the name
    assert not finished(recording)
    recording.write_bytes(msgpack.packb({**TIMELINE_HEADER.record(), CAPTURE_KEY: {"unapplied": []}}))
    assert not finished(recording)
    save(Cassette(TIMELINE_HEADER, TIMELINE_FRAMES), recording)
    assert finished(recording)
    save(Cassette(TIMELINE_HEADER, TIMELINE_FRAMES), tmp_path / "a.recording.tape")
    assert finished(tmp_path / "a.recording.tape")
