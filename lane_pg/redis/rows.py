"""Between Python values and what the scripts store: times as epoch milliseconds, JSON
columns as JSON text, a job hash as a ``JobRow``.

A job's hash has one field per column of ``lane.jobs`` (``lua/includes/job.lua``); an
absent field is NULL. The order key is not stored whole (it passes 2^53, where a Lua number
stops being exact): the hash keeps the offset within the priority's bucket, and the key is
``priority * 2^41 + offset`` here, as ``lane._order_key`` computes it.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from lane_pg.errors import InvalidOptions
from lane_pg.options import ParsedOptions, RetentionRule
from lane_pg.types import (
    JSON,
    Backoff,
    JobOptions,
    JobRow,
    JobState,
    dumps_json,
    parse_job_options,
    validate_job_name,
)

PRIORITY_BUCKET = 2**41
"""Width of one priority's range of order keys (``lane._order_key``)."""

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MILLISECOND = timedelta(milliseconds=1)


def epoch_ms(moment: datetime | None) -> int | None:
    """Epoch milliseconds, floored; None stays None (the script reads the server clock)."""
    if moment is None:
        return None
    if moment.tzinfo is None:  # naive is UTC, as asyncpg reads a timestamptz parameter
        moment = moment.replace(tzinfo=UTC)
    return (moment - _EPOCH) // _MILLISECOND


def from_ms(value: str | int) -> datetime:
    return _EPOCH + int(value) * _MILLISECOND


def dump(value: JSON) -> str:
    """JSON text as the scripts store it (compact; the same text ``json.loads`` reads)."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def script_list(value: object) -> list[Any]:
    """A script's list result: Redis's cjson encodes an empty table as ``{}``."""
    return value if isinstance(value, list) else []


def canonical_token(token: str) -> str | None:
    """A lock token as the scripts compare it (the canonical UUID text), or None for a
    text that is no UUID (it matches no job: PostgreSQL compares uuid values)."""
    try:
        return str(uuid.UUID(str(token)))
    except ValueError:
        return None


def retention_json(rule: RetentionRule) -> str | None:
    """A parsed ``remove_on_complete`` / ``remove_on_fail`` as the finishing scripts read
    it: ``true``, ``{"age_ms", "count", "limit"}``, or None to keep the job."""
    if rule is None:
        return None
    if rule is True:
        return "true"
    return dump(rule.to_json())


@dataclass(frozen=True, slots=True)
class SpecFields:
    """One checked add request as ``add_jobs.lua`` stores it."""

    parsed: ParsedOptions
    fields: dict[str, JSON]


_NO_OPTIONS = parse_job_options(None)
"""What no options mean, parsed once: 7.7 us of a job's ~30 us of client time in a
1,000-job add_jobs (timeit); its document is only read (dumped), never changed."""


def spec_fields(name: str, data: JSON, options: JobOptions | dict[str, JSON] | None) -> SpecFields:
    """Check one spec (the rules ``lane_pg.options`` holds once) and give its fields."""
    validate_job_name(name)
    if options is None:  # the fields of no options, built once (_PLAIN_FIELDS)
        text = dumps_json(data, "data", ascii_only=False)
        return SpecFields(_NO_OPTIONS, {**_PLAIN_FIELDS, "name": name, "data": text})
    parsed = parse_job_options(options)
    text = dumps_json(data, "data", ascii_only=False)  # checked and dumped at once
    backoff = None if parsed.backoff is None else dump(parsed.backoff)
    return SpecFields(
        parsed,
        {
            "id": parsed.job_id,
            "name": name,
            "data": text,
            "options": dump(parsed.document),
            "priority": parsed.priority,
            "lifo": parsed.lifo,
            "delay_ms": parsed.delay_ms,
            "attempts": parsed.attempts,
            "backoff": backoff,
            "timeout_ms": parsed.timeout_ms,
            "roc": retention_json(parsed.remove_on_complete),
            "rof": retention_json(parsed.remove_on_fail),
        },
    )


_PLAIN_FIELDS: dict[str, JSON] = spec_fields("_", None, {}).fields
"""A spec's fields when it has no options, but its name and data."""


def _optional_ms(fields: Mapping[str, str], name: str) -> datetime | None:
    value = fields.get(name)
    return None if value is None else from_ms(value)


def _optional_json(fields: Mapping[str, str], name: str) -> JSON:
    value = fields.get(name)
    return None if value is None else json.loads(value)


def _optional_int(fields: Mapping[str, str], name: str) -> int | None:
    value = fields.get(name)
    return None if value is None else int(value)


