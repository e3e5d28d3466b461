"""``MemoryBatches``: the rules of sql/functions/19_batches.sql over the store (batch rows
and their settlements live in ``_Store._batches``; settling happens in the store's
transitions, ``_Store._batch_settle``)."""

from __future__ import annotations

import re
import uuid
from collections.abc import Mapping, Sequence
from datetime import datetime

from lane_pg.backend.batches import (
    AddBatch,
    AddToBatch,
    CancelBatch,
    FindBatch,
    ListBatches,
    PruneBatches,
)
from lane_pg.errors import BatchNotFound, InvalidOptions, JobStateConflict
from lane_pg.memory._records import _MILLISECOND, _Batch, _BatchRecord, _NewJob, _parse_spec
from lane_pg.memory._store import MemoryEntity, _Store
from lane_pg.options import parse_options
from lane_pg.types import (
    BATCH_CALLBACK_KINDS,
    BATCH_STATES,
    JSON,
    Batch,
    QueuedSpec,
    options_document,
    to_millis,
    validate_count,
    validate_queue_name,
)

_REFUSED = ("job_id", "deduplication", "repeat")
_BATCH_OPTIONS = "allow_failures, callback_options, callback_queue, catch, finally, meta, then"
_CHAIN_ID = re.compile(r"[A-Za-z0-9_.-]{1,100}")


def _canonical(batch_id: str) -> str | None:
    try:
        return str(uuid.UUID(batch_id))
    except (ValueError, TypeError, AttributeError):
        return None


def check_batch_options(options: Mapping[str, JSON]) -> dict[str, JSON]:
    """lane._check_batch_options: the batch's options document, checked."""
    if not isinstance(options, Mapping):
        raise InvalidOptions(f"batch options must be a JSON object, got {options!r}")
    for key, value in options.items():
        if key in BATCH_CALLBACK_KINDS:
            if not isinstance(value, str) or not 1 <= len(value) <= 255:
                raise InvalidOptions(
                    f"batch option {key} names a registered callback: 1-255 characters,"
                    f" got {value!r}"
                )
        elif key == "allow_failures":
            if not isinstance(value, bool):
                raise InvalidOptions(
                    f"batch option allow_failures must be true or false, got {value!r}"
                )
        elif key == "callback_queue":
            if not isinstance(value, str):
                raise InvalidOptions(
                    f"batch option callback_queue must be a queue name, got {value!r}"
                )
            validate_queue_name(value)
        elif key == "callback_options":
            parse_options(value)
            if isinstance(value, dict) and any(refused in value for refused in _REFUSED):
                raise InvalidOptions(
                    "batch option callback_options takes no job_id, deduplication or repeat:"
                    " a callback job has the id batch-<id>-<kind>"
                )
        elif key == "meta":
            parse_options({"meta": value})
        else:
            raise InvalidOptions(
                f"unknown batch option {key!r}: known options are {_BATCH_OPTIONS}"
            )
    return dict(options)


def parse_grouped(jobs: Sequence[QueuedSpec], what: str) -> list[tuple[str, _NewJob]]:
    """Each spec checked as ``add_job`` checks it, without the options a group refuses."""
    parsed = []
    for position, job in enumerate(jobs, start=1):
        validate_queue_name(job.queue)
        new = _parse_spec(job.name, job.data, options_document(job.options))  # type: ignore[arg-type]
        if any(key in new.options.parsed.document for key in _REFUSED):
            raise InvalidOptions(
                f"{what} {position} ({job.name}): a {what.split()[-1]}'s jobs take no job_id,"
                " deduplication or repeat option"
            )
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
        batch_id = _canonical(args.batch_id)
        if batch_id is None:
            raise InvalidOptions(f"a batch id is a UUID, got {args.batch_id!r}")
        if not isinstance(args.name, str) or len(args.name) > 255:
            raise InvalidOptions("a batch name is text of at most 255 characters")
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
        batch_id = _canonical(args.batch_id)
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
        batch_id = _canonical(args.batch_id)
        record = None if batch_id is None else self._store._batches.get(batch_id)
        return None if record is None else snapshot(record)

    async def list_batches(self, args: ListBatches) -> list[Batch]:
        limit = validate_count(args.limit, "limit")
        if limit < 1:
            raise InvalidOptions(f"limit must be a positive number, got {limit}")
        state = args.state
        if state is not None and state not in BATCH_STATES:
            raise InvalidOptions(f"state must be one of {', '.join(BATCH_STATES)}, got {state!r}")
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
        if not isinstance(args.remove_waiting, bool):
            raise InvalidOptions(
                f"remove_waiting must be true or false, got {args.remove_waiting!r}"
            )
        batch_id = _canonical(args.batch_id)
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
        finished_ms = to_millis(args.finished_older_than, "finished_older_than")
        unfinished = args.unfinished_older_than
        unfinished_ms = (
            None if unfinished is None else to_millis(unfinished, "unfinished_older_than")
        )
        if finished_ms < 0 or (unfinished_ms is not None and unfinished_ms < 0):
            raise InvalidOptions("prune_batches takes ages of 0 ms or more")
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


def check_chain_id(chain_id: str) -> str:
    if not isinstance(chain_id, str) or not _CHAIN_ID.fullmatch(chain_id) or chain_id.isdigit():
        raise InvalidOptions(
            "a chain id is 1-100 letters, digits, dots, dashes or underscores, not all"
            f" digits; got {chain_id!r}"
        )
    return chain_id
