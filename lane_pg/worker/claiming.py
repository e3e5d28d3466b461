"""Blocking claims for callers other than the worker's loop (CLAIM-7, CLAIM-11, CLAIM-13).

    job = await claim_next_blocking(backend, "script-1", lease=30, block_timeout=10,
                                    queues=["emails"])

``claim_next_blocking`` claims one job; when there is none it waits for a wake-up (the
backend's LISTEN connection), the next delayed job's due time or the moment a rate-limited
queue admits a claim again (``next_claim_in``), or the poll, whichever comes first, then
claims again: the wake-up only says "look again", the claim decides (pause, limits,
promotion, SKIP LOCKED). A backend without wake-ups (memory) claims once and returns
(CLAIM-13). ``Worker.run_once_blocking`` waits the same way (``wait_for_claim``).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from datetime import timedelta
from typing import TypeVar

from lane_pg.backend import HasWakeups, JobQueueBackend, WakeupSource
from lane_pg.types import ClaimedJob, Duration, JobRateLimit, QueueDemand, to_millis

log = logging.getLogger("lane_pg.worker")

T = TypeVar("T")

DEFAULT_POLL_INTERVAL = 5.0
"""Seconds a blocked claimer waits at most between claims (CLAIM-12), whatever woke it."""


async def wait_for_claim(
    claim: Callable[[], Awaitable[T | None]],
    next_claim_in: Callable[[], Awaitable[timedelta | None]],
    wakeups: WakeupSource | None,
    *,
    block_timeout: float,
    poll_interval: float = DEFAULT_POLL_INTERVAL,
) -> T | None:
    """Run ``claim`` until it returns something or ``block_timeout`` seconds passed.

    Between claims: wait on ``wakeups`` until a wake-up, ``next_claim_in()`` (a due
    delayed job, a rate-limit window that frees) or ``poll_interval``, whichever is first.
    ``wakeups`` must already listen, so a job that arrives between the empty claim and the
    wait is not missed. Without ``wakeups`` one claim is made (CLAIM-13)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + block_timeout
    while True:
        found = await claim()
        if found is not None or wakeups is None:
            return found
        remaining = deadline - loop.time()
        if remaining <= 0:
            return None
        timeout = min(remaining, poll_interval)
        try:
            due = await next_claim_in()
        except Exception as exc:  # only a timer: the poll still bounds the wait
            log.debug("next_claim_in failed: %s", exc)
            due = None
        if due is not None:
            timeout = min(timeout, max(due.total_seconds(), 0.001))
        await wakeups.wait(timeout)


async def claim_next_blocking(
    backend: JobQueueBackend,
    worker_id: str,
    lease: Duration,
    block_timeout: Duration,
    *,
    queues: Sequence[str] | None = None,
    rate_limit: JobRateLimit | None = None,
    poll_interval: float = DEFAULT_POLL_INTERVAL,
    wakeups: WakeupSource | None = None,
    ignore_pause: bool = False,
) -> ClaimedJob | None:
    """Claim the next job of ``queues`` (every queue when None, in name order), waiting up
    to ``block_timeout`` for one (CLAIM-7); None when none came.

    ``wakeups`` is a started ``WakeupSource`` to wait on (``backend.wakeups(...)``); given
    none, a backend that has wake-ups (``HasWakeups``: PostgreSQL) opens a LISTEN
    connection for this call and closes it afterwards, so a caller that claims in a loop
    passes its own. A backend without wake-ups claims once (CLAIM-13). ``rate_limit`` and
    ``ignore_pause`` are ``claim_jobs``'; a throttled queue is claimed again as soon as its
    window admits a job (CLAIM-11)."""
    timeout = to_millis(block_timeout, "block_timeout") / 1000
    names = None if queues is None else list(queues)

    async def claim() -> ClaimedJob | None:
        asked = names if names is not None else await backend.queues.list_queues()
        jobs = await backend.runs.claim_jobs(
            worker_id,
            [QueueDemand(queue, 1) for queue in asked],
            lease,
            total=1,
            rate_limit=rate_limit,
            ignore_pause=ignore_pause,
        )
        return jobs[0] if jobs else None

    async def due() -> timedelta | None:
        return await backend.limits.next_claim_in(names, rate_limit)

    if wakeups is not None or not isinstance(backend, HasWakeups) or timeout <= 0:
        return await wait_for_claim(
            claim, due, wakeups, block_timeout=timeout, poll_interval=poll_interval
        )
    own = backend.wakeups(
        names,
        name=f"lane_pg listener {worker_id}",
        health_interval=min(poll_interval, DEFAULT_POLL_INTERVAL),
    )
    if own is None:  # no LISTEN to be had (a transaction pooler): poll
        return await wait_for_claim(
            claim, due, None, block_timeout=timeout, poll_interval=poll_interval
        )
    await own.start()
    try:
        return await wait_for_claim(
            claim, due, own, block_timeout=timeout, poll_interval=poll_interval
        )
    finally:
        await own.close()
