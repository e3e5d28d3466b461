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

import re
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import KW_ONLY
from datetime import datetime

from lane_pg.backend.operation import Arguments, Handle, operation
from lane_pg.errors import InvalidOptions
from lane_pg.types import (
    BATCH_CALLBACK_KINDS,
    BATCH_STATES,
    JSON,
    Batch,
    Duration,
    QueuedSpec,
    to_millis,
    validate_count,
    validate_queue_name,
)


class AddBatch(Arguments[list[str]]):
    """Store batch ``batch_id`` (a UUID's text) named ``name`` and its ``jobs``, each
    stamped with the batch (``options.meta.batch_id``), in one operation; return their ids
    in input order. ``options``: ``then`` / ``catch`` / ``finally`` (callback names, 1-255
    characters), ``allow_failures`` (bool), ``callback_queue``, ``callback_options`` (the
    callback jobs' options, without ``job_id``, ``deduplication`` or ``repeat``; without
    it they get ``CHAIN_CATCH_RETRY``'s 3 attempts with backoff), ``meta``;
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


# ----------------------------------------------------------------- rules of every backend
# (sql/functions/19_batches.sql and 19_chains.sql check them; memory and Redis import them)

GROUP_REFUSED = ("job_id", "deduplication", "repeat")
"""The job options a batch's job or a chain's link refuses: each would let the add return
another job, which the group would then claim as its own."""
_BATCH_OPTIONS = "allow_failures, callback_options, callback_queue, catch, finally, meta, then"
_CHAIN_ID = re.compile(r"[A-Za-z0-9_.-]{1,100}")


def canonical_batch_id(batch_id: object) -> str | None:
    """The batch id as PostgreSQL's uuid prints it, or None for a text that is no UUID."""
    try:
        return str(uuid.UUID(str(batch_id))) if isinstance(batch_id, str) else None
    except ValueError:
        return None


def check_batch_id(batch_id: object) -> str:
    """``add_batch``'s id: a UUID (its canonical text), else ``InvalidOptions``."""
    canonical = canonical_batch_id(batch_id)
    if canonical is None:
        raise InvalidOptions(f"a batch id is a UUID, got {batch_id!r}")
    return canonical


def check_batch_name(name: object) -> str:
    if not isinstance(name, str) or len(name) > 255:
        raise InvalidOptions("a batch name is text of at most 255 characters")
    return name


def check_batch_options(options: Mapping[str, JSON]) -> dict[str, JSON]:
    """lane._check_batch_options: the batch's options document, checked."""
    from lane_pg.options import parse_options  # lane_pg.options imports lane_pg.types first

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
            if isinstance(value, dict) and any(refused in value for refused in GROUP_REFUSED):
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


def refuse_group_options(document: Mapping[str, JSON], position: int, name: str, what: str) -> None:
    """A group's job (``what``: "job of the batch", "link of the chain") at ``position``
    (from 1) with an option the group refuses: ``InvalidOptions``."""
    if any(key in document for key in GROUP_REFUSED):
        raise InvalidOptions(
            f"{what} {position} ({name}): a {what.split()[-1]}'s jobs take no job_id,"
            " deduplication or repeat option"
        )


def check_chain_id(chain_id: str) -> str:
    if not isinstance(chain_id, str) or not _CHAIN_ID.fullmatch(chain_id) or chain_id.isdigit():
        raise InvalidOptions(
            "a chain id is 1-100 letters, digits, dots, dashes or underscores, not all"
            f" digits; got {chain_id!r}"
        )
    return chain_id


def check_chain(
    chain_id: str, links: Sequence[QueuedSpec], catch: str | None, catch_queue: str | None
) -> None:
    """lane.add_chain's checks of the call itself (each link's spec is checked apart)."""
    check_chain_id(chain_id)
    if not links:
        raise InvalidOptions("a chain needs at least one job")
    if catch is not None and (not isinstance(catch, str) or not 1 <= len(catch) <= 255):
        raise InvalidOptions("a chain's catch names a registered callback: 1-255 characters")
    if catch_queue is not None:
        validate_queue_name(catch_queue)


def check_list_batches(limit: int, state: str | None) -> int:
    """lane.list_batches's checks; the limit."""
    limit = validate_count(limit, "limit")
    if limit < 1:
        raise InvalidOptions(f"limit must be a positive number, got {limit}")
    if state is not None and state not in BATCH_STATES:
        raise InvalidOptions(f"state must be one of {', '.join(BATCH_STATES)}, got {state!r}")
    return limit


def check_remove_waiting(remove_waiting: object) -> None:
    if not isinstance(remove_waiting, bool):
        raise InvalidOptions(f"remove_waiting must be true or false, got {remove_waiting!r}")


def prune_ages(args: PruneBatches) -> tuple[int, int | None]:
    """lane.prune_batches's ages in milliseconds (finished, unfinished or None)."""
    finished_ms = to_millis(args.finished_older_than, "finished_older_than")
    unfinished = args.unfinished_older_than
    unfinished_ms = None if unfinished is None else to_millis(unfinished, "unfinished_older_than")
    if finished_ms < 0 or (unfinished_ms is not None and unfinished_ms < 0):
        raise InvalidOptions("prune_batches takes ages of 0 ms or more")
    return finished_ms, unfinished_ms
