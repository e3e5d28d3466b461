"""A worker on a failover connection (FOV-5, FOV-6, FOV-8, FOV-11): one runtime worker
per connection of the list, under one supervisor.

    stop = asyncio.Event()
    await lane_pg.run_worker(Q.connection("failover"), WorkerConfig(...), stop)
    python -m lane_pg worker --app myapp.jobs --connection failover

* Every connection is served at once, each by a ``Worker`` of its own: its own claims,
  leases, settlements (on the store that issued the job, FOV-6 and FOV-11), maintenance
  leadership and NOTIFY listener. A primary back with a backlog therefore never starves
  the jobs left on a fallback (FOV-5's intent), and ``concurrency`` is per connection.
* A connection that cannot be reached (an availability error, ``is_unavailable``) when its
  worker is opened does not stop the others: it is retried with backoff, from
  ``min(poll_interval, 1 s)`` up to ``max(poll_interval, 1 s)``, logged once when it goes
  down and once when it is back (``Outage``). A store lost later is the member worker's
  own outage: its claims back off the same way while the others go on. Any other error
  (a schema that is too old, a bad configuration) stops every worker and is raised.
* Shared: ``stop()`` (a signal, the shutdown event), ``max_jobs`` (one ``ClaimBudget``, a
  total over every connection), and the end of any member worker outside burst mode (a
  restart signal seen on one store, CLI-6): then all of them stop. In burst mode each
  drains its store and the supervisor returns when all are done; a store that is down
  is left undrained, with a warning.
* Queue filtering (FOV-8): with lanes (``--queue``), every connection of the list must be
  able to claim from named queues only; otherwise ``ConfigurationError`` names the first
  that cannot, when the supervisor is made, before anything is opened or claimed.
* Connections without stored jobs (sync, null) are skipped; a connection whose driver has
  no backend a worker could claim from (a third-party driver) is refused the same way.

The events of a job's processing and the worker's pause events carry the label of the
inner connection the job came from; each member's ``worker_id`` is the configured one
plus ``@label``.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from lane_pg.backend import JobQueueBackend
from lane_pg.errors import ConfigurationError
from lane_pg.facade.connection import BackendDriver
from lane_pg.facade.failover import FailoverDriver, is_unavailable
from lane_pg.facade.null import NullDriver
from lane_pg.types import Lane
from lane_pg.worker import Worker, WorkerConfig
from lane_pg.worker.budget import ClaimBudget
from lane_pg.worker.outage import Outage, retry_delays
from lane_pg.worker.start import close_worker

log = logging.getLogger("lane_pg.facade.failover")

MemberWorkerFactory = Callable[
    [str, JobQueueBackend, WorkerConfig, ClaimBudget | None], Awaitable[Worker]
]
"""Makes the worker of one connection: ``(label, backend, config, shared max_jobs)``."""


@dataclass
class FailoverMember:
    """One connection of the list that a worker serves."""

    label: str
    driver: BackendDriver
    outage: Outage
    worker: Worker | None = None


def served_connections(
    driver: FailoverDriver, config: WorkerConfig
) -> list[tuple[str, BackendDriver]]:
    """The connections of ``driver`` a worker serves, in list order; ``ConfigurationError``
    (nothing opened) for one that cannot filter by queue under ``config.lanes`` (FOV-8),
    one without a backend to claim from, or a list with nothing to serve."""
    if config.lanes:
        driver.require_queue_filtering()
    served: list[tuple[str, BackendDriver]] = []
    for label, inner in driver.connections:
        if isinstance(inner, BackendDriver):
            served.append((label, inner))
        elif isinstance(inner, NullDriver):
            log.info(
                "failover connection %r (%s) keeps no jobs: no worker for it",
                label,
                inner.driver_name,
            )
        else:
            raise ConfigurationError(
                f"failover connection {label!r} ({inner.driver_name}) has no backend a worker"
                " can claim from: workers run on postgres, memory and local connections"
            )
    if not served:
        raise ConfigurationError(f"{driver!r} has no connection that keeps jobs to work on")
    return served


class FailoverWorker:
    """The workers of a failover connection, run and stopped together (module docstring)."""

    def __init__(
        self, driver: FailoverDriver, config: WorkerConfig, make_worker: MemberWorkerFactory
    ) -> None:
        first, cap = retry_delays(config.poll_interval)
        self.members = [
            FailoverMember(
                label, inner, Outage(f"failover connection {label!r}", log, first=first, cap=cap)
            )
            for label, inner in served_connections(driver, config)
        ]
        self.config = config
        self.driver = driver
        self._make = make_worker
        self.budget = None if config.max_jobs is None else ClaimBudget(config.max_jobs)
        if self.budget is not None:
            self.budget.on_spent(self.stop)
        self._stopped = asyncio.Event()
        self._forced = False

    @property
    def worker_id(self) -> str:
        return self.config.worker_id

    @property
    def lanes(self) -> tuple[Lane, ...]:
        """The lanes every member serves, in claim order (as ``Worker.lanes``)."""
        return tuple(sorted(self.config.lanes, key=lambda lane: (lane.priority, lane.name)))

    @property
    def labels(self) -> list[str]:
        return [member.label for member in self.members]

    @property
    def workers(self) -> dict[str, Worker]:
        """The member workers made so far, by connection label."""
        return {m.label: m.worker for m in self.members if m.worker is not None}

    @property
    def counts(self) -> dict[str, int]:
        """``Worker.counts`` summed over the member workers."""
        total: dict[str, int] = {}
        for worker in self.workers.values():
            for key, value in worker.counts.items():
                total[key] = total.get(key, 0) + value
        return total

    @property
    def settled(self) -> int:
        return sum(worker.settled for worker in self.workers.values())

    def member_config(self, label: str) -> WorkerConfig:
        return dataclasses.replace(self.config, worker_id=f"{self.config.worker_id}@{label}")

    @property
    def running(self) -> int:
        """Jobs whose handler is running now, over every member worker."""
        return sum(worker.running for worker in self.workers.values())

    @property
    def forced(self) -> bool:
        return self._forced

    @property
    def given_back(self) -> list[tuple[str, str]]:
        """``(queue, id)`` of each job a forced stop gave back, over every member."""
        return [item for worker in self.workers.values() for item in worker.given_back]

    def stop(self, *, force: bool = False) -> None:
        """Stop every member worker at its next claim boundary, and the retries of the
        connections that are down; ``force`` as ``Worker.stop``."""
        self._forced = self._forced or force
        self._stopped.set()
        for worker in self.workers.values():
            worker.stop(force=self._forced)

    async def run(self) -> None:
        """Serve every connection until ``stop()`` (or, in burst mode, until each is
        drained); raises the first error that is not a connection being down."""
        tasks = [
            asyncio.create_task(self._serve(member), name=f"lane_pg-failover-{member.label}")
            for member in self.members
        ]
        try:
            await asyncio.wait(tasks, return_when=asyncio.FIRST_EXCEPTION)
        finally:
            if not all(task.done() for task in tasks):
                self.stop()
            outcomes = await asyncio.gather(*tasks, return_exceptions=True)
        for outcome in outcomes:
            if isinstance(outcome, BaseException):
                raise outcome

    async def _serve(self, member: FailoverMember) -> None:
        try:
            worker = await self._open(member)
            if worker is None:
                return
            try:
                await worker.run()
            finally:
                await close_worker(worker)
        finally:
            if not self.config.burst:
                # One process: a worker that ended (a restart signal on its store, max_jobs,
                # an error) ends them all.
                self.stop()

    async def _open(self, member: FailoverMember) -> Worker | None:
        """The member's worker, once its connection answers; None when stopped first."""
        while not self._stopped.is_set():
            try:
                backend = await member.driver.backend()
                worker = await self._make(
                    member.label, backend, self.member_config(member.label), self.budget
                )
            except Exception as exc:
                if not is_unavailable(exc):
                    raise
                if self.config.burst:
                    log.warning(
                        "failover connection %r is down (%s: %s): this burst leaves it undrained",
                        member.label,
                        type(exc).__name__,
                        exc,
                    )
                    return None
                wait = member.outage.failed(exc)
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(wait):
                        await self._stopped.wait()
                continue
            member.outage.succeeded()
            member.worker = worker
            if self._stopped.is_set():
                # Stopped while it was being made: it shuts down at once.
                worker.stop(force=self._forced)
            return worker
        return None
