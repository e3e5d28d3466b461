"""Optional capabilities beside the protocol: what some backends can do and others need not.

The worker checks for them with ``isinstance`` instead of widening ``JobQueueBackend``, so
the memory backend (and a Redis backend) stays free of methods that mean nothing to it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import KW_ONLY, dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from lane_pg.backend.operation import Arguments, Handle, operation
from lane_pg.types import (
    JSON,
    Failure,
    FinalizeOutcome,
    JobOptions,
    JobRow,
    JobSpec,
)

if TYPE_CHECKING:
    from lane_pg.backend import JobQueueBackend


@dataclass(frozen=True, slots=True)
class IndexSize:
    """One index as ``Space.index_sizes`` reads it."""

    table: str
    index: str
    bytes: int
    live_rows: int
    """The table's live rows as the statistics estimate them (``n_live_tup``): they can be
    off several times over right after a wave of jobs (W6 read 33,636 for 10,000)."""


class DeadTuples(Arguments[dict[str, int]]):
    """Dead row versions per table of the backend's schema."""


class Vacuum(Arguments[int]):
    """VACUUM one table without waiting for its lock; the dead row versions left."""

    table: str


class IndexSizes(Arguments[list[IndexSize]]):
    """Every valid index of the backend's tables with its size and its table's live rows."""


class CountRows(Arguments[int]):
    """The rows of one table of the backend's schema, counted up to ``limit``."""

    table: str
    limit: int


class Reindex(Arguments[int]):
    """Rebuild one index without blocking writers; its size in bytes afterwards."""

    index: str


class Space(Handle, name="space"):
    """A backend whose tables the leader vacuums (PostgreSQL; the memory backend has none)."""

    __slots__ = ()

    dead_tuples = operation(DeadTuples)
    vacuum = operation(Vacuum)
    index_sizes = operation(IndexSizes)
    count_rows = operation(CountRows)
    reindex = operation(Reindex)


class PruneIdempotencyKeys(Arguments[int]):
    """Delete at most ``limit`` expired idempotency keys; how many went (WORK-18)."""

    _: KW_ONLY
    limit: int = 1000
    now: datetime | None = None


class Idempotency(Handle, name="idempotency"):
    """A backend with the idempotency key table of ``lane_pg.postgres.idempotency`` (PostgreSQL)."""

    __slots__ = ()

    prune_idempotency_keys = operation(PruneIdempotencyKeys)


@runtime_checkable
class HasDedicatedConnection(Protocol):
    """A backend that can lend a sequential caller a connection of its own (PostgreSQL)."""

    async def dedicated(self) -> JobQueueBackend | None:
        """A backend over one connection of its own, which the caller closes; or None."""
        ...


@runtime_checkable
class WakeupSource(Protocol):
    """What wakes an idle worker early (PostgreSQL: LISTEN on its own connection).

    Only a speed-up: a worker also polls, so a lost wake-up costs latency, never a job.
    """

    async def start(self) -> None:
        """Connect and start listening (raises when the backend is unreachable)."""
        ...

    async def close(self) -> None: ...

    def wake(self) -> None:
        """Wake the waiting worker from inside the process (a slot freed, a stop)."""
        ...

    async def wait(self, timeout: float | None) -> bool:  # noqa: ASYNC109 (bounded poll)
        """Wait until woken or ``timeout`` seconds passed; True when woken."""
        ...


@runtime_checkable
class HasWakeups(Protocol):
    """A backend that can wake its idle workers early (PostgreSQL: a LISTEN connection)."""

    def wakeups(
        self, queues: Sequence[str] | None, *, name: str, health_interval: float
    ) -> WakeupSource | None:
        """A not yet started ``WakeupSource`` for ``queues`` (every queue when None);
        ``name`` labels its connection, ``health_interval`` is how often it checks it.
        None when the backend cannot wake them as configured: they poll."""
        ...


class AddJobIn(Arguments[JobRow]):
    """``add_job`` through ``conn``: written, and visible to others, only when the
    caller commits; a rollback leaves nothing."""

    conn: object
    queue: str
    name: str
    data: JSON = None
    options: JobOptions | dict[str, JSON] | None = None


class AddJobsIn(Arguments[list[JobRow]]):
    """``add_jobs`` through ``conn``, inside the caller's transaction as ``add_job_in``."""

    conn: object
    queue: str
    specs: Sequence[JobSpec]


class SameDatabase(Arguments[bool]):
    """Whether ``conn`` (a caller's connection, as ``add_job_in`` takes it) is open on
    the database this backend writes to: the same database of the same running server
    (name, port and start time), so that a job added through it commits and rolls
    back with the caller's transaction (A24). It reads server settings only, so
    ``conn`` may be on any database, and its transaction stays usable."""

    conn: object


class Transactions(Handle, name="transactions"):
    """A backend that can add jobs through a caller's own connection, inside the caller's
    transaction (TX-1): PostgreSQL, for asyncpg, psycopg and SQLAlchemy connections."""

    __slots__ = ()

    add_job_in = operation(AddJobIn)
    add_jobs_in = operation(AddJobsIn)
    same_database = operation(SameDatabase)


class FailJobsRecording(Arguments[list[FinalizeOutcome]]):
    """``fail_jobs``; each item that fails for good is also recorded, under its stored
    connection label, else ``connection``."""

    items: Sequence[Failure]
    connection: str
    _: KW_ONLY
    now: datetime | None = None


class FailedRecords(Handle, name="failed_records"):
    """A backend that records terminal failures in its own failed-job table, in the
    transaction of the transition (PostgreSQL: ``lane.fail_jobs``' last parameter)."""

    __slots__ = ()

    fail_jobs_recording = operation(FailJobsRecording)
