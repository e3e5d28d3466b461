"""The fast snapshot constructors (types.new_job, types.new_claimed_job) give ordinary,
frozen snapshots equal to the dataclass constructors' (MGMT-1)."""

from __future__ import annotations

import dataclasses
import pickle
from datetime import UTC, datetime

import pytest

from lane_pg.types import ClaimedJob, JobRow, job_constructor, new_claimed_job, new_job


def _fields(**changes: object) -> dict[str, object]:
    now = datetime(2026, 12, 1, tzinfo=UTC)
    values: dict[str, object] = {
        "queue": "q",
        "id": "7",
        "name": "send",
        "data": {"to": "a@example.com"},
        "state": "waiting",
        "priority": 3,
        "lifo": False,
        "order_key": 11,
        "enqueued_seq": 5,
        "created_at": now,
        "available_at": now,
        "processed_at": None,
        "finished_at": None,
        "attempts_started": 0,
        "attempts_made": 0,
        "max_attempts": 2,
        "backoff": None,
        "timeout_ms": None,
        "lock_token": None,
        "worker_id": None,
        "lease_expires_at": None,
        "stalled_count": 0,
        "progress": None,
        "return_value": None,
        "failed_reason": None,
        "stacktrace": [],
        "options": {"attempts": 2},
        "deduplication_id": "acct:1",
        "repeat_key": None,
        "parent_queue": "flows",
        "parent_id": "p-1",
        "deferred_failure": None,
        "logs_count": None,
        "deduplication_expires_at": None,
        "child_ids": None,
    }
    values.update(changes)
    return values


@pytest.mark.parametrize(
    ("build", "cls", "changes"),
    [
        (new_job, JobRow, {}),
        (new_claimed_job, ClaimedJob, {"state": "active", "lock_token": "t-1"}),
    ],
)
def test_fast_snapshot_is_the_frozen_class(
    build: type[JobRow], cls: type[JobRow], changes: dict[str, object]
) -> None:
    values = _fields(**changes)
    fast = build(**values)  # type: ignore[arg-type]
    plain = cls(**values)  # type: ignore[arg-type]
    assert type(fast) is cls
    assert fast == plain and plain == fast
    assert hash(dataclasses.replace(fast, data=None, stacktrace=(), options=None)) is not None  # type: ignore[arg-type]
    assert repr(fast) == repr(plain)
    assert dataclasses.asdict(fast) == dataclasses.asdict(plain)
    assert pickle.loads(pickle.dumps(fast)) == plain
    with pytest.raises(dataclasses.FrozenInstanceError):
        fast.id = "8"  # type: ignore[misc]
    assert fast.payload == {"to": "a@example.com"}


def test_fast_snapshot_differs_where_the_fields_differ() -> None:
    assert new_job(**_fields()) != new_job(**_fields(id="8"))  # type: ignore[arg-type]


def test_rows_map_every_column_to_its_field() -> None:
    # Distinct values for fields of one type, so a positional slip in job_from_row or
    # plain_job shows as a wrong field.
    from lane_pg.postgres.rows import job_from_row, plain_job

    t = [datetime(2026, 12, 1, hour, tzinfo=UTC) for hour in range(5)]
    row = {
        "queue": "q",
        "id": "7",
        "name": "send",
        "data": '{"a": 1}',
        "state": "active",
        "priority": 3,
        "lifo": True,
        "order_key": 11,
        "enqueued_seq": 5,
        "created_at": t[0],
        "available_at": t[1],
        "processed_at": t[2],
        "finished_at": t[3],
        "attempts_started": 13,
        "attempts_made": 12,
        "max_attempts": 14,
        "backoff": '{"type": "fixed", "delay_ms": 10}',
        "timeout_ms": 250,
        "lock_token": "tok",
        "worker_id": "w1",
        "lease_expires_at": t[4],
        "stalled_count": 15,
        "progress": "16",
        "return_value": '"done"',
        "failed_reason": "why",
        "stacktrace": ["frame"],
        "options": '{"attempts": 14}',
        "dedup_id": "acct:42",
        "repeat_key": "heartbeat",
        "parent_queue": "flows",
        "parent_id": "p-9",
        "deferred_failure": "child 3 failed",
    }
    job = job_from_row(row, new_claimed_job)
    decoded = {
        "data": {"a": 1},
        "progress": 16,
        "return_value": "done",
        "options": {"attempts": 14},
    }
    for name in (f.name for f in dataclasses.fields(JobRow) if f.compare):
        if name == "backoff":
            assert job.backoff is not None and job.backoff.delay_ms == 10
        else:
            column = {"deduplication_id": "dedup_id"}.get(name, name)
            assert getattr(job, name) == decoded.get(name, row[column]), name
    assert type(job) is ClaimedJob

    added = plain_job("q", "8", "send", {"b": 2}, 21, 22, t[0])
    assert (added.id, added.data, added.enqueued_seq, added.order_key) == ("8", {"b": 2}, 21, 22)
    assert (added.created_at, added.available_at, added.state) == (t[0], t[0], "waiting")


def test_a_job_constructor_sets_its_fixed_fields_and_gives_the_frozen_class() -> None:
    values = _fields()
    varying = ("queue", "id", "data", "created_at")
    construct = job_constructor(
        ("queue", "job_id", "data", "created_at"),
        {
            name: {"id": "job_id"}.get(name, name) if name in varying else repr(value)
            for name, value in values.items()
            if name not in ("created_at", "available_at")
        }
        | {"created_at": "created_at", "available_at": "created_at"},
    )
    first = construct("q", "7", {"to": "a@example.com"}, values["created_at"])
    second = construct("q", "8", None, values["created_at"])
    assert type(first) is JobRow and first == JobRow(**values)  # type: ignore[arg-type]
    assert second.id == "8" and second.data is None
    assert first.stacktrace is not second.stacktrace  # a literal is new each call
    assert first.options is not second.options
    with pytest.raises(dataclasses.FrozenInstanceError):
        first.id = "9"  # type: ignore[misc]
    with pytest.raises(TypeError, match="a value for each field"):
        job_constructor(("queue",), {"queue": "queue"})
