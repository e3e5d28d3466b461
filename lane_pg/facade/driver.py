"""The facade's driver protocol (DRV-5) and the driver over any ``JobQueueBackend``.

A connection of the facade is a ``QueueDriver``. The durable drivers (PostgreSQL, memory,
and Redis when it lands) are ``BackendDriver``: a thin adapter whose writes are the
backend's ``add_job`` / ``add_jobs`` and whose reads are its counts and pages, so every
rule (options, dedup owners, pause) stays in the backend. The worker runs on the backend
itself; drivers that have no backend (sync, null) and the failover wrapper implement the
protocol their own way.

Counts follow A16: ``size`` = waiting + delayed + active + waiting-children,
``pending_size`` = waiting + due delayed, ``delayed_size`` = delayed, ``reserved_size`` =
active. A read with ``queue=None`` covers every queue of the connection. Listings return stored
``JobRow`` snapshots, at most ``limit`` of them, in the backend's page order; they never
change a job (INSP-4).

Reservations (DRV-5): ``pop``/``pop_from`` lease one job for the driver's visibility
timeout and return a ``Reservation``; ``settle`` (and its spellings ``ack``, ``nack``,
``release``) ends it and answers ``SETTLED``, or ``STALE`` when the reservation no longer
holds the job (lease taken over, job gone): nothing was changed then.

``clear`` follows A16: it removes every waiting, delayed and waiting-children job and every
active job whose lease has expired, never a validly leased one (seed 003 drops every
envelope; a running job's owner would otherwise settle a job that no longer exists), and
returns how many went. Finished jobs are history, not queue contents, and stay. The
current occurrence of a repeat series stays too (a drain never ends a series, REP-16).

A third-party driver subclasses ``DriverBase`` and implements what it can; everything else
raises ``NotImplementedError`` naming the driver and the method (CONN-14): never an empty
answer that is not true.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Final, Literal, Protocol, TypeAlias, runtime_checkable

from lane_pg.backend import JobQueueBackend, Transactions, connect
from lane_pg.errors import ConfigurationError, JobNotFound, JobStateConflict, LockMismatch
from lane_pg.facade.envelope import Envelope
from lane_pg.facade.stores import StoreKey, local_store, postgres_store
from lane_pg.types import JSON, Duration, JobRow, JobState, PauseStatus, QueueDemand, to_millis

SIZE_STATES: tuple[JobState, ...] = ("waiting", "delayed", "active", "waiting-children")
DEFAULT_VISIBILITY_TIMEOUT = timedelta(seconds=60)
"""The lease of a reservation unless configured (``LANE_PG_VISIBILITY_TIMEOUT_SECS``)."""
DEFAULT_LISTING_LIMIT = 1000

SettleResult: TypeAlias = Literal["settled", "stale"]
SETTLED: Final[SettleResult] = "settled"
STALE: Final[SettleResult] = "stale"


@dataclass(frozen=True, slots=True)
class Reservation:
    """One leased job as a driver's caller holds it.

    ``token`` is what the issuing driver needs back to settle it (a backend's lock token;
    the failover driver's own token), ``connection`` the label of the connection the job
    came from, ``expires_at`` the end of the lease (visibility timeout)."""

    token: str
    job: JobRow
    connection: str
    expires_at: datetime


@dataclass(frozen=True, slots=True)
class Ack:
    """Complete the job with ``result``."""

    result: JSON = None


@dataclass(frozen=True, slots=True)
class Nack:
    """Fail this attempt: retried under the job's retry settings unless ``retry`` is false."""

    reason: str
    retry: bool = True


@dataclass(frozen=True, slots=True)
class Release:
    """Give the job back: waiting at the front (``delay`` 0) or delayed by ``delay``;
    the attempt is not charged."""

    delay: Duration = 0


Settlement: TypeAlias = Ack | Nack | Release


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

    async def pending_jobs(
        self, queue: str | None = None, *, limit: int = DEFAULT_LISTING_LIMIT
    ) -> list[JobRow]: ...

    async def delayed_jobs(
        self, queue: str | None = None, *, limit: int = DEFAULT_LISTING_LIMIT
    ) -> list[JobRow]: ...

    async def reserved_jobs(
        self, queue: str | None = None, *, limit: int = DEFAULT_LISTING_LIMIT
    ) -> list[JobRow]: ...

    async def clear(self, queue: str | None = None) -> int:
        """Remove the queue's (every queue's) clearable jobs (A16); returns the count."""
        ...

    @property
    def filters_queues(self) -> bool:
        """Whether ``pop_from`` can claim from the named queues only (FOV-8)."""
        ...

    async def pop(self) -> Reservation | None:
        """Lease the next job of any queue, or None when nothing is ready."""
        ...

    async def pop_from(self, queues: Sequence[str]) -> Reservation | None:
        """Lease the next job of ``queues`` (earlier queues first), or None."""
        ...

    async def settle(self, reservation: Reservation, outcome: Settlement) -> SettleResult: ...

    async def ack(self, reservation: Reservation, result: JSON = None) -> SettleResult: ...

    async def nack(
        self, reservation: Reservation, reason: str, *, retry: bool = True
    ) -> SettleResult: ...

    async def release(self, reservation: Reservation, delay: Duration = 0) -> SettleResult: ...

    async def close(self) -> None: ...


class SettleSpellings:
    """``ack``/``nack``/``release`` as ``settle`` (one routing point for every outcome)."""

    async def settle(self, reservation: Reservation, outcome: Settlement) -> SettleResult:
        raise NotImplementedError

    async def ack(self, reservation: Reservation, result: JSON = None) -> SettleResult:
        return await self.settle(reservation, Ack(result))

    async def nack(
        self, reservation: Reservation, reason: str, *, retry: bool = True
    ) -> SettleResult:
        return await self.settle(reservation, Nack(reason, retry))

    async def release(self, reservation: Reservation, delay: Duration = 0) -> SettleResult:
        return await self.settle(reservation, Release(delay))


class DriverBase(SettleSpellings):
    """The base of a third-party driver: every method not overridden raises
    ``NotImplementedError`` naming the driver and the method (CONN-14), so an inspection
    the driver cannot answer is an honest error, never an empty list."""

    filters_queues = False

    @property
    def driver_name(self) -> str:
        return type(self).__name__

    def _missing(self, method: str) -> NotImplementedError:
        return NotImplementedError(f"the {self.driver_name} driver does not implement {method}")

    async def push(self, envelope: Envelope, *, conn: object | None = None) -> str:
        raise self._missing("push")

    async def bulk_push(
        self, envelopes: Sequence[Envelope], *, conn: object | None = None
    ) -> list[str]:
        raise self._missing("bulk_push")

    async def size(self, queue: str | None = None) -> int:
        raise self._missing("size")

    async def pending_size(self, queue: str | None = None) -> int:
        raise self._missing("pending_size")

    async def delayed_size(self, queue: str | None = None) -> int:
        raise self._missing("delayed_size")

    async def reserved_size(self, queue: str | None = None) -> int:
        raise self._missing("reserved_size")

    async def pending_jobs(
        self, queue: str | None = None, *, limit: int = DEFAULT_LISTING_LIMIT
    ) -> list[JobRow]:
        raise self._missing("pending_jobs")

    async def delayed_jobs(
        self, queue: str | None = None, *, limit: int = DEFAULT_LISTING_LIMIT
    ) -> list[JobRow]:
        raise self._missing("delayed_jobs")

    async def reserved_jobs(
        self, queue: str | None = None, *, limit: int = DEFAULT_LISTING_LIMIT
    ) -> list[JobRow]:
        raise self._missing("reserved_jobs")

    async def clear(self, queue: str | None = None) -> int:
        raise self._missing("clear")

    async def pop(self) -> Reservation | None:
        raise self._missing("pop")

    async def pop_from(self, queues: Sequence[str]) -> Reservation | None:
        raise self._missing("pop_from")

    async def settle(self, reservation: Reservation, outcome: Settlement) -> SettleResult:
        raise self._missing("settle")

    async def close(self) -> None:
        return None


def visibility_timeout_of(value: Duration | None) -> timedelta:
    """A visibility timeout as a positive ``timedelta`` (``DEFAULT_VISIBILITY_TIMEOUT`` for
    None); ``ConfigurationError`` otherwise."""
    if value is None:
        return DEFAULT_VISIBILITY_TIMEOUT
    millis = to_millis(value, "visibility_timeout")
    if millis <= 0:
        raise ConfigurationError(f"the visibility timeout must be positive, got {value!r}")
    return timedelta(milliseconds=millis)


_HANDLER_ERROR = "_lane_pg_raised_by_handler"


def mark_handler_error(exc: BaseException) -> None:
    """Mark ``exc`` as raised by a job's own handler (a driver that runs jobs at push), so
    no failover takes it for an unreachable store and runs the job again."""
    with contextlib.suppress(AttributeError):  # a class with __slots__: nothing to mark
        setattr(exc, _HANDLER_ERROR, True)


def is_handler_error(exc: BaseException) -> bool:
    return getattr(exc, _HANDLER_ERROR, False) is True


def attach_events(driver: object, events: object) -> None:
    """Give ``driver`` the facade's event emitter if it emits events of its own (failover's
    ``QueueFailedOver``, the sync driver's processing events) and has none yet."""
    attach = getattr(driver, "attach_events", None)
    if callable(attach):
        attach(events)


class BackendDriver(SettleSpellings):
    """A ``QueueDriver`` over a backend (PostgreSQL, memory): given open, or opened from
    ``url`` on first use (``BackendDriver.lazy``), so configuring connections does no I/O."""

    filters_queues = True

    def __init__(
        self,
        backend: JobQueueBackend | None,
        driver_name: str,
        *,
        visibility_timeout: Duration | None = None,
    ) -> None:
        self._backend = backend
        self._driver_name = driver_name
        self._url: str | None = None
        self._lazy = False
        self._schema = "lane"
        self._opener: Callable[[], Awaitable[JobQueueBackend]] | None = None
        self._store: StoreKey | None = None
        self._opening = asyncio.Lock()
        self.visibility_timeout = visibility_timeout_of(visibility_timeout)
        self.worker_id = f"{driver_name}-driver-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        """The ``worker_id`` this driver's reservations are claimed under."""

    @classmethod
    def lazy(
        cls,
        url: str | None,
        driver_name: str,
        *,
        schema: str = "lane",
        visibility_timeout: Duration | None = None,
    ) -> BackendDriver:
        """A driver whose backend ``lane_pg.backend.connect(url)`` opens on first use
        (``url`` None: ``$LANE_PG_DSN``, else the embedded server, resolved then)."""
        driver = cls(None, driver_name, visibility_timeout=visibility_timeout)
        driver._url, driver._schema, driver._lazy = url, schema, True
        driver._store = postgres_store(url, schema)
        return driver

    @classmethod
    def opened_by(
        cls,
        opener: Callable[[], Awaitable[JobQueueBackend]],
        driver_name: str,
        *,
        visibility_timeout: Duration | None = None,
        store: StoreKey | None = None,
    ) -> BackendDriver:
        """A driver whose backend ``opener()`` opens on first use (again after ``close``);
        ``store`` names what it opens (CONN-11)."""
        driver = cls(None, driver_name, visibility_timeout=visibility_timeout)
        driver._opener, driver._lazy, driver._store = opener, True, store
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

    @property
    def store_key(self) -> StoreKey | None:
        """The store this driver binds (``lane_pg.facade.stores``): named when configured,
        else read off an open backend (a PostgreSQL DSN and schema, a snapshot's path);
        None for one that no other connection can reach (memory)."""
        if self._store is not None:
            return self._store
        backend = self._backend
        dsn, schema = getattr(backend, "dsn", None), getattr(backend, "schema", None)
        if isinstance(dsn, str) and isinstance(schema, str):
            return postgres_store(dsn, schema)
        path = getattr(backend, "path", None)
        return local_store(path) if isinstance(path, Path) else None

    def __repr__(self) -> str:
        return f"BackendDriver({self._driver_name})"

    async def backend(self) -> JobQueueBackend:
        """The backend, opened now if this driver is lazy and not yet open."""
        if self._backend is None:
            async with self._opening:
                if self._backend is None:
                    if not self._lazy:
                        raise ConfigurationError(f"{self!r} was closed")
                    if self._opener is not None:
                        self._backend = await self._opener()
                    else:
                        self._backend = await connect(self._url, schema=self._schema)
        return self._backend

    async def push(self, envelope: Envelope, *, conn: object | None = None) -> str:
        return (await self.push_row(envelope, conn=conn)).id

    async def push_row(self, envelope: Envelope, *, conn: object | None = None) -> JobRow:
        """``push``, returning the stored (or, deduplicated, the owner's) snapshot."""
        backend = await self.backend()
        options = envelope.options_document(datetime.now(UTC))
        if conn is None:
            return await backend.jobs.add_job(
                envelope.queue, envelope.job_name, envelope.data, options
            )
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
            rows = await backend.jobs.add_jobs(queue, specs)
        else:
            rows = await self._transactional(backend).add_jobs_in(conn, queue, specs)
        return [row.id for row in rows]

    def _transactional(self, backend: JobQueueBackend) -> Transactions:
        if backend.transactions is None:
            raise ConfigurationError(
                f"the {self._driver_name} connection cannot enqueue inside a caller's"
                " transaction (conn=): only PostgreSQL can"
            )
        return backend.transactions

    async def _count(self, queue: str | None, states: Sequence[JobState]) -> int:
        backend = await self.backend()
        queues = [queue] if queue is not None else await backend.queues.list_queues()
        total = 0
        for name in queues:
            total += await backend.reads.get_job_count(name, list(states))
        return total

    async def size(self, queue: str | None = None) -> int:
        return await self._count(queue, SIZE_STATES)

    async def pending_size(self, queue: str | None = None) -> int:
        """Waiting plus due delayed jobs (A16)."""
        backend = await self.backend()
        queues = [queue] if queue is not None else await backend.queues.list_queues()
        return sum([await backend.reads.count_ready_jobs(name) for name in queues])

    async def delayed_size(self, queue: str | None = None) -> int:
        """Delayed jobs not due yet: a due one is pending (A16, INSP-5), counted once."""
        backend = await self.backend()
        queues = [queue] if queue is not None else await backend.queues.list_queues()
        return sum([await backend.reads.count_scheduled_jobs(name) for name in queues])

    async def reserved_size(self, queue: str | None = None) -> int:
        return await self._count(queue, ("active",))

    async def _listing(
        self, queue: str | None, listed: JobState | Literal["ready", "scheduled"], limit: int
    ) -> list[JobRow]:
        """Jobs of one state, or the ``ready`` (waiting and due delayed) or ``scheduled``
        (delayed, not due) ones, so a listing agrees with its count (INSP-5)."""
        if limit < 0:
            raise ConfigurationError(f"a listing limit cannot be negative, got {limit}")
        backend = await self.backend()
        queues = [queue] if queue is not None else await backend.queues.list_queues()
        found: list[JobRow] = []
        for name in queues:
            offset = 0
            while len(found) < limit:
                size = min(limit - len(found), 500)
                if listed == "ready":
                    page = await backend.reads.list_ready_jobs(name, offset=offset, limit=size)
                elif listed == "scheduled":
                    page = await backend.reads.list_scheduled_jobs(name, offset=offset, limit=size)
                else:
                    page = await backend.reads.list_jobs(name, [listed], offset=offset, limit=size)
                found.extend(page.items)
                offset += len(page.items)
                if not page.items or offset >= page.total:
                    break
        return found[:limit]

    async def pending_jobs(
        self, queue: str | None = None, *, limit: int = DEFAULT_LISTING_LIMIT
    ) -> list[JobRow]:
        return await self._listing(queue, "ready", limit)

    async def delayed_jobs(
        self, queue: str | None = None, *, limit: int = DEFAULT_LISTING_LIMIT
    ) -> list[JobRow]:
        return await self._listing(queue, "scheduled", limit)

    async def reserved_jobs(
        self, queue: str | None = None, *, limit: int = DEFAULT_LISTING_LIMIT
    ) -> list[JobRow]:
        return await self._listing(queue, "active", limit)

    async def clear(self, queue: str | None = None) -> int:
        backend = await self.backend()
        queues = [queue] if queue is not None else await backend.queues.list_queues()
        removed = 0
        for name in queues:
            # Parents first: removing a child first could release its parent to waiting.
            removed += await self._remove_waiting_children(backend, name)
            removed += await backend.cleanup.drain_jobs(name, delayed=True)
            # Active jobs whose lease has expired: their owner is gone (MGMT-19 guards the
            # valid ones inside the backend, at the backend's own clock).
            removed += len(await backend.cleanup.clean_jobs(name, "active", 0))
        return removed

    @staticmethod
    async def _remove_waiting_children(backend: JobQueueBackend, queue: str) -> int:
        removed = 0
        while True:
            page = await backend.reads.list_jobs(queue, ["waiting-children"], limit=500)
            gone = 0
            for job in page.items:
                try:
                    gone += await backend.jobs.remove_job(queue, job.id)
                except (JobNotFound, JobStateConflict):
                    continue  # settled or removed meanwhile: not ours to count
            removed += gone
            if not page.items or gone == 0:
                return removed

    async def pop(self) -> Reservation | None:
        backend = await self.backend()
        return await self._claim(backend, await backend.queues.list_queues())

    async def pop_from(self, queues: Sequence[str]) -> Reservation | None:
        if not queues:
            raise ConfigurationError("pop_from takes at least one queue")
        return await self._claim(await self.backend(), queues)

    async def _claim(self, backend: JobQueueBackend, queues: Sequence[str]) -> Reservation | None:
        if not queues:
            return None
        demands = [QueueDemand(name, 1) for name in dict.fromkeys(queues)]
        claimed = await backend.runs.claim_jobs(
            self.worker_id, demands, self.visibility_timeout, total=1
        )
        if not claimed:
            return None
        job = claimed[0]
        expires_at = job.lease_expires_at or datetime.now(UTC) + self.visibility_timeout
        return Reservation(job.lock_token, job, self._driver_name, expires_at)

    async def settle(self, reservation: Reservation, outcome: Settlement) -> SettleResult:
        backend = await self.backend()
        job, token = reservation.job, reservation.token
        try:
            if isinstance(outcome, Ack):
                await backend.runs.complete_job(job.queue, job.id, token, outcome.result)
            elif isinstance(outcome, Nack):
                await backend.runs.fail_job(
                    job.queue, job.id, token, outcome.reason, discard_retry=not outcome.retry
                )
            else:  # Release: the attempt is not charged (A2)
                await backend.runs.give_back_job(job.queue, job.id, token, outcome.delay)
        except (LockMismatch, JobNotFound):
            return STALE  # the lease is no longer ours: the backend changed nothing
        return SETTLED

    # -- pausing (PAUSE-3..5; lane_pg.facade.pausing) ------------------------------------

    async def pause_queue(self, queue: str) -> None:
        await (await self.backend()).queues.pause_queue(queue)

    async def resume_queue(self, queue: str) -> None:
        await (await self.backend()).queues.resume_queue(queue)

    async def pause_all(self) -> None:
        await (await self.backend()).queues.pause_all()

    async def resume_all(self) -> None:
        await (await self.backend()).queues.resume_all()

    async def pause_status(self, queues: Sequence[str]) -> PauseStatus:
        return await (await self.backend()).queues.get_pause_status(queues)

    async def close(self) -> None:
        if self._backend is not None:
            await self._backend.close()
            if self._lazy:
                self._backend = None  # a lazy driver may open again
