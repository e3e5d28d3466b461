"""Claiming, leases and settling outcomes (CLAIM, FIN, RETRY) on Redis: the worker's hot
path, one script per queue named in the call."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

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
from lane_pg.errors import InvalidOptions, PendingDependencies
from lane_pg.redis.backend import RedisEntity, by_queue, refused
from lane_pg.redis.limits import checked_limit
from lane_pg.redis.repeats import call_scheduled
from lane_pg.redis.rows import canonical_token, dump, epoch_ms, job_row
from lane_pg.types import (
    ClaimedJob,
    Completion,
    Duration,
    Failure,
    FinalizeOutcome,
    JobRow,
    LeaseRef,
    check_json,
    to_millis,
)


def _positive_lease(lease: Duration) -> int:
    lease_ms = to_millis(lease, "lease")
    if lease_ms <= 0:
        raise InvalidOptions(f"lease must be positive, got {lease_ms} ms")
    return lease_ms


def _token(token: str) -> str:
    return canonical_token(token) or ""


class RedisRuns(RedisEntity):
    """The ``runs`` handle on Redis."""

    async def claim_jobs(self, args: ClaimJobs) -> list[ClaimedJob]:
        lease_ms = _positive_lease(args.lease)
        local = checked_limit(args.rate_limit, "rate_limit")
        now = epoch_ms(args.now)
        backend = self._backend
        claimed: list[ClaimedJob] = []
        for demand in args.demands:
            if demand.limit <= 0:
                continue
            room = (
                demand.limit if args.total is None else min(demand.limit, args.total - len(claimed))
            )
            if room <= 0:
                break
            pause_as: bool | None = None
            if demand.pause_as is not None and demand.pause_as != demand.queue:
                flag = await backend.client.hget(backend.keys(demand.pause_as).meta, "paused")
                pause_as = flag == b"1"
            answer = await backend.call(
                "claim_jobs",
                demand.queue,
                {
                    "worker_id": args.worker_id,
                    "limit": room,
                    "lease_ms": lease_ms,
                    "now": now,
                    "token_seed": str(uuid.uuid4()),  # the tokens: lane_token
                    "ignore_pause": args.ignore_pause,
                    "pause_as_paused": pause_as,
                    "rate_max": None if local is None else local.max,
                    "rate_ms": None if local is None else local.duration_ms,
                },
            )
            for fields in answer["jobs"] or []:
                claimed.append(ClaimedJob.from_job(job_row(demand.queue, fields)))
        return claimed

    async def renew_leases(self, args: RenewLeases) -> list[LeaseRef]:
        lease_ms = _positive_lease(args.lease)
        leases = list(args.leases)
        lost: list[LeaseRef] = []
        for queue, positions in by_queue([ref.queue for ref in leases]).items():
            refs = [[leases[i].id, _token(leases[i].token)] for i in positions]
            failed = await self._backend.call(
                "renew_leases",
                queue,
                {"leases": refs, "lease_ms": lease_ms, "now": epoch_ms(args.now)},
            )
            lost += [leases[positions[i - 1]] for i in failed or []]
        order = {id(ref): n for n, ref in enumerate(leases)}
        return sorted(lost, key=lambda ref: order[id(ref)])

    async def _settle(
        self, script: str, queue: str, items: list[Any], now: datetime | None, *, want_jobs: bool
    ) -> list[list[Any]]:
        answer = await call_scheduled(  # a series' next cron tick: lane_pg.redis.repeats
            self._backend,
            script,
            queue,
            {"items": items, "now": epoch_ms(now), "want_jobs": want_jobs},
        )
        return list(answer) if answer else []

    async def complete_job(self, args: CompleteJob) -> JobRow:
        result = dump(check_json(args.result, "result"))
        item = [args.job_id, _token(args.token), result]
        (answer,) = await self._settle(
            "complete_jobs", args.queue, [item], args.now, want_jobs=True
        )
        if answer[0] == "pending_dependencies":
            deferred = answer[4] or None
            raise PendingDependencies(
                f"job {args.job_id} of queue {args.queue} cannot complete: {answer[3]} of its"
                " children are pending" + ("" if deferred is None else f" and {deferred}")
            )
        if answer[0] != "ok":
            refused(answer[0], args.queue, args.job_id)
        return job_row(args.queue, answer[2])

    async def complete_jobs(self, args: CompleteJobs) -> list[FinalizeOutcome]:
        items: list[Completion] = list(args.items)
        results = [dump(check_json(item.result, "result")) for item in items]
        outcomes: list[FinalizeOutcome | None] = [None] * len(items)
        for queue, positions in by_queue([item.queue for item in items]).items():
            batch = [[items[i].id, _token(items[i].token), results[i]] for i in positions]
            answers = await self._settle("complete_jobs", queue, batch, args.now, want_jobs=False)
            for i, answer in zip(positions, answers, strict=True):
                state = answer[1] if len(answer) > 1 and answer[0] == "ok" else None
                outcomes[i] = FinalizeOutcome(queue, items[i].id, answer[0], state)
        return [outcome for outcome in outcomes if outcome is not None]

    def _failure(self, item: Failure) -> dict[str, Any]:
        return {
            "id": item.id,
            "token": _token(item.token),
            "reason": item.reason,
            "stacktrace": item.stacktrace,
            "discard_retry": item.discard_retry,
            "uniform": self._backend.rng.random(),
            "limit": item.stacktrace_limit,
        }

    async def fail_job(self, args: FailJob) -> JobRow:
        item = Failure(
            args.queue, args.job_id, args.token, args.reason, args.stacktrace, args.discard_retry
        )
        (answer,) = await self._settle(
            "fail_jobs", args.queue, [self._failure(item)], args.now, want_jobs=True
        )
        if answer[0] != "ok":
            refused(answer[0], args.queue, args.job_id)
        return job_row(args.queue, answer[2])

    async def fail_jobs(self, args: FailJobs) -> list[FinalizeOutcome]:
        items = list(args.items)
        outcomes: list[FinalizeOutcome | None] = [None] * len(items)
        for queue, positions in by_queue([item.queue for item in items]).items():
            batch = [self._failure(items[i]) for i in positions]
            answers = await self._settle("fail_jobs", queue, batch, args.now, want_jobs=False)
            for i, answer in zip(positions, answers, strict=True):
                state = answer[1] if len(answer) > 1 else None
                outcomes[i] = FinalizeOutcome(queue, items[i].id, answer[0], state)
        return [outcome for outcome in outcomes if outcome is not None]

    async def _move(
        self,
        queue: str,
        job_id: str,
        token: str,
        delay_ms: int | None,
        now: datetime | None,
        *,
        give_back: bool,
    ) -> JobRow:
        """Release (``delay_ms`` None) or delay a held job."""
        answer = await self._backend.call(
            "move_job",
            queue,
            {
                "id": job_id,
                "token": _token(token),
                "release": delay_ms is None,
                "delay_ms": delay_ms or 0,
                "now": epoch_ms(now),
                "give_back": give_back,
            },
        )
        if answer[0] != "ok":
            refused(answer[0], queue, job_id)
        return job_row(queue, answer[1])

    async def release_job(self, args: ReleaseJob) -> JobRow:
        return await self._move(
            args.queue, args.job_id, args.token, None, args.now, give_back=False
        )

    async def delay_job(self, args: DelayJob) -> JobRow:
        delay_ms = to_millis(args.delay, "delay")
        return await self._move(
            args.queue, args.job_id, args.token, delay_ms, args.now, give_back=False
        )

    async def give_back_job(self, args: GiveBackJob) -> JobRow:
        delay_ms = to_millis(args.delay, "delay")
        return await self._move(
            args.queue, args.job_id, args.token, delay_ms or None, args.now, give_back=True
        )

    async def discard_job(self, args: DiscardJob) -> None:
        answer = await self._backend.call(
            "discard_job",
            args.queue,
            {"id": args.job_id, "token": _token(args.token), "now": epoch_ms(args.now)},
        )
        if answer[0] != "ok":
            refused(answer[0], args.queue, args.job_id)
