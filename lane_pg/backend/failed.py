"""The failed-job store (FAIL-1): one record per job that failed for good.

A record names the connection, queue and job name the job failed on, keeps the whole job
record (``envelope``: queue, id, name, data, options with ``options.meta``, attempts,
reason, stacktrace; ``job_document`` and ``lane._failed_job_document`` build the same
keys) and the exception text. Records are read oldest first in keyset pages by
``(failed_at, id)``, so a listing or a retry of any number of them never holds them all.

Stores: ``MemoryFailedJobStore`` (this process, lost on exit), ``NullFailedJobStore``
(discards every record: a job that fails for good is finalised and nothing is kept) and
``lane_pg.postgres.failed.DatabaseFailedJobStore`` (``lane.failed_jobs``, written in the
transaction of the terminal transition when the worker settles on the same database).

This module imports no driver: the worker (``lane_pg.worker.settlement``) and the facade
(``lane_pg.facade.failed``) both use it.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Protocol, runtime_checkable

from lane_pg.errors import InvalidOptions, LaneError
from lane_pg.types import JSON, JobRow

DEFAULT_PAGE = 100
MAX_PAGE = 10_000
"""The largest page ``page`` returns (``lane.failed_jobs_page`` refuses more)."""


class FailedJobNotFound(LaneError):
    """No failed-job record answers to an id (neither a record id nor a job id)."""

    sqlstate = "LN003"


class AmbiguousFailedJob(LaneError):
    """A job id that several failed-job records carry (the same id in two queues, or a job
    that failed for good twice): the message lists them, by record id."""

    sqlstate = "LN003"

    def __init__(self, message: str, candidates: list[FailedJobRecord]) -> None:
        super().__init__(message)
        self.candidates = candidates


class UndecodableFailedJob(LaneError):
    """A failed-job record whose envelope is not a job record this version can push again."""

    sqlstate = "LN003"


@dataclass(frozen=True, slots=True)
class FailedJobRecord:
    """One failed job as a store keeps it."""

    id: str
    """A UUID (A5), the id ``retry``/``forget`` take; not the job's id (``job_id``)."""
    connection: str
    queue: str
    job_name: str
    envelope: dict[str, JSON]
    exception: str
    failed_at: datetime

    @property
    def job_id(self) -> str | None:
        found = self.envelope.get("id")
        return found if isinstance(found, str) else None

    @property
    def exception_summary(self) -> str:
        """The exception's last non-empty line (a traceback ends with the error itself)."""
        lines = [line.strip() for line in self.exception.splitlines() if line.strip()]
        return lines[-1] if lines else ""

    @classmethod
    def of_job(
        cls,
        job: JobRow,
        connection: str,
        exception: str,
        *,
        failed_at: datetime | None = None,
        record_id: str | None = None,
    ) -> FailedJobRecord:
        """The record of ``job`` failing for good with ``exception`` on the worker's
        ``connection`` (CONN-13: the name it can be retried through; the push's label only
        when none is given)."""
        return cls(
            id=record_id or str(uuid.uuid4()),
            connection=connection or job_connection_label(job) or "default",
            queue=job.queue,
            job_name=job.name,
            envelope=job_document(job),
            exception=exception,
            failed_at=failed_at or datetime.now(UTC),
        )


def job_connection_label(job: JobRow) -> str | None:
    """The connection label a push stored on ``job`` (``options.meta.connection``)."""
    meta = job.options.get("meta")
    if isinstance(meta, dict):
        label = meta.get("connection")
        if isinstance(label, str):
            return label
    return None


def job_document(job: JobRow) -> dict[str, JSON]:
    """The job record a failed-job record keeps: ``lane._failed_job_document``'s keys."""
    return {
        "queue": job.queue,
        "id": job.id,
        "name": job.name,
        "data": job.data,
        "options": dict(job.options),
        "attempts_made": job.attempts_made,
        "attempts_started": job.attempts_started,
        "max_attempts": job.max_attempts,
        "failed_reason": job.failed_reason,
        "stacktrace": list(job.stacktrace),
        "created_at_ms": int(job.created_at.timestamp() * 1000),
    }


def fails_for_good(job: JobRow, discard: bool) -> bool:
    """Whether failing ``job`` (held, as claimed) ends it: ``lane._fail_one``'s test
    (``attempts_made + 1 >= max_attempts`` or a discarded retry). The worker asks before
    settling, to log the record first when its store lives outside the database."""
    return discard or job.attempts_made + 1 >= job.max_attempts


