"""Removing many jobs at once: drain, clean, obliterate, orphaned side rows (MGMT-17..22).

The rules every backend follows are in ``lane_pg.backend`` (the package docstring). Every
removal here is the same as ``remove_job``'s: ``removed {prev}`` per job, the dedup id and
repeat series it owns released, its logs deleted (and, with flows, its parent updated).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import KW_ONLY
from datetime import datetime

from lane_pg.backend.operation import Arguments, Handle, operation
from lane_pg.types import Duration, JobRow, JobState, validate_queue_name


class DrainJobs(Arguments[int]):
    """Remove the queue's waiting jobs, and with ``delayed`` its delayed ones too, and
    return how many went (MGMT-17). The current occurrence of each repeat series is
    kept, so a drain never ends a series (REP-16); active, waiting-children, completed
    and failed jobs stay. A job being claimed while the drain runs is left to its
    claimer."""

    queue: str
    _: KW_ONLY
    delayed: bool = False
    now: datetime | None = None


class CleanJobs(Arguments[list[JobRow]]):
    """Remove up to ``limit`` (0: no limit) jobs in ``state`` older than ``now -
    grace``, oldest first, and return their snapshots as they were (MGMT-18); writes
    ``cleaned {count}`` on the queue (also for 0). Older by: ``finished_at`` for
    completed and failed, ``processed_at`` for active (only those whose lease has
    expired, MGMT-19), ``created_at`` for waiting and delayed. The current occurrence
    of a repeat series is never removed (MGMT-20). ``waiting-children`` and unknown
    states raise ``InvalidOptions``, as do a negative grace or limit."""

    queue: str
    state: JobState
    grace: Duration
    _: KW_ONLY
    limit: int = 0
    now: datetime | None = None


class ClearQueues(Arguments[int]):
    """Empty ``queues`` (None: every queue) in one transaction and return how many jobs
    went (A16, the facade's ``clear``): every waiting, delayed and waiting-children job
    and every active job whose lease has expired; never a validly leased job (MGMT-19),
    a finished one, or the current occurrence of a repeat series (REP-16). Every name
    is checked first (``clear_queue_names``): one bad name removes nothing. Per queue,
    in name order: its waiting-children jobs (a parent before its children, which a
    child's removal would release), then what ``drain_jobs(delayed=True)`` removes,
    then what ``clean_jobs(state="active", grace=0)`` removes, with its ``cleaned``
    event (which creates a named queue that does not exist, as a clean does)."""

    queues: Sequence[str] | None = None
    _: KW_ONLY
    now: datetime | None = None


class ObliterateQueue(Arguments[int]):
    """Pause the queue, then delete everything of it (jobs, logs, events, dedup owners,
    repeat series, flow dependencies, claim log, metrics, its settings and pause
    flag) and return how many jobs went (MGMT-21). While it has an active job and
    ``force`` is false, raises ``JobStateConflict`` after the pause: the queue stays
    paused, so its active jobs drain and a later call succeeds."""

    queue: str
    _: KW_ONLY
    force: bool = False
    now: datetime | None = None


class RemoveOrphaned(Arguments[int]):
    """Delete side rows whose job is gone (log lines; flow dependencies whose parent is
    gone; dedup owner rows without a running TTL; repeat series) and return how many
    went (MGMT-22). ``count`` rows are read per statement (0: 1,000), at most
    ``limit`` deleted (0: all)."""

    count: int = 0
    limit: int = 0
    _: KW_ONLY
    now: datetime | None = None


class Cleanup(Handle, name="cleanup"):
    """Removing many jobs at once (MGMT-17..22, REP-16)."""

    __slots__ = ()

    drain_jobs = operation(DrainJobs)
    clean_jobs = operation(CleanJobs)
    clear_queues = operation(ClearQueues)
    obliterate_queue = operation(ObliterateQueue)
    remove_orphaned = operation(RemoveOrphaned)


def clear_queue_names(queues: Sequence[str] | None) -> list[str] | None:
    """``clear_queues``' argument as every backend reads it: the checked names (a lone
    string is refused, not read as its letters), or None for every queue."""
    if queues is None:
        return None
    if isinstance(queues, str):
        raise TypeError(f"clear_queues takes a sequence of queue names, got {queues!r}")
    return [validate_queue_name(queue) for queue in queues]
