"""Sync pushes: the facade for code with no event loop (Flask, Django, a script).

    Q.push_sync(SendWelcomeEmail(user_id=42))
    with psycopg.connect(dsn) as conn:                  # the caller's own transaction
        conn.execute("INSERT INTO users ...")
        Q.push_sync(SendWelcomeEmail(user_id=42), conn=conn)   # committed with the insert

Each ``*_sync`` method runs its async twin, unchanged, on one event loop that lane_pg keeps
in a daemon thread of the process, and waits for it: the same routing, envelope, unique,
debounce, delay and after-commit rules, the same events, no second implementation to
drift. The caller's ``contextvars`` travel with the call, so ``lane_pg.context`` scopes
and a ``lane_pg.transaction(conn)`` block opened around the call apply as they do to an
``await``.

``conn=`` takes a synchronous connection as well: a psycopg ``Connection`` or a
SQLAlchemy ``Connection``/``Session``; the job row joins its open transaction (PostgreSQL
runs the statement on that connection while the caller's thread waits, so the connection is
never used by two threads at once).

One process uses a facade's connections from one event loop: its own (``await Q.push``) or
this one (``Q.push_sync``), because a connection pool belongs to the loop that opened it.
Calling a sync method from inside a running event loop raises (it would block that loop);
``await`` the async method there. After ``fork`` the child starts a loop of its own.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import os
import threading
from collections.abc import Coroutine, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, TypeVar

from lane_pg.errors import ConfigurationError
from lane_pg.facade.envelope import EnvelopeOverrides
from lane_pg.facade.job import Job
from lane_pg.types import Duration

T = TypeVar("T")


class _LoopThread:
    """One event loop in a daemon thread, started on first use (again in a forked child)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._pid = 0

    def loop(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None or self._pid != os.getpid():
                loop = asyncio.new_event_loop()
                thread = threading.Thread(
                    target=loop.run_forever, name="lane_pg-sync-pushes", daemon=True
                )
                thread.start()
                self._loop, self._pid = loop, os.getpid()
            return self._loop

    def run(self, call: Coroutine[Any, Any, T]) -> T:
        """Run ``call`` on the loop in the caller's ``contextvars`` and wait for its result."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            pass
        else:
            call.close()
            raise ConfigurationError(
                "a *_sync push blocks until the job is stored, and this thread runs an event"
                " loop: await the async method (Q.push, Q.later, ...) here instead"
            )
        loop = self.loop()
        done: concurrent.futures.Future[T] = concurrent.futures.Future()
        context = contextvars.copy_context()

        def start() -> None:
            task = loop.create_task(call, context=context)

            def settle(finished: asyncio.Task[T]) -> None:
                if finished.cancelled():
                    done.cancel()
                elif (error := finished.exception()) is not None:
                    done.set_exception(error)
                else:
                    done.set_result(finished.result())

            task.add_done_callback(settle)

        loop.call_soon_threadsafe(start)
        return done.result()


LOOP = _LoopThread()
"""The process's loop for sync pushes (every facade shares it)."""


def run_blocking(call: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine of the facade from synchronous code (see the module docstring)."""
    return LOOP.run(call)


class SyncPushes:
    """The ``*_sync`` twins of the facade's pushes (mixed into ``QueueFacade``)."""

    if TYPE_CHECKING:

        async def push(self, job: Job, *, conn: object | None = None) -> str: ...

        async def later(self, delay: Duration, job: Job, *, conn: object | None = None) -> str: ...

        async def push_later(
            self, job: Job, at: datetime, *, conn: object | None = None
        ) -> str: ...

        async def push_with(
            self, job: Job, overrides: EnvelopeOverrides, *, conn: object | None = None
        ) -> str: ...

        async def bulk(self, jobs: Sequence[Job], *, conn: object | None = None) -> list[str]: ...

        async def push_after_commit(self, job: Job) -> str: ...

        async def push_unique(self, job: Job) -> bool: ...

        async def later_unique(self, delay: Duration, job: Job) -> bool: ...

        async def close(self) -> None: ...

    def push_sync(self, job: Job, *, conn: object | None = None) -> str:
        """``push`` from synchronous code; ``conn``: the caller's connection (sync or not)."""
        return run_blocking(self.push(job, conn=conn))

    def later_sync(self, delay: Duration, job: Job, *, conn: object | None = None) -> str:
        return run_blocking(self.later(delay, job, conn=conn))

    def push_later_sync(self, job: Job, at: datetime, *, conn: object | None = None) -> str:
        return run_blocking(self.push_later(job, at, conn=conn))

    def push_with_sync(
        self, job: Job, overrides: EnvelopeOverrides, *, conn: object | None = None
    ) -> str:
        return run_blocking(self.push_with(job, overrides, conn=conn))

    def bulk_sync(self, jobs: Sequence[Job], *, conn: object | None = None) -> list[str]:
        return run_blocking(self.bulk(jobs, conn=conn))

    def push_after_commit_sync(self, job: Job) -> str:
        return run_blocking(self.push_after_commit(job))

    def push_unique_sync(self, job: Job) -> bool:
        """``push_unique`` from synchronous code: False when the job's unique lock is held."""
        return run_blocking(self.push_unique(job))

    def later_unique_sync(self, delay: Duration, job: Job) -> bool:
        return run_blocking(self.later_unique(delay, job))

    def close_sync(self) -> None:
        """Close every connection's driver from synchronous code (at shutdown)."""
        run_blocking(self.close())
