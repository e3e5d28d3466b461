"""Maintenance leadership as a lease (``Leader``, the backend's ``leader`` handle): one holder
at a time, renewed by its holder, taken over once it lapsed, given up by resigning
(STALL-8: a leader that freezes must not stop recovery). Each test uses a role of its own:
the PostgreSQL test database is shared."""

from __future__ import annotations

import asyncio

import pytest

from lane_pg.backend import JobQueueBackend, Leader
from lane_pg.errors import InvalidOptions, ValidationError
from lane_pg.types import JSON, JobRow, Lane
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
