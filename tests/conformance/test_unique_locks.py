"""Unique ids (``deduplication.kind = "unique"``, migration 0018) on every backend: one lock
per id in the whole connection (UNIQ-1), held in the queue of its job, and retried without
the lock (A9). Times come from ``clock`` (``now=``), never from sleeping."""

from __future__ import annotations

from typing import Any

import pytest

from lane_pg.backend import Dedup, JobQueueBackend
from lane_pg.errors import DeduplicationConflict, InvalidOptions
from lane_pg.types import ALL_STATES, JobRow, JobSpec, QueueDemand
from tests.helpers import Clock, events


@pytest.fixture
def key(queue_name: str) -> str:
    """The test's own id: the PostgreSQL backend, and so its unique locks, are shared."""
    return f"Report:{queue_name}"


def unique(key: str, token: str | None, ttl_ms: int = 10_000) -> dict[str, Any]:
    document: dict[str, Any] = {"id": key, "ttl_ms": ttl_ms, "kind": "unique"}
    if token is not None:
        document["token"] = token
    return {"deduplication": document}


def locks(backend: JobQueueBackend) -> Dedup:
    assert isinstance(backend.dedup, Dedup)
    return backend.dedup


async def rows(backend: JobQueueBackend, queue: str) -> list[JobRow]:
    return list((await backend.list_jobs(queue, ALL_STATES, limit=100)).items)


async def fail_for_good(backend: JobQueueBackend, queue: str, clock: Clock, at: float) -> JobRow:
    [job] = await backend.claim_jobs("w", [QueueDemand(queue, 1)], 30, now=clock.at(at))
    assert job.lock_token is not None
    await backend.fail_job(queue, job.id, job.lock_token, "boom", now=clock.at(at))
    failed = await backend.get_job(queue, job.id)
    assert failed is not None and failed.state == "failed"
    return failed


async def test_one_unique_lock_per_connection_across_queues_UNIQ_1(
    backend: JobQueueBackend, queue_name: str, queue_b: str, clock: Clock, key: str
) -> None:
    first = await backend.add_job(queue_name, "r", 1, unique(key, "a"), now=clock.at())
    other = await backend.add_job(queue_b, "r", 2, unique(key, "b"), now=clock.at(1))
    # Suppressed: the add answers the lock's job, of the other queue; nothing is stored.
    assert (other.queue, other.id, other.data) == (queue_name, first.id, 1)
    assert await rows(backend, queue_b) == []
    dedup_events = [e for e in await events(backend, queue_name) if e.job_id == first.id]
    assert [e.event for e in dedup_events][-2:] == ["debounced", "deduplicated"]
    # The lock is found under the queue of its job.
    assert await backend.get_deduplication_job_id(queue_name, key, now=clock.at(1)) == first.id
    assert await backend.get_deduplication_job_id(queue_b, key, now=clock.at(1)) is None
    # Once it expired, another queue's push takes it.
    taken = await backend.add_job(queue_b, "r", 3, unique(key, "c"), now=clock.at(11))
    assert taken.queue == queue_b and taken.data == 3
    assert await backend.get_deduplication_job_id(queue_b, key, now=clock.at(12)) == taken.id
    again = await backend.add_job(queue_name, "r", 4, unique(key, "d"), now=clock.at(12))
    assert again.id == taken.id


async def test_queue_scoped_ids_share_a_queue_with_unique_ones_only_DEDUP_1_UNIQ_1(
    backend: JobQueueBackend, queue_name: str, queue_b: str, clock: Clock, key: str
) -> None:
    """A plain deduplication id stays per queue: another queue's unique lock on the same
    text does not hold it back; in the lock's own queue the two meet, as before."""
    lock = await backend.add_job(queue_name, "r", 1, unique(key, "a"), now=clock.at())
    plain = {"deduplication": {"id": key}}
    elsewhere = await backend.add_job(queue_b, "r", 2, plain, now=clock.at(1))
    assert elsewhere.queue == queue_b and elsewhere.id != lock.id
    here = await backend.add_job(queue_name, "r", 3, plain, now=clock.at(1))
    assert here.id == lock.id
    # And a plain owner of an id does not block a unique push of it from another queue.
    lock_b = await backend.add_job(queue_b, "r", 4, unique(f"{key}:b", "b"), now=clock.at(2))
    await backend.add_job(
        queue_name, "r", 5, {"deduplication": {"id": f"{key}:b"}}, now=clock.at(2)
    )
    assert (
        await backend.add_job(queue_name, "r", 6, unique(f"{key}:b", "c"), now=clock.at(3))
    ).id == lock_b.id


async def test_a_reservation_is_one_lock_per_connection_TX_10_UNIQ_1(
    backend: JobQueueBackend, queue_name: str, queue_b: str, clock: Clock, key: str
) -> None:
    lock = locks(backend)
    assert await lock.reserve_deduplication_key(queue_name, key, "t1", 10, now=clock.at())
    assert not await lock.reserve_deduplication_key(queue_b, key, "t2", 10, now=clock.at(1))
    assert await lock.reserve_deduplication_key(queue_b, key, "t1", 10, now=clock.at(1))
    with pytest.raises(DeduplicationConflict):
        await backend.add_job(queue_b, "r", "other", unique(key, "t2"), now=clock.at(2))
    # The reserved push lands where it was routed, keeping the reservation's expiry.
    mine = await backend.add_job(queue_b, "r", "mine", unique(key, "t1"), now=clock.at(3))
    assert mine.queue == queue_b
    assert await backend.get_deduplication_job_id(queue_b, key, now=clock.at(4)) == mine.id
    assert not await lock.reserve_deduplication_key(queue_name, key, "t3", 10, now=clock.at(9))
    assert await lock.reserve_deduplication_key(queue_name, key, "t3", 10, now=clock.at(10))
    assert await lock.release_deduplication_key(queue_name, key, "t3") is True


