"""Job states, JSON and durations, the queue/job name rules and the small shared checks."""

from __future__ import annotations

import json
import re
from datetime import timedelta
from typing import Any, Literal, TypeAlias, cast

from lane_pg.errors import (
    InvalidOptions,
    InvalidPayload,
    InvalidQueueName,
)

JobState: TypeAlias = Literal[
    "waiting", "delayed", "active", "waiting-children", "completed", "failed"
]


ALL_STATES: tuple[JobState, ...] = (
    "waiting",
    "delayed",
    "active",
    "waiting-children",
    "completed",
    "failed",
)


JSON: TypeAlias = Any
"""Any value ``json.dumps`` accepts: dict, list, str, int, float, bool or None."""


Duration: TypeAlias = timedelta | float | int
"""A duration: a ``timedelta`` or a number of seconds."""


MAX_NAME_LENGTH = 255


DEFAULT_MAX_STALLED_COUNT = 1


DEFAULT_KEEP_COMPLETED = 10_000
"""Completed jobs a queue keeps by default, newest first (``QueueRetention``); the column
default of ``lane.queues.keep_completed`` is the same number."""


DEFAULT_KEEP_FAILED = 100_000
"""Failed jobs a queue keeps by default (``lane.queues.keep_failed``)."""


DEFAULT_PRUNE_BATCH = 5_000
"""Most finished jobs one ``prune_finished`` call deletes per queue and state."""


_MAX_INT4 = 2**31 - 1


_QUEUE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:\-]{0,127}")


def validate_queue_name(queue: str) -> str:
    if not isinstance(queue, str) or not _QUEUE_NAME.fullmatch(queue):
        raise InvalidQueueName(
            f"invalid queue name {queue!r}: use 1-128 characters from A-Z a-z 0-9 _ . : -,"
            " starting with a letter or digit"
        )
    return queue


def validate_job_name(name: str) -> str:
    if not isinstance(name, str) or not name or len(name) > MAX_NAME_LENGTH:
        raise InvalidOptions(f"invalid job name {name!r}: use 1-{MAX_NAME_LENGTH} characters")
    return name


# An escaped NUL that is not itself an escaped backslash followed by "u0000".
_ESCAPED_NUL = re.compile(r"(?<!\\)(?:\\\\)*\\u0000")


# One encoder instance: json.dumps with keyword arguments builds a new encoder per call.
_ENCODER = json.JSONEncoder(allow_nan=False, separators=(",", ":"))
_TEXT_ENCODER = json.JSONEncoder(allow_nan=False, separators=(",", ":"), ensure_ascii=False)


def dumps_json(value: JSON, what: str, *, ascii_only: bool = True) -> str:
    """``value`` as compact JSON text for a jsonb cast, refused before any write unless it
    is plain JSON (SCH-10). NUL characters are refused too: jsonb cannot store them.
    ``ascii_only=False`` keeps non-ASCII characters as they are (the text Redis stores)."""
    if value is None:
        return "null"
    try:
        text = (_ENCODER if ascii_only else _TEXT_ENCODER).encode(value)
    except (TypeError, ValueError) as exc:
        raise InvalidPayload(f"{what} must be JSON-serialisable: {exc}") from exc
    if "\\u0000" in text and _ESCAPED_NUL.search(text):
        raise InvalidPayload(f"{what} must not contain NUL characters (jsonb cannot store them)")
    return text


def check_json(value: JSON, what: str) -> JSON:
    """``value`` itself, once ``dumps_json`` accepts it."""
    dumps_json(value, what)
    return value


def validate_prune_batch(batch: int) -> int:
    """``prune_finished``'s batch: at least 1 job per queue and state."""
    if isinstance(batch, bool) or not isinstance(batch, int) or not 1 <= batch <= _MAX_INT4:
        raise InvalidOptions(f"batch must be an integer between 1 and {_MAX_INT4}, got {batch!r}")
    return batch


def validate_record_events(record: bool) -> bool:
    """``set_queue_events``' flag: ``True`` or ``False`` itself (not 1, not "off")."""
    if not isinstance(record, bool):
        raise InvalidOptions(f"record must be True or False, got {record!r}")
    return record


def validate_clean_state(state: str) -> JobState:
    """``clean_jobs``' state: completed, failed, active, waiting or delayed (MGMT-18).
    waiting-children is refused: a parent waiting for its children goes with its flow."""
    if state not in ALL_STATES:
        raise InvalidOptions(f"unknown job state {state!r}; use one of {list(ALL_STATES)}")
    if state == "waiting-children":
        raise InvalidOptions(
            "clean does not take waiting-children: a parent waiting for its children is"
            " removed with remove_job, or its flow; use completed, failed, active, waiting"
            " or delayed"
        )
    return cast(JobState, state)


def validate_count(value: int, what: str) -> int:
    """A count of jobs or rows where 0 means none or the default: 0 to 2147483647."""
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= _MAX_INT4:
        raise InvalidOptions(f"{what} must be an integer between 0 and {_MAX_INT4}, got {value!r}")
    return value


def validate_flag(value: bool, what: str) -> bool:
    """A switch argument: ``True`` or ``False`` itself (not 1, not "yes")."""
    if not isinstance(value, bool):
        raise InvalidOptions(f"{what} must be True or False, got {value!r}")
    return value


def validate_stacktrace(stacktrace: object, failed_reason: object) -> tuple[list[str], str | None]:
    """``save_job_stacktrace``' arguments: a sequence of strings (not a string itself) and
    a reason or None."""
    if isinstance(stacktrace, str) or not isinstance(stacktrace, list | tuple):
        raise InvalidOptions(f"stacktrace must be a list of strings, got {stacktrace!r}")
    if not all(isinstance(entry, str) for entry in stacktrace):
        raise InvalidOptions(f"every stacktrace entry must be a string, got {stacktrace!r}")
    if failed_reason is not None and not isinstance(failed_reason, str):
        raise InvalidOptions(f"failed_reason must be a string or None, got {failed_reason!r}")
    return list(stacktrace), failed_reason
