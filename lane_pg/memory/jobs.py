"""Adding, reading and changing single jobs (ADD, MGMT): ``lane.add_job`` / ``add_jobs``,
``get_job``, ``promote_job``, ... over the store."""

from __future__ import annotations

import copy
from dataclasses import replace
from datetime import datetime

from lane_pg.backend.batches import check_chain
from lane_pg.backend.jobs import (
    AddChain,
    AddJob,
    AddJobs,
    GetJob,
    GetJobFinishedResult,
    GetJobState,
    PromoteJob,
    RemoveJob,
    RescheduleJob,
    RetryJob,
    SaveJobStacktrace,
    UpdateJobData,
    UpdateJobPriority,
    UpdateJobProgress,
)
from lane_pg.errors import (
    InvalidOptions,
    JobStateConflict,
)
from lane_pg.memory._records import (
    _MILLISECOND,
    _Batch,
    _epoch_ms,
    _json_copy,
    _parse_spec,
    _Queue,
    _Record,
    check_series_left,
)
from lane_pg.memory._store import MemoryEntity
from lane_pg.memory.batches import parse_grouped
from lane_pg.types import (
    JSON,
    Completed,
    Failed,
    FinishedResult,
    JobRow,
    JobState,
    NotFinished,
    check_json,
    to_millis,
    validate_priority,
    validate_queue_name,
    validate_stacktrace,
)


