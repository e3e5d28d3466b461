"""The facade's failed-job store and retries (FAIL-1, FAIL-4, FAIL-5, A4, A9): a mixin of
``QueueFacade``.

    Q.set_failed_store(MemoryFailedJobStore())
    await Q.retry_failed(record_id)          # True: pushed again and the record deleted
    await Q.retry_all_failed(before=cutoff)  # how many were pushed again

A retry goes to the connection and queue the job failed on (CONN-12): the connection the
record names, a failover member by its label, or, for a name that is only a label, the one
known store still holding the record's job; otherwise it is refused, never guessed. While
the failed row is retained in its backend it is ``retry_job`` (same row, attempts reset,
seed 000); once retention removed it, the stored job record is added again (under the same
job id when it is a custom id; a generated decimal id belongs to the queue's sequence, A5,
so the push gets a new one) with its data and options, minus what belonged to that run: its delay,
its deduplication id and the unique/debounce tokens of ``options.meta`` (A9: a retried
unique job carries no owner token and never reclaims or checks the lock). A row that is
live again (retried some other way) is left alone. Either way the record is deleted.
"""

from __future__ import annotations

import logging
from datetime import datetime
from typing import TYPE_CHECKING

from lane_pg.backend import JobQueueBackend
from lane_pg.backend.failed import (
    ANY_RECORD,
    FailedJobFilter,
    FailedJobRecord,
    FailedJobStore,
    PageKey,
    UndecodableFailedJob,
    check_record_id,
    record_key,
)
from lane_pg.backend.url import failed_store_of
from lane_pg.errors import ConfigurationError, LaneError, ValidationError
from lane_pg.facade.connection import BackendDriver, Connection
from lane_pg.facade.events import JobQueued
from lane_pg.facade.failover import FailoverDriver
from lane_pg.facade.job import decode_fields
from lane_pg.types import JSON, validate_queue_name

if TYPE_CHECKING:
    from lane_pg.facade.events import Events
    from lane_pg.facade.fake import QueueFake
    from lane_pg.facade.registry import JobRegistry

log = logging.getLogger("lane_pg.facade")

RETRY_PAGE = 100

DROPPED_OPTIONS = ("delay_ms", "deduplication", "repeat")
"""Options of the failed run a fresh push leaves out: its delay (available at once), its
deduplication id (A9) and repeat series (a retried occurrence starts no schedule)."""

DROPPED_META_PREFIXES = ("unique", "debounce")
"""``options.meta`` keys of the unique/debounce machinery (owner and superseded tokens,
UNIQ): a retried job carries none (A9)."""


def retry_options(envelope: dict[str, JSON]) -> dict[str, JSON]:
    """The options document a fresh push of a failed job's record stores."""
    options = envelope.get("options")
    if not isinstance(options, dict):
        raise UndecodableFailedJob("the record's job has no options object")
    document: dict[str, JSON] = {k: v for k, v in options.items() if k not in DROPPED_OPTIONS}
    meta = document.get("meta")
    if isinstance(meta, dict):
        document["meta"] = {
            key: value for key, value in meta.items() if not key.startswith(DROPPED_META_PREFIXES)
        }
    job_id = envelope["id"]
    if isinstance(job_id, str) and not job_id.isdigit():
        # A custom id is kept (an add with it is idempotent: a repeated retry adds once);
        # a generated id (decimal, A5) is the queue sequence's own: the push gets a new one.
        document["job_id"] = job_id
    return document


def decode_record(record: FailedJobRecord) -> tuple[str, str, str, JSON]:
    """``(queue, job id, job name, data)`` of the record's job; ``UndecodableFailedJob``
    when the envelope is not a job record."""
    envelope = record.envelope
    if not isinstance(envelope, dict):
        raise UndecodableFailedJob(f"failed job {record.id}: the envelope is not a JSON object")
    queue, job_id, name = envelope.get("queue"), envelope.get("id"), envelope.get("name")
    if not (isinstance(queue, str) and isinstance(job_id, str) and isinstance(name, str)):
        raise UndecodableFailedJob(
            f"failed job {record.id}: the envelope names no queue, id and name"
        )
    if not isinstance(envelope.get("options"), dict):
        raise UndecodableFailedJob(f"failed job {record.id}: the envelope has no options object")
    try:
        validate_queue_name(queue)
    except LaneError as exc:
        raise UndecodableFailedJob(f"failed job {record.id}: {exc}") from exc
    return queue, job_id, name, envelope.get("data")


