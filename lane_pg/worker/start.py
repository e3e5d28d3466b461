"""Making a worker the way every entry point does: ``App``, the CLI and the facade's
``run_worker`` (WORK-17), so they cannot drift apart.

A backend that can wake workers (PostgreSQL: LISTEN on the queues' channels) gets a
started notifier for the worker's queues; the others poll. ``close_worker`` releases it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Protocol

from lane_pg.backend import HasWakeups, JobQueueBackend
from lane_pg.failed import FailedJobStore
from lane_pg.worker.budget import ClaimBudget
from lane_pg.worker.config import WorkerConfig
from lane_pg.worker.context import ProcessorLike
from lane_pg.worker.pausing import WorkerHooks
from lane_pg.worker.runtime import Worker


async def create_worker(
    backend: JobQueueBackend,
    processors: Mapping[str, ProcessorLike] | ProcessorLike,
    config: WorkerConfig,
    *,
    failed_store: FailedJobStore | None = None,
    connection: str = "default",
    hooks: WorkerHooks | None = None,
    claim_budget: ClaimBudget | None = None,
) -> Worker:
    notifier = None
    if isinstance(backend, HasWakeups):
        notifier = backend.wakeups(
            [lane.name for lane in config.lanes] or None,
            name=f"lane_pg listener {config.worker_id}",
            health_interval=min(config.poll_interval, 5.0),
        )
        await notifier.start()
    return Worker(
        backend,
        processors,
        config,
        notifier=notifier,
        failed_store=failed_store,
        connection=connection,
        hooks=hooks,
        claim_budget=claim_budget,
    )


async def close_worker(worker: Worker) -> None:
    if worker.notifier is not None:
        await worker.notifier.close()


class Runnable(Protocol):
    """A ``Worker``, or workers run as one (``lane_pg.facade.failover_worker``)."""

    async def run(self) -> None: ...

    def stop(self) -> None: ...


async def run_until(worker: Runnable, shutdown: asyncio.Event | None) -> None:
    """``worker.run()``, stopped at its next claim boundary once ``shutdown`` is set."""
    if shutdown is None:
        await worker.run()
        return

    async def watch() -> None:
        await shutdown.wait()
        worker.stop()

    watcher = asyncio.create_task(watch())
    try:
        await worker.run()
    finally:
        watcher.cancel()