@dataclass(frozen=True, slots=True)
class FailedJobFilter:
    """Which records a page, count or walk covers (None: any)."""

    queue: str | None = None
    job_name: str | None = None
    before: datetime | None = None
    """Only records that failed before this time."""

    def matches(self, record: FailedJobRecord) -> bool:
        return (
            (self.queue is None or record.queue == self.queue)
            and (self.job_name is None or record.job_name == self.job_name)
            and (self.before is None or record.failed_at < self.before)
        )


ANY_RECORD = FailedJobFilter()

PageKey = tuple[datetime, str]
"""``(failed_at, id)`` of the last record of a page: the next page starts after it."""


def record_key(record: FailedJobRecord) -> PageKey:
    return (record.failed_at, record.id)


def check_record_id(record_id: str) -> str:
    """``record_id`` as a canonical UUID string; ``InvalidOptions`` when it is not one."""
    try:
        return str(uuid.UUID(str(record_id)))
    except ValueError:
        raise InvalidOptions(f"a failed-job id is a UUID, got {record_id!r}") from None


LIST_HINT = "list them with: python -m lane_pg failed"


async def records_of_job(
    store: FailedJobStore, job_id: str, queue: str | None = None
) -> list[FailedJobRecord]:
    """The records of the job ``job_id`` (in ``queue`` when given), oldest first: a walk
    of the store's pages (a failed-job table is small next to the jobs table)."""
    return [
        record
        async for record in walk(store, FailedJobFilter(queue=queue), page=MAX_PAGE)
        if record.job_id == job_id
    ]


async def find_failed(
    store: FailedJobStore, text: str, queue: str | None = None
) -> FailedJobRecord:
    """The record ``text`` names: a record id (a UUID), else a job id, which must name one
    record (in ``queue`` when given). ``FailedJobNotFound`` or ``AmbiguousFailedJob``
    (listing the candidates) otherwise; nothing is changed."""
    text = str(text).strip()
    if not text:
        raise FailedJobNotFound(
            f"an empty failed-job id: give a record id or a job id; {LIST_HINT}"
        )
    try:
        record_id: str | None = check_record_id(text)
    except InvalidOptions:
        record_id = None
    if record_id is not None:
        record = await store.find(record_id)
        if record is not None and (queue is None or record.queue == queue):
            return record
    # A job id (a UUID may be one too: a custom or failover-pinned id).
    found = await records_of_job(store, text, queue)
    if len(found) == 1:
        return found[0]
    where = "" if queue is None else f" in queue {queue!r}"
    if not found:
        raise FailedJobNotFound(
            f"no failed job has id {text!r}{where} (a failed-record id or a job id); {LIST_HINT}"
        )
    listed = "; ".join(
        f"record {record.id} (queue {record.queue}, {record.job_name},"
        f" failed {record.failed_at.isoformat(timespec='seconds')})"
        for record in found
    )
    queues = {record.queue for record in found}
    narrow = "give --queue, or " if queue is None and len(queues) > 1 else ""
    raise AmbiguousFailedJob(
        f"job id {text!r}{where} names {len(found)} failed-job records: {narrow}use a record"
        f" id: {listed}",
        found,
    )


def _check_limit(limit: int) -> int:
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_PAGE:
        raise InvalidOptions(f"a page holds 1 to {MAX_PAGE} records, got {limit!r}")
    return limit


@runtime_checkable
class FailedJobStore(Protocol):
    """Where failed jobs are recorded (FAIL-1)."""

    async def log(self, record: FailedJobRecord) -> None:
        """Keep ``record`` (a record with a stored id is left as it is)."""
        ...

    async def find(self, record_id: str) -> FailedJobRecord | None: ...

    async def forget(self, record_id: str) -> bool:
        """Delete one record; whether it existed."""
        ...

    async def flush(self, before: datetime | None = None) -> int:
        """Delete every record, or those that failed before ``before``; how many went."""
        ...

    async def count(self, where: FailedJobFilter = ANY_RECORD) -> int: ...

    async def page(
        self,
        where: FailedJobFilter = ANY_RECORD,
        *,
        after: PageKey | None = None,
        limit: int = DEFAULT_PAGE,
    ) -> list[FailedJobRecord]:
        """Up to ``limit`` records oldest first (by ``failed_at``, then id), after ``after``."""
        ...

    async def all(self) -> list[FailedJobRecord]:
        """Every record, oldest first (all in memory: ``walk`` pages instead)."""
        ...

    async def ids(self) -> list[str]: ...


