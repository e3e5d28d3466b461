"""``Q.fake()``: a test double that records pushes in place of writing them (TEST-1..6,
TEST-9, INSP-6).

    with Q.fake() as fake:
        await signup(user_id=42)
        fake.assert_pushed(SendWelcomeEmail, lambda job: job.user_id == 42)

While a fake is installed on a facade, every way of pushing (``push``, ``later``,
``push_with``, ``bulk``, ``push_unique``, debounced and after-commit pushes, batches,
chains, failed-job retries) records a ``FakedPush`` here and touches no driver, so a
facade with no connection at all can be faked. The facade checks for a fake at each entry
point (one attribute read on the plain path); everything else lives here.

What the fake does not do: it never runs a job unless asked (``run_pushed``), it holds no
unique lock and arms no debounce window (each push is recorded as fresh and undelayed by
a window), and an after-commit push is recorded at once, even inside a transaction that
later rolls back (TX-15).

A process-wide re-entrant lock is held while a fake is installed: two threads faking at
once (each with its own event loop) take turns, so neither sees the other's pushes.
"""

from __future__ import annotations

import dataclasses
import inspect
import itertools
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from types import TracebackType
from typing import TYPE_CHECKING, Any, TypeVar

from lane_pg.errors import BatchNotFound, ConfigurationError
from lane_pg.facade.connection import DEFAULT_LISTING_LIMIT
from lane_pg.facade.envelope import NO_OVERRIDES, Envelope, EnvelopeOverrides
from lane_pg.facade.events import JobQueued, JobQueueing
from lane_pg.facade.job import Job, encode_fields, job_name_of
from lane_pg.facade.reads import InspectedJob
from lane_pg.facade.unique import refuse_unique_and_debounce
from lane_pg.types import JSON, Batch

if TYPE_CHECKING:
    from lane_pg.facade.batches import PendingBatch, PendingChain
    from lane_pg.facade.queue import QueueFacade

J = TypeVar("J", bound=Job)

JobRef = type[Job] | str
"""A job type in an assertion: its class, or its ``job_name``."""

_LOCK = threading.RLock()
"""Held while any fake is installed: parallel tests in threads take turns (TEST-1).
Re-entrant, so one thread may fake two facades at once."""

LOCK_TIMEOUT = 120.0
"""Seconds ``install`` waits for another thread's fake before it raises: a fake that was
never uninstalled would otherwise hang the next test silently."""

_SHORT = 80
"""Characters of a job's repr shown in an assertion message."""


def _name_of(ref: JobRef) -> str:
    return ref if isinstance(ref, str) else job_name_of(ref)


def _is(job: Job, ref: JobRef) -> bool:
    """Exact type (or job name) match: a subclass is another job type."""
    return job_name_of(type(job)) == ref if isinstance(ref, str) else type(job) is ref


def _short(value: object) -> str:
    text = repr(value)
    return text if len(text) <= _SHORT else f"{text[: _SHORT - 3]}..."


@dataclass(frozen=True, slots=True)
class FakedPush:
    """One push as the fake recorded it."""

    id: str
    job: Job
    job_name: str
    queue: str
    connection: str
    payload: dict[str, JSON]
    available_at: datetime | None
    """When the job would have become available; None for "at once" (no delay)."""
    overrides: EnvelopeOverrides
    """The per-push overrides: the defaults except for ``push_with`` / ``later_with``
    (and ``push_after_commit``, which is ``push_with(after_commit=True)``)."""

    def describe(self) -> str:
        when = "" if self.available_at is None else f" at {self.available_at.isoformat()}"
        return f"{self.job_name} on {self.connection}/{self.queue}{when}: {_short(self.job)}"


