"""A stopping worker's helper tasks end when cancelled, whatever they were waiting for.

On Python 3.11, ``asyncio.wait_for`` swallows a cancellation that arrives in the same
event-loop turn as the awaited event: the maintenance scheduler, cancelled just as the
worker won the leadership role, looped on and a burst worker never returned (seen as a
hanging ``App("memory://").run_worker(burst=True)``). The worker's waits use
``asyncio.timeout`` instead.
"""

from __future__ import annotations

import asyncio

import pytest

from lane_pg.worker.maintenance import Leadership


async def test_a_leadership_wait_cancelled_as_the_role_changes_is_cancelled() -> None:
    for _ in range(20):
        leadership = Leadership(None, "worker-1", 1.0)
        waiting = asyncio.create_task(leadership.wait_changed(30.0))
        await asyncio.sleep(0)  # the task now waits for the change
        leadership._changed.set()  # the role changes ...
        waiting.cancel()  # ... in the very turn the worker stops
        with pytest.raises(asyncio.CancelledError):
            await waiting
