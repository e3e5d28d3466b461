"""Live updates: one reader per dashboard process, shared by every open page.

While at least one page listens (``/api/stream``, server-sent events), one task reads the
overview (every queue's counts and pause flag, and the live workers) and sends it to
each listener when it changed. It reads again when the backend wakes it (PostgreSQL:
LISTEN on the channel that wakes idle workers, so an added or resumed job shows at
once), and every ``poll_interval`` seconds otherwise (completions send no notification:
a NOTIFY on every commit halved concurrent enqueue). With no page open nothing runs, so
the dashboard costs the queue nothing while nobody looks; many pages cost one reader,
not one each (Oban Web's per-session refresh queries were a reported load on busy
databases).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from lane_pg.backend import HasWakeups, JobQueueBackend, WakeupSource

logger = logging.getLogger("lane_pg.dashboard")

Snapshot = dict[str, Any]

END = ""
"""What an inbox receives last when the hub ends every stream (no snapshot is empty)."""


class LiveHub:
    """The shared reader behind ``/api/stream``."""

    def __init__(
        self,
        backend: Callable[[], Awaitable[JobQueueBackend]],
        read: Callable[[JobQueueBackend], Awaitable[Snapshot]],
        poll_interval: float,
    ) -> None:
        self._backend = backend
        self._read = read
        self._poll_interval = poll_interval
        self._listeners: set[asyncio.Queue[str]] = set()
        self._new: set[asyncio.Queue[str]] = set()
        """Listeners that got no snapshot yet: the next read goes to them, changed or not
        (a cached one could be older than the page they just loaded)."""
        self._kick = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._last: str | None = None
        self._ending = False
        self.reads = 0
        """How many snapshots were read (a test checks nothing runs with no listener)."""

    @property
    def listeners(self) -> int:
        return len(self._listeners)

    @property
    def running(self) -> bool:
        return self._task is not None and not self._task.done()

    @contextlib.asynccontextmanager
    async def listen(self) -> AsyncIterator[asyncio.Queue[str]]:
        """A queue of snapshot texts for one page: a fresh read at once, then each change."""
        inbox: asyncio.Queue[str] = asyncio.Queue(maxsize=4)
        if self._ending:
            inbox.put_nowait(END)
            yield inbox
            return
        self._listeners.add(inbox)
        self._new.add(inbox)
        self._kick.set()
        if not self.running:
            self._task = asyncio.create_task(self._run(), name="lane_pg dashboard live")
        try:
            yield inbox
        finally:
            self._listeners.discard(inbox)
            self._new.discard(inbox)
            if not self._listeners and self._task is not None:
                self._task.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await self._task
                self._task = None
                self._last = None
                if self._listeners:
                    # A page joined while the reader was being stopped (a form's redirect
                    # opens the next page's stream as the last one closes): it saw the old
                    # reader still running and started none, so start it here.
                    self._task = asyncio.create_task(self._run(), name="lane_pg dashboard live")

    def end_streams(self) -> None:
        """Send every open stream, and each one opened from now on, its end.

        A server stopping waits for its open responses, and a page's stream never ends by
        itself: ``python -m lane_pg dashboard`` calls this when it is told to stop, so a
        SIGTERM with a page open exits at once instead of after the server's grace
        period (uvicorn's is unbounded; a test's dashboard was killed after 10 s)."""
        self._ending = True
        self._send(END, self._listeners)

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task
            self._task = None

    async def _run(self) -> None:
        backend = await self._backend()
        wakeups: WakeupSource | None = None
        if isinstance(backend, HasWakeups):
            wakeups = backend.wakeups(None, name="lane_pg dashboard", health_interval=30.0)
            try:
                if wakeups is not None:
                    await wakeups.start()
            except Exception as exc:  # polling still works: say so, once
                logger.warning("dashboard: live wake-ups unavailable, polling only: %s", exc)
                wakeups = None
        try:
            while self._listeners:
                try:
                    snapshot = await self._read(backend)
                    self.reads += 1
                    text = json.dumps(snapshot, default=str, sort_keys=True)
                    if text != self._last:
                        self._last = text
                        self._send(text, self._listeners)
                    else:
                        self._send(text, self._new)
                    self._new.clear()
                except Exception as exc:
                    logger.warning("dashboard: reading the overview failed: %s", exc)
                if await self._wait(wakeups):
                    # A burst of adds wakes many times: one read covers them.
                    await asyncio.sleep(min(0.25, self._poll_interval))
        finally:
            if wakeups is not None:
                with contextlib.suppress(Exception):
                    await wakeups.close()

    async def _wait(self, wakeups: WakeupSource | None) -> bool:
        """Until the backend wakes this reader (True), a page joins, or the poll is due."""
        if self._kick.is_set():
            self._kick.clear()
            return False
        kicked = asyncio.ensure_future(self._kick.wait())
        waiting = asyncio.ensure_future(
            wakeups.wait(self._poll_interval)
            if wakeups is not None
            else asyncio.sleep(self._poll_interval, False)
        )
        try:
            await asyncio.wait({kicked, waiting}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            kicked.cancel()
            waiting.cancel()
        self._kick.clear()
        return bool(waiting.done() and not waiting.cancelled() and waiting.result())

    def _send(self, text: str, listeners: set[asyncio.Queue[str]]) -> None:
        if self._ending and text != END:
            return  # a snapshot after the end could push the end out of a full inbox
        for inbox in list(listeners):
            if inbox.full():  # a slow page gets the newest snapshot, not a backlog
                with contextlib.suppress(asyncio.QueueEmpty):
                    inbox.get_nowait()
            inbox.put_nowait(text)