class MemoryJobs(MemoryEntity):
    """Adding, reading and changing single jobs (ADD, MGMT)."""

    async def add_job(self, args: AddJob) -> JobRow:
        validate_queue_name(args.queue)
        new = _parse_spec(args.name, args.data, args.options)
        moment = self._store._now(args.now)
        check_series_left([new], moment)
        self._store._check_reservations(args.queue, [new], moment)
        return self._store._insert(args.queue, new, moment).snapshot()

    async def add_jobs(self, args: AddJobs) -> list[JobRow]:
        validate_queue_name(args.queue)
        parsed = [_parse_spec(spec.name, spec.data, spec.options) for spec in args.specs]
        moment = self._store._now(args.now)
        check_series_left(parsed, moment)
        self._store._check_reservations(args.queue, parsed, moment)
        batch = _Batch()
        jobs = [self._store._insert(args.queue, new, moment, batch) for new in parsed]
        if batch.jobs or batch.later:
            self._store._emit_batch(self._store._queue(args.queue), batch, moment)
        return [job.snapshot() for job in jobs]

    async def add_chain(self, args: AddChain) -> JobRow:
        check_chain(args.chain_id, args.links, args.catch, args.catch_queue)
        catch = args.catch
        parsed = parse_grouped(args.links, "link of the chain")
        links: list[JSON] = [
            {
                "queue": queue,
                "name": new.name,
                "data": new.data,
                "options": new.options.parsed.document,
            }
            for queue, new in parsed[1:]
        ]
        chain: dict[str, JSON] = {"id": args.chain_id, "index": 0, "links": links}
        if catch is not None:
            chain["catch"] = catch
        chain["catch_queue"] = args.catch_queue or parsed[0][0]
        head_queue, head = parsed[0]
        store = self._store
        moment = store._now(args.now)
        job = store._chain_add(
            head_queue, head.name, head.data, dict(head.options.parsed.document), chain, moment
        )
        return job.snapshot()

    async def get_job(self, args: GetJob) -> JobRow | None:
        found = self._store._find(args.queue, args.job_id)
        if found is None:
            return None
        q, job = found
        # MGMT-1's extras, as lane.get_job_extras reads them.
        owner = None if job.dedup_id is None else q.owners.get(job.dedup_id)
        deps = sorted(self._store._deps.get(job.key, {}).values(), key=lambda d: d.seq)
        return replace(
            job.snapshot(),
            logs_count=len(job.logs),
            deduplication_expires_at=(
                owner.expires_at if owner is not None and owner.job_key == job.key else None
            ),
            child_ids=tuple((dep.child_queue, dep.child_id) for dep in deps),
        )

    async def get_job_state(self, args: GetJobState) -> JobState | None:
        found = self._store._find(args.queue, args.job_id)
        return None if found is None else found[1].state

    async def get_job_finished_result(self, args: GetJobFinishedResult) -> FinishedResult | None:
        found = self._store._find(args.queue, args.job_id)
        if found is None:
            return None
        job = found[1]
        if job.state == "completed":
            return Completed(copy.deepcopy(job.return_value))
        if job.state == "failed":
            return Failed(job.failed_reason or "")
        return NotFinished(job.state)

    def _require_state(self, job: _Record, states: tuple[JobState, ...], action: str) -> None:
        if job.state not in states:
            raise JobStateConflict(
                f"cannot {action} job {job.id!r}: it is {job.state}, not {' or '.join(states)}"
            )

    async def promote_job(self, args: PromoteJob) -> JobRow:
        moment = self._store._now(args.now)
        q, job = self._store._require(args.queue, args.job_id)
        self._require_state(job, ("delayed",), "promote")
        self._store._move_to_waiting(q, job)
        self._store._emit(q, "waiting", job.id, {"prev": "delayed"}, moment)
        return job.snapshot()

    async def reschedule_job(self, args: RescheduleJob) -> JobRow:
        delay_ms = to_millis(args.delay, "delay")
        moment = self._store._now(args.now)
        q, job = self._store._require(args.queue, args.job_id)
        self._require_state(job, ("delayed",), "reschedule")
        if job.repeat_key is None:  # MGMT-5; a repeat occurrence's delay is its schedule
            job.options = {**job.options, "delay_ms": delay_ms}
        self._store._move_to_delayed(q, job, moment + delay_ms * _MILLISECOND)
        self._store._emit(q, "delayed", job.id, {"delay": _epoch_ms(job.available_at)}, moment)
        return job.snapshot()

    async def retry_job(self, args: RetryJob) -> JobRow:
        moment = self._store._now(args.now)
        q, job = self._store._require(args.queue, args.job_id)
        self._require_state(job, ("completed", "failed"), "retry")
        # DEDUP-13 and REP-15, both checked before either changes anything. A unique job
        # neither takes back nor checks its lock, and loses its owner token (A9).
        dedup = job.options.get("deduplication")
        unique = isinstance(dedup, dict) and dedup.get("kind") == "unique"
        for apply in (False, True):
            if not unique:
                self._store._dedup_reclaim(q, job, moment, apply=apply)
            self._store._repeat_reclaim(q, job, moment, apply=apply)
        if isinstance(dedup, dict) and unique:
            job.options = {
                **job.options,
                "deduplication": {k: v for k, v in dedup.items() if k != "token"},
            }
        previous = job.state
        job.return_value = None
        job.failed_reason = None
        job.processed_at = None
        job.finished_at = None
        job.stacktrace = []
        job.attempts_made = 0
        job.attempts_started = 0
        job.stalled_count = 0
        if job.parent_id is not None:
            self._store._flow_restore(job, moment)  # FLOW-27
        if job.deps_pending is not None and job.deps_pending > 0:
            self._store._set_state(q, job, "waiting-children")
            self._store._emit(q, "waiting-children", job.id, {"prev": previous}, moment)
        else:
            self._store._move_to_waiting(q, job)
            self._store._emit(q, "waiting", job.id, {"prev": previous}, moment)
        return job.snapshot()

    async def remove_job(self, args: RemoveJob) -> bool:
        moment = self._store._now(args.now)
        found = self._store._find(args.queue, args.job_id)
        if found is None:
            q = self._store._queues.get(args.queue)
            if q is not None:
                self._forget_missing_job(q, args.job_id, moment)
            return False
        q, job = found
        self._store._remove(q, job, moment)
        return True

    def _forget_missing_job(self, q: _Queue, job_id: str, now: datetime) -> None:
        """lane._forget_missing_job: the owner rows (with any kept next job) and series
        still naming a job that is gone. Logs and dependency rows go with their record
        here (``_Store._delete``), so nothing else can be left."""
        for dedup_id, owner in sorted(q.owners.items()):
            if owner.job_id == job_id:
                del q.owners[dedup_id]
                self._store._dedup_next_dropped(q.name, dedup_id, owner, now)
        for key in [key for key, series in q.series.items() if series.job_id == job_id]:
            del q.series[key]

    async def update_job_data(self, args: UpdateJobData) -> JobRow:
        data = args.data
        data = _json_copy(check_json(data, "data"))
        _, job = self._store._writable(args.queue, args.job_id, args.token)
        job.data = data
        return job.snapshot()

    async def update_job_progress(self, args: UpdateJobProgress) -> JobRow:
        progress = args.progress
        progress = _json_copy(check_json(progress, "progress"))
        moment = self._store._now(args.now)
        q, job = self._store._writable(args.queue, args.job_id, args.token)
        job.progress = progress
        self._store._emit(q, "progress", job.id, {"data": copy.deepcopy(progress)}, moment)
        return job.snapshot()

    async def save_job_stacktrace(self, args: SaveJobStacktrace) -> JobRow:
        entries, reason = validate_stacktrace(args.stacktrace, args.failed_reason)
        _, job = self._store._require(args.queue, args.job_id)
        job.stacktrace = entries
        job.failed_reason = reason
        return job.snapshot()

    async def update_job_priority(self, args: UpdateJobPriority) -> JobRow:
        lifo = args.lifo
        validate_priority(args.priority)
        if lifo is not None and not isinstance(lifo, bool):
            raise InvalidOptions(f"lifo must be a boolean or None, got {lifo!r}")
        q, job = self._store._require(args.queue, args.job_id)
        job.priority = args.priority
        if lifo is not None:
            job.lifo = lifo
            job.options = {**job.options, "lifo": lifo}  # MGMT-9: stored on the options
        if job.state == "waiting":
            self._store._enqueue(q, job)  # the old heap entry goes stale
        return job.snapshot()
