"""Removing many jobs at once: drain, clean, obliterate, orphaned side rows (MGMT-17..22;
sql/functions/42_cleanup.sql). Every job goes through ``_Store._remove_jobs``."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from lane_pg.backend.cleanup import (
    CleanJobs,
    ClearQueues,
    DrainJobs,
    ObliterateQueue,
    RemoveOrphaned,
    clear_queue_names,
)
from lane_pg.errors import JobStateConflict
from lane_pg.memory._records import _MILLISECOND, _Queue, _Record
from lane_pg.memory._store import MemoryEntity
from lane_pg.types import (
    JobRow,
    JobState,
    to_millis,
    validate_clean_state,
    validate_count,
    validate_flag,
    validate_queue_name,
)

# Per state: the time clean_jobs compares with its cut-off, and the order it takes jobs in
# (the order of the state's index, lane._removable_keys).
_CLEAN_TIME: dict[JobState, Callable[[_Record], datetime | None]] = {
    "completed": lambda job: job.finished_at,
    "failed": lambda job: job.finished_at,
    "active": lambda job: job.processed_at,
    "waiting": lambda job: job.created_at,
    "delayed": lambda job: job.created_at,
}
_CHUNK = 1000
"""Jobs per lane._remove_jobs call of a drain, clean or obliterate (lane._remove_in_chunks)."""

_REMOVAL_ORDER: dict[JobState, Callable[[_Record], tuple[object, int]]] = {
    "completed": lambda job: (job.finished_at, job.key),
    "failed": lambda job: (job.finished_at, job.key),
    "active": lambda job: (job.lease_expires_at, job.key),
    "waiting": lambda job: (job.order_key, job.key),
    "delayed": lambda job: (job.available_at, job.key),
}


class MemoryCleanup(MemoryEntity):
    """Removing many jobs at once (MGMT-17..22, REP-16)."""

    def _is_repeat_owner(self, q: _Queue, job: _Record) -> bool:
        """lane._is_repeat_owner: the occurrence its series names (drain and clean keep it)."""
        row = None if job.repeat_key is None else q.series.get(job.repeat_key)
        return row is not None and row.job_key == job.key

    def _remove_in_chunks(self, q: _Queue, doomed: list[_Record], now: datetime) -> None:
        """lane._remove_in_chunks: 1,000 jobs per removal, so a flow parent released by
        one chunk writes its event before the next chunk's `removed` events, as in SQL."""
        for start in range(0, len(doomed), _CHUNK):
            self._store._remove_jobs([(q, job) for job in doomed[start : start + _CHUNK]], now)

    async def drain_jobs(self, args: DrainJobs) -> int:
        validate_queue_name(args.queue)
        validate_flag(args.delayed, "delayed")
        moment = self._store._now(args.now)
        q = self._store._queues.get(args.queue)
        if q is None:
            return 0
        doomed: list[_Record] = []
        for state in ("waiting", "delayed") if args.delayed else ("waiting",):
            doomed += sorted(
                (j for j in q.by_state[state].values() if not self._is_repeat_owner(q, j)),
                key=_REMOVAL_ORDER[state],
            )
        self._remove_in_chunks(q, doomed, moment)
        return len(doomed)

    async def clean_jobs(self, args: CleanJobs) -> list[JobRow]:
        state = args.state
        validate_queue_name(args.queue)
        state = validate_clean_state(state)
        cut = self._store._now(args.now) - to_millis(args.grace, "grace") * _MILLISECOND
        validate_count(args.limit, "limit")
        moment = self._store._now(args.now)
        q = self._store._queue(args.queue)  # the `cleaned` event creates the queue, as in SQL
        time_of = _CLEAN_TIME[state]

        def cleanable(job: _Record) -> bool:
            moment_of_job = time_of(job)
            if moment_of_job is None or not moment_of_job < cut:
                return False
            if state == "active" and not (job.lease_expires_at and job.lease_expires_at < moment):
                return False  # MGMT-19: a live lease protects it
            return not self._is_repeat_owner(q, job)  # MGMT-20

        doomed = sorted(
            (j for j in q.by_state[state].values() if cleanable(j)), key=_REMOVAL_ORDER[state]
        )
        if args.limit:
            doomed = doomed[: args.limit]
        snapshots = [job.snapshot() for job in doomed]
        self._remove_in_chunks(q, doomed, moment)
        self._store._emit(q, "cleaned", None, {"count": len(doomed)}, moment)
        return snapshots

    async def clear_queues(self, args: ClearQueues) -> int:
        names = clear_queue_names(args.queues)
        moment = self._store._now(args.now)
        removed = 0
        for name in sorted(set(self._store._queues if names is None else names)):
            q = self._store._queues.get(name)
            if q is not None:
                parents = sorted(q.by_state["waiting-children"].values(), key=lambda j: j.key)
                self._remove_in_chunks(q, parents, moment)
                removed += len(parents)
            removed += await self.drain_jobs(DrainJobs(name, delayed=True, now=moment))
            removed += len(await self.clean_jobs(CleanJobs(name, "active", 0, now=moment)))
        return removed

    async def obliterate_queue(self, args: ObliterateQueue) -> int:
        queue = args.queue
        validate_queue_name(queue)
        validate_flag(args.force, "force")
        moment = self._store._now(args.now)
        q = self._store._queue(queue)
        q.paused = True  # stays when refused below (MGMT-21)
        self._store._emit(q, "paused", None, {}, moment)
        if q.by_state["active"] and not args.force:
            raise JobStateConflict(
                f"queue {queue} has active jobs: it cannot be obliterated unless forced (pause"
                " it and let them finish, or force)"
            )
        doomed = sorted(q.jobs.values(), key=lambda j: j.key)
        self._remove_in_chunks(q, doomed, moment)
        # Rows left without a job: a parent elsewhere that waited for one's kept next job
        # is told (DEDUP-18; the queue's own parents are gone).
        for dedup_id, owner in sorted(q.owners.items()):
            self._store._dedup_next_dropped(queue, dedup_id, owner, moment)
        del self._store._queues[queue]  # events, owners, series, limits, settings, pause
        return len(doomed)

    async def remove_orphaned(self, args: RemoveOrphaned) -> int:
        validate_count(args.count, "count")
        left = validate_count(args.limit, "limit") or None
        moment = self._store._now(args.now)

        def gone(q: _Queue, job_id: str | None, job_key: int | None) -> bool:
            job = None if job_id is None else q.jobs.get(job_id)
            return job is None or job.key != job_key

        # Logs live on their job's record and a parent's dependency rows go with it
        # (_Store._delete): only owner rows and series can outlive their job (a TTL owner
        # after retention, DEDUP-5). Owners of every queue first, then series, each by
        # (queue, key), as lane.remove_orphaned.
        queues = [self._store._queues[name] for name in sorted(self._store._queues)]
        stale_owners = [
            (q, dedup_id)
            for q in queues
            for dedup_id, owner in sorted(q.owners.items())
            if not (owner.expires_at is not None and owner.expires_at > moment)
            and gone(q, owner.job_id, owner.job_key)
        ][:left]
        stale_series = [
            (q, key)
            for q in queues
            for key, row in sorted(q.series.items())
            if gone(q, row.job_id, row.job_key)
        ][: None if left is None else left - len(stale_owners)]
        for q, dedup_id in stale_owners:
            self._store._dedup_next_dropped(q.name, dedup_id, q.owners.pop(dedup_id), moment)
        for q, key in stale_series:
            del q.series[key]
        return len(stale_owners) + len(stale_series)
