"""Unique pushes, debounced pushes and after-commit dispatch (UNIQ, TX-3..14), mixed into
``QueueFacade``.

Unique (UNIQ-1..7, -15). The lock of ``push_unique(job)`` is a TTL dedup owner with the
document ``{id: "<job_name>:<unique_id>", ttl_ms: unique_for, token, kind: "unique"}``:
one per connection, whatever the queue (migration 0018), found by
``get_deduplication_job_id(queue, key)`` in the queue of its job; it outlives completion
(DEDUP-4). The push is one add that writes the lock and the job in one transaction
(UNIQ-5): ``JobQueueing``, the add, then ``JobQueued``, or ``UniqueJobSkipped`` when the
add found the key held (False). A failed add leaves no lock (UNIQ-3).
``unique_until_processing`` jobs free the lock right before ``handle()`` by their token
(``release_deduplication_key``), so an old attempt never frees a newer push's lock (UNIQ-7,
Laravel PR #59567); a retried job has no token (A9, ``retry_job``).

On a ``null`` connection a unique or debounced push is discarded like any push (True, or
its id); on a ``failover`` one it falls through the list as a plain push does, and the lock
or window is taken on the store that accepts the job (``FailoverDriver.fall_through``).

Debounce (UNIQ-9..13). The window of ``(job_name, debounce_id)`` is a dedup owner keyed
``debounce:<job_name>:<debounce_id>`` (no TTL, per queue), and each dispatch is one
``add_debounced_job`` call, which reads and writes the window in one step (so concurrent
dispatches of one window each see the one before): the dispatch is stored ``window`` later
and owns the window; the window's job it finds is replaced when still delayed
(``JobDebounced`` at push), else superseded: the worker, finding another job owning the
window, completes it without running it (``JobDebounced``). A missing window runs the job
(UNIQ-12). Once a burst (the window row's ``created_at``) has waited ``max_wait``, the
dispatch is stored without delay and without the window, which is released, so nothing
supersedes it and the next dispatch starts a new burst (UNIQ-10). ``options.meta.debounce``
``{key}`` marks a debounced dispatch for the worker.

After commit (TX). See ``lane_pg.facade.transaction``. Inside a tracked transaction a
deferring push is resolved now and written at commit; its id is assigned now (a custom id
``ac-<uuid>``) so the call can return it. When the transaction is on the database the
push's PostgreSQL connection writes to (A24), the job is written inside the transaction
instead (rollback-atomic, stronger than deferring) and only ``JobQueueing``/``JobQueued``
wait for the commit, after a declared ``Job.delay`` is re-timed to count from the commit
(TX-9, ``reschedule_job``; explicit times stay). A deferred ``push_unique`` on another
store reserves its key at once
(``reserve_deduplication_key``); rollback, a refused COMMIT or a savepoint rollback give
it back (owner-scoped), and the add at commit takes the reservation over. If the
reservation expired and another push took the key meanwhile, the job is still written
(the call already answered True) and a warning names the job and key (UNIQ-4).
"""

from __future__ import annotations

import dataclasses
import logging
import os
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, TypeGuard

from lane_pg import tracing
from lane_pg.backend import Dedup
from lane_pg.errors import (
    ConfigurationError,
    DeduplicationConflict,
    JobNotFound,
    JobStateConflict,
)
from lane_pg.facade.connection import BackendDriver, Connection
from lane_pg.facade.envelope import DebounceOptions, Envelope, EnvelopeOverrides
from lane_pg.facade.events import JobDebounced, JobQueued, JobQueueing, UniqueJobSkipped
from lane_pg.facade.failover import FailoverDriver
from lane_pg.facade.job import Job, job_name_of
from lane_pg.facade.null import NullDriver
from lane_pg.facade.transaction import DISCARD_NOTHING, Deferred, Transaction, current_transaction
from lane_pg.types import JSON, Duration, JobRow, to_millis

if TYPE_CHECKING:
    from lane_pg.facade.events import Events
    from lane_pg.facade.fake import QueueFake

