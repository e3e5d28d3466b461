"""Deduplication owners (DEDUP): reading and releasing the owner of a deduplication id.

An add whose options carry ``deduplication`` (``DeduplicationOptions``) claims the id for
its job, or returns the job that owns it (``Producer.add_job``). The owner of an id is one
row per (queue, id) (``lane.dedup_owners``), written in the adder's transaction: an add
that rolls back leaves no owner. The rules every backend follows:

* An owner blocks duplicates while its job exists and carries the id, and: for as long as
  it runs when it is a keep-last owner; until its TTL runs out when it has one (also after
  the job finished, DEDUP-4); until its job finishes otherwise (DEDUP-3).
* A duplicate returns the owner and writes ``debounced`` and ``deduplicated`` on the
  owner's id, with ``{deduplicationId, deduplicatedJobId}`` naming the skipped job
  (DEDUP-2). ``extend_ttl`` restarts the owner's TTL (DEDUP-6); ``replace_delayed``
  removes a delayed owner (``removed prev=delayed``) and stores the new job as the owner,
  keeping the old expiry unless ``extend_ttl`` (DEDUP-7, -8); ``keep_last_if_active``
  keeps the latest duplicate that arrives while the owner runs and stores it when the
  owner completes or fails for good, its delay counted from then (DEDUP-9, -10, -16).
* Completion and terminal failure release the id unless a TTL still runs; removal
  releases it; ``retry_job`` takes it back or raises ``DeduplicationConflict`` (DEDUP-12,
  -13). A release only ever removes the row that names the releasing job.
* Within one bulk add, a spec whose id an earlier spec of the call took is deduplicated
  against it, whatever its flags (DEDUP-20).
* In a flow, a duplicate node is not stored (DEDUP-17, -19); kept as a running owner's
  next job it keeps its parent and children: the parent counts a placeholder dependency
  ``0:<dedup id>`` until the owner finishes and the node is stored under it, in that
  transaction. Every way a kept next job is dropped (replaced by a later duplicate, this
  key removed, the owner removed or its row expired or cleaned) releases that parent
  when nothing else is pending, so no parent waits for a job that will never exist
  (DEDUP-18).
* A row that no longer blocks (its job gone, not its job, finished, or expired) is
  replaced or deleted wherever it is met (DEDUP-15, A10).

Owner tokens (``DeduplicationLocks``, migration 0015): an add whose deduplication document
carries ``token`` records it on the owner row. ``release_deduplication_key`` frees an id
only while its row still carries the caller's token (UNIQ-7: a redelivered or retried job
never frees the lock of a newer push, Laravel PR #59567). ``reserve_deduplication_key``
takes an id before its job exists (a row with a token and an expiry and no job, TX-10):
it blocks like a TTL owner; ``get_deduplication_job_id`` answers None for it (no job yet)
without deleting it; the add carrying its token takes it over, keeping its expiry; any
other add of that id, and a ``retry_job`` reclaiming it, raise ``DeduplicationConflict``
and write nothing, since there is no owner job to return.

Unique ids (``"kind": "unique"`` in the deduplication document, migration 0018; the
facade's ``push_unique``): one lock per id in the whole connection, not per queue (UNIQ-1).
The row stays in the queue of the job (or reservation) holding it, where ``get``,
``remove`` and ``release`` find it; an add or a reservation in any queue meets it. Such a
document needs ``ttl_ms`` and takes neither ``replace_delayed`` nor
``keep_last_if_active``. Reservations are always unique ids. ``retry_job`` of a unique job
neither takes back nor checks its lock and drops the job's token (A9): the lock row is
left as it is, and nothing the retried job does can free a lock.
"""

from __future__ import annotations

from dataclasses import KW_ONLY, dataclass
from datetime import datetime

from lane_pg.backend.operation import Arguments, Handle, operation
from lane_pg.errors import InvalidOptions
from lane_pg.options import MAX_DURATION_MS, Deduplication, ParsedOptions
from lane_pg.types import JSON, Duration, JobOptions, JobRow, to_millis


@dataclass(frozen=True, slots=True)
class DebouncedAdd:
    """What one debounced dispatch did (``Debounces.add_debounced_job``)."""

    job: JobRow
    """The stored dispatch."""
    replaced_id: str | None
    """The window's delayed job it replaced (removed at push, UNIQ-11), if any."""


