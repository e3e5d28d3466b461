"""Concurrent debounced pushes of one window (UNIQ-9..11): each dispatch reads and writes
the window in one backend call (``add_debounced_job``), so a burst of concurrent pushes
leaves exactly one live dispatch, the one stored last.

On PostgreSQL every push goes through a facade of its own over a backend of its own (its
own pool, so its own connection): the pushes really run at once in the database, where the
window's owner row serialises them. On memory they are concurrent tasks over one store.

What is guaranteed: dispatches of a window are stored in the order they take its row, so
the one left owning the window is the greatest job key (generated id) among them and
carries its own push's payload; which push that is, among pushes that overlap, is not
the call order."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import pytest_asyncio

from lane_pg.backend import JobQueueBackend
from lane_pg.facade import BackendDriver, DebounceOptions, JobDebounced, JobRegistry, QueueFacade
from lane_pg.facade.job import Job
from lane_pg.types import ALL_STATES, JobRow
from tests.facade.conftest import Drain

PUSHES = 8
RUNS: list[int] = []


@dataclass
class Refresh(Job):
    job_name = "concurrency.refresh"
    n: int = 0

    async def handle(self) -> None:
        RUNS.append(self.n)


OPTIONS = DebounceOptions(window=60, id="w")
KEY = "debounce:concurrency.refresh:w"


@pytest_asyncio.fixture
async def pushers(
    backend: JobQueueBackend, backend_kind: str, facade: QueueFacade, queue_name: str
) -> AsyncIterator[list[QueueFacade]]:
    """One facade per concurrent push, each listening into ``facade``'s events."""
    facade.route(Refresh, queue=queue_name)
    RUNS.clear()
    opened: list[JobQueueBackend] = []
    facades: list[QueueFacade] = []
    for _ in range(PUSHES):
        own = backend
        if backend_kind == "postgres":
            from lane_pg.postgres.backend import PostgresBackend

            assert isinstance(backend, PostgresBackend) and backend.dsn is not None
            own = await PostgresBackend.connect(backend.dsn, min_size=1, max_size=1)
            opened.append(own)
        pusher = QueueFacade(registry=JobRegistry())
        pusher.set_driver(BackendDriver(own, backend_kind), name=facade.connection_name())
        pusher.route(Refresh, queue=queue_name)
        pusher.events = facade.events
        facades.append(pusher)
    try:
        yield facades
    finally:
        for own in opened:
            await own.close()


async def burst(pushers: list[QueueFacade]) -> list[str]:
    """Every pusher's dispatch at once; their ids, in pusher order."""
    return list(
        await asyncio.gather(
            *(pusher.push_debounced(Refresh(n), OPTIONS) for n, pusher in enumerate(pushers))
        )
    )


async def rows(backend: JobQueueBackend, queue: str) -> list[JobRow]:
    return list((await backend.list_jobs(queue, ALL_STATES, limit=100)).items)


def listen(facade: QueueFacade) -> list[Any]:
    seen: list[Any] = []
    facade.events.listen(JobDebounced, seen.append)
    return seen


async def test_a_concurrent_burst_leaves_one_dispatch_the_last_stored_UNIQ_9_UNIQ_11(
    backend: JobQueueBackend, facade: QueueFacade, pushers: list[QueueFacade], queue_name: str
) -> None:
    debounced = listen(facade)
    ids = await burst(pushers)
    assert len(set(ids)) == PUSHES
    [survivor] = await rows(backend, queue_name)  # each replaced one was removed at push
    assert survivor.id == max(ids, key=int)
    assert survivor.data == {"n": ids.index(survivor.id)}  # its own push's payload
    assert survivor.state == "delayed"
    assert await backend.get_deduplication_job_id(queue_name, KEY) == survivor.id
    # Every other dispatch was replaced while delayed, and said so exactly once.
    assert sorted(event.job_id for event in debounced) == sorted(set(ids) - {survivor.id})


async def test_a_burst_after_promotion_supersedes_the_running_window_UNIQ_11(
    backend: JobQueueBackend,
    facade: QueueFacade,
    pushers: list[QueueFacade],
    queue_name: str,
    drain: Drain,
    registry: Any,
) -> None:
    """The window's job is waiting (no longer replaceable) when the burst comes: it stays,
    superseded, and the worker drops it; one dispatch of the burst owns the window."""
    registry.register(Refresh)
    debounced = listen(facade)
    first = await facade.push_debounced(Refresh(-1), OPTIONS)
    await backend.promote_job(queue_name, first)
    ids = await burst(pushers)
    delayed = [row for row in await rows(backend, queue_name) if row.state == "delayed"]
    assert [row.id for row in delayed] == [max(ids, key=int)]
    survivor = delayed[0]
    assert await backend.get_deduplication_job_id(queue_name, KEY) == survivor.id
    assert len(debounced) == PUSHES - 1  # replaced at push; the waiting one is not
    await backend.promote_job(queue_name, survivor.id)
    await drain(queue_name)
    assert [survivor.data["n"]] == RUNS  # one run, the survivor's payload
    assert debounced[-1].job_id == first  # dropped by the worker (UNIQ-11)