log = logging.getLogger("lane_pg.facade")

META_UNIQUE = "unique"
"""``options.meta`` key that marked a unique push before migration 0018 (its lock is now
``deduplication.kind``), read for jobs stored then."""
META_DEBOUNCE = "debounce"
"""``options.meta`` key marking a debounced dispatch: ``{"key"}`` (before the window was one
call, also ``token``, ``first_at_ms`` and ``flush``, which the worker still honours)."""
AFTER_COMMIT_ENV = "LANE_PG_AFTER_COMMIT"
DEFERRED_ID_PREFIX = "ac-"


def process_after_commit() -> bool:
    """TX-8: ``LANE_PG_AFTER_COMMIT=true|1``, read at each push."""
    return os.environ.get(AFTER_COMMIT_ENV, "").strip().lower() in ("true", "1")


def wants_after_commit(envelope: Envelope) -> bool:
    """TX-7, -8, -13: the per-push override, else the process switch, else the instance."""
    if envelope.after_commit is not None:
        return envelope.after_commit
    return process_after_commit() or envelope.job.dispatch_after_commit()


def declares_unique(cls: type[Job]) -> bool:
    return cls.unique_id is not Job.unique_id


def refuse_unique_and_debounce(cls: type[Job]) -> None:
    """UNIQ-14: one class is unique or debounced, never both."""
    if cls.debounce_for is not None and declares_unique(cls):
        raise ConfigurationError(
            f"{cls.__qualname__} declares both debounce_for and unique_id: a job type is"
            " debounced or unique, not both"
        )


def meta_of(row: JobRow, key: str) -> dict[str, JSON] | None:
    meta = row.options.get("meta")
    value = meta.get(key) if isinstance(meta, dict) else None
    return value if isinstance(value, dict) else None


def unique_lock_of(row: JobRow) -> tuple[str, str | None] | None:
    """``(key, owner token)`` of a unique push's job (``deduplication.kind`` unique; for a
    job pushed before migration 0018, the ``options.meta.unique`` mark), else None. The
    token is None once the job was retried (A9)."""
    dedup = row.options.get("deduplication")
    if not isinstance(dedup, dict):
        return None
    key, token = dedup.get("id"), dedup.get("token")
    if not isinstance(key, str) or (
        dedup.get("kind") != "unique" and meta_of(row, META_UNIQUE) is None
    ):
        return None
    return key, token if isinstance(token, str) else None


def unique_token_of(row: JobRow) -> str | None:
    """The owner token of the unique push that stored ``row``, if it is one."""
    lock = unique_lock_of(row)
    return None if lock is None else lock[1]


def _runs_inline(driver: Connection) -> bool:
    """The sync connection: it runs each push's handler inside the push."""
    return driver.runs_inline


def _discards(driver: Connection) -> bool:
    """The null connection (DRV-4): a push writes nothing and answers as if it had."""
    return isinstance(driver, NullDriver) and not driver.runs_inline


def _fails_over(driver: Connection) -> TypeGuard[FailoverDriver]:
    return isinstance(driver, FailoverDriver)


