"""The memory backend's store: the transitions every operation shares (the Python twin of
sql/functions/00_helpers.sql, 05_transitions.sql, and of the owner rules of 15_dedup.sql
and 16_repeats.sql), over the records of ``_records``.

``MemoryBackend`` (lane_pg/memory/__init__.py) is this store plus one mixin per entity,
split like sql/functions/. Every public method runs without awaiting anything, so on one
event loop each call is atomic, like one stored-function transaction.
"""

from __future__ import annotations

import asyncio
import copy
import heapq
import random
import uuid
from collections.abc import Callable, Iterable, Sequence
from datetime import UTC, datetime
from typing import ClassVar

from lane_pg.errors import (
    InvalidOptions,
    JobLocked,
    JobNotFound,
    LockMismatch,
    RepeatConflict,
)
from lane_pg.memory._flow_rules import _FlowRules
from lane_pg.memory._groups import _GroupRules
from lane_pg.memory._owners import _OwnerRules
from lane_pg.memory._records import (
    _MILLISECOND,
    BUCKET_MIDDLE,
    PRIORITY_BUCKET,
    _Batch,
    _BatchRecord,
    _Dep,
    _epoch_ms,
    _json_copy,
    _Leadership,
    _Limiter,
    _Lock,
    _NewJob,
    _Node,
    _Owner,
    _parse_options,
    _Policy,
    _Queue,
    _Record,
    _same_token,
    _Series,
    _utc,
    _WorkerPresence,
    first_occurrence,
    series_key,
)
from lane_pg.types import (
    JSON,
    FinalizeOutcome,
    JobRow,
    JobState,
    QueueDemand,
    QueueEvent,
)
from lane_pg.types.metrics import MINUTE_MS
from lane_pg.types.schedule import check_repeat, repeat_next