class GetDeduplicationJobId(Arguments[str | None]):
    """The id of the job that owns ``dedup_id`` now, or None; a row that no longer
    blocks is deleted on the way (DEDUP-15)."""

    queue: str
    dedup_id: str
    _: KW_ONLY
    now: datetime | None = None


class RemoveDeduplicationKey(Arguments[bool]):
    """Free ``dedup_id`` whatever holds it, with any kept next job; the owner job is
    not touched (DEDUP-14). True when there was an owner row."""

    queue: str
    dedup_id: str


class ExpireDedupOwners(Arguments[int]):
    """Delete up to ``limit`` owner rows whose TTL ran out (a running keep-last owner
    keeps its row); returns how many went. The maintenance leader runs it."""

    _: KW_ONLY
    limit: int = 1000
    now: datetime | None = None


class ReserveDeduplicationKey(Arguments[bool]):
    """Take ``dedup_id`` for the push named ``token`` for ``ttl``, before its job exists.
    True when ``token`` holds it now (also when it already did); False when another
    live owner or reservation holds it. ``InvalidOptions`` for an empty or over-long id
    or token, or a ttl outside 1 ms..MAX_DURATION_MS."""

    queue: str
    dedup_id: str
    token: str
    ttl: Duration
    _: KW_ONLY
    now: datetime | None = None


class ReleaseDeduplicationKey(Arguments[bool]):
    """Free ``dedup_id`` only while its row carries ``token`` (reserved or owned, with any
    kept next job); the job is not touched. With ``reservation_only``, only while no
    job has taken the reservation over (a push giving back the lock of a write that
    failed, which keeps it if the write did commit). True when a row went."""

    queue: str
    dedup_id: str
    token: str
    _: KW_ONLY
    reservation_only: bool = False


class AddDebouncedJob(Arguments[DebouncedAdd]):
    """Add one dispatch of the window ``options["deduplication"]`` names (with a
    ``token``; ``delay_ms`` is the window), reading and writing the window in one
    step, so concurrent dispatches of one window each see the one before
    (``lane.add_debounced_job``): the window's delayed job is replaced, one that no
    longer waits is superseded (its window is this dispatch's), and once the burst
    has waited ``max_wait`` since its first dispatch this one is stored at once,
    without the window, which is released (UNIQ-10). Of concurrent dispatches, the
    last to be stored owns the window; ``InvalidOptions`` for a document without a
    token, a unique or keep-last one, or a max wait outside 1 ms..MAX_DURATION_MS."""

    queue: str
    name: str
    data: JSON = None
    options: JobOptions | dict[str, JSON] | None = None
    _: KW_ONLY
    max_wait: Duration | None = None
    now: datetime | None = None


class Dedup(Handle, name="dedup"):
    """Reading and releasing the owner of a deduplication id (DEDUP-14, -15)."""

    __slots__ = ()

    get_deduplication_job_id = operation(GetDeduplicationJobId)
    remove_deduplication_key = operation(RemoveDeduplicationKey)
    expire_dedup_owners = operation(ExpireDedupOwners)
    reserve_deduplication_key = operation(ReserveDeduplicationKey)
    release_deduplication_key = operation(ReleaseDeduplicationKey)
    add_debounced_job = operation(AddDebouncedJob)


def debounced_add_wait(
    parsed: ParsedOptions, max_wait: Duration | None
) -> tuple[Deduplication, int | None]:
    """``add_debounced_job``'s checks of a parsed spec (both backends): its deduplication
    and its max wait in milliseconds (None: none); ``InvalidOptions`` for a spec without
    deduplication id and token, a unique or keep-last one, or a max wait outside
    1 ms..MAX_DURATION_MS."""
    dedup = parsed.deduplication
    max_wait_ms = None if max_wait is None else to_millis(max_wait, "max_wait")
    if (
        dedup is None
        or dedup.token is None
        or dedup.kind == "unique"
        or dedup.keep_last_if_active
        or (max_wait_ms is not None and not 1 <= max_wait_ms <= MAX_DURATION_MS)
    ):
        raise InvalidOptions(
            'a debounced add needs deduplication {"id", "token"} (not unique, not'
            f" keep-last) and a max wait of 1..{MAX_DURATION_MS} ms or none, got"
            f" {parsed.document.get('deduplication')} and {max_wait_ms}"
        )
    return dedup, max_wait_ms
