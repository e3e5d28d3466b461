"""In-process lifecycle events (LIFE): one small emitter the facade and the worker share.

``Q.events.listen(JobQueued, fn)`` calls ``fn(event)`` (a function or a coroutine function)
for every event of that class or a subclass, in the emitting task. A listener that raises
is logged and the others still run: a broken listener never turns a push or a job into a
failure. Events are plain frozen dataclasses (the catalogue of LIFE-1). The events of a
job carry its identity (``event.identity``, a ``JobIdentity``: LIFE-2), never the typed
job instance, so a listener cannot change the job it hears about.

Order for one job (LIFE-5): ``JobProcessing``, then ``JobProcessed`` or
``JobExceptionOccurred``; once the worker wrote the outcome, ``JobTimedOut`` (if the
attempt ran past its timeout), ``JobReleasedAfterException`` (it runs again) or
``JobFailed`` (for good), and last ``JobAttempted``. A worker tells ``WorkerStarting``,
``Looping`` before each claim and ``WorkerStopping``. With no listener of a kind, the
worker asks ``has_listeners`` and builds nothing.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

log = logging.getLogger("lane_pg.facade")

E = TypeVar("E")
Listener = Callable[[Any], Awaitable[None] | None]


class Events:
    """Listeners by event class."""

    def __init__(self) -> None:
        self._listeners: list[tuple[type[Any], Listener]] = []

    def listen(self, event_type: type[E], listener: Callable[[E], Any]) -> Callable[[], None]:
        """Call ``listener`` for each ``event_type`` event; returns the function that stops it."""
        entry = (event_type, listener)
        self._listeners.append(entry)

        def stop() -> None:
            if entry in self._listeners:
                self._listeners.remove(entry)

        return stop

    def has_listeners(self, event_type: type[Any]) -> bool:
        return any(issubclass(event_type, kind) for kind, _ in self._listeners)

    async def emit(self, event: object) -> None:
        for kind, listener in list(self._listeners):
            if not isinstance(event, kind):
                continue
            try:
                outcome = listener(event)
                if inspect.isawaitable(outcome):
                    await outcome
            except Exception:
                log.exception("listener %r raised on %r", listener, event)

    def clear(self) -> None:
        self._listeners.clear()


@dataclass(frozen=True, slots=True)
class JobIdentity:
    """Which job an event is about (LIFE-2): ``attempts`` counts the attempt the event
    is about, the first being 1; ``max_tries`` is None when the emitter did not know it."""

    id: str
    job_name: str
    attempts: int
    max_tries: int | None
    connection: str


class _JobEvent:
    """The ``identity`` of the events of one stored job (their fields name it)."""

    __slots__ = ()
    connection: str
    job_name: str
    job_id: str
    max_tries: int | None

    def _attempts(self) -> int:
        # "attempt" on the events of one attempt, "attempts" (made) on JobFailed.
        value = getattr(self, "attempt", None)
        return int(getattr(self, "attempts", 0) if value is None else value)

    @property
    def identity(self) -> JobIdentity:
        return JobIdentity(
            self.job_id, self.job_name, self._attempts(), self.max_tries, self.connection
        )


@dataclass(frozen=True, slots=True)
class JobQueueing:
    """A push is about to write (TX-3: at commit for a deferred push)."""

    connection: str
    queue: str
    job_name: str
    job: object


@dataclass(frozen=True, slots=True)
class JobQueued:
    """A push was written: ``job_id`` is the stored job's id."""

    connection: str
    queue: str
    job_name: str
    job_id: str


@dataclass(frozen=True, slots=True)
class JobProcessing(_JobEvent):
    connection: str
    queue: str
    job_name: str
    job_id: str
    attempt: int
    max_tries: int | None = None


@dataclass(frozen=True, slots=True)
class JobProcessed(_JobEvent):
    connection: str
    queue: str
    job_name: str
    job_id: str
    attempt: int
    max_tries: int | None = None


@dataclass(frozen=True, slots=True)
class JobExceptionOccurred(_JobEvent):
    """``handle`` raised (PUSH-8); the worker then fails the attempt (a retry or the end)."""

    connection: str
    queue: str
    job_name: str
    job_id: str
    attempt: int
    exception: BaseException
    max_tries: int | None = None


@dataclass(frozen=True, slots=True)
class JobReleased(_JobEvent):
    """A job middleware released the job (MW-2): it goes back to the queue after ``delay``
    seconds with its attempt given back (WithoutOverlapping, RateLimited, ...)."""

    connection: str
    queue: str
    job_name: str
    job_id: str
    attempt: int
    delay: float
    reason: str
    max_tries: int | None = None


