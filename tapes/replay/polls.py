"""Polls: requests a client repeats, on its own clock, to read a state that moves on by itself
(2025-11-25 tasks: `tasks/get` until the task is done). A replay cannot expect the live client to
poll as often as the recorded one did, so by default a poll is answered with the state the
recording had reached: each live poll plays the next recorded one, the last is answered again
when the live client polls more often, and the recorded polls it never made are skipped (neither
unused nor missed) once it moves on, e.g. to `tasks/result` of the same task. With a timing (the
recorded clock), a poll plays the newest recorded poll the clock has reached instead."""

from __future__ import annotations

from enum import StrEnum
from typing import Any

POLL_METHODS = frozenset({"tasks/get"})
"""Requests that only read a state that moves on by itself."""

TASK_PARAM = "taskId"
TASK_STATUS = "notifications/tasks/status"


class Polls(StrEnum):
    """How repeated polls of the same thing are answered."""

    LATEST = "latest"  # the state the recording had reached at that point of the live session
    EXACT = "exact"  # polls are requests like any other: the recorded count, no more, no fewer


def is_poll(method: str) -> bool:
    return method in POLL_METHODS


def subject(method: str, params: Any) -> Any:
    """What a tasks/* message is about (its task id), None for anything else: a live message about
    a task moves the recording past the polls of that task recorded before it."""
    if not method.startswith("tasks/") or not isinstance(params, dict):
        return None
    task = params.get(TASK_PARAM)
    return task if isinstance(task, str | int) else None
