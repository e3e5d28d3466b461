"""Upkeep that the workers' maintenance leader runs (STALL, delayed promotion, EVS-3, RET).

The rules every backend follows are in ``lane_pg.backend`` (the package docstring)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import KW_ONLY
from datetime import datetime

from lane_pg.backend.operation import Arguments, Handle, operation
from lane_pg.types import (
    DEFAULT_PRUNE_BATCH,
    StalledOutcome,
)


class RecoverStalled(Arguments[list[StalledOutcome]]):
    """Recover every active job whose lease expired before ``now`` (STALL-1..3).

    Each gets ``stalled_count + 1`` and the event ``stalled``. While ``stalled_count <=
    max_stalled_count`` it returns to ``waiting`` (normal position, ``waiting
    prev=active``); otherwise it fails terminally with reason ``job stalled more than
    allowable limit`` (``failed prev=active``, retention, ``drained``). The lost run
    stays counted in ``attempts_started`` (STALL-6). ``queues=None`` means all queues.
    """

    queues: Sequence[str] | None = None
    _: KW_ONLY
    max_stalled_count: int = 1
    now: datetime | None = None


class PromoteDueJobs(Arguments[int]):
    """Promote every delayed job with ``available_at <= now``; return how many."""

    queues: Sequence[str] | None = None
    _: KW_ONLY
    now: datetime | None = None


class TrimEvents(Arguments[int]):
    """Trim each queue's retained events to its ``max_events`` (default 10,000),
    keeping the newest (EVS-3); returns how many were deleted."""

    queues: Sequence[str] | None = None


class PruneFinished(Arguments[int]):
    """Enforce each queue's bound (all queues when None); return how many jobs were
    deleted.

    Per queue and state with a bound ``keep``: finished jobs in newest-first order
    ``(finished_at, key)`` (key = creation order, so the jobs of one completion batch
    that share ``finished_at`` go oldest-created first) beyond the first ``keep`` are
    deleted with their logs, oldest first, at most ``batch`` per queue and state, so
    a caller repeats while a call deleted full batches. Only ``completed`` and
    ``failed`` jobs are touched; no events are written (as BullMQ's retention). The
    worker's maintenance leader calls it every ``WorkerConfig.prune_interval``.
    """

    queues: Sequence[str] | None = None
    _: KW_ONLY
    batch: int = DEFAULT_PRUNE_BATCH


class Maintenance(Handle, name="maintenance"):
    """Upkeep that the workers' maintenance leader runs (STALL, delayed promotion, EVS-3, RET)."""

    __slots__ = ()

    recover_stalled = operation(RecoverStalled)
    promote_due_jobs = operation(PromoteDueJobs)
    trim_events = operation(TrimEvents)
    prune_finished = operation(PruneFinished)