@dataclass(frozen=True, slots=True)
class JobFailed(_JobEvent):
    """The job failed for good, in a settlement its worker wrote (RETRY-9): after the
    transaction that ended it (and wrote its failed-job record) committed. ``exception`` is
    the typed cause: ``MaxAttemptsExceeded`` (its last attempt raised; the error is its
    ``__cause__``), ``TimeoutExceeded``, ``ManuallyFailed`` (``Job.fail``), or the error
    that ended it without spending its attempts (an unknown job name, a failed child)."""

    connection: str
    queue: str
    job_name: str
    job_id: str
    attempts: int
    """Attempts made, the last included."""
    exception: BaseException
    max_tries: int | None = None


@dataclass(frozen=True, slots=True)
class UniqueJobSkipped:
    """``push_unique`` found the key ``job_name:unique_id`` locked and pushed nothing (UNIQ-1)."""

    job_name: str
    unique_id: str
    connection: str


@dataclass(frozen=True, slots=True)
class JobDebounced(_JobEvent):
    """A debounced dispatch was superseded by a newer one of its window (UNIQ-11): removed
    at push while still delayed, or acknowledged by the worker without running."""

    connection: str
    queue: str
    job_name: str
    job_id: str
    max_tries: int | None = None


@dataclass(frozen=True, slots=True)
class QueueFailedOver:
    """A failover driver's connection ``connection`` (its label) refused a push with an
    availability error and the push moved on (FOV-4): emitted once per transition into
    failure; a later push that this connection accepts re-arms it."""

    connection: str
    job_name: str
    exception: BaseException


@dataclass(frozen=True, slots=True)
class QueuePaused:
    """``Q.pause(connection, queue)`` paused one queue (PAUSE-3), in the calling process."""

    connection: str
    queue: str


@dataclass(frozen=True, slots=True)
class QueueResumed:
    connection: str
    queue: str


@dataclass(frozen=True, slots=True)
class QueuesPaused:
    """``Q.pause_all(connection)``: the connection-wide switch (PAUSE-4)."""

    connection: str


@dataclass(frozen=True, slots=True)
class QueuesResumed:
    connection: str


@dataclass(frozen=True, slots=True)
class WorkerQueuePaused:
    """A worker found a queue it was started with paused (PAUSE-7): once per transition.
    ``queue`` is None for a worker of every queue under the connection-wide pause."""

    connection: str
    queue: str | None


@dataclass(frozen=True, slots=True)
class WorkerQueueResumed:
    connection: str
    queue: str | None


@dataclass(frozen=True, slots=True)
class WorkerInterrupted:
    """A worker saw a restart signal newer than its start and stops (CLI-6);
    ``processed``: the jobs it settled."""

    connection: str
    processed: int


@dataclass(frozen=True, slots=True)
class JobTimedOut(_JobEvent):
    """An attempt ran past the job's timeout (``timeout`` seconds) and was cancelled;
    emitted once its failure is written, before ``JobReleasedAfterException`` or
    ``JobFailed``. (``lane_pg.JobTimedOut`` is the error the attempt failed with.)"""

    connection: str
    queue: str
    job_name: str
    job_id: str
    attempt: int
    timeout: float
    max_tries: int | None = None


@dataclass(frozen=True, slots=True)
class JobReleasedAfterException(_JobEvent):
    """A failed attempt was written and the job runs again after ``delay`` seconds at
    least (the backoff's shortest: jitter may add to it; 0: waiting at once)."""

    connection: str
    queue: str
    job_name: str
    job_id: str
    attempt: int
    exception: BaseException
    delay: float
    max_tries: int | None = None


@dataclass(frozen=True, slots=True)
class JobAttempted(_JobEvent):
    """The outcome of one attempt was written (each settlement, the last event of an
    attempt): ``state`` is where the job went (``completed``, ``waiting``, ``delayed``,
    ``failed``), ``exception`` what failed it (None: it completed)."""

    connection: str
    queue: str
    job_name: str
    job_id: str
    attempt: int
    state: str | None
    exception: BaseException | None
    max_tries: int | None = None

    @property
    def exception_occurred(self) -> bool:
        return self.exception is not None


@dataclass(frozen=True, slots=True)
class Looping:
    """A worker's claim loop is about to claim (each turn; keep listeners cheap)."""

    connection: str


@dataclass(frozen=True, slots=True)
class WorkerStarting:
    """A worker starts running (before its first claim)."""

    connection: str


@dataclass(frozen=True, slots=True)
class WorkerStopping:
    """A worker stops, its jobs finished or given back; ``processed``: the jobs it
    settled."""

    connection: str
    processed: int
