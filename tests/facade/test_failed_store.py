"""The failed-job store contract (FAIL-1, FAIL-6) on every store: the memory and database
stores keep and page records alike; the null store keeps nothing.

The database store runs on the session's shared PostgreSQL database, whose
``lane.failed_jobs`` other tests write too: records here carry the test's own queue name
and times far in the past, and reads filter by that queue.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import pytest

from lane_pg.backend.failed import (
    FailedJobFilter,
    FailedJobRecord,
    FailedJobStore,
    MemoryFailedJobStore,
    NullFailedJobStore,
    walk,
)
from lane_pg.errors import InvalidOptions
from lane_pg.postgres.backend import PostgresBackend

KEEPING = ["memory", "database"]
EPOCH = datetime(2001, 1, 1, tzinfo=UTC)


@pytest.fixture(params=KEEPING)
def store(request: pytest.FixtureRequest) -> FailedJobStore:
    """A sync fixture: an async one cannot set up the session's backend on demand."""
    if request.param == "memory":
        return MemoryFailedJobStore()
    from lane_pg.postgres.failed import DatabaseFailedJobStore

    backend: PostgresBackend = request.getfixturevalue("pg_backend")
    return DatabaseFailedJobStore(backend)


def record(
    queue: str,
    minutes: int,
    *,
    job_name: str = "Poison",
    connection: str = "pg",
    record_id: str | None = None,
) -> FailedJobRecord:
    job_id = str(minutes + 1)
    return FailedJobRecord(
        id=record_id or str(uuid.uuid4()),
        connection=connection,
        queue=queue,
        job_name=job_name,
        envelope={
            "queue": queue,
            "id": job_id,
            "name": job_name,
            "data": {"n": minutes},
            "options": {"attempts": 2, "meta": {"connection": connection, "hidden": "h"}},
        },
        exception=f"Traceback (most recent call last):\nValueError: boom {minutes}",
        failed_at=EPOCH + timedelta(minutes=minutes),
    )


async def test_log_find_forget_FAIL_1(store: FailedJobStore, queue_name: str) -> None:
    kept = record(queue_name, 1)
    await store.log(kept)
    await store.log(kept)  # a repeated log keeps one record
    found = await store.find(kept.id)
    assert found == kept
    assert found.job_id == "2"
    assert found.exception_summary == "ValueError: boom 1"
    assert found.envelope["options"] == {"attempts": 2, "meta": {"connection": "pg", "hidden": "h"}}
    assert await store.count(FailedJobFilter(queue=queue_name)) == 1
    assert kept.id in await store.ids()
    assert kept.id in [r.id for r in await store.all()]

    assert await store.forget(kept.id) is True
    assert await store.forget(kept.id) is False
    assert await store.find(kept.id) is None
    assert await store.find(str(uuid.uuid4())) is None


async def test_pages_in_failed_at_then_id_order_FAIL_1(
    store: FailedJobStore, queue_name: str
) -> None:
    same_minute = sorted((str(uuid.uuid4()) for _ in range(3)), key=uuid.UUID)
    records = [record(queue_name, m) for m in (5, 1, 3)]
    records += [record(queue_name, 2, record_id=i) for i in reversed(same_minute)]
    for each in records:
        await store.log(each)
    mine = FailedJobFilter(queue=queue_name)
    expected = sorted(records, key=lambda r: (r.failed_at, uuid.UUID(r.id)))

    first = await store.page(mine, limit=4)
    assert first == expected[:4]
    rest = await store.page(mine, after=(first[-1].failed_at, first[-1].id), limit=4)
    assert rest == expected[4:]
    assert [r async for r in walk(store, mine, page=2)] == expected


async def test_filters_by_queue_job_name_and_before_FAIL_1(
    store: FailedJobStore, queue_name: str, queue_b: str
) -> None:
    await store.log(record(queue_name, 1, job_name="A"))
    await store.log(record(queue_name, 2, job_name="B"))
    await store.log(record(queue_b, 3, job_name="A"))
    assert await store.count(FailedJobFilter(queue=queue_name)) == 2
    named = await store.page(FailedJobFilter(queue=queue_name, job_name="A"))
    assert [(r.queue, r.job_name) for r in named] == [(queue_name, "A")]
    early = FailedJobFilter(queue=queue_name, before=EPOCH + timedelta(minutes=2))
    assert [r.job_name for r in await store.page(early)] == ["A"]
    assert await store.count(early) == 1


async def test_flush_before_keeps_newer_records_FAIL_6(
    store: FailedJobStore, queue_name: str
) -> None:
    old = record(queue_name, 1)
    newer = record(queue_name, 60 * 24 * 30)
    await store.log(old)
    await store.log(newer)
    # Only records older than the cut-off go, the test's ancient one among them.
    assert await store.flush(EPOCH + timedelta(minutes=2)) >= 1
    assert await store.find(old.id) is None
    assert await store.find(newer.id) == newer


async def test_flush_without_cutoff_removes_all_FAIL_6(
    store: FailedJobStore, queue_name: str
) -> None:
    await store.log(record(queue_name, 1))
    await store.log(record(queue_name, 2))
    assert await store.flush() >= 2
    assert await store.count() == 0


async def test_bad_input_is_refused_FAIL_1(store: FailedJobStore, queue_name: str) -> None:
    with pytest.raises(InvalidOptions, match="UUID"):
        await store.find("not-a-uuid")
    with pytest.raises(InvalidOptions, match="UUID"):
        await store.forget("42")
    with pytest.raises(InvalidOptions, match="page holds"):
        await store.page(limit=0)
    with pytest.raises(TypeError):
        await store.log({"id": "x"})  # type: ignore[arg-type]
    assert await store.count(FailedJobFilter(queue=queue_name)) == 0


async def test_null_store_discards_every_record_FAIL_1(queue_name: str) -> None:
    store = NullFailedJobStore()
    assert isinstance(store, FailedJobStore)
    kept = record(queue_name, 1)
    await store.log(kept)
    assert await store.find(kept.id) is None
    assert await store.all() == []
    assert await store.ids() == []
    assert await store.count() == 0
    assert await store.forget(kept.id) is False
    assert await store.flush() == 0
    with pytest.raises(InvalidOptions):
        await store.find("nope")


async def test_database_store_refuses_a_record_without_names_FAIL_1(
    pg_backend: PostgresBackend, queue_name: str
) -> None:
    from lane_pg.postgres.failed import DatabaseFailedJobStore

    store = DatabaseFailedJobStore(pg_backend)
    nameless = record(queue_name, 1, connection="")
    with pytest.raises(InvalidOptions, match="needs a connection"):
        await store.log(nameless)
    assert await store.find(nameless.id) is None
    with pytest.raises(TypeError):
        DatabaseFailedJobStore(MemoryFailedJobStore())  # type: ignore[arg-type]
