"""Upkeep the workers' leader runs: stalled recovery, promotion, trimming, pruning
(sql/functions/60_maintenance.sql)."""

from __future__ import annotations

from lane_pg.backend.maintenance import PromoteDueJobs, PruneFinished, RecoverStalled, TrimEvents
from lane_pg.memory._records import LEASE_EXPIRED, STALLED_REASON, _Queue, _Record
from lane_pg.memory._store import MemoryEntity
from lane_pg.types import (
    JobState,
    StalledOutcome,
    validate_prune_batch,
    validate_queue_name,
)


class MemoryMaintenance(MemoryEntity):
    """Upkeep the workers' leader runs: stalled recovery, promotion, trimming, pruning."""

    async def recover_stalled(self, args: RecoverStalled) -> list[StalledOutcome]:
        moment = self._store._now(args.now)
        expired = sorted(
            (
                (job, q)
                for q in self._store._selected(args.queues)
                for job in q.by_state["active"].values()
                if job.lease_expires_at is not None and job.lease_expires_at < moment
            ),
            key=lambda pair: pair[0].key,
        )
        outcomes: list[StalledOutcome] = []
        for job, q in expired:
            job.stalled_count += 1
            self._store._emit(q, "stalled", job.id, {"reason": LEASE_EXPIRED}, moment)
            if job.stalled_count <= args.max_stalled_count or self._owns_its_series(q, job):
                self._store._end_lease(job)
                self._store._move_to_waiting(q, job)
                self._store._emit(q, "waiting", job.id, {"prev": "active"}, moment)
            else:
                self._store._finalize_terminal(q, job, STALLED_REASON, moment)
            outcomes.append(StalledOutcome(q.name, job.id, job.state))
        return outcomes

    def _owns_its_series(self, q: _Queue, job: _Record) -> bool:
        """STALL-5: a repeat series' owner is requeued whatever its stall count (failing
        it would end the schedule)."""
        if job.repeat_key is None:
            return False
        row = q.series.get(job.repeat_key)
        return row is not None and self._store._series_owner(q, job.repeat_key, row) is job

    async def promote_due_jobs(self, args: PromoteDueJobs) -> int:
        moment = self._store._now(args.now)
        return sum(self._store._promote_due(q, moment) for q in self._store._selected(args.queues))

    async def trim_events(self, args: TrimEvents) -> int:
        trimmed = 0
        for q in self._store._selected(args.queues):
            excess = len(q.events) - q.max_events
            if excess > 0:
                del q.events[:excess]
                trimmed += excess
        return trimmed

    async def prune_finished(self, args: PruneFinished) -> int:
        names = None if args.queues is None else [validate_queue_name(name) for name in args.queues]
        validate_prune_batch(args.batch)
        deleted = 0
        for q in self._store._selected(names):
            bounds: tuple[tuple[JobState, int | None], ...] = (
                ("completed", q.keep_completed),
                ("failed", q.keep_failed),
            )
            for state, keep in bounds:
                finished = q.by_state[state]
                if keep is None or len(finished) <= keep:
                    continue
                oldest_first = sorted(finished.values(), key=_Record.finish_order)
                doomed = oldest_first[: min(len(finished) - keep, args.batch)]
                self._store._delete_all(q, doomed)  # the logs live on the record
                deleted += len(doomed)
        return deleted
