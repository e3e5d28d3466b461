"""Lease renewal: every running lease in one batched call, every ``lease * renew_fraction``.

A lease that cannot be renewed (the job was recovered and claimed again, removed, or its
token replaced) flags the job's context as lost (WORK-8); the handler keeps running unless
``cancel_on_lease_loss`` is set, and nothing it produces is written.
"""

from __future__ import annotations

import asyncio
import logging

from lane_pg.backend import JobQueueBackend
from lane_pg.types import LeaseRef
from lane_pg.worker.config import WorkerConfig
from lane_pg.worker.execution import RunningJobs

log = logging.getLogger("lane_pg.worker")


async def renew_leases_forever(
    backend: JobQueueBackend, jobs: RunningJobs, config: WorkerConfig
) -> None:
    """The renewal task (WORK-6): runs until cancelled."""
    interval = config.lease * config.renew_fraction
    while True:
        await asyncio.sleep(interval)
        held = [LeaseRef(r.job.queue, r.job.id, r.job.lock_token) for r in jobs]
        if not held:
            continue
        try:
            lost = await backend.runs.renew_leases(held, config.lease)
        except Exception as exc:
            log.warning("lease renewal failed (%s); retrying", exc)
            continue
        for ref in lost:
            running = jobs.get(ref.queue, ref.id, ref.token)
            if running is None or running.settling or running.context.has_lost_lease():
                continue
            running.context.mark_lease_lost()
            log.warning("job %s/%s: lease lost", ref.queue, ref.id)
            if config.cancel_on_lease_loss and running.task is not None:
                running.task.cancel()