@runtime_checkable
class RecordsInSettlement(Protocol):
    """A store the backend writes itself, in the transaction that fails the job for good
    (``DatabaseFailedJobStore`` on the worker's own database): the worker then passes its
    connection name to ``fail_jobs_recording`` instead of logging the record first."""

    async def records_in(self, backend: object) -> bool:
        """Whether settling through ``backend`` writes this store's records."""
        ...


async def walk(
    store: FailedJobStore, where: FailedJobFilter = ANY_RECORD, *, page: int = DEFAULT_PAGE
) -> AsyncIterator[FailedJobRecord]:
    """Every matching record, oldest first, one page in memory at a time. Records deleted
    while walking (a retry) do not move the cursor: it is the last record's key."""
    after: PageKey | None = None
    while True:
        records = await store.page(where, after=after, limit=page)
        for record in records:
            yield record
        if len(records) < page:
            return
        after = record_key(records[-1])


class PagedStore:
    """``page`` (its checks and defaults), ``all`` and ``ids`` over ``_page``, for stores
    that implement the rest."""

    async def page(
        self,
        where: FailedJobFilter = ANY_RECORD,
        *,
        after: PageKey | None = None,
        limit: int = DEFAULT_PAGE,
    ) -> list[FailedJobRecord]:
        _check_limit(limit)
        return await self._page(where, after, limit)

    async def _page(
        self, where: FailedJobFilter, after: PageKey | None, limit: int
    ) -> list[FailedJobRecord]:
        """The records ``where`` selects after ``after``, oldest first, at most ``limit``
        (checked already)."""
        raise NotImplementedError

    async def all(self) -> list[FailedJobRecord]:
        return [record async for record in walk(self, page=MAX_PAGE)]  # type: ignore[arg-type]

    async def ids(self) -> list[str]:
        return [record.id for record in await self.all()]


@dataclass
class MemoryFailedJobStore(PagedStore):
    """Records in this process (lost when it exits)."""

    _records: dict[str, FailedJobRecord] = field(default_factory=dict)

    async def log(self, record: FailedJobRecord) -> None:
        if not isinstance(record, FailedJobRecord):
            raise TypeError(f"log takes a FailedJobRecord, got {record!r}")
        self._records.setdefault(check_record_id(record.id), record)

    async def find(self, record_id: str) -> FailedJobRecord | None:
        return self._records.get(check_record_id(record_id))

    async def forget(self, record_id: str) -> bool:
        return self._records.pop(check_record_id(record_id), None) is not None

    async def flush(self, before: datetime | None = None) -> int:
        gone = [key for key, r in self._records.items() if before is None or r.failed_at < before]
        for key in gone:
            del self._records[key]
        return len(gone)

    async def count(self, where: FailedJobFilter = ANY_RECORD) -> int:
        return sum(1 for record in self._records.values() if where.matches(record))

    async def _page(
        self, where: FailedJobFilter, after: PageKey | None, limit: int
    ) -> list[FailedJobRecord]:
        found = sorted(
            (r for r in self._records.values() if where.matches(r)),
            key=lambda r: (r.failed_at, uuid.UUID(r.id)),
        )
        if after is not None:
            key = (after[0], uuid.UUID(after[1]))
            found = [r for r in found if (r.failed_at, uuid.UUID(r.id)) > key]
        return found[:limit]


class NullFailedJobStore(PagedStore):
    """Discards every record (Laravel's NullFailedJobProvider): a job that fails for good
    is finalised and nothing is kept."""

    async def log(self, record: FailedJobRecord) -> None:
        return None

    async def find(self, record_id: str) -> FailedJobRecord | None:
        check_record_id(record_id)
        return None

    async def forget(self, record_id: str) -> bool:
        check_record_id(record_id)
        return False

    async def flush(self, before: datetime | None = None) -> int:
        return 0

    async def count(self, where: FailedJobFilter = ANY_RECORD) -> int:
        return 0

    async def _page(
        self, where: FailedJobFilter, after: PageKey | None, limit: int
    ) -> list[FailedJobRecord]:
        return []
