"""``FailoverDriver([(label, connection), ...])``: several connections tried in order (FOV).

A wrapper of connections, not a store: it has no backend of its own (pausing it raises
``NotImplementedError``; pause its connections by their own names). Each operation below
is one of its connections' (``lane_pg.facade.connection``), chosen or combined as follows.

Pushes (FOV-1, FOV-4, FOV-9, FOV-10, A17):

* Each push goes to the first connection that accepts it. Only an availability error
  (``is_unavailable``: the store cannot be reached or is shutting down) moves it on to the
  next connection; any other error (a ``ValidationError``, a constraint, a bug) is raised at
  once, because another store would refuse it the same way or, worse, accept what the
  first one rightly refused. When every connection refuses, the last one's error is raised.
* ``QueueFailedOver(label, job_name, exception)`` is emitted on the push that moves a
  connection into failure, not on every push while it stays down; a push the connection
  accepts again re-arms it (Laravel #57762 emitted it per push).
* The driver pins what must not change between attempts before the first one: a job id
  (a UUID, unless the envelope carries one) and, for a delayed push, ``available_at``
  (from the push's moment, so time spent on refusing connections is not added to the
  delay; each store still counts the remaining delay on its own clock).
  Failover is not dedup: a connection that stored a job and then reported a failure
  leaves a duplicate with the same id on the next connection (at-least-once, FOV-10);
  handlers are idempotent by the job id (README, "Idempotent handlers").
* ``bulk_push`` falls through per job, never re-pushing a half-accepted batch: when a job
  is refused everywhere, its error is raised with a note naming the job, and the jobs
  before it stay enqueued (the batch is not atomic across connections).
* A ``conn=`` push joins the caller's transaction on the first connection and never fails
  over: writing it elsewhere would break the transaction's atomicity (A17).

Reservations (FOV-5, FOV-6, FOV-8): ``pop`` starts at the next connection on every call
and then tries them all, so a recovered primary cannot starve jobs left on a fallback. A
reservation carries this driver's own token, mapped to the issuing connection and its
inner reservation until the visibility timeout ends; settling an unknown or expired token
answers ``STALE`` and reaches no connection (two stores may issue the same inner token).
A settle that raises leaves the reservation in place, so lease expiry redelivers the job.
``pop_from(queues)`` requires every connection to filter by queue and raises, naming the
first that cannot, before anything is claimed.

Reads (FOV-7): the counts sum, the listings concatenate in list order, ``clear`` clears
every connection. A connection that cannot be reached makes the read raise: an answer
that silently leaves a store out would be wrong.
"""

from __future__ import annotations

import dataclasses
import logging
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TypeVar

from lane_pg.errors import ConfigurationError, is_server_unreachable
from lane_pg.facade.connection import (
    DEFAULT_LISTING_LIMIT,
    STALE,
    UNSERVED,
    Connection,
    Reservation,
    Settlement,
    SettleResult,
    is_handler_error,
)
from lane_pg.facade.envelope import Envelope
from lane_pg.facade.events import Events, QueueFailedOver
from lane_pg.facade.stores import refuse_shared_stores
from lane_pg.types import Duration, JobRow

log = logging.getLogger("lane_pg.facade.failover")

T = TypeVar("T")


class ConnectionUnavailable(Exception):
    """What a third-party driver raises to say its store cannot be reached right now: the
    failover driver then tries the next connection."""


def is_unavailable(exc: BaseException) -> bool:
    """Whether ``exc`` says the store could not be reached (so another may take the job):
    an ``OSError`` (refused, reset, timed out, unknown host), ``ConnectionUnavailable``, or
    a driver error whose SQLSTATE is of class 08, 53 or 57; looked for along the
    ``__cause__`` chain. A ``LaneError`` (bad input, configuration, schema) never is, nor
    an error a job's handler raised under the sync driver (the job ran)."""
    return is_server_unreachable(exc, also=(ConnectionUnavailable,), never=is_handler_error)


@dataclass(frozen=True, slots=True)
class _Held:
    label: str
    inner: Reservation
    deadline: datetime


