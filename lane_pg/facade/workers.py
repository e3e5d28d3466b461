"""How every worker is made: ``App.create_worker`` / ``App.run_worker`` (the documented
way), ``python -m lane_pg worker`` (through ``App``), and ``lane_pg.run_worker`` /
``run_worker_on`` (WORK-17, kept for code that calls them) all end in ``start_worker``
here, so they cannot drift apart.

A ``WorkerSpec`` is what a worker runs: the facade's job classes, processor functions by
job name and the lanes declared in code (an ``App``'s, or a facade's job classes alone).
``start_worker`` makes it a worker on a backend, a backend-backed connection, or a
failover connection (one worker per connection of its list, run as one:
``FailoverWorker``), with the failed-job store ``failed_store_for`` chooses and the
connection's label on its events and records.

    stop = asyncio.Event()
    await lane_pg.run_worker(Q.driver(), WorkerConfig(lease=60, poll_interval=0.1), stop)
    await lane_pg.run_worker_on("reports", config, stop)   # a registered connection

Without lanes in the config (and without ``all_queues=True``) a worker serves the lanes
its code declares, their forwards included (``lane_pg.facade.serving``); setting
``shutdown`` stops it at the next claim boundary, running jobs finish
(``shutdown_timeout``) and the call returns the stopped worker.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from lane_pg.backend import JobQueueBackend
from lane_pg.errors import ConfigurationError
from lane_pg.facade.batches import callback_processors
from lane_pg.facade.connection import BackendDriver, Connection
from lane_pg.facade.failed import failed_store_for
from lane_pg.facade.failover import FailoverDriver
from lane_pg.facade.failover_worker import FailoverWorker
from lane_pg.facade.pausing import FacadeWorkerHooks
from lane_pg.facade.queue import Q, QueueFacade
from lane_pg.facade.registry import JobRegistry
from lane_pg.facade.runner import typed_processors
from lane_pg.facade.serving import NO_QUEUES_IN_CODE, declared_lanes, with_forwards
from lane_pg.types import Lane
from lane_pg.worker import Processor, ProcessorLike, Worker, WorkerConfig, WorkerHooks
from lane_pg.worker.budget import ClaimBudget
from lane_pg.worker.start import close_worker, create_worker, run_until

HooksFor = Callable[[str], WorkerHooks | None]
"""The hooks of the worker of one connection label (a failover list has one per member)."""


@dataclass(frozen=True)
class WorkerSpec:
    """What a worker runs, wherever it runs (module docstring)."""

    facade: QueueFacade
    jobs: JobRegistry | None
    functions: Mapping[str, Processor] = field(default_factory=dict)
    lanes: tuple[Lane, ...] = ()

    def processors(self, label: str) -> dict[str, ProcessorLike]:
        """The processor functions and a processor per job class, by job name, the job
        classes' events carrying ``label``; one name served twice is refused."""
        typed: dict[str, ProcessorLike] = {}
        if self.jobs is not None:
            typed.update(typed_processors(self.jobs, self.facade.events, label))
            typed.update(callback_processors(self.facade.callbacks, self.facade.events))
        both = sorted(set(typed) & set(self.functions))
        if both:
            raise ConfigurationError(
                f"job names served both by a processor function and a job class: {both}"
            )
        return {**typed, **self.functions}

    def served_lanes(self, label: str) -> tuple[Lane, ...]:
        """The declared lanes, a lane per job class queue, and their forward destinations
        (``lane_pg.facade.serving``); empty when nothing names a queue."""
        declared = declared_lanes(self.lanes, self.jobs, self.facade)
        return with_forwards(declared, self.facade, label)

    def configured(self, config: WorkerConfig | None, label: str) -> WorkerConfig:
        """``config`` (default ``WorkerConfig()``), given ``served_lanes`` when it names no
        lane and does not say ``all_queues``; ``ConfigurationError`` when those are none."""
        config = config or WorkerConfig()
        if config.lanes or config.all_queues:
            return config
        lanes = self.served_lanes(label)
        if not lanes:
            raise ConfigurationError(NO_QUEUES_IN_CODE)
        return dataclasses.replace(config, lanes=lanes)


