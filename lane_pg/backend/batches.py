"""Batches (BATCH): jobs dispatched together whose settlements drive callbacks.

A batch is stored with its jobs in one operation; each of its jobs is settled against it
in the same operation that ends the job (completed, failed for good, or removed before it
finished: *deleted*), whatever ended it, and a job settles once. Counts are derived from
the settlements on every read, never stored (``lane_pg.types.Batch``). The first failure
cancels the batch unless its options allow failures, and enqueues its ``catch`` callback;
the last settlement finishes it and enqueues ``then`` (when nothing failed) and
``finally``. A callback is a job named ``lane_pg:batch_callback`` with the id
``batch-<batch id>-<kind>`` on the batch's ``callback_queue`` (default: the first job's
queue), added in the settling operation, so it can neither be lost nor doubled.

The rules every backend follows are in ``lane_pg.backend`` (the package docstring)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import KW_ONLY
from datetime import datetime

from lane_pg.backend.operation import Arguments, Handle, operation
from lane_pg.types import JSON, Batch, Duration, QueuedSpec


class AddBatch(Arguments[list[str]]):
    """Store batch ``batch_id`` (a UUID's text) named ``name`` and its ``jobs``, each
    stamped with the batch (``options.meta.batch_id``), in one operation; return their ids
    in input order. ``options``: ``then`` / ``catch`` / ``finally`` (callback names, 1-255
    characters), ``allow_failures`` (bool), ``callback_queue``, ``callback_options`` (the
    callback jobs' options, without ``job_id``, ``deduplication`` or ``repeat``), ``meta``;
    any other key raises ``InvalidOptions``. A job takes what ``add_job`` takes except
    ``job_id``, ``deduplication`` and ``repeat`` (``InvalidOptions``). An existing
    ``batch_id`` raises ``JobStateConflict``. Any refusal stores nothing. An empty batch
    finishes at once."""

    batch_id: str
    name: str
    jobs: Sequence[QueuedSpec]
    options: Mapping[str, JSON] | None = None
    _: KW_ONLY
    now: datetime | None = None


class AddToBatch(Arguments[list[str]]):
    """Add ``jobs`` to a batch that has not finished (its total grows); return their ids.
    ``BatchNotFound`` when it does not exist, ``JobStateConflict`` when it finished (a
    ``then`` callback adding to its own batch cannot start it over)."""

    batch_id: str
    jobs: Sequence[QueuedSpec]
    _: KW_ONLY
    now: datetime | None = None


class FindBatch(Arguments[Batch | None]):
    """The batch with its derived counts, or None."""

    batch_id: str


class ListBatches(Arguments[list[Batch]]):
    """The newest ``limit`` batches (by creation, then id, descending), optionally only
    those ``pending`` (not finished), ``finished`` or ``cancelled``."""

    limit: int = 50
    state: str | None = None


class CancelBatch(Arguments[bool]):
    """Mark the batch cancelled (True when this call did; False when it was already).
    Its jobs still run unless they skip themselves (the ``SkipIfBatchCancelled``
    middleware); with ``remove_waiting`` its waiting and delayed jobs are removed, each
    settled as deleted. ``BatchNotFound`` when it does not exist."""

    batch_id: str
    _: KW_ONLY
    remove_waiting: bool = False
    now: datetime | None = None


class PruneBatches(Arguments[int]):
    """Delete batches that finished longer than ``finished_older_than`` ago and, with
    ``unfinished_older_than``, those created longer ago than that which never finished
    (their jobs stay and settle nothing); their settlements go with them. Returns the
    count."""

    finished_older_than: Duration
    _: KW_ONLY
    unfinished_older_than: Duration | None = None
    now: datetime | None = None


class Batches(Handle, name="batches"):
    """Batches (BATCH): stored with their jobs, settled as each job ends, read with derived
    counts."""

    __slots__ = ()

    add_batch = operation(AddBatch)
    add_to_batch = operation(AddToBatch)
    find_batch = operation(FindBatch)
    list_batches = operation(ListBatches)
    cancel_batch = operation(CancelBatch)
    prune_batches = operation(PruneBatches)
