"""Synchronous handlers: a plain ``def`` processor or job class runs in a thread of a
bounded pool the worker owns, never on the event loop (which keeps renewing its lease).

A thread cannot be killed. When its job's run ends without it (the job's timeout, a lost
lease with ``cancel_on_lease_loss``, the shutdown deadline) the job is settled or given back
by the event loop, the run's context is flagged (``ctx.cancelled``), and the thread is left
to finish: whatever it returns or raises then is dropped, since the call's future is gone,
and its context writes are refused. It keeps its place in the pool until it returns.

The threads are daemon threads started on demand: an idle worker of async handlers has
none, and a handler that never returns cannot keep the process alive after the worker
exits (``ThreadPoolExecutor`` joins its threads at interpreter exit, whatever
``shutdown(wait=False)`` said).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
import inspect
import logging
import queue
import threading
from collections.abc import Callable
from typing import Any, Generic, TypeVar

from lane_pg.types import JobRow

log = logging.getLogger("lane_pg.worker")

T = TypeVar("T")


def is_async_callable(obj: object) -> bool:
    """Whether calling ``obj`` gives an awaitable by declaration: an ``async def``
    function or method, a ``functools.partial`` of one, a decorated one that kept
    ``__wrapped__``, or an object whose ``__call__`` is one."""
    while isinstance(obj, functools.partial):
        obj = obj.func
    if inspect.iscoroutinefunction(obj) or inspect.iscoroutinefunction(_unwrapped(obj)):
        return True
    if inspect.isfunction(obj) or inspect.ismethod(obj) or inspect.isbuiltin(obj):
        return False
    call = getattr(obj, "__call__", None)  # noqa: B004 (the method itself is inspected)
    return call is not None and (
        inspect.iscoroutinefunction(call) or inspect.iscoroutinefunction(_unwrapped(call))
    )


def _unwrapped(obj: object) -> object:
    try:
        return inspect.unwrap(obj)  # type: ignore[arg-type]
    except ValueError:  # a __wrapped__ cycle
        return obj


class _Call(Generic[T]):
    """One call handed to the pool, and the future the event loop awaits."""

    __slots__ = ("abandoned", "call", "context", "done", "finished", "loop", "started")

    def __init__(
        self, call: Callable[[], T], loop: asyncio.AbstractEventLoop, done: asyncio.Future[T]
    ) -> None:
        self.call = call
        self.loop = loop
        self.done = done
        self.context = contextvars.copy_context()
        self.started = False
        self.finished = False
        self.abandoned = False

    def run(self, lock: threading.Lock) -> None:
        """In a pool thread: the call, unless it was abandoned before it started."""
        with lock:
            if self.abandoned:
                return
            self.started = True
        try:
            result = self.context.run(self.call)
        except Exception as exc:
            self._post(self._set_exception, exc)
        except BaseException as exc:  # SystemExit, KeyboardInterrupt: a failed run here
            failure = RuntimeError(f"the handler raised {type(exc).__name__}: {exc}")
            failure.__cause__ = exc
            self._post(self._set_exception, failure)
        else:
            self._post(self._set_result, result)

    def _post(self, setter: Callable[[Any], None], value: object) -> None:
        # A closed loop: the worker is gone, and so is the job's run.
        with contextlib.suppress(RuntimeError):
            self.loop.call_soon_threadsafe(setter, value)

    def _set_result(self, value: T) -> None:
        if not self.done.done():  # a cancelled (timed-out, given-back) run drops it
            self.done.set_result(value)

    def _set_exception(self, exc: BaseException) -> None:
        if not self.done.done():
            self.done.set_exception(exc)


class SyncThreads:
    """At most ``size`` synchronous calls at once, each in a daemon thread of its own,
    started when a call finds no idle thread. ``close()`` lets the threads end (a busy
    one once its call returns); the next call starts new ones."""

    def __init__(self, size: int, name: str = "lane_pg-sync") -> None:
        self.size = size
        self._name = name
        self._lock = threading.Lock()
        self._calls: queue.SimpleQueue[_Call[Any] | None] = queue.SimpleQueue()
        self._threads = 0
        self._idle = 0
        self._abandoned = 0

    @property
    def abandoned(self) -> int:
        """Threads still running a call whose run was given up (a timed-out handler)."""
        return self._abandoned

    async def run(self, call: Callable[[], T], job: JobRow | None = None) -> T:
        """``call()`` in a pool thread; cancelling this (a timeout, the shutdown deadline)
        abandons it: a call not started yet never starts, a started one runs on and its
        outcome is dropped."""
        loop = asyncio.get_running_loop()
        item: _Call[T] = _Call(call, loop, loop.create_future())
        self._submit(item)
        try:
            return await item.done
        except asyncio.CancelledError:
            self._abandon(item, job)
            raise

    def close(self) -> None:
        """Let the threads end: idle ones at once, busy ones after their call."""
        with self._lock:
            calls, self._calls = self._calls, queue.SimpleQueue()
            threads, self._threads, self._idle = self._threads, 0, 0
        for _ in range(threads):
            calls.put(None)

    def _submit(self, item: _Call[Any]) -> None:
        with self._lock:
            calls = self._calls
            calls.put(item)
            if self._idle > 0:
                self._idle -= 1  # that idle thread takes it
                return
            if self._threads >= self.size:
                return  # waits for a thread to free up
            self._threads += 1
            number = self._threads
        thread = threading.Thread(
            target=self._serve, args=(calls,), name=f"{self._name}-{number}", daemon=True
        )
        thread.start()

    def _serve(self, calls: queue.SimpleQueue[_Call[Any] | None]) -> None:
        lock = self._lock
        while True:
            item = calls.get()
            if item is None:
                return
            item.run(lock)
            with lock:
                item.finished = True
                if item.abandoned and item.started:
                    self._abandoned -= 1
                if calls is self._calls:
                    self._idle += 1

    def _abandon(self, item: _Call[Any], job: JobRow | None) -> None:
        with self._lock:
            item.abandoned = True
            running = item.started and not item.finished
            if running:
                self._abandoned += 1
            held = self._abandoned
        if running:
            what = "a sync call" if job is None else f"job {job.queue}/{job.id} ({job.name})"
            log.warning(
                "%s: its run ended (timeout, lost lease or shutdown) while its handler still"
                " runs in its thread; the handler's late result will be dropped; %d of %d"
                " sync threads are held by such handlers",
                what,
                held,
                self.size,
            )
