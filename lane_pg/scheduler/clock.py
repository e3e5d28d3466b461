"""The scheduler's time source: the real one, and a manual one for tests.

Every time-based decision of the lane scheduler (timeouts, retry delays, rate-limit
windows, priority boost, drain deadlines) reads ``Clock.monotonic()`` and waits with
``Clock.sleep()``, so a test can drive virtual time with ``ManualClock`` instead of
sleeping.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import time
from collections.abc import Awaitable
from typing import Protocol, TypeVar

T = TypeVar("T")


class Clock(Protocol):
    def monotonic(self) -> float:
        """Seconds on a monotonic scale (only differences matter)."""
        ...

    async def sleep(self, seconds: float) -> None:
        """Wait ``seconds`` on this clock's scale."""
        ...


class SystemClock:
    """The default clock: ``time.monotonic`` (the asyncio loop's scale) and ``asyncio.sleep``."""

    def monotonic(self) -> float:
        return time.monotonic()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(max(seconds, 0.0))


class ManualClock:
    """A clock that only moves when told to; sleepers wake when time passes their deadline.

    ``advance``/``advance_to`` move time; ``next_deadline`` waits for someone to sleep;
    ``run_until`` drives time from deadline to deadline until an awaitable completes.
    """

    def __init__(self, start: float = 0.0) -> None:
        self._now = float(start)
        self._counter = itertools.count()
        self._sleepers: list[tuple[float, int, asyncio.Future[None]]] = []
        self._watchers: list[asyncio.Future[None]] = []

    def monotonic(self) -> float:
        return self._now

    async def sleep(self, seconds: float) -> None:
        loop = asyncio.get_running_loop()
        if seconds <= 0:
            await asyncio.sleep(0)
            return
        fut: asyncio.Future[None] = loop.create_future()
        heapq.heappush(self._sleepers, (self._now + seconds, next(self._counter), fut))
        watchers, self._watchers = self._watchers, []
        for watcher in watchers:
            if not watcher.done():
                watcher.set_result(None)
        await fut

    @property
    def sleepers(self) -> int:
        """How many sleepers are waiting."""
        self._purge()
        return len(self._sleepers)

    def advance(self, seconds: float) -> None:
        self.advance_to(self._now + seconds)

    def advance_to(self, when: float) -> None:
        """Move time forward to ``when`` and wake every sleeper whose deadline has passed."""
        self._now = max(self._now, float(when))
        while self._sleepers and self._sleepers[0][0] <= self._now:
            _, _, fut = heapq.heappop(self._sleepers)
            if not fut.done():
                fut.set_result(None)

    async def next_deadline(self) -> float:
        """The earliest sleeper's deadline, waiting until someone sleeps if nobody does."""
        while True:
            self._purge()
            if self._sleepers:
                return self._sleepers[0][0]
            watcher: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._watchers.append(watcher)
            await watcher

    async def run_until(
        self,
        aw: Awaitable[T],
        *,
        timeout: float = 10.0,  # noqa: ASYNC109 (real seconds, bounding virtual time's drive)
        settle: int = 10,
    ) -> T:
        """Await ``aw``, jumping to the next sleeper's deadline whenever the loop is quiet.

        Before each jump the loop gets ``settle`` turns so work due now runs first.
        ``timeout`` bounds the real time spent.
        """
        async with asyncio.timeout(timeout):
            target = asyncio.ensure_future(aw)
            try:
                while True:
                    for _ in range(settle):
                        if target.done():
                            return target.result()
                        await asyncio.sleep(0)
                    deadline = asyncio.ensure_future(self.next_deadline())
                    await asyncio.wait({target, deadline}, return_when=asyncio.FIRST_COMPLETED)
                    if target.done():
                        deadline.cancel()
                        return target.result()
                    self._purge()  # a sleeper may have come or gone since
                    if self._sleepers:
                        self.advance_to(self._sleepers[0][0])
            finally:
                if not target.done():
                    target.cancel()

    def _purge(self) -> None:
        while self._sleepers and self._sleepers[0][2].done():
            heapq.heappop(self._sleepers)
