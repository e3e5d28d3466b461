"""Making a worker the way every entry point does: ``App``, the CLI and the facade's
``run_worker`` (WORK-17), so they cannot drift apart.

A backend that can wake workers (PostgreSQL: LISTEN on the queues' channels) gets a
started notifier for the worker's queues; the others poll. ``close_worker`` releases it.

``open_when_reachable`` opens a backend whose server may not be up yet (a worker started
before its database, as docker compose does): an unreachable server is retried with
capped backoff, anything retrying cannot fix is raised at once (``is_being_set_up``: a
schema or database created by a migrate running beside a worker that had to wait).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Protocol, TypeVar

from lane_pg.backend import HasWakeups, JobQueueBackend
from lane_pg.backend.failed import FailedJobStore
from lane_pg.errors import SchemaVersionMismatch, describe_exception, is_server_unreachable
from lane_pg.types.workers import jittered
from lane_pg.worker.budget import ClaimBudget
from lane_pg.worker.config import WorkerConfig
from lane_pg.worker.context import ProcessorLike
from lane_pg.worker.pausing import WorkerHooks
from lane_pg.worker.runtime import Worker


async def create_worker(
    backend: JobQueueBackend,
    processors: Mapping[str, ProcessorLike] | ProcessorLike,
    config: WorkerConfig,
    *,
    failed_store: FailedJobStore | None = None,
    connection: str = "default",
    hooks: WorkerHooks | None = None,
    claim_budget: ClaimBudget | None = None,
) -> Worker:
    notifier = None
    if isinstance(backend, HasWakeups):
        notifier = backend.wakeups(
            [lane.name for lane in config.lanes] or None,
            name=f"lane_pg listener {config.worker_id}",
            health_interval=min(config.poll_interval, 5.0),
        )
        if notifier is not None:
            await notifier.start()
    return Worker(
        backend,
        processors,
        config,
        notifier=notifier,
        failed_store=failed_store,
        connection=connection,
        hooks=hooks,
        claim_budget=claim_budget,
    )


async def close_worker(worker: Worker) -> None:
    if worker.notifier is not None:
        await worker.notifier.close()


class Runnable(Protocol):
    """A ``Worker``, or workers run as one (``lane_pg.facade.failover_worker``)."""

    async def run(self) -> None: ...

    def stop(self) -> None: ...


async def run_until(worker: Runnable, shutdown: asyncio.Event | None) -> None:
    """``worker.run()``, stopped at its next claim boundary once ``shutdown`` is set."""
    if shutdown is None:
        await worker.run()
        return

    async def watch() -> None:
        await shutdown.wait()
        worker.stop()

    watcher = asyncio.create_task(watch())
    try:
        await worker.run()
    finally:
        watcher.cancel()


T = TypeVar("T")

log = logging.getLogger("lane_pg.worker")

STARTUP_FIRST_DELAY = 0.5
"""Seconds before the first retry of an unreachable server; doubled per retry..."""
STARTUP_MAX_DELAY = 10.0
"""...up to this many seconds between tries."""
STARTUP_LOG_EVERY = 30.0
"""Seconds between the log lines of a start-up wait: one line per window, not per try."""
STARTUP_SETUP_GRACE = 60.0
"""Seconds a server that was unreachable and now answers gets to have its lane schema (or
its database) created: the migrate of a compose file often runs beside the worker."""


class DatabaseUnreachable(ConnectionError):
    """The server did not answer within the start-up timeout."""


def is_unreachable(exc: BaseException) -> bool:
    """Whether ``exc`` says the server cannot be reached yet, so trying again may work
    (``lane_pg.errors.is_server_unreachable``)."""
    return is_server_unreachable(exc)


def is_being_set_up(exc: BaseException) -> bool:
    """Whether ``exc`` says the server answers but what the worker needs is not there yet:
    the lane schema is not installed at all, or the database does not exist (SQLSTATE
    3D000). Retried for a grace period after the server itself was unreachable in the same
    start-up, and a missing database from the first answer on (``open_when_reachable``): a
    ``migrate`` or ``createdb`` may be running beside it."""
    if isinstance(exc, SchemaVersionMismatch):
        return exc.installed is None
    return is_missing_database(exc)


def is_missing_database(exc: BaseException) -> bool:
    """The server answers, but the database of the DSN does not exist (SQLSTATE 3D000)."""
    return getattr(exc, "sqlstate", None) == "3D000"


async def open_when_reachable(
    open_backend: Callable[[], Awaitable[T]],
    what: str,
    *,
    timeout: float | None = None,  # noqa: ASYNC109 (a start-up deadline, not a call's)
    stop: asyncio.Event | None = None,
    first_delay: float = STARTUP_FIRST_DELAY,
    max_delay: float = STARTUP_MAX_DELAY,
    log_every: float = STARTUP_LOG_EVERY,
    setup_grace: float = STARTUP_SETUP_GRACE,
) -> T | None:
    """``await open_backend()``, retried while the server is unreachable (``is_unreachable``)
    with a delay of ``first_delay`` seconds doubling up to ``max_delay``, for ``timeout``
    seconds at most (None: until it answers); any other error is raised at once, except
    that a server which answers without the database, or was unreachable and now answers
    without the lane schema (``is_being_set_up``), gets ``setup_grace`` more seconds. Logs
    one warning per ``log_every`` seconds of waiting, naming ``what`` (a redacted DSN),
    never one per try. Returns None when ``stop`` is set first; raises
    ``DatabaseUnreachable`` when the timeout or the grace passes."""
    if stop is not None and stop.is_set():
        return None
    started = time.monotonic()
    delay = first_delay
    attempts = 0
    next_log = 0.0
    answered_at: float | None = None
    while True:
        try:
            opened = await open_backend()
        except Exception as exc:
            now = time.monotonic()
            if not is_unreachable(exc):
                # A missing schema on the first answer is final (a worker pointed at the
                # wrong database); a missing database may be a createdb still to come
                # (a test harness, a compose file without the image's own init).
                if not is_being_set_up(exc) or (not attempts and not is_missing_database(exc)):
                    raise
                if answered_at is None:
                    answered_at = now
                    log.warning(
                        "%s answers, but %s: waiting up to %gs for a migrate (or createdb)"
                        " running beside this worker",
                        what,
                        exc,
                        setup_grace,
                    )
                if now - answered_at >= setup_grace:
                    raise DatabaseUnreachable(
                        f"{what} answers, but {exc} (waited {now - answered_at:.0f}s for a"
                        " migrate or createdb)"
                    ) from exc
            attempts += 1
            waited = now - started
            error = describe_exception(exc)
            if timeout is not None and waited >= timeout and answered_at is not None:
                raise DatabaseUnreachable(
                    f"{what} answers, but {exc} (the start-up timeout of {timeout:g}s passed)"
                ) from exc
            if timeout is not None and waited >= timeout:
                raise DatabaseUnreachable(
                    f"{what} did not answer within the start-up timeout of {timeout:g}s"
                    f" ({attempts} attempts; last: {error})"
                ) from exc
            if answered_at is None and waited >= next_log:
                bound = "until it answers" if timeout is None else f"for up to {timeout:g}s"
                log.warning(
                    "waiting for %s (%s): retrying, %gs doubling to %gs between tries, %s;"
                    " SIGTERM or SIGINT stops the wait",
                    what,
                    error,
                    first_delay,
                    max_delay,
                    bound,
                )
                next_log = waited + log_every
            pause = jittered(delay)
            if timeout is not None:
                pause = min(pause, max(timeout - waited, 0.0))
            delay = min(delay * 2, max_delay)
            if stop is None:
                await asyncio.sleep(pause)
                continue
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(pause):
                    await stop.wait()
            if stop.is_set():
                return None
            continue
        if attempts:
            log.warning(
                "%s answered after %.1fs (%d failed attempts)",
                what,
                time.monotonic() - started,
                attempts,
            )
        return opened
