"""The maintenance leader rebuilds a bloated index (W6): B-tree pages emptied by a wave of
jobs are never given back by VACUUM, so an index sized for a past wave keeps its size until
``REINDEX INDEX CONCURRENTLY`` rebuilds it from the live rows.

Each test uses a fresh database, so the sizes it reads are its own.
"""

from __future__ import annotations

import asyncio

import asyncpg
import pytest

from lane_pg.errors import InvalidOptions, UpkeepDeferred
from lane_pg.postgres import space
from lane_pg.postgres.backend import PostgresBackend
from lane_pg.types import JobSpec, QueueDemand
from lane_pg.worker import WorkerConfig
from lane_pg.worker.maintenance import reindex_pass


async def _wave(dsn: str, queue: str, n: int, *, remove: bool = True) -> None:
    """``n`` jobs added, then (``remove``) deleted and vacuumed away: the indexes keep their
    pages. The connection closes, so the table's statistics count what it did."""
    conn = await asyncpg.connect(dsn)
    try:
        await conn.execute(
            "SELECT count(*) FROM lane.add_jobs($1, array_fill('n'::text, ARRAY[$2::int]),"
            " array_fill('1'::jsonb, ARRAY[$2::int]), array_fill('{}'::jsonb, ARRAY[$2::int]))",
            queue,
            n,
        )
        if remove:
            await conn.execute("DELETE FROM lane.jobs WHERE queue = $1", queue)
            await conn.execute("VACUUM lane.jobs")
    finally:
        await conn.close()


def _size(sizes: list, index: str) -> int:  # type: ignore[type-arg]
    return next(s.bytes for s in sizes if s.index == index)


async def test_a_bloated_index_is_rebuilt_and_the_queue_still_works(
    fresh: tuple[str, PostgresBackend],
) -> None:
    dsn, backend = fresh
    assert backend.space is not None
    await _wave(dsn, "wave", 30_000)
    await backend.add_jobs("wave", [JobSpec("n", i) for i in range(5)])
    before = await backend.index_sizes()
    assert _size(before, "jobs_waiting_idx") > 512 * 1024  # sized for 30,000 rows

    rebuilt = await reindex_pass(backend, 64 * 1024)

    after = await backend.index_sizes()
    assert any("jobs_waiting_idx" in line for line in rebuilt), rebuilt
    assert _size(after, "jobs_waiting_idx") < _size(before, "jobs_waiting_idx") / 4
    assert {s.index for s in after} == {s.index for s in before}  # all valid, none left over
    # The rebuilt indexes serve the queue: the five jobs are claimed in order, by id.
    claimed = await backend.claim_jobs("w", [QueueDemand("wave", 10)], 30)
    assert [job.data for job in claimed] == [0, 1, 2, 3, 4]
    assert await backend.get_job("wave", claimed[0].id) is not None
    # Nothing bloated is left: a second pass rebuilds nothing.
    assert await reindex_pass(backend, 64 * 1024) == []


async def test_an_index_of_the_right_size_is_left_alone(
    fresh: tuple[str, PostgresBackend],
) -> None:
    dsn, backend = fresh
    await _wave(dsn, "steady", 2_000, remove=False)
    sizes = await backend.index_sizes()
    assert _size(sizes, "jobs_waiting_idx") > 64 * 1024  # above the floor: judged by rows
    assert await reindex_pass(backend, 64 * 1024) == []


async def test_a_held_table_lock_makes_reindex_give_up_instead_of_waiting(
    fresh: tuple[str, PostgresBackend], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A session that keeps a transaction open on lane.jobs (a report's REPEATABLE READ
    read) makes a rebuild fail after its lock timeout (5 s; 0.5 s here), leaving an
    invalid copy; the next pass drops that copy under the same timeout instead of waiting
    for the session to end, which froze the leader's maintenance for as long as it stayed open."""
    dsn, backend = fresh
    assert backend.space is not None
    monkeypatch.setattr(space, "REINDEX_LOCK_TIMEOUT_MS", 500)
    monkeypatch.setattr(space, "REINDEX_DEFER_AFTER_S", 3600.0)  # the rebuild is tried
    await _wave(dsn, "held", 100, remove=False)
    holder = await asyncpg.connect(dsn)
    try:
        await holder.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
        await holder.fetchval("SELECT count(*) FROM lane.jobs")
        for _ in range(2):  # the first leaves a _ccnew copy, the second must drop it
            with pytest.raises(Exception, match="lock timeout"):
                await asyncio.wait_for(backend.space.reindex("jobs_waiting_idx"), 30)
    finally:
        await holder.close()
    await backend.space.reindex("jobs_waiting_idx")  # the session ended: it goes through
    names = {s.index for s in await backend.index_sizes()}
    assert not any("ccnew" in name for name in names), names


async def test_an_old_snapshot_puts_the_rebuild_off_and_leaves_nothing_behind(
    fresh: tuple[str, PostgresBackend], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A transaction holding a snapshot for longer than the threshold (5 s; 0 here): the
    rebuild is not started, so no invalid copy is left and nothing waits; the pass says
    why; once the transaction ends the rebuild goes through."""
    dsn, backend = fresh
    assert backend.space is not None
    monkeypatch.setattr(space, "REINDEX_DEFER_AFTER_S", 0.0)
    await _wave(dsn, "held", 30_000)
    await backend.add_jobs("held", [JobSpec("n", i) for i in range(5)])
    holder = await asyncpg.connect(dsn)
    try:
        await holder.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
        await holder.fetchval("SELECT count(*) FROM lane.jobs")
        pid = await holder.fetchval("SELECT pg_backend_pid()")
        with pytest.raises(UpkeepDeferred, match=f"session {pid} has held a snapshot"):
            await backend.space.reindex("jobs_waiting_idx")
        notes = await reindex_pass(backend, 64 * 1024)
        assert len(notes) == 1 and f"session {pid}" in notes[0], notes
        indexes = await holder.fetchval(
            "SELECT count(*) FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid"
            " WHERE i.relname LIKE '%ccnew%'"
        )
        assert indexes == 0
    finally:
        await holder.close()
    rebuilt = await reindex_pass(backend, 64 * 1024)
    assert any("jobs_waiting_idx" in line for line in rebuilt), rebuilt


async def test_reindex_refuses_an_unknown_index(fresh: tuple[str, PostgresBackend]) -> None:
    _, backend = fresh
    with pytest.raises(InvalidOptions):
        await backend.reindex("no_such_index")


def test_reindex_settings_are_checked() -> None:
    assert WorkerConfig(reindex_min_bytes=None).reindex_min_bytes is None
    with pytest.raises(InvalidOptions):
        WorkerConfig(reindex_min_bytes=-1)
    with pytest.raises(InvalidOptions):
        WorkerConfig(reindex_interval=0)