def job_row(queue: str, fields: Mapping[str, str]) -> JobRow:
    """The ``JobRow`` of a job hash a script returned (a new job's record leaves its
    counters and stacktrace unset at 0 and ``[]``: ``includes/store.lua``)."""
    priority = int(fields["priority"])
    seq = fields.get("seq")
    options = json.loads(fields["options"])
    return JobRow(
        queue=queue,
        id=fields["id"],
        name=fields["name"],
        data=json.loads(fields["data"]),
        state=_state(fields["state"]),
        priority=priority,
        lifo=fields["lifo"] == "1",
        # A job out of waiting keeps the priority its order key was built with until it
        # moves into waiting again (update_job_priority.lua), as lane.jobs.order_key does.
        order_key=int(fields.get("order_priority", priority)) * PRIORITY_BUCKET
        + int(fields["order_offset"]),
        enqueued_seq=None if seq is None else int(seq),
        created_at=from_ms(fields["created_at"]),
        available_at=from_ms(fields["available_at"]),
        processed_at=_optional_ms(fields, "processed_at"),
        finished_at=_optional_ms(fields, "finished_at"),
        attempts_started=int(fields.get("attempts_started", 0)),
        attempts_made=int(fields.get("attempts_made", 0)),
        max_attempts=int(fields["max_attempts"]),
        backoff=Backoff.from_json(_optional_json(fields, "backoff")),
        timeout_ms=_optional_int(fields, "timeout_ms"),
        lock_token=fields.get("lock_token"),
        worker_id=fields.get("worker_id"),
        lease_expires_at=_optional_ms(fields, "lease_expires_at"),
        stalled_count=int(fields.get("stalled_count", 0)),
        progress=_optional_json(fields, "progress"),
        return_value=_optional_json(fields, "return_value"),
        failed_reason=fields.get("failed_reason"),
        stacktrace=_optional_json(fields, "stacktrace") or [],
        options=options,
        deduplication_id=fields.get("dedup_id"),
        repeat_key=fields.get("repeat_key"),
        parent_queue=fields.get("parent_queue"),
        parent_id=fields.get("parent_id"),
        deferred_failure=fields.get("deferred_failure"),
    )


def added_row(queue: str, spec: SpecFields, entry: list[Any], created_at: datetime) -> JobRow:
    """The ``JobRow`` of a job ``add_jobs.lua`` just stored from ``spec``: what the script
    assigned (``entry``: spec index, id, state, order_offset, seq, available_at) and what
    the client sent, as ``job_row`` reads it back from the hash (a test compares the two)."""
    fields = spec.fields
    parsed = spec.parsed
    backoff = fields["backoff"]
    dedup: Any = fields.get("dedup")
    series: Any = fields.get("series")
    seq = entry[4]
    return JobRow(
        queue=queue,
        id=entry[1],
        name=str(fields["name"]),
        data=json.loads(str(fields["data"])),
        state=_state(entry[2]),
        priority=parsed.priority,
        lifo=parsed.lifo,
        order_key=parsed.priority * PRIORITY_BUCKET + int(entry[3]),
        enqueued_seq=None if seq is False else int(seq),
        created_at=created_at,
        available_at=from_ms(entry[5]),
        processed_at=None,
        finished_at=None,
        attempts_started=0,
        attempts_made=0,
        max_attempts=parsed.attempts,
        backoff=None if backoff is None else Backoff.from_json(json.loads(str(backoff))),
        timeout_ms=parsed.timeout_ms,
        lock_token=None,
        worker_id=None,
        lease_expires_at=None,
        stalled_count=0,
        progress=None,
        return_value=None,
        failed_reason=None,
        stacktrace=[],
        options={} if fields["options"] == "{}" else json.loads(str(fields["options"])),
        deduplication_id=None if dedup is None else str(dedup["id"]),
        repeat_key=None if series is None else str(series["key"]),
    )


_STATES: dict[str, JobState] = {
    "waiting": "waiting",
    "delayed": "delayed",
    "active": "active",
    "waiting-children": "waiting-children",
    "completed": "completed",
    "failed": "failed",
}


def _state(text: str) -> JobState:
    return _STATES[text]


def check_state(state: str) -> JobState:
    if state not in _STATES:
        raise InvalidOptions(f"unknown job state {state!r}; use one of {list(_STATES)}")
    return _STATES[state]


def non_negative_int(value: object, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise InvalidOptions(f"{what} must be a non-negative integer, got {value!r}")
    return value


def member_job(state: str, member: str) -> tuple[int, str]:
    """(key, id) of a state index's member: ``<key 16>:<id>``, or in ``waiting``
    ``<priority 7><offset 13><key 16>:<id>`` (``lua/includes/order.lua``)."""
    if state == "waiting":
        return int(member[20:36]), member[37:]
    return int(member[:16]), member[17:]