async def test_a_bulk_add_of_unique_ids_is_one_lock_per_connection_UNIQ_1_DEDUP_20(
    backend: JobQueueBackend, queue_name: str, queue_b: str, clock: Clock, key: str
) -> None:
    held = await backend.add_job(queue_name, "r", 0, unique(key, "a"), now=clock.at())
    stored = await backend.add_jobs(
        queue_b,
        [
            JobSpec("r", 1, unique(key, "b")),
            JobSpec("r", 2, unique(f"{key}:2", "c")),
            JobSpec("r", 3, unique(f"{key}:2", "d")),
        ],
        now=clock.at(1),
    )
    assert stored[0].id == held.id
    assert stored[1].queue == queue_b and stored[2].id == stored[1].id
    assert [job.data for job in await rows(backend, queue_b)] == [2]


@pytest.mark.parametrize(
    "document",
    [
        {"id": "x", "kind": "unique"},
        {"id": "x", "kind": "unique", "ttl_ms": 5, "replace_delayed": True},
        {"id": "x", "kind": "unique", "ttl_ms": 5, "keep_last_if_active": True},
        {"id": "x", "kind": "lock", "ttl_ms": 5},
        {"id": "x", "kind": 1, "ttl_ms": 5},
    ],
)
async def test_a_bad_unique_document_writes_nothing_UNIQ_15(
    backend: JobQueueBackend, queue_name: str, document: dict[str, Any]
) -> None:
    with pytest.raises(InvalidOptions, match="kind"):
        await backend.add_job(queue_name, "r", 1, {"deduplication": document})
    assert await rows(backend, queue_name) == []


async def test_retry_neither_takes_nor_checks_a_live_lock_A9(
    backend: JobQueueBackend, queue_name: str, clock: Clock, key: str
) -> None:
    job = await backend.add_job(queue_name, "r", 1, unique(key, "a"), now=clock.at())
    await fail_for_good(backend, queue_name, clock, 1)
    # UNIQ-3: the lock outlives the failure.
    assert (
        await backend.add_job(queue_name, "r", 2, unique(key, "b"), now=clock.at(2))
    ).id == job.id
    retried = await backend.retry_job(queue_name, job.id, now=clock.at(3))
    assert retried.state == "waiting"
    assert "token" not in retried.options["deduplication"]  # no owner token any more
    assert retried.options["deduplication"]["kind"] == "unique"
    # The lock is the same: owned by the job, with its first expiry, still suppressing.
    assert await backend.get_deduplication_job_id(queue_name, key, now=clock.at(9.9)) == job.id
    assert (
        await backend.add_job(queue_name, "r", 3, unique(key, "c"), now=clock.at(4))
    ).id == job.id
    assert await locks(backend).release_deduplication_key(queue_name, key, "a") is True
    assert await backend.get_deduplication_job_id(queue_name, key, now=clock.at(5)) is None


async def test_retry_after_expiry_leaves_a_later_owner_alone_A9_UNIQ_7(
    backend: JobQueueBackend, queue_name: str, clock: Clock, key: str
) -> None:
    """The retried job neither takes the lock a later push holds (no DEDUP-13 conflict),
    nor frees it by anything it does afterwards: run, fail again, retried, removed."""
    job = await backend.add_job(queue_name, "r", 1, unique(key, "a"), now=clock.at())
    await fail_for_good(backend, queue_name, clock, 1)
    later = await backend.add_job(queue_name, "r", 2, unique(key, "b"), now=clock.at(11))
    assert later.id != job.id
    retried = await backend.retry_job(queue_name, job.id, now=clock.at(12))
    assert retried.state == "waiting"
    assert await backend.get_deduplication_job_id(queue_name, key, now=clock.at(12)) == later.id
    claimed = await backend.claim_jobs("w", [QueueDemand(queue_name, 2)], 30, now=clock.at(13))
    [mine] = [c for c in claimed if c.id == job.id]
    assert mine.lock_token is not None
    await backend.fail_job(queue_name, job.id, mine.lock_token, "again", now=clock.at(13))
    await backend.retry_job(queue_name, job.id, now=clock.at(14))
    assert await backend.remove_job(queue_name, job.id, now=clock.at(15))
    assert await backend.get_deduplication_job_id(queue_name, key, now=clock.at(16)) == later.id
    suppressed = await backend.add_job(queue_name, "r", 3, unique(key, "c"), now=clock.at(16))
    assert suppressed.id == later.id


async def test_retry_of_a_plain_deduplicated_job_still_reclaims_DEDUP_13(
    backend: JobQueueBackend, queue_name: str, clock: Clock, key: str
) -> None:
    """Seed 000's rule for kind 'dedup', token or not: the id is taken back."""
    job = await backend.add_job(
        queue_name, "r", 1, {"deduplication": {"id": key, "ttl_ms": 5000, "token": "a"}},
        now=clock.at(),
    )  # fmt: skip
    await fail_for_good(backend, queue_name, clock, 1)
    retried = await backend.retry_job(queue_name, job.id, now=clock.at(10))
    assert retried.options["deduplication"]["token"] == "a"
    assert await backend.get_deduplication_job_id(queue_name, key, now=clock.at(14)) == job.id
