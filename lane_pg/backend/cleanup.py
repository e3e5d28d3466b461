"""Removing many jobs at once: drain, clean, obliterate, orphaned side rows (MGMT-17..22).

The rules every backend follows are in ``lane_pg.backend`` (the package docstring). Every
removal here is the same as ``remove_job``'s: ``removed {prev}`` per job, the dedup id and
repeat series it owns released, its logs deleted (and, with flows, its parent updated).
"""

from __future__ import annotations

from datetime import datetime

from lane_pg.backend.operation import Handle, operation
from lane_pg.types import Duration, JobRow, JobState


class Cleanup(Handle, name="cleanup"):
    """Removing many jobs at once (MGMT-17..22, REP-16)."""

    __slots__ = ()

    @operation
    async def drain_jobs(
        self, queue: str, *, delayed: bool = False, now: datetime | None = None
    ) -> int:
        """Remove the queue's waiting jobs, and with ``delayed`` its delayed ones too, and
        return how many went (MGMT-17). The current occurrence of each repeat series is
        kept, so a drain never ends a series (REP-16); active, waiting-children, completed
        and failed jobs stay. A job being claimed while the drain runs is left to its
        claimer."""

    @operation
    async def clean_jobs(
        self,
        queue: str,
        state: JobState,
        grace: Duration,
        *,
        limit: int = 0,
        now: datetime | None = None,
    ) -> list[JobRow]:
        """Remove up to ``limit`` (0: no limit) jobs in ``state`` older than ``now -
        grace``, oldest first, and return their snapshots as they were (MGMT-18); writes
        ``cleaned {count}`` on the queue (also for 0). Older by: ``finished_at`` for
        completed and failed, ``processed_at`` for active (only those whose lease has
        expired, MGMT-19), ``created_at`` for waiting and delayed. The current occurrence
        of a repeat series is never removed (MGMT-20). ``waiting-children`` and unknown
        states raise ``InvalidOptions``, as do a negative grace or limit."""

    @operation
    async def obliterate_queue(
        self, queue: str, *, force: bool = False, now: datetime | None = None
    ) -> int:
        """Pause the queue, then delete everything of it (jobs, logs, events, dedup owners,
        repeat series, flow dependencies, claim log, metrics, its settings and pause
        flag) and return how many jobs went (MGMT-21). While it has an active job and
        ``force`` is false, raises ``JobStateConflict`` after the pause: the queue stays
        paused, so its active jobs drain and a later call succeeds."""

    @operation
    async def remove_orphaned(
        self, count: int = 0, limit: int = 0, *, now: datetime | None = None
    ) -> int:
        """Delete side rows whose job is gone (log lines; flow dependencies whose parent is
        gone; dedup owner rows without a running TTL; repeat series) and return how many
        went (MGMT-22). ``count`` rows are read per statement (0: 1,000), at most
        ``limit`` deleted (0: all)."""