class FailedJobs:
    """``QueueFacade``'s failed-job half (mixed in; uses its connections and events)."""

    _failed_store: FailedJobStore | None = None
    _refuse_process_local = False
    events: Events

    if TYPE_CHECKING:
        _fake: QueueFake | None
        registry: JobRegistry

        def driver_for(self, connection: str) -> Connection: ...

        def connection(self, name: str) -> Connection: ...

        def connection_names(self) -> list[str]: ...

    def set_failed_store(self, store: FailedJobStore | None) -> None:
        """Bind the store workers of this facade record into and retries read (None: none)."""
        if store is not None and not isinstance(store, FailedJobStore):
            raise TypeError(f"set_failed_store takes a FailedJobStore, got {store!r}")
        self._failed_store = store

    def failed_store(self) -> FailedJobStore | None:
        return self._failed_store

    def _bound_store(self) -> FailedJobStore:
        if self._failed_store is None:
            raise ConfigurationError(
                "no failed-job store is bound: call Q.set_failed_store(...) (the postgres"
                " driver binds its database store at boot)"
            )
        return self._failed_store

    def refuse_process_local_retries(self) -> None:
        """Refuse retries into a connection whose store lives in one process (memory):
        for a process that is not the app's (the CLI), where the job would be lost."""
        self._refuse_process_local = True

    async def _retry_driver(self, record: FailedJobRecord) -> BackendDriver:
        driver = await self._retry_store(record)
        if self._refuse_process_local and driver.driver_name == "memory":
            raise ConfigurationError(
                f"failed job {record.id} failed on connection {record.connection!r}, a memory"
                " store that lives in the app's process: a retry from here would be lost with"
                " this process; retry it in the app (Q.retry_failed)"
            )
        return driver

    async def _retry_store(self, record: FailedJobRecord) -> BackendDriver:
        """The driver of the store ``record``'s job belongs to (CONN-12, CONN-13): the
        connection it names; an inner connection of a failover list by its label; else,
        for a name that is only a label (CONN-6, or a record written before records named
        the worker's connection), the one known store that still holds the record's job
        (same queue, id, name and creation time). Never a guess: otherwise it refuses."""
        names = self.connection_names()
        if record.connection in names:
            driver = self.connection(record.connection)
            if isinstance(driver, BackendDriver):
                return driver
            inner = await _holder(record, _backend_drivers(driver))
            if inner is not None:
                return inner
            raise ConfigurationError(
                f"connection {record.connection!r} ({driver!r}) cannot push a stored job"
                " record again: retries need a backend-backed driver"
            )
        drivers: list[BackendDriver] = []
        for name in names:
            for label, inner in _labelled(name, self.connection(name)):
                if label == record.connection:
                    return inner
                if all(inner is not known for known in drivers):
                    drivers.append(inner)
        holder = await _holder(record, drivers)
        if holder is not None:
            return holder
        known = ", ".join(names) or "none"
        raise ConfigurationError(
            f"failed job {record.id} failed on connection {record.connection!r}, which"
            f" is not registered (known: {known}), and no known store holds its job: register"
            " that connection (LANE_PG_CONNECTIONS, or in the app) to retry it"
        )

    async def retry_failed(self, record_id: str) -> bool:
        """Push one failed job again and delete its record (FAIL-4); False when no record
        has this id. Raises ``ConfigurationError`` for a connection that is not registered
        and ``UndecodableFailedJob`` for a record that is not a job record; the record is
        kept then."""
        store = self._bound_store()
        record = await store.find(check_record_id(record_id))
        if record is None:
            return False
        return await self._retry(store, record)

    async def _retry(self, store: FailedJobStore, record: FailedJobRecord) -> bool:
        """Push ``record``'s job again; False when another retry took the record first.

        The record is deleted before the push, so of two concurrent retries (two
        ``retry all`` runs) one pushes and the other finds nothing to take; a push that
        fails logs the record back, so it is never lost."""
        if self._fake is not None:
            return await self._retry_into_fake(self._fake, store, record)
        queue, job_id, name, data = decode_record(record)
        driver = await self._retry_driver(record)
        options = retry_options(record.envelope)
        if not await store.forget(record.id):
            return False
        try:
            backend = await driver.backend()
            row = await backend.jobs.get_job(queue, job_id)
            if row is None:
                stored = await backend.jobs.add_job(queue, name, data, options)
                await self.events.emit(JobQueued(record.connection, queue, name, stored.id))
            elif row.state in ("failed", "completed"):
                await backend.jobs.retry_job(queue, job_id)
                await self.events.emit(JobQueued(record.connection, queue, name, job_id))
            else:
                log.info(
                    "failed job %s: job %s/%s is %s again already; its record goes",
                    record.id,
                    queue,
                    job_id,
                    row.state,
                )
        except BaseException:
            await store.log(record)
            raise
        return True

    async def _retry_into_fake(
        self, fake: QueueFake, store: FailedJobStore, record: FailedJobRecord
    ) -> bool:
        """TEST-6: the job is rebuilt from its registered class and recorded by the fake,
        on the queue and connection it failed on; no driver is asked. The record is still
        deleted (the failed-job store is not faked)."""
        queue, _, name, data = decode_record(record)
        cls = self.registry.get(name)
        if cls is None:
            raise ConfigurationError(
                f"failed job {record.id}: no job class is registered for {name!r}, so the"
                " fake cannot rebuild the job it would push again"
            )
        job = decode_fields(cls, data)
        custom = retry_options(record.envelope).get("job_id")
        if not await store.forget(record.id):
            return False
        try:
            await fake.record_retry(
                job, queue, record.connection, custom if isinstance(custom, str) else None
            )
        except BaseException:
            await store.log(record)
            raise
        return True

    async def retry_all_failed(
        self, before: datetime | None = None, *, where: FailedJobFilter | None = None
    ) -> int:
        """Retry every record (or those that failed before ``before``), page by page, and
        return how many were pushed again (FAIL-5). A record on a connection that is not
        registered, or one that does not decode, is kept with a warning and the walk goes
        on; any other error stops it (the records before it are retried and gone)."""
        store = self._bound_store()
        base = where or ANY_RECORD
        scope = FailedJobFilter(base.queue, base.job_name, before or base.before)
        retried = 0
        after: PageKey | None = None
        while True:
            page = await store.page(scope, after=after, limit=RETRY_PAGE)
            for record in page:
                try:
                    retried += await self._retry(store, record)
                except (ConfigurationError, UndecodableFailedJob, ValidationError) as exc:
                    # ValidationError: stored data or options the backend refuses now.
                    log.warning("failed job %s kept: %s", record.id, exc)
            if len(page) < RETRY_PAGE:
                return retried
            after = record_key(page[-1])