class UniquePushes:
    """``push_unique``, ``push_debounced``, ``push_after_commit`` and the after-commit and
    debounce turns of ``dispatch`` (mixed into ``QueueFacade``)."""

    if TYPE_CHECKING:
        events: Events
        _fake: QueueFake | None

        def driver_for(self, connection: str) -> Connection: ...

        def envelope(
            self,
            job: Job,
            overrides: EnvelopeOverrides = ...,
            *,
            delay: Duration | None = None,
            available_at: datetime | None = None,
        ) -> Envelope: ...

        async def dispatch(self, envelope: Envelope, *, conn: object | None = None) -> str: ...

        async def write(self, envelope: Envelope, *, conn: object | None = None) -> str: ...

        async def write_bulk(
            self, envelopes: Sequence[Envelope], *, conn: object | None = None
        ) -> list[str]: ...

    # -- public pushes ---------------------------------------------------------------------

    async def push_unique(self, job: Job) -> bool:
        """Push unless a live lock ``job_name:unique_id`` holds (UNIQ-1): True when pushed."""
        return await self._push_unique(self.envelope(job))

    async def push_unique_later(self, job: Job, at: datetime) -> bool:
        if at.tzinfo is None:
            raise ConfigurationError("push_unique_later takes an aware datetime (with a time zone)")
        return await self._push_unique(self.envelope(job, available_at=at))

    async def later_unique(self, delay: Duration, job: Job) -> bool:
        return await self._push_unique(self.envelope(job, delay=delay))

    async def push_after_commit(self, job: Job) -> str:
        """``push_with(job, EnvelopeOverrides(after_commit=True))`` (TX-7)."""
        return await self.dispatch(self.envelope(job, EnvelopeOverrides(after_commit=True)))

    async def push_debounced(self, job: Job, options: DebounceOptions) -> str:
        """Keep only the latest dispatch of a burst (UNIQ-9): returns this dispatch's id."""
        envelope = self.envelope(job)
        envelope.debounce = _checked(options)
        return await self.dispatch(envelope)

    # -- the dispatch turns ----------------------------------------------------------------

    async def dispatch_special(self, envelope: Envelope, conn: object | None) -> str | None:
        """The push's id when it is debounced or deferred (handled here), else None."""
        cls = type(envelope.job)
        refuse_unique_and_debounce(cls)
        if envelope.debounce is None and cls.debounce_for is not None:
            envelope.debounce = _checked(
                DebounceOptions(cls.debounce_for, cls.max_debounce_wait, envelope.job.debounce_id())
            )
        tx = current_transaction() if conn is None else None
        if tx is not None and wants_after_commit(envelope):
            driver = self.driver_for(envelope.connection)  # TX-14: an unknown one raises now
            if envelope.debounce is None and await self._shares_database(tx, driver):
                await self._prepare_queue(tx, driver, envelope.queue)
                job_id = await self.push_on(driver, envelope, conn=tx.conn)
                tx.defer(
                    Deferred(self._committed(envelope, job_id), DISCARD_NOTHING, _what(envelope))
                )
                return job_id
            if envelope.job_id is None:
                envelope.job_id = f"{DEFERRED_ID_PREFIX}{uuid.uuid4().hex}"
            job_id = envelope.job_id

            async def run() -> None:
                if envelope.debounce is not None:
                    await self._debounce(envelope, None)
                else:
                    await self.write(envelope)

            tx.defer(Deferred(run, DISCARD_NOTHING, _what(envelope)))
            return job_id
        if envelope.debounce is not None:
            if _runs_inline(self.driver_for(envelope.connection)):
                return None  # UNIQ-13: nothing collapses under sync, every dispatch runs
            return await self._debounce(envelope, conn)
        return None

    async def bulk_special(
        self, envelopes: Sequence[Envelope], conn: object | None
    ) -> list[str] | None:
        """PUSH-6: a bulk call defers all or nothing (when any of its jobs wants to), the
        same way as one push; it never arms a debounce window (UNIQ-13). None: write now."""
        tx = current_transaction() if conn is None else None
        if tx is None or not any(wants_after_commit(envelope) for envelope in envelopes):
            return None
        driver = self.driver_for(envelopes[0].connection)  # TX-14
        if await self._shares_database(tx, driver):
            await self._prepare_queue(tx, driver, envelopes[0].queue)
            ids = await self.bulk_push_on(driver, envelopes, conn=tx.conn)
            for envelope, job_id in zip(envelopes, ids, strict=True):
                emit = self._committed(envelope, job_id)
                tx.defer(Deferred(emit, DISCARD_NOTHING, _what(envelope)))
            return ids
        for envelope in envelopes:
            if envelope.job_id is None:
                envelope.job_id = f"{DEFERRED_ID_PREFIX}{uuid.uuid4().hex}"

        async def run() -> None:
            await self.write_bulk(envelopes)

        tx.defer(Deferred(run, DISCARD_NOTHING, _what(envelopes[0])))
        return [envelope.job_id or "" for envelope in envelopes]

    # -- unique ----------------------------------------------------------------------------

    async def _push_unique(self, envelope: Envelope) -> bool:
        cls = type(envelope.job)
        refuse_unique_and_debounce(cls)
        unique_id = envelope.job.unique_id()
        if unique_id is None:
            raise ConfigurationError(
                f"push_unique: {cls.__qualname__}.unique_id() returned None; a unique push"
                " needs the id its lock is keyed by"
            )
        key = f"{envelope.job_name}:{unique_id}"
        token = uuid.uuid4().hex
        ttl_ms = to_millis(cls.unique_for, "unique_for")
        if ttl_ms <= 0:
            raise ConfigurationError(f"{cls.__qualname__}.unique_for must be positive")
        if self._fake is not None:  # TEST-3: no lock is held, every unique push is fresh
            await self._fake.record(envelope)
            return True
        envelope.deduplication = {"id": key, "ttl_ms": ttl_ms, "token": token, "kind": "unique"}
        announce = _Announce(self.events, envelope)
        return await self._unique_on(self.driver_for(envelope.connection), envelope, announce)

    async def _unique_on(self, driver: Connection, envelope: Envelope, announce: _Announce) -> bool:
        """The unique push of ``envelope`` on ``driver``: inline under sync (UNIQ-8),
        discarded under null (True, as a plain push there answers an id), falling through a
        failover list with the lock taken on the store that accepts the job (FOV-1)."""
        dedup = envelope.deduplication or {}
        key, token, unique_id = str(dedup["id"]), dedup["token"], str(envelope.job.unique_id())
        if _runs_inline(driver):
            return await self._push_unique_inline(driver, envelope, key, announce)
        if _discards(driver):
            await self.write_on(driver, envelope, announce)
            return True
        if _fails_over(driver):

            async def attempt(inner: Connection, pinned: Envelope) -> bool:
                return await self._unique_on(inner, pinned, announce)

            return await driver.fall_through(envelope, attempt)
        driver = _backend(driver, "push_unique")
        tx = current_transaction()
        deferred = tx is not None and wants_after_commit(envelope)
        if tx is not None and deferred and await self._shares_database(tx, driver):
            return await self._unique_in_transaction(tx, driver, envelope, unique_id)
        if tx is not None and deferred:
            # Onto another store at commit: the key is reserved now, given back by a
            # rollback, and taken over by the add at commit.
            locks = await _locks(driver)
            ttl_ms = dedup["ttl_ms"]
            assert isinstance(ttl_ms, int)
            ttl = timedelta(milliseconds=ttl_ms)
            if not await locks.reserve_deduplication_key(envelope.queue, key, str(token), ttl):
                await self._skipped(envelope, unique_id)
                return False

            async def give_back() -> None:
                await locks.release_deduplication_key(
                    envelope.queue, key, str(token), reservation_only=True
                )

            tx.defer(Deferred(self._reserved_write(driver, envelope), give_back, _what(envelope)))
            return True
        # UNIQ-5: the lock and the job in one add, one transaction: a crash can leave
        # neither alone, and a failed add leaves no lock (UNIQ-3). JobQueueing comes before
        # that write, so a push the lock suppresses emits JobQueueing, then
        # UniqueJobSkipped instead of JobQueued (docs/decisions.md).
        await announce()
        try:
            row = await driver.push_row(envelope)
        except DeduplicationConflict:  # reserved by a pending after-commit push elsewhere
            await self._skipped(envelope, unique_id)
            return False
        if unique_token_of(row) != token:
            await self._skipped(envelope, unique_id)
            return False
        await self.events.emit(
            JobQueued(envelope.connection, envelope.queue, envelope.job_name, row.id)
        )
        return True

    async def _unique_in_transaction(
        self, tx: Transaction, driver: BackendDriver, envelope: Envelope, unique_id: str
    ) -> bool:
        """A24: the lock and the job in the caller's transaction; the events at commit. A
        savepoint keeps a refused add (a key reserved elsewhere) from aborting it."""
        token = (envelope.deduplication or {}).get("token")
        await self._prepare_queue(tx, driver, envelope.queue)
        try:
            async with tx.conn.transaction():
                row = await driver.push_row(envelope, conn=tx.conn)
        except DeduplicationConflict:
            await self._skipped(envelope, unique_id)
            return False
        if unique_token_of(row) != token:
            await self._skipped(envelope, unique_id)
            return False
        tx.defer(Deferred(self._committed(envelope, row.id), DISCARD_NOTHING, _what(envelope)))
        return True

    def _reserved_write(self, driver: BackendDriver, envelope: Envelope) -> Any:
        async def run() -> None:
            dedup = envelope.deduplication or {}
            key, token = dedup.get("id"), dedup.get("token")
            await self.events.emit(
                JobQueueing(envelope.connection, envelope.queue, envelope.job_name, envelope.job)
            )
            try:
                row: JobRow | None = await driver.push_row(envelope)
            except DeduplicationConflict:
                row = None
            if row is None or unique_token_of(row) != token:
                # UNIQ-4: our reservation ran out and another push holds the key now; the
                # caller was told True, so the job is written, without the lock.
                log.warning(
                    "the unique lock %r of %s expired before its after-commit push and is"
                    " held by another push now: the job is pushed without it",
                    key,
                    envelope.job_name,
                )
                envelope.deduplication = None
                row = await driver.push_row(envelope)
            await self.events.emit(
                JobQueued(envelope.connection, envelope.queue, envelope.job_name, row.id)
            )

        return run

    async def _push_unique_inline(
        self, driver: Connection, envelope: Envelope, key: str, announce: _Announce
    ) -> bool:
        """UNIQ-8: the sync connection stores nothing that could hold a lock; the handler
        runs inside this call, and the result is True."""
        log.warning(
            "push_unique %s on the sync connection: no lock is held, exclusivity could not"
            " be proven",
            key,
        )
        if type(envelope.job).unique_until_processing:
            log.warning(
                "push_unique %s: the lock's lease was lost before the push returned (the sync"
                " handler ran inline and released its caller's lock)",
                key,
            )
        await self.write_on(driver, dataclasses.replace(envelope, deduplication=None), announce)
        return True

    async def write_on(
        self,
        driver: Connection,
        envelope: Envelope,
        announce: _Announce | None = None,
        *,
        conn: object | None = None,
    ) -> str:
        """The plain write: ``JobQueueing`` (once per push: ``announce``), the driver's
        push, ``JobQueued``."""
        if announce is not None:
            await announce()
        else:  # the plain path: no helper object
            await self.events.emit(
                JobQueueing(envelope.connection, envelope.queue, envelope.job_name, envelope.job)
            )
        job_id = await self.push_on(driver, envelope, conn=conn)
        await self.events.emit(
            JobQueued(envelope.connection, envelope.queue, envelope.job_name, job_id)
        )
        return job_id

    @staticmethod
    async def push_on(driver: Connection, envelope: Envelope, *, conn: object | None) -> str:
        """``driver.push``, in a ``send`` span whose context the job stores when tracing
        is on (``lane_pg.tracing``)."""
        if not tracing.enabled():  # off: one global read per push
            return await driver.push(envelope, conn=conn)
        with tracing.sending(envelope.queue, envelope.job_name) as span:
            assert span is not None
            envelope.meta[tracing.META_KEY] = span.carrier()
            job_id = await driver.push(envelope, conn=conn)
            span.sent([job_id])
        return job_id

    @staticmethod
    async def bulk_push_on(
        driver: Connection, envelopes: Sequence[Envelope], *, conn: object | None
    ) -> list[str]:
        """``driver.bulk_push``: when tracing is on, in one ``send`` span, each job
        storing the context of a ``create`` span of its own, the send span's child."""
        if not tracing.enabled():  # off: one global read per bulk push
            return await driver.bulk_push(envelopes, conn=conn)
        first = envelopes[0]
        with tracing.sending(first.queue, first.job_name, len(envelopes)) as span:
            assert span is not None
            for envelope in envelopes:
                envelope.meta[tracing.META_KEY] = span.create()
            ids = await driver.bulk_push(envelopes, conn=conn)
            span.sent(ids)
        return ids

    async def _skipped(self, envelope: Envelope, unique_id: str) -> None:
        await self.events.emit(UniqueJobSkipped(envelope.job_name, unique_id, envelope.connection))

    # -- debounce --------------------------------------------------------------------------

    async def _debounce(self, envelope: Envelope, conn: object | None) -> str:
        if conn is not None:
            raise ConfigurationError(
                "a debounced push is not written in a caller's transaction (conn=): its"
                " window is kept on the queue's own connection"
            )
        announce = _Announce(self.events, envelope)
        return await self._debounce_on(self.driver_for(envelope.connection), envelope, announce)

    async def _debounce_on(
        self, driver: Connection, envelope: Envelope, announce: _Announce
    ) -> str:
        """The debounced push of ``envelope`` on ``driver``: a plain write under null (it
        discards) and sync (it runs, UNIQ-13); through a failover list, the window is kept
        on the store that accepts the job (FOV-1)."""
        options = envelope.debounce
        assert options is not None
        if _discards(driver) or _runs_inline(driver):
            return await self.write_on(driver, envelope, announce)
        if _fails_over(driver):

            async def attempt(inner: Connection, pinned: Envelope) -> str:
                return await self._debounce_on(inner, pinned, announce)

            return await driver.fall_through(envelope, attempt)
        driver = _backend(driver, "a debounced push")
        backend = await driver.backend()
        key = f"debounce:{envelope.job_name}:{options.id or ''}"
        # PUSH-4: a call-site time (later, push_later, ...) wins over the window: the
        # dispatch is stored at that time, still owning the window (a newer dispatch of the
        # window replaces it while it waits), and max_debounce_wait, whose flush stores a
        # dispatch at once, does not apply to it. Otherwise the window is its delay.
        explicit = not envelope.declared_delay
        if not explicit:
            envelope.available_at = None
            envelope.delay = options.window
        envelope.deduplication = {"id": key, "replace_delayed": True, "token": uuid.uuid4().hex}
        envelope.meta[META_DEBOUNCE] = {"key": key}
        await announce()
        # One call reads and writes the window (UNIQ-9..11): of concurrent dispatches of a
        # window each sees the one before, and the last stored owns it.
        added = await backend.dedup.add_debounced_job(
            envelope.queue,
            envelope.job_name,
            envelope.data,
            envelope.options_document(datetime.now(UTC)),
            max_wait=None if explicit else options.max_wait,
        )
        if added.replaced_id is not None:  # replaced at push while delayed (UNIQ-11)
            await self.events.emit(
                JobDebounced(
                    envelope.connection, envelope.queue, envelope.job_name, added.replaced_id
                )
            )
        await self.events.emit(
            JobQueued(envelope.connection, envelope.queue, envelope.job_name, added.job.id)
        )
        return added.job.id

    # -- helpers ---------------------------------------------------------------------------

    def _backend_driver(self, envelope: Envelope, what: str) -> BackendDriver:
        return _backend(self.driver_for(envelope.connection), what)

    def _committed(self, envelope: Envelope, job_id: str) -> Any:
        """What follows the commit of a job written in the caller's transaction (A24): its
        declared delay re-timed from the commit (TX-9), then its two events."""

        async def emit() -> None:
            await self._retime(envelope, job_id)
            await self.events.emit(
                JobQueueing(envelope.connection, envelope.queue, envelope.job_name, envelope.job)
            )
            await self.events.emit(
                JobQueued(envelope.connection, envelope.queue, envelope.job_name, job_id)
            )

        return emit

    async def _retime(self, envelope: Envelope, job_id: str) -> None:
        """TX-9 on the queue's own database: the row was written inside the transaction
        with ``Job.delay`` counted from the push; right after the commit it counts from
        now (``reschedule_job``). If the process dies in between, the job keeps the push's
        time; if the transaction outlived the delay, a worker may have taken the job
        already, which then runs as it is. An explicit time is never re-timed."""
        if not envelope.declared_delay or to_millis(envelope.delay, "delay") <= 0:
            return
        driver = self._backend_driver(envelope, "a deferred push")
        try:
            await (await driver.backend()).jobs.reschedule_job(
                envelope.queue, job_id, envelope.delay
            )
        except (JobStateConflict, JobNotFound):
            log.info("job %s left its delay before the commit re-timed it", job_id)
        except Exception:
            log.warning(
                "could not count the delay of job %s (%s) from the commit: it counts from the push",
                job_id,
                envelope.job_name,
                exc_info=True,
            )

    async def _prepare_queue(self, tx: Transaction, driver: Connection, queue: str) -> None:
        """Create a missing queue outside the transaction before an in-transaction write:
        an add that creates it would hold its new ``lane.queues`` row until the commit, so
        every other push to that queue (this task's immediate ones included) would wait
        for the caller's transaction. A new queue records events, as one an add creates."""
        key = (id(driver), queue)
        if key in tx.prepared or not isinstance(driver, BackendDriver):
            return
        backend = await driver.backend()
        if queue not in await backend.queues.list_queues():
            await backend.queues.set_queue_events(queue, record=True)
        tx.prepared.add(key)

    async def _shares_database(self, tx: Transaction, driver: Connection) -> bool:
        """A24: whether ``driver`` writes to the database ``tx`` is open on (same database,
        port and server start), asked once per transaction and driver."""
        known = tx.identities.get(id(driver))
        if known is not None:
            return known
        shared = False
        if isinstance(driver, BackendDriver):
            transactions = (await driver.backend()).transactions
            shared = transactions is not None and await transactions.same_database(tx.conn)
        tx.identities[id(driver)] = shared
        return shared