@dataclass(frozen=True, slots=True)
class FakedBatch:
    """A batch recorded by the fake: its id (what ``dispatch`` returned), name and jobs,
    with the names of its callbacks."""

    id: str
    name: str
    jobs: list[Job]
    then: str | None = None
    catch: str | None = None
    finally_: str | None = None
    allow_failures: bool = False
    callback_queue: str | None = None

    def jobs_of(self, ref: JobRef) -> list[Job]:
        """The batch's jobs of one type, in order."""
        return [job for job in self.jobs if _is(job, ref)]

    def describe(self) -> str:
        names = ", ".join(job_name_of(type(job)) for job in self.jobs) or "no jobs"
        return f"batch {self.name or self.id!r} ({names})"


@dataclass(frozen=True, slots=True)
class FakedChain:
    """A chain recorded by the fake: its links head first; ``id`` is the head's id (what
    ``dispatch`` returned)."""

    id: str
    chain_id: str
    links: list[Job]
    catch: str | None = None

    @property
    def names(self) -> list[str]:
        return [job_name_of(type(job)) for job in self.links]

    def link(self, ref: type[J], index: int = 0) -> J:
        """The ``index``-th link of type ``ref`` (0: the first one); AssertionError when
        the chain has fewer."""
        found = [job for job in self.links if type(job) is ref]
        if index >= len(found):
            raise AssertionError(
                f"chain {self.names} has {len(found)} {ref.__qualname__} link(s), no link {index}"
            )
        job: J = found[index]  # type(job) is ref
        return job

    def describe(self) -> str:
        return f"chain {self.names}"


@dataclass
class _Records:
    pushes: list[FakedPush] = field(default_factory=list)
    batches: list[FakedBatch] = field(default_factory=list)
    chains: list[FakedChain] = field(default_factory=list)
    stored_batches: dict[str, Batch] = field(default_factory=dict)
    ran: int = 0


