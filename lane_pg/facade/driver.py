"""The facade's driver protocol (DRV-5) and the driver over any ``JobQueueBackend``.

A connection of the facade is a ``QueueDriver``. The durable drivers (PostgreSQL, memory,
and Redis when it lands) are ``BackendDriver``: a thin adapter whose writes are the
backend's ``add_job`` / ``add_jobs`` and whose reads are its counts and pages, so every
rule (options, dedup owners, pause) stays in the backend. The worker runs on the backend
itself; drivers that have no backend (sync, null) and the failover wrapper implement the
protocol their own way.

Counts follow A16: ``size`` = waiting + delayed + active + waiting-children,
``pending_size`` = waiting, ``delayed_size`` = delayed, ``reserved_size`` = active. A read
with ``queue=None`` covers every queue of the connection.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Protocol, runtime_checkable

from lane_pg.backend import AddsInTransaction, JobQueueBackend, connect
from lane_pg.errors import ConfigurationError
from lane_pg.facade.envelope import Envelope
from lane_pg.types import JobRow, JobState, PauseStatus

SIZE_STATES: tuple[JobState, ...] = ("waiting", "delayed", "active", "waiting-children")


@runtime_checkable
class QueueDriver(Protocol):
    """What the facade needs of one connection."""

    @property
    def driver_name(self) -> str:
        """The driver's kind: ``postgres``, ``memory``, ``sync``, ``null``, ..."""
        ...

    async def push(self, envelope: Envelope, *, conn: object | None = None) -> str:
        """Store one job and return its id; with ``conn``, inside the caller's transaction
        (``ConfigurationError`` when the driver cannot)."""
        ...

    async def bulk_push(
        self, envelopes: Sequence[Envelope], *, conn: object | None = None
    ) -> list[str]:
        """Store jobs of one queue in one call, all or none; ids in input order."""
        ...

    async def size(self, queue: str | None = None) -> int: ...

    async def pending_size(self, queue: str | None = None) -> int: ...

    async def delayed_size(self, queue: str | None = None) -> int: ...

    async def reserved_size(self, queue: str | None = None) -> int: ...

    async def close(self) -> None: ...


class BackendDriver:
    """A ``QueueDriver`` over a backend (PostgreSQL, memory): given open, or opened from
    ``url`` on first use (``BackendDriver.lazy``), so configuring connections does no I/O."""

    def __init__(self, backend: JobQueueBackend | None, driver_name: str) -> None:
        self._backend = backend
        self._driver_name = driver_name
        self._url: str | None = None
        self._lazy = False
        self._schema = "lane"
        self._opening = asyncio.Lock()

    @classmethod
    def lazy(cls, url: str | None, driver_name: str, *, schema: str = "lane") -> BackendDriver:
        """A driver whose backend ``lane_pg.backend.connect(url)`` opens on first use
        (``url`` None: ``$LANE_PG_DSN``, else the embedded server, resolved then)."""
        driver = cls(None, driver_name)
        driver._url, driver._schema, driver._lazy = url, schema, True
        return driver

    @property
    def driver_name(self) -> str:
        return self._driver_name

    @property
    def url(self) -> str | None:
        """The URL a lazy driver opens (None for a driver given its backend)."""
        return self._url

    @property
    def schema(self) -> str:
        return self._schema

    def __repr__(self) -> str:
        return f"BackendDriver({self._driver_name})"

    async def backend(self) -> JobQueueBackend:
        """The backend, opened now if this driver is lazy and not yet open."""
        if self._backend is None:
            async with self._opening:
                if self._backend is None:
                    if not self._lazy:
                        raise ConfigurationError(f"{self!r} was closed")
                    self._backend = await connect(self._url, schema=self._schema)
        return self._backend

    async def push(self, envelope: Envelope, *, conn: object | None = None) -> str:
        return (await self.push_row(envelope, conn=conn)).id

    async def push_row(self, envelope: Envelope, *, conn: object | None = None) -> JobRow:
        """``push``, returning the stored (or, deduplicated, the owner's) snapshot."""
        backend = await self.backend()
        options = envelope.options_document(datetime.now(UTC))
        if conn is None:
            return await backend.add_job(envelope.queue, envelope.job_name, envelope.data, options)
        return await self._transactional(backend).add_job_in(
            conn, envelope.queue, envelope.job_name, envelope.data, options
        )

    async def bulk_push(
        self, envelopes: Sequence[Envelope], *, conn: object | None = None
    ) -> list[str]:
        if not envelopes:
            return []
        queues = {envelope.queue for envelope in envelopes}
        if len(queues) > 1:
            raise ConfigurationError(f"a bulk push goes to one queue, got {sorted(queues)}")
        now = datetime.now(UTC)
        specs = [envelope.spec(now) for envelope in envelopes]
        queue = envelopes[0].queue
        backend = await self.backend()
        if conn is None:
            rows = await backend.add_jobs(queue, specs)
        else:
            rows = await self._transactional(backend).add_jobs_in(conn, queue, specs)
        return [row.id for row in rows]

    def _transactional(self, backend: JobQueueBackend) -> AddsInTransaction:
        if not isinstance(backend, AddsInTransaction):
            raise ConfigurationError(
                f"the {self._driver_name} connection cannot enqueue inside a caller's"
                " transaction (conn=): only PostgreSQL can"
            )
        return backend

    async def _count(self, queue: str | None, states: Sequence[JobState]) -> int:
        backend = await self.backend()
        queues = [queue] if queue is not None else await backend.list_queues()
        total = 0
        for name in queues:
            total += await backend.get_job_count(name, list(states))
        return total

    async def size(self, queue: str | None = None) -> int:
        return await self._count(queue, SIZE_STATES)

    async def pending_size(self, queue: str | None = None) -> int:
        return await self._count(queue, ("waiting",))

    async def delayed_size(self, queue: str | None = None) -> int:
        return await self._count(queue, ("delayed",))

    async def reserved_size(self, queue: str | None = None) -> int:
        return await self._count(queue, ("active",))

    # -- pausing (PAUSE-3..5; lane_pg.facade.pausing) ------------------------------------

    async def pause_queue(self, queue: str) -> None:
        await (await self.backend()).pause_queue(queue)

    async def resume_queue(self, queue: str) -> None:
        await (await self.backend()).resume_queue(queue)

    async def pause_all(self) -> None:
        await (await self.backend()).pause_all()

    async def resume_all(self) -> None:
        await (await self.backend()).resume_all()

    async def pause_status(self, queues: Sequence[str]) -> PauseStatus:
        return await (await self.backend()).get_pause_status(queues)

    async def close(self) -> None:
        if self._backend is not None:
            await self._backend.close()
            if self._lazy:
                self._backend = None  # a lazy driver may open again
