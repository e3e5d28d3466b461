"""Pausing through the facade (PAUSE-3..6) and the worker hooks that report it (PAUSE-7).

    await Q.pause("reports", "billing")      # one queue of one connection
    await Q.pause_all()                       # every queue of the default connection
    await Q.is_paused(None, "billing")

A connection argument of None means the default connection; any other name must be a
configured connection (``Q.connection``), so a pause can never land on the wrong one.
The pause itself is the connection's backend's (``lane.pause_queue``, ``lane.pause_all``:
checked inside the claim); the facade adds the events of the calling process
(``QueuePaused``, ``QueuesPaused``, ...: LIFE-4). A connection whose backend cannot pause
raises ``NotImplementedError``, and no event is emitted.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Protocol, TypeVar, runtime_checkable

import lane_pg.context as context
from lane_pg.facade.envelope import stored_context
from lane_pg.facade.events import (
    Events,
    JobAttempted,
    JobFailed,
    JobReleasedAfterException,
    JobTimedOut,
    Looping,
    QueuePaused,
    QueueResumed,
    QueuesPaused,
    QueuesResumed,
    WorkerInterrupted,
    WorkerQueuePaused,
    WorkerQueueResumed,
    WorkerStarting,
    WorkerStopping,
)
from lane_pg.types import JobRow, JobState, PauseStatus, validate_queue_name
from lane_pg.worker.pausing import WorkerHooks

if TYPE_CHECKING:
    from lane_pg.facade.connection import Connection

T = TypeVar("T")


@runtime_checkable
class PausesQueues(Protocol):
    """A connection that can be paused: every ``Connection`` over a backend that keeps
    queues (``BackendDriver``), or a third-party driver that implements these."""

    async def pause_queue(self, queue: str) -> None: ...

    async def resume_queue(self, queue: str) -> None: ...

    async def pause_all(self) -> None: ...

    async def resume_all(self) -> None: ...

    async def pause_status(self, queues: Sequence[str]) -> PauseStatus: ...


class PausingMixin:
    """``QueueFacade``'s pause calls; the facade gives ``events``, ``driver()``,
    ``connection(name)`` and ``connection_name()``."""

    events: Events

    # QueueFacade's own methods (it comes first in the MRO), declared for the type checker.
    def driver(self) -> Connection:
        raise NotImplementedError

    def connection(self, name: str) -> Connection:
        raise NotImplementedError

    def connection_name(self) -> str:
        raise NotImplementedError

    async def _on(self, connection: str | None, call: Callable[[Connection], Awaitable[T]]) -> T:
        """``call`` on the connection (None: the default); ``NotImplementedError`` naming
        it when its backend cannot pause (null, sync, failover, a driver without one)."""
        if connection is None:
            name, driver = self.connection_name(), self.driver()
        else:
            name, driver = connection, self.connection(connection)
        try:
            return await call(driver)
        except NotImplementedError as exc:
            raise NotImplementedError(
                f"the {driver.driver_name} connection {name!r} cannot pause queues"
            ) from exc

    def _name(self, connection: str | None) -> str:
        return self.connection_name() if connection is None else connection

    async def pause(self, connection: str | None, queue: str) -> None:
        """Pause ``queue`` on ``connection`` (None: the default) and emit ``QueuePaused``
        (PAUSE-3); jobs already claimed finish, nothing more is claimed from it."""
        validate_queue_name(queue)
        await self._on(connection, lambda driver: driver.pause_queue(queue))
        await self.events.emit(QueuePaused(self._name(connection), queue))

    async def resume(self, connection: str | None, queue: str) -> None:
        validate_queue_name(queue)
        await self._on(connection, lambda driver: driver.resume_queue(queue))
        await self.events.emit(QueueResumed(self._name(connection), queue))

    async def pause_all(self, connection: str | None = None) -> None:
        """The connection-wide pause (PAUSE-4): every queue, now and created later."""
        await self._on(connection, lambda driver: driver.pause_all())
        await self.events.emit(QueuesPaused(self._name(connection)))

    async def resume_all(self, connection: str | None = None) -> None:
        """Lift ``pause_all``; queues paused one by one stay paused (PAUSE-4)."""
        await self._on(connection, lambda driver: driver.resume_all())
        await self.events.emit(QueuesResumed(self._name(connection)))

    async def is_paused(self, connection: str | None, queue: str) -> bool:
        """True when ``queue`` or the whole connection is paused (PAUSE-5)."""
        validate_queue_name(queue)
        status = await self._on(connection, lambda driver: driver.pause_status([queue]))
        return status.is_paused(queue)

    async def paused_queues(self, connection: str | None, queues: Sequence[str]) -> list[str]:
        """The paused ones among ``queues``, in their order (PAUSE-5): all of them under
        the connection-wide pause."""
        names = list(queues)
        for queue in names:
            validate_queue_name(queue)
        status = await self._on(connection, lambda driver: driver.pause_status(names))
        return [queue for queue in names if status.is_paused(queue)]


class FacadeWorkerHooks(WorkerHooks):
    """A worker's hooks as facade events (``WorkerQueuePaused``, ``WorkerQueueResumed``,
    ``WorkerInterrupted``, ``JobFailed``, and the rest of LIFE-1's worker side) labelled
    with the connection it drains.

    The events of a written outcome (``JobFailed``, ``JobTimedOut``,
    ``JobReleasedAfterException``, ``JobAttempted``) are emitted by the worker's
    settlement, after the attempt's own scope ended: their listeners run in the context
    the job was pushed with (``lane_pg.context``), restored for them without its hooks."""

    def __init__(self, events: Events, connection: str) -> None:
        self.events = events
        self.connection = connection

    async def queue_paused(self, queue: str | None) -> None:
        await self.events.emit(WorkerQueuePaused(self.connection, queue))

    async def queue_resumed(self, queue: str | None) -> None:
        await self.events.emit(WorkerQueueResumed(self.connection, queue))

    async def interrupted(self, processed: int) -> None:
        await self.events.emit(WorkerInterrupted(self.connection, processed))

    async def starting(self) -> None:
        await self.events.emit(WorkerStarting(self.connection))

    async def stopping(self, processed: int) -> None:
        await self.events.emit(WorkerStopping(self.connection, processed))

    async def looping(self) -> None:
        if self.events.has_listeners(Looping):  # every turn of the loop: build nothing else
            await self.events.emit(Looping(self.connection))

    def hears_settlements(self) -> bool:
        events = self.events
        return (
            events.has_listeners(JobAttempted)
            or events.has_listeners(JobReleasedAfterException)
            or events.has_listeners(JobTimedOut)
        )

    async def _emit_for(self, job: JobRow, event: object) -> None:
        with context.restore(stored_context(job), hooks=False):
            await self.events.emit(event)

    async def job_failed(self, job: JobRow, cause: BaseException) -> None:
        await self._emit_for(
            job,
            JobFailed(
                self.connection,
                job.queue,
                job.name,
                job.id,
                job.attempts_made + 1,
                cause,
                job.max_attempts,
            ),
        )

    async def job_timed_out(self, job: JobRow, limit: float) -> None:
        attempt = job.attempts_made + 1
        event = JobTimedOut(
            self.connection, job.queue, job.name, job.id, attempt, limit, job.max_attempts
        )
        await self._emit_for(job, event)

    async def job_retrying(self, job: JobRow, error: BaseException, delay: float) -> None:
        attempt = job.attempts_made + 1
        event = JobReleasedAfterException(
            self.connection, job.queue, job.name, job.id, attempt, error, delay, job.max_attempts
        )
        await self._emit_for(job, event)

    async def job_attempted(
        self, job: JobRow, state: JobState | None, error: BaseException | None
    ) -> None:
        attempt = job.attempts_made + 1
        event = JobAttempted(
            self.connection, job.queue, job.name, job.id, attempt, state, error, job.max_attempts
        )
        await self._emit_for(job, event)
