"""Claims, leases and outcomes (CLAIM, FIN, RETRY): the worker's hot path."""

from __future__ import annotations

from lane_pg.backend.runs import (
    ClaimJobs,
    CompleteJob,
    CompleteJobs,
    DelayJob,
    DiscardJob,
    FailJob,
    FailJobs,
    GiveBackJob,
    ReleaseJob,
    RenewLeases,
)
from lane_pg.errors import PendingDependencies
from lane_pg.memory._records import _MILLISECOND, _epoch_ms, _json_copy, _same_token
from lane_pg.memory._store import MemoryEntity
from lane_pg.memory.limits import _checked_limit, _limited_claim, _log_claim
from lane_pg.types import (
    ClaimedJob,
    FinalizeOutcome,
    JobRow,
    LeaseRef,
    check_json,
    to_millis,
)


class MemoryRuns(MemoryEntity):
    """The ``runs`` handle: claims, leases and outcomes (CLAIM, FIN, RETRY)."""

    async def claim_jobs(self, args: ClaimJobs) -> list[ClaimedJob]:
        lease_ms = to_millis(args.lease, "lease")
        local = _checked_limit(args.rate_limit, "rate_limit")
        moment = self._store._now(args.now)
        claimed: list[ClaimedJob] = []
        for demand in args.demands:
            if demand.limit <= 0:
                continue
            room = (
                demand.limit if args.total is None else min(demand.limit, args.total - len(claimed))
            )
            if room <= 0:
                break  # total reached: later queues are not even promoted
            q = self._store._queues.get(demand.queue)
            if q is None:
                continue
            self._store._promote_due(q, moment)
            if not args.ignore_pause and self._store._claim_paused(q, demand):
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
                self._store._activate(q, job, args.worker_id, lease_ms, moment)
                claimed.append(ClaimedJob.from_job(job.snapshot()))
                taken += 1
            if window_ms is not None and taken > 0:
                _log_claim(q, moment, taken, window_ms)
        return claimed

    async def renew_leases(self, args: RenewLeases) -> list[LeaseRef]:
        expires_at = self._store._now(args.now) + to_millis(args.lease, "lease") * _MILLISECOND
        failed: list[LeaseRef] = []
        for ref in args.leases:
            found = self._store._find(ref.queue, ref.id)
            job = None if found is None else found[1]
            if job is None or job.state != "active" or not _same_token(job.lock_token, ref.token):
                failed.append(ref)
            else:
                job.lease_expires_at = expires_at
        return failed

    async def complete_job(self, args: CompleteJob) -> JobRow:
        queue = args.queue
        job_id = args.job_id
        result = args.result
        result = _json_copy(check_json(result, "result"))
        moment = self._store._now(args.now)
        q, job = self._store._owned(queue, job_id, args.token)
        if self._store._blocked_by_children(job):
            raise PendingDependencies(
                f"job {job_id} of queue {queue} cannot complete: {job.deps_pending} of its"
                " children are pending"
                + ("" if job.deferred_failure is None else f" and {job.deferred_failure}")
            )
        return self._store._complete(q, job, result, moment)

    async def complete_jobs(self, args: CompleteJobs) -> list[FinalizeOutcome]:
        results = [_json_copy(check_json(item.result, "result")) for item in args.items]
        moment = self._store._now(args.now)
        outcomes: list[FinalizeOutcome] = []
        for item, result in zip(args.items, results, strict=True):
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

    async def fail_job(self, args: FailJob) -> JobRow:
        moment = self._store._now(args.now)
        q, job = self._store._owned(args.queue, args.job_id, args.token)
        return self._store._fail(q, job, args.reason, args.stacktrace, args.discard_retry, moment)

    async def fail_jobs(self, args: FailJobs) -> list[FinalizeOutcome]:
        moment = self._store._now(args.now)
        outcomes: list[FinalizeOutcome] = []
        for item in args.items:
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

    async def release_job(self, args: ReleaseJob) -> JobRow:
        moment = self._store._now(args.now)
        q, job = self._store._owned(args.queue, args.job_id, args.token)
        self._store._end_lease(job)
        job.processed_at = None
        self._store._move_to_waiting(q, job, front=True)
        self._store._emit(q, "waiting", job.id, {"prev": "active"}, moment)
        return job.snapshot()

    async def delay_job(self, args: DelayJob) -> JobRow:
        delay_ms = to_millis(args.delay, "delay")
        moment = self._store._now(args.now)
        q, job = self._store._owned(args.queue, args.job_id, args.token)
        self._store._end_lease(job)
        self._store._move_to_delayed(q, job, moment + delay_ms * _MILLISECOND)
        data = {"delay": _epoch_ms(job.available_at), "prev": "active"}
        self._store._emit(q, "delayed", job.id, data, moment)
        return job.snapshot()

    async def give_back_job(self, args: GiveBackJob) -> JobRow:
        if to_millis(args.delay, "delay") == 0:
            await self.release_job(ReleaseJob(args.queue, args.job_id, args.token, now=args.now))
        else:
            await self.delay_job(
                DelayJob(args.queue, args.job_id, args.token, args.delay, now=args.now)
            )
        _, job = self._store._require(args.queue, args.job_id)
        job.attempts_started = max(job.attempts_started - 1, 0)
        return job.snapshot()

    async def discard_job(self, args: DiscardJob) -> None:
        moment = self._store._now(args.now)
        q, job = self._store._owned(args.queue, args.job_id, args.token)
        self._store._remove_jobs([(q, job)], moment)