class _Announce:
    """``JobQueueing`` of one push, emitted once however many connections of a failover
    list the push tries."""

    def __init__(self, events: Events, envelope: Envelope) -> None:
        self._events, self._envelope, self._done = events, envelope, False

    async def __call__(self) -> None:
        if not self._done:
            self._done = True
            envelope = self._envelope
            await self._events.emit(
                JobQueueing(envelope.connection, envelope.queue, envelope.job_name, envelope.job)
            )


def _backend(driver: Connection, what: str) -> BackendDriver:
    if not isinstance(driver, BackendDriver):
        raise ConfigurationError(
            f"{what} needs a connection over a backend (PostgreSQL, memory, local), or the"
            f" null, sync or failover driver; got {driver!r}"
        )
    return driver


async def _locks(driver: BackendDriver) -> Dedup:
    return (await driver.backend()).dedup


def _checked(options: DebounceOptions) -> DebounceOptions:
    if not isinstance(options, DebounceOptions):
        raise TypeError(f"push_debounced takes DebounceOptions, got {options!r}")
    if to_millis(options.window, "debounce window") <= 0:
        raise ConfigurationError("a debounce window must be positive")
    if options.max_wait is not None and to_millis(options.max_wait, "max_debounce_wait") <= 0:
        raise ConfigurationError("max_debounce_wait must be positive")
    if options.id is not None and not isinstance(options.id, str):
        raise ConfigurationError(f"a debounce id is a string, got {options.id!r}")
    return options


def _what(envelope: Envelope) -> str:
    return f"{envelope.job_name} on {envelope.connection}/{envelope.queue}"


__all__ = ["DebounceOptions", "UniquePushes", "job_name_of"]
