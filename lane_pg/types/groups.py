"""Batches and chains (BATCH, CHAIN): the specs a backend stores for them and the batch's
snapshot with its derived counts."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime

from lane_pg.types.base import JSON
from lane_pg.types.options import JobOptions

BATCH_CALLBACK_JOB = "lane_pg:batch_callback"
"""The name of a batch's callback jobs (data: batch_id, kind, callback, error)."""
CHAIN_CALLBACK_JOB = "lane_pg:chain_callback"
"""The name of a chain's catch job (data: chain_id, kind, callback, error, queue, job_id,
name: the link that failed)."""
CHAIN_CATCH_RETRY: dict[str, JSON] = {
    "attempts": 3,
    "backoff": {"type": "exponential", "base_ms": 2000, "cap_ms": 300000, "jitter": 0.25},
}
"""The retries of a chain's catch job, and of a batch's callback jobs when the batch sets no
``callback_options``, as a job class's defaults: with one attempt, a worker that died
running it spent it (attempts count deliveries) and the callback never ran.
``lane._callback_retry()`` is the same document (tests/conformance/test_chains.py,
test_batches.py)."""
BATCH_CALLBACK_KINDS = ("then", "catch", "finally")
BATCH_STATES = ("pending", "finished", "cancelled")
"""What ``list_batches`` filters by: not finished, finished, cancelled."""


@dataclass(frozen=True, slots=True)
class QueuedSpec:
    """One job of a batch or a chain, with the queue it goes to."""

    queue: str
    name: str
    data: JSON = None
    options: JobOptions | Mapping[str, JSON] | None = None


@dataclass(frozen=True, slots=True)
class Batch:
    """A batch as stored, with counts derived from its jobs' settlements (BATCH-5, -6):
    ``pending_jobs`` is ``total_jobs`` minus the jobs settled (completed, failed for good,
    or removed before they finished), ``failed_jobs`` the ones that failed for good."""

    id: str
    name: str
    total_jobs: int
    pending_jobs: int
    failed_jobs: int
    failed_job_ids: tuple[str, ...]
    options: dict[str, JSON] = field(compare=False)
    created_at: datetime
    cancelled_at: datetime | None
    finished_at: datetime | None

    def processed_jobs(self) -> int:
        """Jobs settled so far."""
        return self.total_jobs - self.pending_jobs

    def progress(self) -> int:
        """Percent settled, rounded down, so 100 only once every job settled (0 for an
        empty batch); the view ``lane.v_batches`` computes the same."""
        return self.processed_jobs() * 100 // self.total_jobs if self.total_jobs else 0

    @property
    def cancelled(self) -> bool:
        return self.cancelled_at is not None

    @property
    def finished(self) -> bool:
        return self.finished_at is not None

    @property
    def has_failures(self) -> bool:
        return self.failed_jobs > 0
