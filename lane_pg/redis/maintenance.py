"""Upkeep the workers' maintenance leader runs on Redis (STALL, delayed promotion, EVS-3,
RET): one script per queue, since each queue is its own cluster slot; ``queues=None`` is
every queue of the backend's queue set, in name order."""

from __future__ import annotations

from collections.abc import Sequence

from lane_pg.backend.maintenance import PromoteDueJobs, PruneFinished, RecoverStalled, TrimEvents
from lane_pg.errors import InvalidQueueName
from lane_pg.redis.backend import RedisBackend, RedisEntity
from lane_pg.redis.queues import KEEP_ALL
from lane_pg.redis.repeats import call_scheduled
from lane_pg.types import (
    DEFAULT_KEEP_COMPLETED,
    DEFAULT_KEEP_FAILED,
    StalledOutcome,
    validate_prune_batch,
    validate_queue_name,
)


async def selected_queues(backend: RedisBackend, queues: Sequence[str] | None) -> list[str]:
    """The queues an upkeep call covers: every known queue in name order when None, else
    the given names in their order (once each); a name that cannot be a queue's is
    skipped, as an unknown queue is (it holds nothing to act on)."""
    if queues is None:
        members = await backend.client.smembers(backend.queues_key)
        return sorted(m.decode() if isinstance(m, bytes) else str(m) for m in members)
    named: list[str] = []
    for queue in dict.fromkeys(queues):
        try:
            named.append(validate_queue_name(queue))
        except InvalidQueueName:
            continue
    return named


class RedisMaintenance(RedisEntity):
    """The ``maintenance`` handle on Redis."""

    async def recover_stalled(self, args: RecoverStalled) -> list[StalledOutcome]:
        backend = self._backend
        now = await backend.now_ms(args.now)  # one instant for every queue of the pass
        outcomes: list[StalledOutcome] = []
        for queue in await selected_queues(backend, args.queues):
            recovered = await call_scheduled(
                backend,
                "recover_stalled",
                queue,
                {"now": now, "max_stalled_count": args.max_stalled_count},
            )
            outcomes += [StalledOutcome(queue, job_id, state) for job_id, state in recovered]
        return outcomes

    async def promote_due_jobs(self, args: PromoteDueJobs) -> int:
        backend = self._backend
        now = await backend.now_ms(args.now)
        promoted = 0
        for queue in await selected_queues(backend, args.queues):
            promoted += int(await backend.call("promote_due_jobs", queue, {"now": now}))
        return promoted

    async def trim_events(self, args: TrimEvents) -> int:
        backend = self._backend
        trimmed = 0
        for queue in await selected_queues(backend, args.queues):
            trimmed += int(await backend.call("trim_events", queue, {}))
        return trimmed

    async def prune_finished(self, args: PruneFinished) -> int:
        if args.queues is not None:
            for queue in args.queues:
                validate_queue_name(queue)
        batch = validate_prune_batch(args.batch)
        backend = self._backend
        defaults = {"completed": DEFAULT_KEEP_COMPLETED, "failed": DEFAULT_KEEP_FAILED}
        deleted = 0
        for queue in await selected_queues(backend, args.queues):
            deleted += int(
                await backend.call(
                    "prune_finished",
                    queue,
                    {"batch": batch, "defaults": defaults, "keep_all": KEEP_ALL},
                )
            )
        return deleted