class QueueFake:
    """Records one facade's pushes while installed (``with Q.fake() as fake:``, or
    ``lane_pg.testing.install_fake()`` and ``uninstall()``), and asserts on them.

    Its recordings are forgotten when it is uninstalled, so assert inside the block."""

    def __init__(self, facade: QueueFacade) -> None:
        self.facade = facade
        self._records = _Records()
        self._ids = itertools.count(1)
        self._installed = False

    # -- installing --------------------------------------------------------------------

    def install(self, *, timeout: float = LOCK_TIMEOUT) -> QueueFake:
        """Start recording the facade's pushes; waits for another thread's fake to end."""
        if self._installed:
            return self
        if not _LOCK.acquire(timeout=timeout):
            raise ConfigurationError(
                f"Q.fake(): another thread kept a fake installed for {timeout:g} s (a fake"
                " that was never uninstalled?)"
            )
        if self.facade._fake is not None:
            _LOCK.release()
            raise ConfigurationError("a fake is already installed on this facade")
        self.facade._fake = self
        self._installed = True
        return self

    def uninstall(self) -> None:
        """Stop recording and forget what was recorded."""
        if not self._installed:
            return
        self._installed = False
        if self.facade._fake is self:
            self.facade._fake = None
        self._records = _Records()
        _LOCK.release()

    @property
    def installed(self) -> bool:
        return self._installed

    def __enter__(self) -> QueueFake:
        return self.install()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.uninstall()

    async def __aenter__(self) -> QueueFake:
        return self.install()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.uninstall()

    # -- recording (called by the facade) ----------------------------------------------

    async def record(self, envelope: Envelope) -> str:
        """Record one resolved push in place of writing it; returns its fake id."""
        refuse_unique_and_debounce(type(envelope.job))  # as without the fake (TEST-3)
        now = datetime.now(UTC)
        if envelope.available_at is not None:
            available_at: datetime | None = envelope.available_at
        else:
            # A debounced push keeps its envelope's own delay: the window is never armed.
            delay = envelope.delay_from(now)
            available_at = now + delay if delay.total_seconds() > 0 else None
        return await self._record(
            envelope.job,
            envelope.job_name,
            envelope.data,
            envelope.queue,
            envelope.connection,
            available_at,
            envelope.overrides,
            envelope.job_id,
        )

    async def record_retry(self, job: Job, queue: str, connection: str, job_id: str | None) -> str:
        """A failed job pushed again (TEST-6): on the queue and connection it failed on."""
        name = job_name_of(type(job))
        return await self._record(
            job, name, encode_fields(job), queue, connection, None, NO_OVERRIDES, job_id
        )

    async def _record(
        self,
        job: Job,
        job_name: str,
        payload: dict[str, JSON],
        queue: str,
        connection: str,
        available_at: datetime | None,
        overrides: EnvelopeOverrides,
        job_id: str | None,
    ) -> str:
        events = self.facade.events
        await events.emit(JobQueueing(connection, queue, job_name, job))
        push = FakedPush(
            job_id or f"fake-{next(self._ids)}",
            job,
            job_name,
            queue,
            connection,
            payload,
            available_at,
            overrides,
        )
        self._records.pushes.append(push)
        await events.emit(JobQueued(connection, queue, job_name, push.id))
        return push.id

    async def record_batch(
        self, batch: PendingBatch, envelopes: Sequence[Envelope], batch_id: str
    ) -> str:
        """A batch recorded, its jobs as pushes, and kept pending for ``find_batch``."""
        for envelope in envelopes:
            await self.record(envelope)
        callbacks = batch.callbacks
        self._records.batches.append(
            FakedBatch(
                batch_id,
                batch.batch_name,
                [envelope.job for envelope in envelopes],
                then=callbacks.get("then"),
                catch=callbacks.get("catch"),
                finally_=callbacks.get("finally"),
                allow_failures=batch.allows_failures,
                callback_queue=batch.callback_queue,
            )
        )
        total = len(envelopes)
        self._records.stored_batches[batch_id] = Batch(
            id=batch_id,
            name=batch.batch_name,
            total_jobs=total,
            pending_jobs=total,
            failed_jobs=0,
            failed_job_ids=(),
            options=batch.options(),
            created_at=datetime.now(UTC),
            cancelled_at=None,
            finished_at=None,
        )
        return batch_id

    async def record_chain(
        self, chain: PendingChain, envelopes: Sequence[Envelope], chain_id: str
    ) -> str:
        """A chain recorded with its links head first; the head also as a push."""
        head_id = await self.record(envelopes[0])
        self._records.chains.append(
            FakedChain(
                head_id,
                chain_id,
                [envelope.job for envelope in envelopes],
                catch=chain.catch_callback,
            )
        )
        return head_id

    async def add_to_batch(self, batch_id: str, envelopes: Sequence[Envelope]) -> list[str]:
        """``Q.add_to_batch`` under the fake: the jobs recorded as pushes and added to the
        recorded batch (``BatchNotFound`` for a batch the fake did not record)."""
        records = self._records
        stored = records.stored_batches.get(batch_id)
        if stored is None:
            raise BatchNotFound(f"batch {batch_id} was not recorded by this fake")
        ids = [await self.record(envelope) for envelope in envelopes]
        faked = next(batch for batch in records.batches if batch.id == batch_id)
        faked.jobs.extend(envelope.job for envelope in envelopes)
        added = len(envelopes)
        records.stored_batches[batch_id] = dataclasses.replace(
            stored, total_jobs=stored.total_jobs + added, pending_jobs=stored.pending_jobs + added
        )
        return ids

    def find_batch(self, batch_id: str) -> Batch | None:
        """A recorded batch as ``Q.find_batch`` answers it: pending, never finished."""
        return self._records.stored_batches.get(batch_id)

    # -- reads (the facade's counts and listings under the fake, INSP-6) -----------------

    def _in(self, queue: str | None) -> list[FakedPush]:
        pushes = self._records.pushes
        return pushes if queue is None else [push for push in pushes if push.queue == queue]

    def _pending(self, queue: str | None) -> list[FakedPush]:
        now = datetime.now(UTC)
        return [p for p in self._in(queue) if p.available_at is None or p.available_at <= now]

    def _delayed(self, queue: str | None) -> list[FakedPush]:
        now = datetime.now(UTC)
        return [p for p in self._in(queue) if p.available_at is not None and p.available_at > now]

    def size(self, queue: str | None = None) -> int:
        return len(self._in(queue))

    def pending_size(self, queue: str | None = None) -> int:
        return len(self._pending(queue))

    def delayed_size(self, queue: str | None = None) -> int:
        return len(self._delayed(queue))

    def reserved_size(self, queue: str | None = None) -> int:
        return 0  # nothing runs under the fake, so nothing is reserved

    @staticmethod
    def _inspected(pushes: list[FakedPush], limit: int) -> list[InspectedJob]:
        return [
            InspectedJob(push.id, push.queue, push.job_name, 0, push.payload, None)
            for push in pushes[:limit]
        ]

    def pending_jobs(
        self, queue: str | None = None, *, limit: int = DEFAULT_LISTING_LIMIT
    ) -> list[InspectedJob]:
        return self._inspected(self._pending(queue), limit)

    def delayed_jobs(
        self, queue: str | None = None, *, limit: int = DEFAULT_LISTING_LIMIT
    ) -> list[InspectedJob]:
        return self._inspected(self._delayed(queue), limit)

    def reserved_jobs(
        self, queue: str | None = None, *, limit: int = DEFAULT_LISTING_LIMIT
    ) -> list[InspectedJob]:
        return []

    def clear(self, queue: str | None = None) -> int:
        """Forget the recorded pushes (of ``queue``, or all); returns how many."""
        records = self._records
        kept = [] if queue is None else [p for p in records.pushes if p.queue != queue]
        already_ran = [p for p in records.pushes[: records.ran] if p in kept]
        removed = len(records.pushes) - len(kept)
        records.pushes, records.ran = kept, len(already_ran)
        return removed

    # -- what was recorded -------------------------------------------------------------

    @property
    def pushes(self) -> list[FakedPush]:
        """Every recorded push, in push order."""
        return list(self._records.pushes)

    def pushes_of(self, ref: JobRef) -> list[FakedPush]:
        return [push for push in self._records.pushes if _is(push.job, ref)]

    def pushed(self, ref: type[J], pred: Callable[[J], object] | None = None) -> list[J]:
        """The pushed jobs of type ``ref`` (those ``pred`` accepts), in push order."""
        jobs: list[J] = [push.job for push in self.pushes_of(ref)]  # type: ignore[misc]
        return [job for job in jobs if pred is None or pred(job)]

    def pushed_with_overrides(self, ref: JobRef) -> list[EnvelopeOverrides]:
        """The overrides of each push of ``ref``, in push order."""
        return [push.overrides for push in self.pushes_of(ref)]

    def batched(self) -> list[FakedBatch]:
        return list(self._records.batches)

    def chained(self) -> list[FakedChain]:
        return list(self._records.chains)

    # -- assertions --------------------------------------------------------------------

    def _what_was_pushed(self) -> str:
        pushes = self._records.pushes
        if not pushes:
            return "nothing was pushed"
        return "pushed:\n" + "\n".join(f"  - {push.describe()}" for push in pushes)

    def _fail(self, message: str, listing: str | None = None) -> AssertionError:
        return AssertionError(f"{message}; {listing or self._what_was_pushed()}")

    def assert_pushed(self, ref: type[J], pred: Callable[[J], object] | None = None) -> None:
        """At least one job of type ``ref`` was pushed (one that ``pred`` accepts)."""
        if not self.pushed(ref, pred):
            which = "" if pred is None else " matching the predicate"
            raise self._fail(f"expected a push of {_name_of(ref)}{which}")

    def assert_pushed_times(self, ref: JobRef, times: int) -> None:
        """Exactly ``times`` jobs of type ``ref`` were pushed."""
        count = len(self.pushes_of(ref))
        if count != times:
            raise self._fail(f"expected {times} push(es) of {_name_of(ref)}, got {count}")

    def assert_pushed_later(
        self, ref: type[J], pred: Callable[[J, datetime], object] | None = None
    ) -> None:
        """A job of type ``ref`` was pushed with a delay or a time (``pred(job, at)``)."""
        for push in self.pushes_of(ref):
            at = push.available_at
            if at is not None and (pred is None or pred(push.job, at)):  # type: ignore[arg-type]
                return
        which = "" if pred is None else " matching the predicate"
        raise self._fail(f"expected a delayed push of {_name_of(ref)}{which}")

    def assert_pushed_on_queue(self, ref: JobRef, queue: str) -> None:
        if not any(push.queue == queue for push in self.pushes_of(ref)):
            raise self._fail(f"expected a push of {_name_of(ref)} on queue {queue!r}")

    def assert_pushed_on_connection(self, ref: JobRef, connection: str) -> None:
        if not any(push.connection == connection for push in self.pushes_of(ref)):
            raise self._fail(f"expected a push of {_name_of(ref)} on connection {connection!r}")

    def assert_not_pushed(self, ref: type[J], pred: Callable[[J], object] | None = None) -> None:
        """No job of type ``ref`` was pushed (none that ``pred`` accepts)."""
        found = self.pushed(ref, pred)
        if found:
            which = "" if pred is None else " matching the predicate"
            raise self._fail(f"expected no push of {_name_of(ref)}{which}, found {len(found)}")

    def assert_nothing_pushed(self) -> None:
        if self._records.pushes:
            raise self._fail("expected nothing pushed")

    def _listing(self, kind: str, items: Iterable[FakedBatch | FakedChain]) -> str:
        described = [f"  - {item.describe()}" for item in items]
        return f"{kind}:\n" + "\n".join(described) if described else f"no {kind}"

    def assert_batch_count(self, count: int) -> None:
        batches = self._records.batches
        if len(batches) != count:
            listing = self._listing("batches", batches)
            raise self._fail(f"expected {count} batch(es), got {len(batches)}", listing)

    def assert_batched(self, pred: Callable[[FakedBatch], object]) -> None:
        """A recorded batch satisfies ``pred``."""
        batches = self._records.batches
        if not any(pred(batch) for batch in batches):
            listing = self._listing("batches", batches)
            raise self._fail("expected a batch matching the predicate", listing)

    def assert_nothing_batched(self) -> None:
        batches = self._records.batches
        if batches:
            raise self._fail("expected no batch", self._listing("batches", batches))

    def assert_chained(self, links: Sequence[JobRef]) -> None:
        """A recorded chain has exactly these links, head first (classes or job names)."""
        expected = [_name_of(link) for link in links]
        chains = self._records.chains
        if not any(chain.names == expected for chain in chains):
            raise self._fail(f"expected a chain {expected}", self._listing("chains", chains))

    def assert_nothing_chained(self) -> None:
        chains = self._records.chains
        if chains:
            raise self._fail("expected no chain", self._listing("chains", chains))

    # -- running -----------------------------------------------------------------------

    async def run_pushed(self, *, limit: int = 10_000) -> int:
        """Run the ``handle()`` of every recorded job not run yet, inline and in push
        order, jobs that those handlers push included; returns how many ran.

        No worker is involved: no middleware, no retries, no ``current_context()``, and
        an exception a handler raises propagates. Chain links after the head and batch
        callbacks are not run. ``limit`` stops a handler that keeps pushing."""
        records = self._records
        ran = 0
        while records.ran < len(records.pushes):
            if ran >= limit:
                raise RuntimeError(f"run_pushed ran {limit} jobs and more are pushed")
            push = records.pushes[records.ran]
            records.ran += 1
            result: Any = push.job.handle()
            if inspect.isawaitable(result):
                await result
            ran += 1
        return ran