class _Store(_FlowRules, _OwnerRules, _GroupRules):
    """The records and shared transitions of a ``MemoryBackend``."""

    STATE: ClassVar[tuple[str, ...]] = (
        "_queues",
        "_last_key",
        "_last_seq",
        "_last_event_id",
        "_leaders",
        "_deps",
        "_last_dep_seq",
        "_all_paused",
        "_restart_at_ms",
        "_batches",
        "_locks",
        "_limiters",
        "_workers",
    )
    """The attributes that are the store (its records, indexes and sequences), as a local
    snapshot saves them (``lane_pg.memory.local``); the others (clock, random source,
    event waiters, handles and hooks) are this process's. A new attribute of state is
    named here, or no snapshot keeps it (``tests/facade/test_local_driver.py`` checks)."""
    STATE_ADDED: ClassVar[frozenset[str]] = frozenset(
        {"_locks", "_limiters", "_batches", "_workers"}
    )
    """State added since snapshots of this format were first written: an older snapshot
    lacks it, and the fresh store's empty value stands (no lock held, no hit counted)."""

    def __init__(
        self,
        clock: Callable[[], datetime] | None = None,
        rng: random.Random | None = None,
    ) -> None:
        self._clock = clock or (lambda: datetime.now(UTC))
        self._rng = rng or random.Random()
        self._queues: dict[str, _Queue] = {}
        self._last_key = 0
        self._last_seq = 0
        self._last_event_id = 0
        self._event_waiters: list[asyncio.Future[None]] = []  # subscribe_events waiting
        self._leaders: dict[str, _Leadership] = {}
        # lane.flow_deps: a parent's dependency rows by child, in attach (seq) order.
        self._deps: dict[int, dict[tuple[str, str], _Dep]] = {}
        self._last_dep_seq = 0
        # lane.settings: the connection-wide pause (PAUSE-4) and the restart signal (CLI-6).
        self._all_paused = False
        self._restart_at_ms: int | None = None
        # lane.batches with their settlements (BATCH).
        self._batches: dict[str, _BatchRecord] = {}
        # lane.locks and lane.limiters: job middleware's locks and limiters (MW-10).
        self._locks: dict[str, _Lock] = {}
        self._limiters: dict[str, _Limiter] = {}
        # lane.workers: the workers' presence, by worker id.
        self._workers: dict[str, _WorkerPresence] = {}

    def _now(self, now: datetime | None) -> datetime:
        return _utc(self._clock() if now is None else now)

    def _claim_paused(self, q: _Queue, demand: QueueDemand) -> bool:
        """``lane.claim_jobs``' pause rule: the queue's own flag, or the flag of the queue
        the demand is paused as (PAUSE-8), or the connection-wide pause (PAUSE-4)."""
        if self._all_paused:
            return True
        if demand.pause_as is not None and demand.pause_as != q.name:
            source = self._queues.get(demand.pause_as)
            return source is not None and source.paused
        return q.paused

    def _queue(self, name: str) -> _Queue:
        """The queue, created on first use."""
        queue = self._queues.get(name)
        if queue is None:
            queue = self._queues[name] = _Queue(name)
        return queue

    def _find(self, queue: str, job_id: str) -> tuple[_Queue, _Record] | None:
        q = self._queues.get(queue)
        job = None if q is None else q.jobs.get(job_id)
        return None if q is None or job is None else (q, job)

    def _require(self, queue: str, job_id: str) -> tuple[_Queue, _Record]:
        found = self._find(queue, job_id)
        if found is None:
            raise JobNotFound(f"job {job_id!r} not found in queue {queue!r}")
        return found

    def _owned(self, queue: str, job_id: str, token: str) -> tuple[_Queue, _Record]:
        q, job = self._require(queue, job_id)
        if job.state != "active" or not _same_token(job.lock_token, token):
            raise LockMismatch(f"job {job_id!r} in queue {queue!r} is not active under token")
        return q, job

    def _writable(self, queue: str, job_id: str, token: str | None) -> tuple[_Queue, _Record]:
        """An administrator's write (no token: any retained job) or a run's (the job must
        be active under exactly ``token``; ``lane._writable_job_key``)."""
        return self._require(queue, job_id) if token is None else self._owned(queue, job_id, token)

    def _outcome_of(self, queue: str, job_id: str, token: str) -> FinalizeOutcome | None:
        """The batch outcome for an item that cannot be finalised, else None."""
        found = self._find(queue, job_id)
        if found is None:
            return FinalizeOutcome(queue, job_id, "not_found", None)
        job = found[1]
        if job.state != "active" or not _same_token(job.lock_token, token):
            return FinalizeOutcome(queue, job_id, "lock_mismatch", None)
        return None

    def _selected(self, queues: Sequence[str] | None) -> list[_Queue]:
        """Existing queues: all in name order when None, else in the given order."""
        names = sorted(self._queues) if queues is None else dict.fromkeys(queues)
        return [self._queues[name] for name in names if name in self._queues]

    def _emit(
        self, q: _Queue, event: str, job_id: str | None, data: dict[str, JSON], now: datetime
    ) -> None:
        if not q.record_events:  # set_queue_events(q, record=False): no row, no id
            return
        self._last_event_id += 1
        q.events.append(QueueEvent(self._last_event_id, q.name, event, job_id, data, now))
        # EVS-7: subscribers look once this call is over (it awaits nothing).
        for waiter in self._event_waiters:
            if not waiter.done():
                waiter.set_result(None)
        self._event_waiters.clear()

    def _set_state(self, q: _Queue, job: _Record, state: JobState) -> None:
        """The one place a stored job changes state (keeps the per-state index right)."""
        del q.by_state[job.state][job.id]
        job.state = state
        q.by_state[state][job.id] = job

    def _store(self, q: _Queue, job: _Record) -> None:
        q.jobs[job.id] = job
        q.by_state[job.state][job.id] = job

    def _delete(self, q: _Queue, job: _Record) -> None:
        # Heap entries go stale and are skipped; the logs live on the record. A parent's
        # dependency rows go with it (lane._flow_forget).
        del q.jobs[job.id]
        del q.by_state[job.state][job.id]
        if job.deps_pending is not None:
            self._deps.pop(job.key, None)

    def _enqueue(self, q: _Queue, job: _Record, *, front: bool = False) -> None:
        """Give a waiting job a fresh sequence and its order key (ORD-1..3)."""
        self._last_seq += 1
        seq = self._last_seq
        bucket = job.priority * PRIORITY_BUCKET
        if front:
            job.order_key = bucket
        elif job.lifo:
            job.order_key = bucket + BUCKET_MIDDLE - seq
        else:
            job.order_key = bucket + BUCKET_MIDDLE + seq
        job.enqueued_seq = seq
        heapq.heappush(q.waiting, (job.order_key, job.key, job.id))

    def _move_to_waiting(self, q: _Queue, job: _Record, *, front: bool = False) -> None:
        self._set_state(q, job, "waiting")
        self._enqueue(q, job, front=front)

    def _move_to_delayed(self, q: _Queue, job: _Record, available_at: datetime) -> None:
        # order_key / enqueued_seq keep their last values until the next move into waiting.
        job.available_at = available_at
        self._set_state(q, job, "delayed")
        heapq.heappush(q.delayed, (available_at, job.key, job.id))

    @staticmethod
    def _end_lease(job: _Record) -> None:
        job.lock_token = None
        job.lease_expires_at = None

    def _pop_waiting(self, q: _Queue) -> _Record | None:
        while q.waiting:
            order_key, key, job_id = heapq.heappop(q.waiting)
            job = q.jobs.get(job_id)
            if job is not None and (job.state, job.order_key, job.key) == (
                "waiting",
                order_key,
                key,
            ):
                return job
        return None

    def _promote_due(self, q: _Queue, now: datetime) -> int:
        """Move every due delayed job to waiting, by ``(available_at, key)``."""
        promoted = 0
        while q.delayed and q.delayed[0][0] <= now:
            due, key, job_id = heapq.heappop(q.delayed)
            job = q.jobs.get(job_id)
            if job is None or (job.state, job.available_at, job.key) != ("delayed", due, key):
                continue  # stale entry: the job left delayed or was rescheduled
            self._move_to_waiting(q, job)
            self._emit(q, "waiting", job.id, {"prev": "delayed"}, now)
            promoted += 1
        return promoted

    def _activate(
        self, q: _Queue, job: _Record, worker_id: str, lease_ms: int, now: datetime
    ) -> None:
        self._set_state(q, job, "active")
        job.lock_token = str(uuid.uuid4())
        job.worker_id = worker_id
        job.processed_at = now
        job.lease_expires_at = now + lease_ms * _MILLISECOND
        job.attempts_started += 1
        self._emit(q, "active", job.id, {"prev": "waiting"}, now)

    def _complete(self, q: _Queue, job: _Record, result: JSON, now: datetime) -> JobRow:
        self._end_lease(job)
        self._set_state(q, job, "completed")
        job.finished_at = now
        job.return_value = result
        self._emit(
            q, "completed", job.id, {"prev": "active", "returnvalue": copy.deepcopy(result)}, now
        )
        snapshot = job.snapshot()
        self._dedup_finish(q, job, now)
        self._repeat_finish(q, job, now)
        if job.parent_id is not None:
            self._flow_resolve([job], "completed", now)
        if job.batch_id is not None:
            self._batch_settle([job], "completed", now)
        if "chain" in job.options:
            self._chain_advance(job, now)
        self._after_finish(q, job, job.remove_on_complete, now)
        return snapshot

    def _fail(
        self,
        q: _Queue,
        job: _Record,
        reason: str,
        stacktrace: str | None,
        discard_retry: bool,
        now: datetime,
    ) -> JobRow:
        job.attempts_made += 1
        job.failed_reason = reason
        if stacktrace is not None:
            job.stacktrace.append(stacktrace)
        if discard_retry or job.attempts_made >= job.max_attempts:
            return self._finalize_terminal(q, job, reason, now)
        self._end_lease(job)
        delay_ms = self._backoff_ms(job)
        if delay_ms > 0:
            self._move_to_delayed(q, job, now + delay_ms * _MILLISECOND)
            data = {"delay": _epoch_ms(job.available_at), "prev": "active", "failedReason": reason}
            self._emit(q, "delayed", job.id, data, now)
        else:
            self._move_to_waiting(q, job)
            self._emit(q, "waiting", job.id, {"prev": "active"}, now)
        return job.snapshot()

    def _backoff_ms(self, job: _Record) -> int:
        if job.backoff is None:
            return 0
        # Draw only when jitter is on, so runs without jitter consume no randomness.
        uniform = self._rng.random() if job.backoff.jitter > 0 else 0.5
        return job.backoff.delay_for(job.attempts_made, uniform)

    def _finalize_terminal(self, q: _Queue, job: _Record, reason: str, now: datetime) -> JobRow:
        """``active -> failed`` for fail_job and stalled recovery alike (FIN-4, STALL-4), and
        ``waiting-children -> failed`` for a parent a child fails (FLOW-5)."""
        prev = job.state
        self._end_lease(job)
        self._set_state(q, job, "failed")
        job.failed_reason = reason
        job.finished_at = now
        self._emit(q, "failed", job.id, {"prev": prev, "failedReason": reason}, now)
        if job.attempts_made >= job.max_attempts:
            self._emit(q, "retries-exhausted", job.id, {"attemptsMade": job.attempts_made}, now)
        snapshot = job.snapshot()
        self._dedup_finish(q, job, now)
        self._repeat_release(q, job)
        if job.parent_id is not None:
            self._flow_resolve([job], "failed", now)
        if job.batch_id is not None:
            self._batch_settle([job], "failed", now)
        if "chain" in job.options:
            self._chain_broken(job, now)
        self._after_finish(q, job, job.remove_on_fail, now)
        return snapshot

    def _after_finish(self, q: _Queue, job: _Record, policy: _Policy, now: datetime) -> None:
        """Retention, metrics, then ``drained`` (FIN-2 steps 5 to 7)."""
        state = job.state
        self._apply_retention(q, job, policy, now)
        minutes = q.metrics.setdefault(state, {})
        minute = _epoch_ms(now) // MINUTE_MS * MINUTE_MS
        minutes[minute] = minutes.get(minute, 0) + 1
        if q.drained():
            self._emit(q, "drained", None, {}, now)

    def _apply_retention(self, q: _Queue, job: _Record, policy: _Policy, now: datetime) -> None:
        """RET-2/3: age cleanup (oldest first, capped by limit), then keep the newest count."""
        if policy is None:
            return
        if policy is True:
            self._delete(q, job)
            return
        finished = sorted(q.by_state[job.state].values(), key=_Record.finish_order)
        if policy.age_ms is not None:
            cutoff = now - policy.age_ms * _MILLISECOND
            expired = [j for j in finished if j.finish_order()[0] < cutoff]
            if policy.limit is not None:
                expired = expired[: policy.limit]
            self._delete_all(q, expired)
            finished = [j for j in finished if q.jobs.get(j.id) is j]
        if policy.count is not None:
            self._delete_all(q, finished[: max(len(finished) - policy.count, 0)])

    def _remove(self, q: _Queue, job: _Record, now: datetime) -> None:
        """lane.remove_job for a found job (MGMT-16): a live lease protects it."""
        if job.state == "active" and job.lease_expires_at and job.lease_expires_at >= now:
            raise JobLocked(f"job {job.id!r} is active under a lease that has not expired")
        self._remove_jobs([(q, job)], now)

    def _remove_jobs(self, jobs: Sequence[tuple[_Queue, _Record]], now: datetime) -> None:
        """lane._remove_jobs, for every path that removes jobs (remove, drain, clean,
        obliterate, remove_unprocessed_children): `removed {prev}` and the owners' release
        per job, in order; a pending flow child told to its parent (FLOW-26); then the rows
        go."""
        for q, job in jobs:
            self._emit(q, "removed", job.id, {"prev": job.state}, now)
        # DEDUP-12, with a kept next job's parent told (DEDUP-18) unless it goes too, in
        # (queue, dedup id) order as lane._remove_jobs; REP-7.
        removed = {job.key for _, job in jobs}
        dropped: list[tuple[str, str, _Owner]] = []
        for q, job in jobs:
            owner = self._dedup_release(q, job, now, tell=False)
            kept_for = None if owner is None else owner.next_parent
            if owner is not None and job.dedup_id is not None and kept_for is not None:
                dropped += [(q.name, job.dedup_id, owner)] if kept_for[2] not in removed else []
            self._repeat_release(q, job)
        for name, dedup_id, owner in sorted(dropped, key=lambda d: (d[0], d[1])):
            self._dedup_next_dropped(name, dedup_id, owner, now)
        pending = [
            job
            for _, job in jobs
            if job.parent_id is not None and job.state not in ("completed", "failed")
        ]
        if pending:
            self._flow_resolve(pending, "removed", now)
        batched = [
            job
            for _, job in jobs
            if job.batch_id is not None and job.state not in ("completed", "failed")
        ]
        if batched:  # BATCH-5: removed before it finished: settled, deleted
            self._batch_settle(batched, "deleted", now)
        for q, job in jobs:
            self._delete(q, job)

    def _delete_all(self, q: _Queue, jobs: Iterable[_Record]) -> None:
        for job in jobs:
            self._delete(q, job)

    # ----------------------------------------------------------------- adding (ADD, DEDUP)

    def _insert(
        self,
        queue: str,
        new: _NewJob,
        now: datetime,
        batch: _Batch | None = None,
        *,
        parent: _Record | None = None,
        hold: bool = False,
        children: list[_Node] | None = None,
    ) -> _Record:
        """Store one new job (lane._store_jobs for one spec), or give the job that keeps its
        custom id (ADD-3) or deduplication id (DEDUP-1). With ``batch`` (one call's jobs so
        far) the new job's events wait for ``_emit_batch``. A flow child names its
        ``parent``; with ``hold`` (children of its own) it waits in waiting-children, and
        ``children`` go with it when it is kept as a running owner's next job (DEDUP-18)."""
        q = self._queue(queue)
        opts = new.options.parsed
        if opts.job_id is not None and opts.job_id in q.jobs:
            # ADD-3: no write, no sequence; only `duplicated`, after the job's own `added`.
            stored = q.jobs[opts.job_id]
            if batch is not None and any(job is stored for job in batch.jobs):
                batch.later.append(("duplicated", stored.id, {}))
            else:
                self._emit(q, "duplicated", stored.id, {}, now)
            return stored
        self._last_key += 1
        key = self._last_key
        # A generated id is the key's text, as lane._store_jobs gives it (migration 0008).
        job_id = opts.job_id if opts.job_id is not None else str(key)
        if opts.deduplication is not None:
            owner = self._dedup_take(
                q, opts.deduplication, new, key, job_id, now, batch, parent, children or []
            )
            if owner is not None:
                return owner
        due = now + opts.delay_ms * _MILLISECOND
        repeat_key = None
        if opts.repeat is not None:
            repeat_key = series_key(new.name, opts.document["repeat"])
            if batch is not None and repeat_key in batch.series:  # REP-6 within the call
                started = batch.series[repeat_key]
                batch.later.append(("duplicated", started.id, {}))
                return started
            taken = self._repeat_take(q, repeat_key, new, key, job_id, now)
            if isinstance(taken, _Record):
                return taken
            due = max(taken, now)
        delayed = due > now
        job = _Record(
            queue=queue,
            id=job_id,
            key=key,
            name=new.name,
            data=new.data,
            state="waiting-children" if hold else "delayed" if delayed else "waiting",
            priority=opts.priority,
            lifo=opts.lifo,
            order_key=opts.priority * PRIORITY_BUCKET + BUCKET_MIDDLE,
            created_at=now,
            available_at=due,
            max_attempts=opts.attempts,
            backoff=new.options.backoff,
            timeout_ms=opts.timeout_ms,
            options=opts.document,
            remove_on_complete=opts.remove_on_complete,
            remove_on_fail=opts.remove_on_fail,
            dedup_id=None if opts.deduplication is None else opts.deduplication.id,
            repeat_key=repeat_key,
            parent_queue=None if parent is None else parent.queue,
            parent_id=None if parent is None else parent.id,
        )
        self._store(q, job)
        if repeat_key is not None and batch is not None:
            batch.series[repeat_key] = job
        if hold:
            pass  # a parent takes its sequence when released
        elif delayed:
            heapq.heappush(q.delayed, (job.available_at, job.key, job.id))
        else:
            self._enqueue(q, job)
        if batch is None:
            self._emit_batch(q, _Batch([job]), now)
        else:
            batch.jobs.append(job)
        return job

    def _emit_batch(self, q: _Queue, batch: _Batch, now: datetime) -> None:
        """The events of jobs added by one call, in the order lane._store_jobs writes its
        event rows: every 'added', then every 'waiting', then every 'delayed', then the
        events of specs that met one of these jobs."""
        jobs = batch.jobs
        for job in jobs:
            self._emit(q, "added", job.id, {"name": job.name}, now)
        for job in jobs:
            if job.state == "waiting":
                self._emit(q, "waiting", job.id, {}, now)
        for job in jobs:
            if job.state == "delayed":
                self._emit(q, "delayed", job.id, {"delay": _epoch_ms(job.available_at)}, now)
        for job in jobs:
            if job.state == "waiting-children":
                self._emit(q, "waiting-children", job.id, {}, now)
        for event, job_id, data in batch.later:
            self._emit(q, event, job_id, data, now)

    # ------------------------------------------------------ repeat series (16_repeats.sql)

    def _series_owner(self, q: _Queue, key: str, row: _Series) -> _Record | None:
        """lane._repeat_owner: the row's owner while it is one (exists, unfinished)."""
        job = q.jobs.get(row.job_id)
        if job is None or job.key != row.job_key or job.repeat_key != key:
            return None
        return None if job.state in ("completed", "failed") else job

    def _repeat_take(
        self, q: _Queue, key: str, new: _NewJob, job_key: int, job_id: str, now: datetime
    ) -> _Record | datetime:
        """lane._repeat_take: the live owner (``duplicated`` on it), or the tick the new
        job, the series' next occurrence, is due at."""
        first = first_occurrence(new, now)
        row = q.series.get(key)
        if row is not None:
            owner = self._series_owner(q, key, row)
            if owner is not None:
                self._emit(q, "duplicated", owner.id, {}, now)
                return owner
            finished = q.jobs.get(row.job_id)
            if (
                finished is not None
                and finished.key == row.job_key
                and finished.repeat_key == key
                and finished.state == "completed"
            ):
                following = repeat_next(row.spec, row.next_at, now)
                if following is None:
                    raise InvalidOptions(f"repeat series {key!r} has no occurrence left")
                row.job_key, row.job_id = job_key, job_id
                row.count += 1
                row.next_at = following
                return following
        spec = new.options.parsed.repeat
        assert spec is not None
        q.series[key] = _Series(job_key, job_id, new, spec, 1, first)
        return first

    def _repeat_finish(self, q: _Queue, job: _Record, now: datetime) -> None:
        """lane._repeat_finish for one job that just completed (REP-2..4)."""
        row = None if job.repeat_key is None else q.series.get(job.repeat_key)
        if row is None or job.repeat_key is None or row.job_key != job.key:
            return
        limit = row.spec.limit if row.spec.limit is not None else 2**31 - 1
        if row.count >= limit or repeat_next(row.spec, row.next_at, now) is None:
            del q.series[job.repeat_key]
            return
        template = row.template
        self._insert(
            q.name, _NewJob(template.name, _json_copy(template.data), template.options), now
        )

    def _repeat_release(self, q: _Queue, job: _Record) -> None:
        """lane._repeat_release (REP-7)."""
        row = None if job.repeat_key is None else q.series.get(job.repeat_key)
        if row is not None and job.repeat_key is not None and row.job_key == job.key:
            del q.series[job.repeat_key]

    def _repeat_reclaim(self, q: _Queue, job: _Record, now: datetime, *, apply: bool) -> None:
        """lane._repeat_reclaim (REP-15); with ``apply`` False only its check."""
        if job.repeat_key is None:
            return
        row = q.series.get(job.repeat_key)
        if row is not None:
            owner = self._series_owner(q, job.repeat_key, row)
            if owner is not None and owner.key != job.key:
                raise RepeatConflict(
                    f"repeat series {job.repeat_key!r} of queue {q.name} is owned by job"
                    f" {owner.id}: job {job.id} cannot be retried while it runs"
                )
            if apply:
                row.job_key, row.job_id, row.next_at = job.key, job.id, now
            return
        if not apply:
            return
        template = _NewJob(job.name, _json_copy(job.data), _parse_options(job.options))
        spec = check_repeat(job.options["repeat"])
        q.series[job.repeat_key] = _Series(job.key, job.id, template, spec, 1, now)


class MemoryEntity:
    """Base of an entity's memory implementation: the operations of one handle over the
    shared store (the records every entity reads and writes, and their shared rules)."""

    def __init__(self, store: _Store) -> None:
        self._store = store
