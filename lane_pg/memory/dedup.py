"""Deduplication owners (DEDUP): ``lane.get_deduplication_job_id`` and friends."""

from __future__ import annotations

from datetime import timedelta

from lane_pg.backend.dedup import (
    AddDebouncedJob,
    DebouncedAdd,
    ExpireDedupOwners,
    GetDeduplicationJobId,
    ReleaseDeduplicationKey,
    RemoveDeduplicationKey,
    ReserveDeduplicationKey,
    debounced_add_wait,
)
from lane_pg.errors import InvalidOptions
from lane_pg.memory._owners import _replaceable
from lane_pg.memory._records import (
    _MILLISECOND,
    _NewJob,
    _Owner,
    _parse_options,
    _parse_spec,
    check_series_left,
)
from lane_pg.memory._store import MemoryEntity
from lane_pg.options import MAX_DURATION_MS, MAX_JOB_ID_LENGTH
from lane_pg.types import to_millis, validate_queue_name


class MemoryDedup(MemoryEntity):
    """Reading and releasing the owner of a deduplication id (DEDUP-14, -15)."""

    async def get_deduplication_job_id(self, args: GetDeduplicationJobId) -> str | None:
        validate_queue_name(args.queue)
        q = self._store._queues.get(args.queue)
        owner = None if q is None else q.owners.get(args.dedup_id)
        if q is None or owner is None or owner.reserved_at(self._store._now(args.now)):
            return None
        moment = self._store._now(args.now)
        holder = self._store._owner_job(q, owner, moment)
        if holder is None:
            del q.owners[args.dedup_id]
            self._store._dedup_next_dropped(args.queue, args.dedup_id, owner, moment)
            return None
        return holder.id

    async def remove_deduplication_key(self, args: RemoveDeduplicationKey) -> bool:
        validate_queue_name(args.queue)
        q = self._store._queues.get(args.queue)
        owner = None if q is None else q.owners.pop(args.dedup_id, None)
        if owner is None:
            return False
        self._store._dedup_next_dropped(
            args.queue, args.dedup_id, owner, self._store._now(None)
        )  # DEDUP-18
        return True

    async def reserve_deduplication_key(self, args: ReserveDeduplicationKey) -> bool:
        dedup_id = args.dedup_id
        token = args.token
        validate_queue_name(args.queue)
        ttl_ms = to_millis(args.ttl, "reservation ttl")
        if not (
            1 <= len(dedup_id) <= MAX_JOB_ID_LENGTH
            and 1 <= len(token) <= MAX_JOB_ID_LENGTH
            and 1 <= ttl_ms <= MAX_DURATION_MS
        ):
            raise InvalidOptions(
                "a reservation needs an id and a token of 1-255 characters and a ttl of"
                f" 1..{MAX_DURATION_MS} ms, got {dedup_id!r}, {token!r}, {ttl_ms}"
            )
        moment = self._store._now(args.now)
        q = self._store._queue(args.queue)
        found = self._store._owner_for(q, dedup_id, "unique")  # one lock in the connection (UNIQ-1)
        if found is not None:
            home, owner = found
            if owner.reserved_at(moment) or self._store._owner_job(home, owner, moment) is not None:
                return owner.token == token
            del home.owners[dedup_id]  # stale: it goes, and the reservation is written
            self._store._dedup_next_dropped(home.name, dedup_id, owner, moment)  # DEDUP-18
        q.owners[dedup_id] = _Owner(
            None,
            None,
            moment + timedelta(milliseconds=ttl_ms),
            False,
            token=token,
            kind="unique",
            created_at=moment,
        )
        return True

    async def release_deduplication_key(self, args: ReleaseDeduplicationKey) -> bool:
        validate_queue_name(args.queue)
        q = self._store._queues.get(args.queue)
        owner = None if q is None else q.owners.get(args.dedup_id)
        if q is None or owner is None or owner.token is None or owner.token != args.token:
            return False
        if args.reservation_only and owner.job_key is not None:
            return False  # a job took it over: the write went through
        del q.owners[args.dedup_id]
        self._store._dedup_next_dropped(
            args.queue, args.dedup_id, owner, self._store._now(None)
        )  # DEDUP-18
        return True

    async def add_debounced_job(self, args: AddDebouncedJob) -> DebouncedAdd:
        """lane.add_debounced_job: this call awaits nothing, so the window is read and
        written in one step."""
        validate_queue_name(args.queue)
        new = _parse_spec(args.name, args.data, args.options)
        dedup, max_wait_ms = debounced_add_wait(new.options.parsed, args.max_wait)
        moment = self._store._now(args.now)
        check_series_left([new], moment)
        q = self._store._queue(args.queue)
        owner = q.owners.get(dedup.id)
        holder = None if owner is None else self._store._owner_job(q, owner, moment)
        first, replaced = moment, None
        if owner is not None and holder is not None:
            first = owner.created_at or moment  # the burst goes on
        if owner is not None:  # the window is this dispatch's, or released (flush)
            del q.owners[dedup.id]
        if holder is not None and _replaceable(holder):
            # Through the removal rules; the window row is gone already, so it stays free.
            self._store._remove_jobs([(q, holder)], moment)
            replaced = holder.id
        if owner is not None:
            self._store._dedup_next_dropped(args.queue, dedup.id, owner, moment)  # DEDUP-18
        if max_wait_ms is not None and moment - first >= max_wait_ms * _MILLISECOND:
            document = {**new.options.parsed.document, "delay_ms": 0}
            del document["deduplication"]
            flushed = _NewJob(new.name, new.data, _parse_options(document))
            return DebouncedAdd(
                self._store._insert(args.queue, flushed, moment).snapshot(), replaced
            )
        job = self._store._insert(args.queue, new, moment)
        q.owners[dedup.id].created_at = first
        if replaced is not None:
            self._store._dedup_events(q, job.id, dedup.id, replaced, moment)
        return DebouncedAdd(job.snapshot(), replaced)

    async def expire_dedup_owners(self, args: ExpireDedupOwners) -> int:
        moment = self._store._now(args.now)
        expired = sorted(
            (owner.expires_at, q.name, dedup_id)
            for q in self._store._queues.values()
            for dedup_id, owner in q.owners.items()
            if owner.expires_at is not None
            and owner.expires_at <= moment
            and not (owner.keep_last and self._runs(q.name, owner.job_id, owner.job_key))
        )[: max(args.limit, 0)]
        for _, name, dedup_id in sorted(expired, key=lambda e: (e[1], e[2])):
            owner = self._store._queues[name].owners.pop(dedup_id)
            self._store._dedup_next_dropped(name, dedup_id, owner, moment)  # DEDUP-18
        return len(expired)

    def _runs(self, queue: str, job_id: str | None, key: int | None) -> bool:
        found = None if job_id is None else self._store._find(queue, job_id)
        return found is not None and found[1].key == key and found[1].state == "active"
