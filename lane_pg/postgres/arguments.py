"""What PostgresBackend puts into its statements and takes out of them: lock tokens as uuid
text, event-id bounds, the bulk add's payload splitting, finalize outcomes, and server
errors as their ``lane_pg.errors`` classes."""

from __future__ import annotations

import re
import uuid
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import NoReturn, TypeVar, cast

import asyncpg

from lane_pg.errors import InvalidOptions, translate_error
from lane_pg.types import (
    FinalizeOutcome,
    FinalizeStatus,
    JobState,
    QueuedSpec,
    dumps_json,
    options_json,
    validate_job_name,
    validate_queue_name,
)

T = TypeVar("T")


def reraise(exc: asyncpg.PostgresError) -> NoReturn:
    """The server's error as its ``lane_pg.errors`` class (SQLSTATE class ``LN``), else as
    it came."""
    lane_error = translate_error(exc)
    if lane_error is None:
        raise exc
    raise lane_error from exc


def event_bound(value: str | int, open_end: str) -> int | None:
    if value == open_end:
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.isdigit():
        return int(value)
    raise InvalidOptions(f"event id bound must be an integer or {open_end!r}, got {value!r}")


@asynccontextmanager
async def server_errors() -> AsyncIterator[None]:
    """Server errors raised inside as their ``lane_pg.errors`` classes (``reraise``)."""
    try:
        yield
    except asyncpg.PostgresError as exc:
        reraise(exc)


# The jsonb[] of the elements of one JSON array ($3), in order: a bulk add's payloads.
SPLIT_DATAS = (
    "ARRAY(SELECT d.value FROM jsonb_array_elements($3::jsonb) WITH ORDINALITY AS d(value, n)"
    " ORDER BY d.n)"
)

_CANONICAL_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def token_text(token: str) -> str:
    """A lock token as uuid text. Text that is no uuid becomes the nil uuid, which no claim
    ever issues, so the function reports the lock mismatch like any stale token."""
    # Tokens the worker got from a claim are canonical already: a match costs ~0.2 us
    # against ~1.5 us for parsing and printing a UUID, twice per job (W3).
    if isinstance(token, str) and _CANONICAL_UUID.fullmatch(token):
        return token
    try:
        return str(uuid.UUID(token))
    except (ValueError, TypeError, AttributeError):
        return str(uuid.UUID(int=0))


def optional_token_text(token: str | None) -> str | None:
    """``token_text`` for a write a token may fence; None (an administrator's call) stays
    None."""
    return None if token is None else token_text(token)


def optional_list(values: Sequence[T] | None) -> list[T] | None:
    """A sequence as the list asyncpg sends as an array; None (SQL NULL: all) stays None."""
    return None if values is None else list(values)


def outcome(row: asyncpg.Record) -> FinalizeOutcome:
    return FinalizeOutcome(
        queue=row["queue"],
        id=row["id"],
        status=cast(FinalizeStatus, row["status"]),
        state=cast(JobState | None, row["state"]),
    )


def spec_arrays(jobs: Sequence[QueuedSpec]) -> tuple[list[str], list[str], str, list[str]]:
    """Queues, names, one JSON array of the datas and the options texts of ``jobs``."""
    queues = [validate_queue_name(job.queue) for job in jobs]
    names = [validate_job_name(job.name) for job in jobs]
    datas = dumps_json([job.data for job in jobs], "job data")
    options = [options_json(job.options) for job in jobs]  # type: ignore[arg-type]
    return queues, names, datas, options
