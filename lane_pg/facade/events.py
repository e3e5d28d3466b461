"""In-process lifecycle events (LIFE): one small emitter the facade and the worker share.

``Q.events.listen(JobQueued, fn)`` calls ``fn(event)`` (a function or a coroutine function)
for every event of that class or a subclass, in the emitting task. A listener that raises
is logged and the others still run: a broken listener never turns a push or a job into a
failure. Events are plain frozen dataclasses; this module defines the ones the dispatch
half of the facade emits, the next issue adds the rest (LIFE-1).
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
class JobProcessing:
    connection: str
    queue: str
    job_name: str
    job_id: str
    attempt: int


@dataclass(frozen=True, slots=True)
class JobProcessed:
    connection: str
    queue: str
    job_name: str
    job_id: str
    attempt: int


@dataclass(frozen=True, slots=True)
class JobExceptionOccurred:
    """``handle`` raised (PUSH-8); the worker then fails the attempt (a retry or the end)."""

    connection: str
    queue: str
    job_name: str
    job_id: str
    attempt: int
    exception: BaseException


@dataclass(frozen=True, slots=True)
class JobReleased:
    """A job middleware released the job (MW-2): it goes back to the queue after ``delay``
    seconds with its attempt given back (WithoutOverlapping, RateLimited, ...)."""

    connection: str
    queue: str
    job_name: str
    job_id: str
    attempt: int
    delay: float
    reason: str


@dataclass(frozen=True, slots=True)
class JobFailed:
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


@dataclass(frozen=True, slots=True)
class UniqueJobSkipped:
    """``push_unique`` found the key ``job_name:unique_id`` locked and pushed nothing (UNIQ-1)."""

    job_name: str
    unique_id: str
    connection: str


@dataclass(frozen=True, slots=True)
class JobDebounced:
    """A debounced dispatch was superseded by a newer one of its window (UNIQ-11): removed
    at push while still delayed, or acknowledged by the worker without running."""

    connection: str
    queue: str
    job_name: str
    job_id: str


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
