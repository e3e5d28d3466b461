"""``MemoryBatches``: the rules of sql/functions/19_batches.sql over the store (batch rows
and their settlements live in ``_Store._batches``; settling happens in the store's
transitions, ``_Store._batch_settle``)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from lane_pg.backend.batches import (
    AddBatch,
    AddToBatch,
    CancelBatch,
    FindBatch,
    ListBatches,
    PruneBatches,
    canonical_batch_id,
    check_batch_id,
    check_batch_name,
    check_batch_options,
    check_list_batches,
    check_remove_waiting,
    prune_ages,
    refuse_group_options,
)
from lane_pg.errors import BatchNotFound, JobStateConflict
from lane_pg.memory._records import _MILLISECOND, _Batch, _BatchRecord, _NewJob, _parse_spec
from lane_pg.memory._store import MemoryEntity, _Store
from lane_pg.types import Batch, QueuedSpec, options_document, validate_queue_name


def parse_grouped(jobs: Sequence[QueuedSpec], what: str) -> list[tuple[str, _NewJob]]:
    """Each spec checked as ``add_job`` checks it, without the options a group refuses."""
    parsed = []
    for position, job in enumerate(jobs, start=1):
        validate_queue_name(job.queue)
        new = _parse_spec(job.name, job.data, options_document(job.options))  # type: ignore[arg-type]
        refuse_group_options(new.options.parsed.document, position, job.name, what)
        parsed.append((job.queue, new))
    return parsed


def store_grouped(
    store: _Store, batch_id: str, parsed: list[tuple[str, _NewJob]], now: datetime
) -> list[str]:
    """lane._batch_store: one add per queue (queues in first-appearance order), each job
    stamped with the batch; their ids in input order."""
    stored: dict[int, str] = {}
    queues = list(dict.fromkeys(queue for queue, _ in parsed))
    for queue in queues:
        batch = _Batch()
        for position, (job_queue, new) in enumerate(parsed):
            if job_queue != queue:
                continue
            job = store._insert(queue, new, now, batch)
            job.batch_id = batch_id
            meta = job.options.get("meta")
            job.options = {
                **job.options,
                "meta": {**(meta if isinstance(meta, dict) else {}), "batch_id": batch_id},
            }
            stored[position] = job.id
        store._emit_batch(store._queue(queue), batch, now)
    return [stored[position] for position in range(len(parsed))]


def snapshot(batch: _BatchRecord) -> Batch:
    failures = batch.failures()
    return Batch(
        batch.id,
        batch.name,
        batch.total_jobs,
        max(0, batch.total_jobs - len(batch.settlements)),
        len(failures),
        tuple(job_id for (_, job_id), _ in failures),
        dict(batch.options),
        batch.created_at,
        batch.cancelled_at,
        batch.finished_at,
    )


class MemoryBatches(MemoryEntity):
    """``Batches`` over a ``MemoryBackend``: the rules of sql/functions/19_batches.sql."""

    async def add_batch(self, args: AddBatch) -> list[str]:
        batch_id = check_batch_id(args.batch_id)
        check_batch_name(args.name)
        options = check_batch_options(args.options or {})
        parsed = parse_grouped(args.jobs, "job of the batch")
        store = self._store
        if batch_id in store._batches:
            raise JobStateConflict(f"batch {batch_id} exists already")
        options.setdefault("callback_queue", parsed[0][0] if parsed else "default")
        moment = store._now(args.now)
        record = _BatchRecord(batch_id, args.name, len(parsed), options, moment)
        store._batches[batch_id] = record
        ids = store_grouped(store, batch_id, parsed, moment)
        if not parsed:
            store._batch_progress(record, 0, moment)
        return ids

    async def add_to_batch(self, args: AddToBatch) -> list[str]:
        batch_id = canonical_batch_id(args.batch_id)
        store = self._store
        record = None if batch_id is None else store._batches.get(batch_id)
        if record is None:
            raise BatchNotFound(f"batch {args.batch_id} not found")
        if record.finished_at is not None:
            raise JobStateConflict(
                f"batch {record.id} finished at {record.finished_at}: no job can be added to it"
            )
        parsed = parse_grouped(args.jobs, "job of the batch")
        moment = store._now(args.now)
        record.total_jobs += len(parsed)
        return store_grouped(store, record.id, parsed, moment)

    async def find_batch(self, args: FindBatch) -> Batch | None:
        batch_id = canonical_batch_id(args.batch_id)
        record = None if batch_id is None else self._store._batches.get(batch_id)
        return None if record is None else snapshot(record)

    async def list_batches(self, args: ListBatches) -> list[Batch]:
        limit = check_list_batches(args.limit, args.state)
        state = args.state
        chosen = [
            record
            for record in self._store._batches.values()
            if state is None
            or (state == "pending" and record.finished_at is None)
            or (state == "finished" and record.finished_at is not None)
            or (state == "cancelled" and record.cancelled_at is not None)
        ]
        chosen.sort(key=lambda record: (record.created_at, record.id), reverse=True)
        return [snapshot(record) for record in chosen[:limit]]

    async def cancel_batch(self, args: CancelBatch) -> bool:
        check_remove_waiting(args.remove_waiting)
        batch_id = canonical_batch_id(args.batch_id)
        store = self._store
        record = None if batch_id is None else store._batches.get(batch_id)
        if record is None:
            raise BatchNotFound(f"batch {args.batch_id} not found")
        moment = store._now(args.now)
        cancelled = record.cancelled_at is None
        if cancelled:
            record.cancelled_at = moment
        if args.remove_waiting:
            doomed = sorted(
                (
                    (q, job)
                    for q in store._queues.values()
                    for job in q.jobs.values()
                    if job.batch_id == record.id and job.state in ("waiting", "delayed")
                ),
                key=lambda pair: pair[1].key,
            )
            store._remove_jobs(doomed, moment)
        return cancelled

    async def prune_batches(self, args: PruneBatches) -> int:
        finished_ms, unfinished_ms = prune_ages(args)
        store = self._store
        moment = store._now(args.now)
        doomed = [
            record.id
            for record in store._batches.values()
            if (
                record.finished_at is not None
                and record.finished_at < moment - finished_ms * _MILLISECOND
            )
            or (
                unfinished_ms is not None
                and record.finished_at is None
                and record.created_at < moment - unfinished_ms * _MILLISECOND
            )
        ]
        for batch_id in doomed:
            del store._batches[batch_id]
        return len(doomed)
