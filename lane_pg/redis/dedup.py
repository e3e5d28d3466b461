"""Deduplication owners (DEDUP, UNIQ, TX-10) on Redis: the owner records of
``lua/includes/owners.lua`` and the ``dedup`` handle, one script per operation.

An owner row lives under its queue's hash tag, so a unique id (``kind: "unique"``) is one
lock per queue here, not per connection as PostgreSQL's ``dedup_owners_unique_id_idx``
makes it: a script may touch one cluster slot only (docs/decisions.md).
"""

from __future__ import annotations

from typing import Any

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
from lane_pg.options import MAX_DURATION_MS, MAX_JOB_ID_LENGTH, ParsedOptions
from lane_pg.redis.backend import RedisEntity
from lane_pg.redis.rows import epoch_ms, job_row
from lane_pg.types import JSON, to_millis, validate_queue_name


def dedup_fields(parsed: ParsedOptions) -> dict[str, JSON] | None:
    """The ``dedup`` part of a spec (``includes/add.lua``), or None."""
    dedup = parsed.deduplication
    if dedup is None:
        return None
    return {
        "id": dedup.id,
        "ttl_ms": dedup.ttl_ms,
        "extend_ttl": dedup.extend_ttl,
        "replace_delayed": dedup.replace_delayed,
        "keep_last": dedup.keep_last_if_active,
        "token": dedup.token,
        "kind": dedup.kind,
    }


class RedisDedup(RedisEntity):
    """The ``dedup`` handle on Redis (DEDUP-14, -15, UNIQ-7..11, TX-10)."""

    async def get_deduplication_job_id(self, args: GetDeduplicationJobId) -> str | None:
        validate_queue_name(args.queue)
        answer = await self._backend.call(
            "get_deduplication_job_id",
            args.queue,
            {"id": args.dedup_id, "now": epoch_ms(args.now)},
        )
        return None if not answer else str(answer)

    async def remove_deduplication_key(self, args: RemoveDeduplicationKey) -> bool:
        validate_queue_name(args.queue)
        return bool(
            await self._backend.call(
                "release_deduplication_key", args.queue, {"id": args.dedup_id, "any": True}
            )
        )

    async def release_deduplication_key(self, args: ReleaseDeduplicationKey) -> bool:
        validate_queue_name(args.queue)
        return bool(
            await self._backend.call(
                "release_deduplication_key",
                args.queue,
                {
                    "id": args.dedup_id,
                    "token": args.token,
                    "reservation_only": args.reservation_only,
                },
            )
        )

    async def reserve_deduplication_key(self, args: ReserveDeduplicationKey) -> bool:
        validate_queue_name(args.queue)
        ttl_ms = to_millis(args.ttl, "reservation ttl")
        if not (
            1 <= len(args.dedup_id) <= MAX_JOB_ID_LENGTH
            and 1 <= len(args.token) <= MAX_JOB_ID_LENGTH
            and 1 <= ttl_ms <= MAX_DURATION_MS
        ):
            raise InvalidOptions(
                "a reservation needs an id and a token of 1-255 characters and a ttl of"
                f" 1..{MAX_DURATION_MS} ms, got {args.dedup_id!r}, {args.token!r}, {ttl_ms}"
            )
        await self._backend.register(args.queue)
        return bool(
            await self._backend.call(
                "reserve_deduplication_key",
                args.queue,
                {
                    "id": args.dedup_id,
                    "token": args.token,
                    "ttl_ms": ttl_ms,
                    "now": epoch_ms(args.now),
                },
            )
        )

    async def expire_dedup_owners(self, args: ExpireDedupOwners) -> int:
        """Queue by queue (each its own slot), until ``limit`` rows went."""
        backend = self._backend
        left = max(args.limit, 0)
        now = await backend.now_ms(args.now)
        gone = 0
        members: Any = await backend.client.smembers(backend.queues_key)
        names = sorted(name.decode() for name in members)
        for queue in names:
            if left <= 0:
                break
            count = int(
                await backend.call("expire_dedup_owners", queue, {"limit": left, "now": now})
            )
            gone += count
            left -= count
        return gone

    async def add_debounced_job(self, args: AddDebouncedJob) -> DebouncedAdd:
        from lane_pg.redis.jobs import checked_specs
        from lane_pg.redis.repeats import call_scheduled, first_ticks, raise_refusal

        validate_queue_name(args.queue)
        [spec] = checked_specs([(args.name, args.data, args.options)])
        _, max_wait_ms = debounced_add_wait(spec.parsed, args.max_wait)
        document = {**spec.parsed.document, "delay_ms": 0}
        del document["deduplication"]
        [flushed] = checked_specs([(args.name, args.data, document)])
        backend = self._backend
        now = await backend.now_ms(args.now)
        cron = first_ticks([(args.name, spec.parsed)], now)
        await backend.register(args.queue)
        answer: Any = await call_scheduled(
            backend,
            "add_debounced_job",
            args.queue,
            {
                "now": now,
                "spec": spec.fields,
                "flushed": flushed.fields,
                "max_wait_ms": max_wait_ms,
                "cron": cron,
            },
        )
        raise_refusal(answer)
        replaced = answer.get("replaced")
        return DebouncedAdd(job_row(args.queue, answer["job"]), replaced or None)
