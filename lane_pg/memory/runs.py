"""Claims, leases and outcomes (CLAIM, FIN, RETRY): the worker's hot path."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from lane_pg.errors import PendingDependencies
from lane_pg.memory._records import _MILLISECOND, _epoch_ms, _json_copy, _same_token
from lane_pg.memory._store import MemoryEntity
from lane_pg.memory.limits import _checked_limit, _limited_claim, _log_claim
from lane_pg.types import (
    JSON,
    ClaimedJob,
    Completion,
    Duration,
    Failure,
    FinalizeOutcome,
    JobRateLimit,
    JobRow,
    LeaseRef,
    QueueDemand,
    check_json,
    to_millis,
)


class MemoryRuns(MemoryEntity):
    """The ``runs`` handle: claims, leases and outcomes (CLAIM, FIN, RETRY)."""

    async def claim_jobs(
        self,
        worker_id: str,
        demands: Sequence[QueueDemand],
        lease: Duration,
        *,
        total: int | None = None,
        now: datetime | None = None,
        rate_limit: JobRateLimit | None = None,
        ignore_pause: bool = False,
    ) -> list[ClaimedJob]:
        lease_ms = to_millis(lease, "lease")
        local = _checked_limit(rate_limit, "rate_limit")
        moment = self._store._now(now)
        claimed: list[ClaimedJob] = []
        for demand in demands:
            if demand.limit <= 0:
                continue
            room = demand.limit if total is None else min(demand.limit, total - len(claimed))
            if room <= 0:
                break  # total reached: later queues are not even promoted
            q = self._store._queues.get(demand.queue)
            if q is None:
                continue
            self._store._promote_due(q, moment)
            if not ignore_pause and self._store._claim_paused(q, demand):
                continue
            if q.rate_blocked_until is not None and q.rate_blocked_until > moment:
                continue  # RATE-6
            window_ms = None
            if q.rate_max is not None or q.max_active is not None or local is not None:
                room, window_ms = _limited_claim(q, room, local, moment)
                if room <= 0:
                    continue  # RATE-4/9: nothing moves, attempts unchanged
            taken = 0
            for _ in range(room):
                job = self._store._pop_waiting(q)
                if job is None:
                    break
                self._store._activate(q, job, worker_id, lease_ms, moment)
                claimed.append(ClaimedJob.from_job(job.snapshot()))
                taken += 1
            if window_ms is not None and taken > 0:
                _log_claim(q, moment, taken, window_ms)
        return claimed

    async def renew_leases(
        self, leases: Sequence[LeaseRef], lease: Duration, *, now: datetime | None = None
    ) -> list[LeaseRef]:
        expires_at = self._store._now(now) + to_millis(lease, "lease") * _MILLISECOND
        failed: list[LeaseRef] = []
        for ref in leases:
            found = self._store._find(ref.queue, ref.id)
            job = None if found is None else found[1]
            if job is None or job.state != "active" or not _same_token(job.lock_token, ref.token):
                failed.append(ref)
            else:
                job.lease_expires_at = expires_at
        return failed

    async def complete_job(
        self,
        queue: str,
        job_id: str,
        token: str,
        result: JSON = None,
        *,
        now: datetime | None = None,
    ) -> JobRow:
        result = _json_copy(check_json(result, "result"))
        moment = self._store._now(now)
        q, job = self._store._owned(queue, job_id, token)
        if self._store._blocked_by_children(job):
            raise PendingDependencies(
                f"job {job_id} of queue {queue} cannot complete: {job.deps_pending} of its"
                " children are pending"
                + ("" if job.deferred_failure is None else f" and {job.deferred_failure}")
            )
        return self._store._complete(q, job, result, moment)

    async def complete_jobs(
        self, items: Sequence[Completion], *, now: datetime | None = None
    ) -> list[FinalizeOutcome]:
        results = [_json_copy(check_json(item.result, "result")) for item in items]
        moment = self._store._now(now)
        outcomes: list[FinalizeOutcome] = []
        for item, result in zip(items, results, strict=True):
            refused = self._store._outcome_of(item.queue, item.id, item.token)
            if refused is None:
                q, job = self._store._require(item.queue, item.id)
                if self._store._blocked_by_children(job):  # FIN-8: still held, still active
                    refused = FinalizeOutcome(item.queue, item.id, "pending_dependencies", None)
                else:
                    self._store._complete(q, job, result, moment)
                    refused = FinalizeOutcome(item.queue, item.id, "ok", "completed")
            outcomes.append(refused)
        return outcomes

    async def fail_job(
        self,
        queue: str,
        job_id: str,
        token: str,
        reason: str,
        *,
        stacktrace: str | None = None,
        discard_retry: bool = False,
        now: datetime | None = None,
    ) -> JobRow:
        moment = self._store._now(now)
        q, job = self._store._owned(queue, job_id, token)
        return self._store._fail(q, job, reason, stacktrace, discard_retry, moment)

    async def fail_jobs(
        self, items: Sequence[Failure], *, now: datetime | None = None
    ) -> list[FinalizeOutcome]:
        moment = self._store._now(now)
        outcomes: list[FinalizeOutcome] = []
        for item in items:
            refused = self._store._outcome_of(item.queue, item.id, item.token)
            if refused is None:
                q, job = self._store._require(item.queue, item.id)
                failed = self._store._fail(
                    q, job, item.reason, item.stacktrace, item.discard_retry, moment
                )
                limit = item.stacktrace_limit
                if limit is not None and len(job.stacktrace) > limit:
                    job.stacktrace = job.stacktrace[len(job.stacktrace) - limit :]
                refused = FinalizeOutcome(item.queue, item.id, "ok", failed.state)
            outcomes.append(refused)
        return outcomes

    async def release_job(
        self, queue: str, job_id: str, token: str, *, now: datetime | None = None
    ) -> JobRow:
        moment = self._store._now(now)
        q, job = self._store._owned(queue, job_id, token)
        self._store._end_lease(job)
        job.processed_at = None
        self._store._move_to_waiting(q, job, front=True)
        self._store._emit(q, "waiting", job.id, {"prev": "active"}, moment)
        return job.snapshot()

    async def delay_job(
        self,
        queue: str,
        job_id: str,
        token: str,
        delay: Duration,
        *,
        now: datetime | None = None,
    ) -> JobRow:
        delay_ms = to_millis(delay, "delay")
        moment = self._store._now(now)
        q, job = self._store._owned(queue, job_id, token)
        self._store._end_lease(job)
        self._store._move_to_delayed(q, job, moment + delay_ms * _MILLISECOND)
        data = {"delay": _epoch_ms(job.available_at), "prev": "active"}
        self._store._emit(q, "delayed", job.id, data, moment)
        return job.snapshot()

    async def give_back_job(
        self,
        queue: str,
        job_id: str,
        token: str,
        delay: Duration = 0,
        *,
        now: datetime | None = None,
    ) -> JobRow:
        if to_millis(delay, "delay") == 0:
            await self.release_job(queue, job_id, token, now=now)
        else:
            await self.delay_job(queue, job_id, token, delay, now=now)
        _, job = self._store._require(queue, job_id)
        job.attempts_started = max(job.attempts_started - 1, 0)
        return job.snapshot()
