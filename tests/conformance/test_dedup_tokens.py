"""Owner tokens on deduplication ids (the ``dedup`` handle, migration 0015): the
owner-scoped release (UNIQ-7) and job-less reservations (TX-10), on every backend. Times
come from ``clock`` (``now=``), never from sleeping."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from lane_pg.backend import Dedup, JobQueueBackend
from lane_pg.errors import DeduplicationConflict, InvalidOptions
from lane_pg.types import ALL_STATES, JobRow, JobSpec, QueueDemand
from tests.helpers import Clock

KEY = "SendReport:acct_42"
"""An id for inputs that are refused before anything is written."""


@pytest.fixture
def key(queue_name: str) -> str:
    """The test's own unique id: unique locks are per connection (UNIQ-1), and the
    PostgreSQL backend is shared by every test."""
    return f"SendReport:{queue_name}"


def locks(backend: JobQueueBackend) -> Dedup:
    assert isinstance(backend.dedup, Dedup)
    return backend.dedup


def unique(token: str, dedup_id: str, ttl_ms: int = 300_000) -> dict[str, Any]:
    return {"deduplication": {"id": dedup_id, "ttl_ms": ttl_ms, "token": token, "kind": "unique"}}


async def job_count(backend: JobQueueBackend, queue: str) -> int:
    return (await backend.list_jobs(queue, ALL_STATES, limit=100)).total


async def test_release_frees_the_id_only_for_its_token_UNIQ_7(
    backend: JobQueueBackend, queue_name: str, clock: Clock, key: str
) -> None:
    first = await backend.add_job(queue_name, "r", 1, unique("t1", key), now=clock.at())
    assert await locks(backend).release_deduplication_key(queue_name, key, "other") is False
    assert await backend.get_deduplication_job_id(queue_name, key, now=clock.at(1)) == first.id
    assert await locks(backend).release_deduplication_key(queue_name, key, "t1") is True
    assert await backend.get_deduplication_job_id(queue_name, key, now=clock.at(1)) is None
    assert (await backend.get_job(queue_name, first.id)).state == "waiting"  # job untouched
    assert await locks(backend).release_deduplication_key(queue_name, key, "t1") is False


async def test_an_old_token_never_frees_a_newer_owner_UNIQ_7(
    backend: JobQueueBackend, queue_name: str, clock: Clock, key: str
) -> None:
    """The lock expires, a newer push takes it; the old job's release leaves it alone
    (Laravel PR #59567: a retry released a lock it did not own)."""
    await backend.add_job(queue_name, "r", 1, unique("old", key, ttl_ms=1000), now=clock.at())
    newer = await backend.add_job(queue_name, "r", 2, unique("new", key), now=clock.at(2))
    assert newer.data == 2
    assert await locks(backend).release_deduplication_key(queue_name, key, "old") is False
    assert await backend.get_deduplication_job_id(queue_name, key, now=clock.at(3)) == newer.id


async def test_an_owner_without_a_token_is_never_released_by_token_UNIQ_7(
    backend: JobQueueBackend, queue_name: str, clock: Clock, key: str
) -> None:
    plain = await backend.add_job(
        queue_name, "r", 1, {"deduplication": {"id": key, "ttl_ms": 60_000}}, now=clock.at()
    )
    assert await locks(backend).release_deduplication_key(queue_name, key, "anything") is False
    assert await backend.get_deduplication_job_id(queue_name, key, now=clock.at(1)) == plain.id


async def test_the_token_survives_replace_delayed_UNIQ_7(
    backend: JobQueueBackend, queue_name: str, clock: Clock, key: str
) -> None:
    def replacing(token: str) -> dict[str, Any]:
        return {
            "delay_ms": 60_000,
            "deduplication": {"id": key, "replace_delayed": True, "token": token},
        }

    await backend.add_job(queue_name, "d", 1, replacing("a"), now=clock.at())
    second = await backend.add_job(queue_name, "d", 2, replacing("b"), now=clock.at(1))
    assert await locks(backend).release_deduplication_key(queue_name, key, "a") is False
    assert await locks(backend).release_deduplication_key(queue_name, key, "b") is True
    assert (await backend.get_job(queue_name, second.id)).state == "delayed"


async def test_a_reservation_blocks_and_its_token_takes_it_over_TX_10(
    backend: JobQueueBackend, queue_name: str, clock: Clock, key: str
) -> None:
    lock = locks(backend)
    assert await lock.reserve_deduplication_key(queue_name, key, "t1", 10, now=clock.at())
    assert await lock.reserve_deduplication_key(queue_name, key, "t1", 10, now=clock.at(1))
    assert not await lock.reserve_deduplication_key(queue_name, key, "t2", 10, now=clock.at(1))
    # No job yet: the id reads as unowned, and the reservation stays.
    assert await backend.get_deduplication_job_id(queue_name, key, now=clock.at(1)) is None
    with pytest.raises(DeduplicationConflict):
        await backend.add_job(queue_name, "r", "other", unique("t2", key), now=clock.at(2))
    assert await job_count(backend, queue_name) == 0
    mine = await backend.add_job(queue_name, "r", "mine", unique("t1", key), now=clock.at(3))
    assert mine.data == "mine" and mine.deduplication_id == key
    assert await backend.get_deduplication_job_id(queue_name, key, now=clock.at(4)) == mine.id
    # The reservation's expiry was kept (10 s from the reservation, not 300 s from the add).
    later = await backend.add_job(queue_name, "r", "later", unique("t3", key), now=clock.at(11))
    assert later.id != mine.id


async def test_a_reservation_expires_and_can_be_released_TX_10(
    backend: JobQueueBackend, queue_name: str, clock: Clock, key: str
) -> None:
    lock = locks(backend)
    assert await lock.reserve_deduplication_key(queue_name, key, "t1", 5, now=clock.at())
    assert await lock.reserve_deduplication_key(queue_name, key, "t2", 5, now=clock.at(6))
    assert await lock.release_deduplication_key(queue_name, key, "t1") is False
    assert await lock.release_deduplication_key(queue_name, key, "t2") is True
    taken = await backend.add_job(queue_name, "r", 1, unique("t3", key), now=clock.at(7))
    assert await backend.get_deduplication_job_id(queue_name, key, now=clock.at(7)) == taken.id
    assert not await lock.reserve_deduplication_key(queue_name, key, "t4", 5, now=clock.at(8))


async def test_a_reservation_is_swept_when_it_expires_TX_10(
    backend: JobQueueBackend, queue_name: str, clock: Clock, key: str
) -> None:
    lock = locks(backend)
    assert await lock.reserve_deduplication_key(queue_name, key, "t1", 5, now=clock.at())
    await backend.expire_dedup_owners(now=clock.at(4))
    assert not await lock.reserve_deduplication_key(queue_name, key, "t2", 5, now=clock.at(4))
    await backend.expire_dedup_owners(now=clock.at(6))
    # Swept: the expired row would still answer its own token's release.
    assert await lock.release_deduplication_key(queue_name, key, "t1") is False


async def test_retry_cannot_reclaim_a_reserved_id_TX_10(
    backend: JobQueueBackend, queue_name: str, clock: Clock, key: str
) -> None:
    failed = await backend.add_job(
        queue_name, "r", 1, {"deduplication": {"id": key, "ttl_ms": 1000}}, now=clock.at()
    )
    [claimed] = await backend.claim_jobs("w", [QueueDemand(queue_name, 1)], 30, now=clock.at())
    assert claimed.lock_token is not None
    await backend.fail_job(queue_name, failed.id, claimed.lock_token, "boom", now=clock.at(1))
    assert await locks(backend).reserve_deduplication_key(
        queue_name, key, "t1", 60, now=clock.at(2)
    )
    with pytest.raises(DeduplicationConflict):
        await backend.retry_job(queue_name, failed.id, now=clock.at(3))
    job: JobRow = await backend.get_job(queue_name, failed.id)
    assert job.state == "failed"


@pytest.mark.parametrize(
    ("dedup_id", "token", "ttl"),
    [("", "t", 5), (KEY, "", 5), ("x" * 256, "t", 5), (KEY, "t" * 256, 5), (KEY, "t", 0)],
)
async def test_bad_reservations_write_nothing_TX_10(
    backend: JobQueueBackend,
    queue_name: str,
    clock: Clock,
    dedup_id: str,
    token: str,
    ttl: float,
) -> None:
    with pytest.raises(InvalidOptions):
        await locks(backend).reserve_deduplication_key(
            queue_name, dedup_id, token, timedelta(seconds=ttl), now=clock.at()
        )
    assert await backend.get_deduplication_job_id(queue_name, KEY, now=clock.at()) is None


@pytest.mark.parametrize("token", ["", "t" * 256, 7])
async def test_bad_tokens_in_the_document_are_refused_UNIQ_7(
    backend: JobQueueBackend, queue_name: str, token: object
) -> None:
    with pytest.raises(InvalidOptions):
        await backend.add_job(queue_name, "r", 1, {"deduplication": {"id": KEY, "token": token}})
    assert await job_count(backend, queue_name) == 0


async def test_a_bulk_add_meeting_a_reservation_writes_nothing_TX_10(
    backend: JobQueueBackend, queue_name: str, clock: Clock, key: str
) -> None:
    assert await locks(backend).reserve_deduplication_key(queue_name, key, "t1", 60, now=clock.at())
    specs = [
        JobSpec("r", 1, {}),
        JobSpec("r", 2, unique("t2", key)),
    ]
    with pytest.raises(DeduplicationConflict):
        await backend.add_jobs(queue_name, specs, now=clock.at(1))
    assert await job_count(backend, queue_name) == 0
    [stored] = await backend.add_jobs(
        queue_name, [JobSpec("r", 3, unique("t1", key))], now=clock.at(2)
    )
    assert await backend.get_deduplication_job_id(queue_name, key, now=clock.at(3)) == stored.id