def _labelled(name: str, driver: Connection) -> list[tuple[str, BackendDriver]]:
    """``(label, driver)`` of the stores behind connection ``name``: itself, or each
    connection of a failover list under its own label."""
    if isinstance(driver, FailoverDriver):
        return [
            (label, inner)
            for label, inner in driver.connections
            if isinstance(inner, BackendDriver)
        ]
    return [(name, driver)] if isinstance(driver, BackendDriver) else []


def _backend_drivers(driver: Connection) -> list[BackendDriver]:
    return [inner for _, inner in _labelled("", driver)]


async def _holder(record: FailedJobRecord, drivers: list[BackendDriver]) -> BackendDriver | None:
    """The driver whose store holds ``record``'s job (failed or completed: the row the
    record was made of, matched by queue, id, name and creation time), if exactly one."""
    envelope = record.envelope
    queue, job_id, created = (
        envelope.get("queue"),
        envelope.get("id"),
        envelope.get("created_at_ms"),
    )
    if not (isinstance(queue, str) and isinstance(job_id, str) and isinstance(created, int)):
        return None
    found: list[BackendDriver] = []
    for driver in drivers:
        row = await (await driver.backend()).jobs.get_job(queue, job_id)
        if (
            row is not None
            and row.name == record.job_name
            and int(row.created_at.timestamp() * 1000) == created
        ):
            found.append(driver)
    return found[0] if len(found) == 1 else None


def default_failed_store(source: JobQueueBackend | Connection) -> FailedJobStore | None:
    """The failed-job store a connection binds by default (FAIL-8): the one rule that
    ``bootstrap_from_env``, ``App``, every worker (``failed_store_for``) and the CLI's
    failed-job commands apply. The store the backend's kind keeps (``failed_store_of``:
    PostgreSQL's database store), over a backend that records failed jobs or over a
    connection of that kind (opened on the store's first use, so binding it at boot does
    no I/O); None for the others (``Q.set_failed_store`` binds one)."""
    if isinstance(source, BackendDriver):
        return failed_store_of(source.driver_name, source)
    if isinstance(source, JobQueueBackend) and source.failed_records is not None:
        return failed_store_of(source.kind, source)
    return None


def failed_store_for(facade: FailedJobs, backend: JobQueueBackend) -> FailedJobStore | None:
    """The store a worker of ``facade`` on ``backend`` records into: the facade's bound
    store, else the backend's default (``default_failed_store``)."""
    return facade.failed_store() or default_failed_store(backend)


def bind_default_failed_store(facade: FailedJobs, source: JobQueueBackend | Connection) -> None:
    """Bind ``source``'s default store (``default_failed_store``) to ``facade`` when it has
    none bound and ``source`` has one."""
    if facade.failed_store() is None:
        store = default_failed_store(source)
        if store is not None:
            facade.set_failed_store(store)