async def open_worker(
    spec: WorkerSpec,
    backend: JobQueueBackend,
    config: WorkerConfig,
    label: str,
    hooks: HooksFor | None = None,
    budget: ClaimBudget | None = None,
) -> Worker:
    """The worker of ``spec`` on ``backend`` (woken by it when it can), its events and
    failed-job records labelled ``label``; ``config`` already names its lanes."""
    return await create_worker(
        backend,
        spec.processors(label),
        config,
        failed_store=failed_store_for(spec.facade, backend),
        connection=label,
        hooks=hooks(label) if hooks is not None else None,
        claim_budget=budget,
    )


def start_failover_worker(
    spec: WorkerSpec, driver: FailoverDriver, config: WorkerConfig, hooks: HooksFor | None
) -> FailoverWorker:
    """The workers of ``driver``'s connections, each labelled with its connection
    (``ConfigurationError`` before anything opens, FOV-8)."""

    async def make(
        label: str, backend: JobQueueBackend, member: WorkerConfig, budget: ClaimBudget | None
    ) -> Worker:
        return await open_worker(spec, backend, member, label, hooks, budget)

    return FailoverWorker(driver, config, make)


async def start_worker(
    spec: WorkerSpec,
    source: JobQueueBackend | Connection,
    config: WorkerConfig | None,
    label: str,
    hooks: HooksFor | None = None,
) -> Worker | FailoverWorker:
    """The worker of ``spec`` on ``source``: a backend, a backend-backed connection, or a
    failover connection (see the module docstring); ``run_started`` runs it."""
    if isinstance(source, FailoverDriver):
        return start_failover_worker(spec, source, spec.configured(config, label), hooks)
    if isinstance(source, BackendDriver):
        backend = await source.backend()
        return await open_worker(spec, backend, spec.configured(config, label), label, hooks)
    if isinstance(source, Connection):
        raise ConfigurationError(
            f"{source!r} has no backend to claim from: workers run on postgres, memory,"
            " local or failover connections"
        )
    return await open_worker(spec, source, spec.configured(config, label), label, hooks)


async def run_started(
    worker: Worker | FailoverWorker, shutdown: asyncio.Event | None
) -> Worker | FailoverWorker:
    """Run a worker of ``start_worker`` until it stops (``shutdown`` set, ``stop()``, or
    idle in burst mode), then release what it holds; returns it."""
    try:
        await run_until(worker, shutdown)
    finally:
        if isinstance(worker, Worker):
            await close_worker(worker)
    return worker


async def run_worker(
    driver: Connection | None = None,
    config: WorkerConfig | None = None,
    shutdown: asyncio.Event | None = None,
    *,
    facade: QueueFacade | None = None,
    connection: str | None = None,
) -> Worker | FailoverWorker:
    """Run a worker of the facade's job classes on ``driver`` (the facade's default
    connection when None) until ``shutdown`` is set (or, in burst mode, until idle).
    ``connection`` is the name its events carry (default: the facade's name for the
    default connection, else the driver's). ``App.run_worker`` is the documented way."""
    facade = facade or Q
    if driver is None:
        driver = facade.driver()
        connection = connection or facade.connection_name()
    label = connection or driver.driver_name
    spec = WorkerSpec(facade, facade.registry)
    worker = await start_worker(spec, driver, config, label, facade_hooks(facade))
    return await run_started(worker, shutdown)


def facade_hooks(facade: QueueFacade) -> HooksFor:
    """The facade's worker events (pauses, interruptions, jobs failed for good), per label."""
    return lambda label: FacadeWorkerHooks(facade.events, label)


def served_config(
    config: WorkerConfig | None, facade: QueueFacade, connection: str
) -> WorkerConfig:
    """``config`` with the lanes of the facade's job classes and their forwards when it
    names none (``WorkerSpec.configured``)."""
    return WorkerSpec(facade, facade.registry).configured(config, connection)


def failover_worker(
    driver: FailoverDriver, config: WorkerConfig, facade: QueueFacade
) -> FailoverWorker:
    """The workers of a failover connection for the facade's job classes
    (``start_failover_worker``), as ``run_worker`` makes them."""
    spec = WorkerSpec(facade, facade.registry)
    return start_failover_worker(spec, driver, config, facade_hooks(facade))


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
