"""Running typed-job workers from code (WORK-17), exactly as ``python -m lane_pg worker``.

    stop = asyncio.Event()
    await lane_pg.run_worker(Q.driver(), WorkerConfig(lease=60, poll_interval=0.1), stop)
    await lane_pg.run_worker_on("reports", config, stop)   # a registered connection
    await lane_pg.run_worker_on("failover", config, stop)  # one worker per connection

The worker runs on the connection's backend with a processor for every job class of the
facade's registry, on the config's lanes, else the queues of those classes and their
forwards (``lane_pg.facade.serving``; ``all_queues=True`` serves every queue); setting
``shutdown`` stops it at the next claim boundary, running jobs finish
(``shutdown_timeout``) and the call returns the stopped worker.
"""

from __future__ import annotations

import asyncio
import dataclasses

from lane_pg.backend import JobQueueBackend
from lane_pg.errors import ConfigurationError
from lane_pg.facade.driver import BackendDriver, QueueDriver
from lane_pg.facade.drivers.failover import FailoverDriver
from lane_pg.facade.failed import default_failed_store
from lane_pg.facade.failover_worker import FailoverWorker
from lane_pg.facade.pausing import FacadeWorkerHooks
from lane_pg.facade.queue import Q, QueueFacade
from lane_pg.facade.runner import typed_processors
from lane_pg.facade.serving import NO_QUEUES_IN_CODE, declared_lanes, with_forwards
from lane_pg.worker import Worker, WorkerConfig
from lane_pg.worker.budget import ClaimBudget
from lane_pg.worker.start import close_worker, create_worker, run_until


async def run_worker(
    driver: QueueDriver | None = None,
    config: WorkerConfig | None = None,
    shutdown: asyncio.Event | None = None,
    *,
    facade: QueueFacade | None = None,
    connection: str | None = None,
) -> Worker | FailoverWorker:
    """Run a worker on ``driver`` (the facade's default connection when None) until
    ``shutdown`` is set (or, in burst mode, until idle). ``connection`` is the name its
    events carry (default: the facade's name for the default connection). On a failover
    connection: one worker per connection of its list, run as one (``FailoverWorker``),
    whose events carry each inner connection's label."""
    facade = facade or Q
    if driver is None:
        driver = facade.driver()
        connection = connection or facade.connection_name()
    if isinstance(driver, FailoverDriver):
        config = served_config(config, facade, connection or driver.driver_name)
        workers = failover_worker(driver, config, facade)
        await run_until(workers, shutdown)
        return workers
    if not isinstance(driver, BackendDriver):
        raise ConfigurationError(
            f"{driver!r} has no backend to claim from: workers run on postgres, memory,"
            " local or failover connections"
        )
    label = connection or driver.driver_name
    config = served_config(config, facade, label)
    processors = typed_processors(facade.registry, facade.events, label)
    worker = await create_worker(
        await driver.backend(),
        processors,
        config,
        failed_store=facade.failed_store(),
        connection=label,
        hooks=FacadeWorkerHooks(facade.events, label),
    )
    try:
        await run_until(worker, shutdown)
    finally:
        await close_worker(worker)
    return worker


def served_config(
    config: WorkerConfig | None, facade: QueueFacade, connection: str
) -> WorkerConfig:
    """``config`` (default ``WorkerConfig()``), with the lanes of the facade's job classes
    and their forwards when it names none and does not say ``all_queues``
    (``lane_pg.facade.serving``); ``ConfigurationError`` when no job class is registered."""
    config = config or WorkerConfig()
    if config.lanes or config.all_queues:
        return config
    lanes = with_forwards(declared_lanes((), facade.registry, facade), facade, connection)
    if not lanes:
        raise ConfigurationError(NO_QUEUES_IN_CODE)
    return dataclasses.replace(config, lanes=lanes)


async def run_worker_on(
    name: str,
    config: WorkerConfig | None = None,
    shutdown: asyncio.Event | None = None,
    *,
    facade: QueueFacade | None = None,
) -> Worker | FailoverWorker:
    """``run_worker`` on the connection named ``name``; ``ConfigurationError`` for an
    unknown name, before anything is claimed."""
    facade = facade or Q
    return await run_worker(
        facade.connection(name), config, shutdown, facade=facade, connection=name
    )


def failover_worker(
    driver: FailoverDriver, config: WorkerConfig, facade: QueueFacade
) -> FailoverWorker:
    """The workers of ``driver``'s connections for the facade's job classes, each labelled
    with its connection (``ConfigurationError`` before anything opens, FOV-8)."""

    async def make(
        label: str, backend: JobQueueBackend, member: WorkerConfig, budget: ClaimBudget | None
    ) -> Worker:
        return await create_worker(
            backend,
            typed_processors(facade.registry, facade.events, label),
            member,
            failed_store=facade.failed_store() or default_failed_store(backend),
            connection=label,
            hooks=FacadeWorkerHooks(facade.events, label),
            claim_budget=budget,
        )

    return FailoverWorker(driver, config, make)
