"""Maintenance leadership as a lease (``Leader``, the backend's ``leader`` handle): one holder
at a time, renewed by its holder, taken over once it lapsed, given up by resigning
(STALL-8: a leader that freezes must not stop recovery). Each test uses a role of its own:
the PostgreSQL test database is shared."""

from __future__ import annotations

import asyncio
import os

import pytest

from lane_pg.backend import JobQueueBackend, Leader
from lane_pg.errors import InvalidOptions, ValidationError
from lane_pg.types import JSON, JobRow, Lane, WorkerInfo
from lane_pg.worker import JobContext, Worker, WorkerConfig
from lane_pg.worker.maintenance import (
    MAINTENANCE_ROLE,
    Leadership,
    MaintenanceScheduler,
    PeriodicTask,
    maintenance_tasks,
)
from tests.helpers import Clock, eventually


def _leader(backend: JobQueueBackend) -> Leader:
    assert isinstance(backend.leader, Leader)
    return backend.leader


async def test_one_holder_at_a_time_renewed_until_it_lapses_STALL_8(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    leader, role = _leader(backend), queue_name
    assert await leader.acquire_leadership(role, "a", 1.0, now=clock.at(0))
    assert not await leader.acquire_leadership(role, "b", 1.0, now=clock.at(0.5))
    # The holder renews: its lease now runs to 1.9 s, so b is refused at 1.5 s.
    assert await leader.acquire_leadership(role, "a", 1.0, now=clock.at(0.9))
    assert not await leader.acquire_leadership(role, "b", 1.0, now=clock.at(1.5))
    assert not await leader.acquire_leadership(role, "b", 1.0, now=clock.at(1.9))
    # a stopped renewing (frozen, dead): the lease lapses and b takes the role over.
    assert await leader.acquire_leadership(role, "b", 1.0, now=clock.at(1.901))
    assert not await leader.acquire_leadership(role, "a", 1.0, now=clock.at(2.0))
    assert await leader.acquire_leadership(role, "b", 1.0, now=clock.at(2.5))


async def test_a_lapsed_holder_that_asks_first_keeps_the_role_STALL_8(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    """Nobody took the role over while the holder was away: its next ask renews it."""
    leader, role = _leader(backend), queue_name
    assert await leader.acquire_leadership(role, "a", 1.0, now=clock.at(0))
    assert await leader.acquire_leadership(role, "a", 1.0, now=clock.at(5))
    assert not await leader.acquire_leadership(role, "b", 1.0, now=clock.at(5.5))


async def test_resigning_frees_the_role_at_once_STALL_8(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    leader, role = _leader(backend), queue_name
    assert not await leader.resign_leadership(role, "a")  # holds nothing yet
    assert await leader.acquire_leadership(role, "a", 60, now=clock.at(0))
    assert not await leader.resign_leadership(role, "b")  # not b's to give up
    assert not await leader.acquire_leadership(role, "b", 60, now=clock.at(1))
    assert await leader.resign_leadership(role, "a")
    assert not await leader.resign_leadership(role, "a")
    assert await leader.acquire_leadership(role, "b", 60, now=clock.at(1))
    # A resigned holder asks again like anyone else.
    assert not await leader.acquire_leadership(role, "a", 60, now=clock.at(2))


async def test_roles_are_independent(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    leader = _leader(backend)
    assert await leader.acquire_leadership(f"{queue_name}.x", "a", 60, now=clock.at(0))
    assert await leader.acquire_leadership(f"{queue_name}.y", "b", 60, now=clock.at(0))
    assert not await leader.acquire_leadership(f"{queue_name}.x", "b", 60, now=clock.at(0))


@pytest.mark.parametrize("lease", [0, -1])
async def test_a_lease_must_be_positive(
    backend: JobQueueBackend, queue_name: str, clock: Clock, lease: float
) -> None:
    leader = _leader(backend)
    with pytest.raises(InvalidOptions):
        await leader.acquire_leadership(queue_name, "a", lease, now=clock.at(0))
    assert await leader.acquire_leadership(queue_name, "b", 60, now=clock.at(0))


@pytest.mark.parametrize(("role", "holder"), [("", "a"), ("r", "")])
async def test_role_and_holder_must_be_named(
    backend: JobQueueBackend, queue_name: str, role: str, holder: str
) -> None:
    with pytest.raises(ValidationError):
        await _leader(backend).acquire_leadership(role and queue_name, holder, 60)


async def test_the_scheduler_runs_its_tasks_only_while_leading_STALL_8(
    backend: JobQueueBackend, queue_name: str
) -> None:
    """A PeriodicTask plugged into the scheduler runs on the leader, and stops when another
    holder has the role (here: a second candidate that holds it first)."""
    leader, role_holder = _leader(backend), f"{queue_name}-other"
    runs: list[str] = []

    async def upkeep() -> str:
        runs.append("ran")
        return "one pass"

    task = PeriodicTask("test upkeep", 0.01, upkeep)
    ours = Leadership(_RoleLeader(leader, queue_name), f"{queue_name}-us", 0.3)
    scheduler = MaintenanceScheduler([task], ours)
    assert await leader.acquire_leadership(queue_name, role_holder, 60)  # taken already
    running = [asyncio.create_task(ours.run()), asyncio.create_task(scheduler.run())]
    try:
        await asyncio.sleep(0)
        assert not ours.leading()
        assert runs == []
        assert await leader.resign_leadership(queue_name, role_holder)
        await eventually(lambda: len(runs) >= 3, timeout=10)
        assert ours.leading()
    finally:
        for job in running:
            job.cancel()
        await asyncio.gather(*running, return_exceptions=True)
    await ours.resign()
    assert await leader.acquire_leadership(queue_name, role_holder, 60)  # resigned


class _RoleLeader:
    """A ``Leader`` that competes for ``role`` whatever role it is asked for, so a test can
    elect within a role of its own instead of the shared ``maintenance`` one."""

    def __init__(self, leader: Leader, role: str) -> None:
        self._leader, self._role = leader, role

    async def acquire_leadership(self, role: str, holder: str, lease: object, **kw: object) -> bool:
        assert role == MAINTENANCE_ROLE
        return await self._leader.acquire_leadership(self._role, holder, lease, **kw)  # type: ignore[arg-type]

    async def resign_leadership(self, role: str, holder: str) -> bool:
        assert role == MAINTENANCE_ROLE
        return await self._leader.resign_leadership(self._role, holder)


async def test_the_worker_lists_todays_upkeep_as_periodic_tasks(
    backend: JobQueueBackend, queue_name: str
) -> None:
    config = WorkerConfig(lanes=(Lane(queue_name),), lease=5, promote_interval=2)
    names = {task.name: task.interval for task in maintenance_tasks(backend, config)}
    expected = {
        "stalled recovery": 1.0,
        "promotion": 2.0,
        "event trimming": 1.0,
        "pruning": 1.0,
        "deduplication expiry": 1.0,
        "metrics compaction": 60.0,
    }
    assert {name: names[name] for name in expected} == expected
    assert ("vacuum" in names) == (type(backend).__name__ == "PostgresBackend")
    assert ("idempotency key expiry" in names) == (type(backend).__name__ == "PostgresBackend")


async def test_two_workers_of_one_backend_elect_one_leader_STALL_8(
    backend: JobQueueBackend, queue_name: str
) -> None:
    async def noop(job: JobRow, ctx: JobContext) -> JSON:
        return None

    leader = _leader(backend)
    workers = [
        Worker(
            backend,
            {"n": noop},
            WorkerConfig(
                worker_id=f"{queue_name}-{n}", lanes=(Lane(queue_name),), poll_interval=0.05
            ),
            leader=_RoleLeader(leader, queue_name),
        )
        for n in range(2)
    ]
    running = [asyncio.create_task(worker.run()) for worker in workers]
    try:
        await eventually(lambda: any(w.leadership.leading() for w in workers), timeout=10)
        leading = [w for w in workers if w.leadership.leading()]
        assert len(leading) == 1
        # The leader stops (and resigns): the other one takes over without waiting a lease.
        leading[0].stop()
        await asyncio.wait_for(running[workers.index(leading[0])], 30)
        other = next(w for w in workers if w is not leading[0])
        await eventually(lambda: other.leadership.leading(), timeout=10)
    finally:
        for worker in workers:
            worker.stop()
        await asyncio.wait_for(asyncio.gather(*running), 30)


# -- the workers' presence (python -m lane_pg workers) -----------------------------------


async def _listed(
    leader: Leader, prefix: str, clock: Clock, at: float, role: str, stale: float = 15
) -> list[WorkerInfo]:
    workers = await leader.list_workers(stale, role, now=clock.at(at))
    return [worker for worker in workers if worker.id.startswith(prefix)]


async def test_heartbeats_list_live_workers_oldest_first(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    leader, role = _leader(backend), queue_name
    a, b = f"{queue_name}-a", f"{queue_name}-b"
    await leader.worker_heartbeat(a, "host-1", 11, ["mail", "sms"], meta={"v": 1}, now=clock.at(0))
    await leader.worker_heartbeat(b, "host-2", 22, [], now=clock.at(1))
    await leader.worker_heartbeat(a, "host-1", 11, ["mail"], meta={"v": 2}, now=clock.at(5))

    first, second = await _listed(leader, queue_name, clock, 6, role)
    assert (first.id, first.hostname, first.pid, first.queues, first.meta) == (
        a,
        "host-1",
        11,
        ("mail",),
        {"v": 2},
    )
    assert (first.started_at, first.heartbeat_at) == (clock.at(0), clock.at(5))
    assert (second.id, second.queues, second.meta, second.leader) == (b, (), {}, False)


async def test_a_silent_worker_drops_out_and_is_deleted_after_an_hour(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    leader, role = _leader(backend), queue_name
    silent, alive = f"{queue_name}-silent", f"{queue_name}-alive"
    await leader.worker_heartbeat(silent, "h", 1, ["q"], now=clock.at(0))
    await leader.worker_heartbeat(alive, "h", 2, ["q"], now=clock.at(10))
    assert [w.id for w in await _listed(leader, queue_name, clock, 16, role)] == [alive]
    assert len(await _listed(leader, queue_name, clock, 16, role, stale=3600)) == 2
    await leader.worker_heartbeat(alive, "h", 2, ["q"], now=clock.at(3601))  # deletes silent
    listed = await _listed(leader, queue_name, clock, 3601, role, stale=86400)
    assert [w.id for w in listed] == [alive]


async def test_the_leader_is_marked_while_its_lease_runs_STALL_8(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    leader, role = _leader(backend), queue_name
    a, b = f"{queue_name}-a", f"{queue_name}-b"
    for worker in (a, b):
        await leader.worker_heartbeat(worker, "h", 1, [], now=clock.at(0))
    assert await leader.acquire_leadership(role, b, 2.0, now=clock.at(0))
    assert [(w.id, w.leader) for w in await _listed(leader, queue_name, clock, 1, role)] == [
        (a, False),
        (b, True),
    ]
    assert not any(w.leader for w in await _listed(leader, queue_name, clock, 3, role))


async def test_a_stopping_worker_leaves_the_list(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    leader, role = _leader(backend), queue_name
    worker = f"{queue_name}-w"
    await leader.worker_heartbeat(worker, "h", 1, [], now=clock.at(0))
    assert await leader.forget_worker(worker) is True
    assert await leader.forget_worker(worker) is False
    assert await _listed(leader, queue_name, clock, 1, role) == []


async def test_bad_presence_input_is_refused_and_changes_nothing(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    leader, role = _leader(backend), queue_name
    with pytest.raises(ValidationError, match="worker id"):
        await leader.worker_heartbeat("", "h", 1, [], now=clock.at(0))
    with pytest.raises(InvalidOptions, match="meta"):
        await leader.worker_heartbeat(
            f"{queue_name}-w",
            "h",
            1,
            [],
            meta=["not", "an", "object"],  # type: ignore[arg-type]
            now=clock.at(0),
        )
    with pytest.raises(InvalidOptions, match="stale_after"):
        await leader.list_workers(0, role, now=clock.at(0))
    assert await _listed(leader, queue_name, clock, 1, role, stale=3600) == []


async def test_a_running_worker_is_listed_until_it_stops(
    backend: JobQueueBackend, queue_name: str
) -> None:
    async def noop(job: JobRow, ctx: JobContext) -> JSON:
        return None

    leader = _leader(backend)
    worker_id = f"{queue_name}-listed"
    worker = Worker(
        backend,
        {"n": noop},
        WorkerConfig(
            worker_id=worker_id, lanes=(Lane(queue_name),), poll_interval=0.05, concurrency=7
        ),
    )
    running = asyncio.create_task(worker.run())

    async def listed() -> list[WorkerInfo]:
        return [w for w in await leader.list_workers(15) if w.id == worker_id]

    try:
        [info] = await eventually(listed, timeout=10)
        assert info.queues == (queue_name,) and info.pid == os.getpid()
        assert info.meta == {"concurrency": 7, "all_queues": False}
    finally:
        worker.stop()
        await asyncio.wait_for(running, 30)
    assert await listed() == []