class FailoverDriver(Connection):
    """A connection made of several, tried in the given order (see the module docstring)."""

    def __init__(
        self,
        connections: Sequence[tuple[str, Connection]],
        *,
        visibility_timeout: Duration | None = None,
        events: Events | None = None,
        clock: Callable[[], datetime] | None = None,
    ) -> None:
        entries = list(connections)
        if not entries:
            raise ConfigurationError("a failover driver needs at least one connection")
        labels: set[str] = set()
        for entry in entries:
            if not (isinstance(entry, tuple) and len(entry) == 2):
                raise ConfigurationError(f"a failover entry is (label, driver), got {entry!r}")
            label, driver = entry
            if not isinstance(label, str) or not label:
                raise ConfigurationError(f"a failover label is a non-empty string: {label!r}")
            if label in labels:
                raise ConfigurationError(f"failover label {label!r} is given twice")
            if not isinstance(driver, Connection):
                raise TypeError(f"failover entry {label!r}: not a connection: {driver!r}")
            labels.add(label)
        refuse_shared_stores(entries, aliases=False)  # CONN-11: falling over to itself is none
        super().__init__(UNSERVED, "failover", visibility_timeout=visibility_timeout)
        self._entries: list[tuple[str, Connection]] = entries
        self._events = events
        self._clock = clock or (lambda: datetime.now(UTC))
        self._failing: set[str] = set()
        self._next_pop = 0
        self._held: dict[str, _Held] = {}

    @property
    def labels(self) -> list[str]:
        """The connections' labels, in failover order (FOV-3)."""
        return [label for label, _ in self._entries]

    @property
    def connections(self) -> list[tuple[str, Connection]]:
        return list(self._entries)

    @property
    def failing(self) -> frozenset[str]:
        """The labels whose last push was refused with an availability error."""
        return frozenset(self._failing)

    @property
    def filters_queues(self) -> bool:
        return all(driver.filters_queues for _, driver in self._entries)

    @property
    def store_key(self) -> None:
        return None  # its connections' stores (``stores_of``)

    def __repr__(self) -> str:
        return f"FailoverDriver({', '.join(self.labels)})"

    def attach_events(self, events: Events) -> None:
        if self._events is None:
            self._events = events
        for _, driver in self._entries:
            driver.attach_events(events)

    # -- pushes ----------------------------------------------------------------------------

    async def push(self, envelope: Envelope, *, conn: object | None = None) -> str:
        if conn is not None:
            return await self._entries[0][1].push(envelope, conn=conn)  # A17
        return await self._push_one(self._pinned(envelope, self._clock()))

    async def bulk_push(
        self, envelopes: Sequence[Envelope], *, conn: object | None = None
    ) -> list[str]:
        if conn is not None:
            return await self._entries[0][1].bulk_push(envelopes, conn=conn)  # A17
        now = self._clock()
        pinned = [self._pinned(envelope, now) for envelope in envelopes]
        ids: list[str] = []
        for number, envelope in enumerate(pinned, 1):
            try:
                ids.append(await self._push_one(envelope))
            except Exception as exc:
                exc.add_note(
                    f"failover bulk_push: job {number} of {len(pinned)} ({envelope.job_name},"
                    f" id {envelope.job_id}) was refused; the {number - 1} before it are"
                    f" enqueued: {ids}"
                )
                raise
        return ids

    @staticmethod
    def _pinned(envelope: Envelope, now: datetime) -> Envelope:
        """The envelope every attempt writes: one job id, one ``available_at``."""
        job_id = envelope.job_id or str(uuid.uuid4())
        available_at = envelope.available_at
        if available_at is None and envelope.delay_from(now) > timedelta(0):
            available_at = now + envelope.delay_from(now)
        return dataclasses.replace(envelope, job_id=job_id, available_at=available_at)

    async def _push_one(self, envelope: Envelope) -> str:
        return await self._first_accepting(envelope, lambda driver, pinned: driver.push(pinned))

    async def fall_through(
        self, envelope: Envelope, attempt: Callable[[Connection, Envelope], Awaitable[T]]
    ) -> T:
        """``attempt(driver, envelope)`` on each connection in order, as a push falls
        through: the envelope pinned once, only an availability error moves on, and
        ``QueueFailedOver`` as for a push. The facade's unique and debounced pushes take
        their lock on the store that accepts the job this way."""
        return await self._first_accepting(self._pinned(envelope, self._clock()), attempt)

    async def _first_accepting(
        self, envelope: Envelope, attempt: Callable[[Connection, Envelope], Awaitable[T]]
    ) -> T:
        refusal: BaseException | None = None
        for label, driver in self._entries:
            try:
                result = await attempt(driver, envelope)
            except Exception as exc:
                if not is_unavailable(exc):
                    raise
                refusal = exc
                await self._failed(label, envelope.job_name, exc)
                continue
            self._failing.discard(label)  # accepted: the next refusal is a new transition
            return result
        assert refusal is not None
        raise refusal

    async def _failed(self, label: str, job_name: str, exc: BaseException) -> None:
        if label in self._failing:
            return  # known to be failing: stay quiet until it accepts a push again
        self._failing.add(label)
        log.warning("failover: connection %r refused a push (%s), trying the next", label, exc)
        if self._events is not None:
            await self._events.emit(QueueFailedOver(label, job_name, exc))

    # -- reservations ----------------------------------------------------------------------

    async def pop(self) -> Reservation | None:
        return await self._rotate(lambda driver: driver.pop())

    def require_queue_filtering(self) -> None:
        """FOV-8: ``ConfigurationError`` naming the first connection that cannot claim from
        named queues only (before anything is claimed: ``pop_from``, a worker's lanes)."""
        for label, driver in self._entries:
            if not driver.filters_queues:
                raise ConfigurationError(
                    f"failover connection {label!r} ({driver.driver_name}) cannot claim from"
                    " named queues only; a worker with --queue needs every connection of the"
                    " failover list to support queue filtering"
                )

    async def pop_from(self, queues: Sequence[str]) -> Reservation | None:
        self.require_queue_filtering()
        return await self._rotate(lambda driver: driver.pop_from(queues))

    async def _rotate(
        self, take: Callable[[Connection], Awaitable[Reservation | None]]
    ) -> Reservation | None:
        count = len(self._entries)
        start = self._next_pop
        self._next_pop = (start + 1) % count
        refusal: BaseException | None = None
        answered = False
        for step in range(count):
            label, driver = self._entries[(start + step) % count]
            try:
                inner = await take(driver)
            except Exception as exc:
                if not is_unavailable(exc):
                    raise
                refusal = exc
                continue
            answered = True
            if inner is not None:
                return self._hold(label, inner)
        if not answered and refusal is not None:
            raise refusal
        return None

    def _hold(self, label: str, inner: Reservation) -> Reservation:
        now = self._clock()
        self._forget_expired(now)
        token = str(uuid.uuid4())
        deadline = now + self.visibility_timeout
        self._held[token] = _Held(label, inner, deadline)
        return Reservation(token, inner.job, label, deadline)

    def _forget_expired(self, now: datetime) -> None:
        for token in [token for token, held in self._held.items() if held.deadline <= now]:
            del self._held[token]

    def held(self) -> int:
        """How many reservations this driver still maps to their connection."""
        return len(self._held)

    async def settle(self, reservation: Reservation, outcome: Settlement) -> SettleResult:
        held = self._held.pop(reservation.token, None)
        if held is None or held.deadline <= self._clock():
            return STALE  # unknown or expired: sent to no connection
        try:
            return await self._driver(held.label).settle(held.inner, outcome)
        except BaseException:
            self._held[reservation.token] = held  # left for a retry or lease expiry
            raise

    def _driver(self, label: str) -> Connection:
        return next(driver for name, driver in self._entries if name == label)

    # -- reads (FOV-7) ---------------------------------------------------------------------

    async def _sum(self, read: Callable[[Connection], Awaitable[int]]) -> int:
        total = 0
        for _, driver in self._entries:
            total += await read(driver)
        return total

    async def size(self, queue: str | None = None) -> int:
        return await self._sum(lambda driver: driver.size(queue))

    async def pending_size(self, queue: str | None = None) -> int:
        return await self._sum(lambda driver: driver.pending_size(queue))

    async def delayed_size(self, queue: str | None = None) -> int:
        return await self._sum(lambda driver: driver.delayed_size(queue))

    async def reserved_size(self, queue: str | None = None) -> int:
        return await self._sum(lambda driver: driver.reserved_size(queue))

    async def clear(self, queue: str | None = None) -> int:
        return await self._sum(lambda driver: driver.clear(queue))

    async def _concat(
        self, limit: int, read: Callable[[Connection, int], Awaitable[list[JobRow]]]
    ) -> list[JobRow]:
        found: list[JobRow] = []
        for _, driver in self._entries:
            if len(found) >= limit:
                break
            found.extend(await read(driver, limit - len(found)))
        return found[:limit]

    async def pending_jobs(
        self, queue: str | None = None, *, limit: int = DEFAULT_LISTING_LIMIT
    ) -> list[JobRow]:
        return await self._concat(limit, lambda d, n: d.pending_jobs(queue, limit=n))

    async def delayed_jobs(
        self, queue: str | None = None, *, limit: int = DEFAULT_LISTING_LIMIT
    ) -> list[JobRow]:
        return await self._concat(limit, lambda d, n: d.delayed_jobs(queue, limit=n))

    async def reserved_jobs(
        self, queue: str | None = None, *, limit: int = DEFAULT_LISTING_LIMIT
    ) -> list[JobRow]:
        return await self._concat(limit, lambda d, n: d.reserved_jobs(queue, limit=n))

    async def close(self) -> None:
        for _, driver in self._entries:
            await driver.close()
