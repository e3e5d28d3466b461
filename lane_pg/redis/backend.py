"""``RedisBackend``: the contract's handles over Lua scripts, one queue's keys per call.

Every state change is one script (``lua/<operation>.lua``), so it is atomic as one stored
function call is in PostgreSQL; reads that need one key only (a job's hash, a stream range)
are plain commands. A script touches one queue's keys, which share a hash tag (one cluster
slot), so an operation over several queues (a claim of a worker's queues) is one script per
queue, in the order the operation names them.

Operations the backend does not implement yet raise ``NotImplementedError`` naming them:
the backend is not a URL scheme of ``lane_pg.connect`` until the conformance suite passes
on it whole (``tests/conformance``'s Redis exclusions list what is left).
"""

from __future__ import annotations

import random
from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime
from typing import Any, NoReturn

from redis.asyncio import Redis

from lane_pg.backend import JobQueueBackend
from lane_pg.errors import JobNotFound, LockMismatch
from lane_pg.redis.keys import DEFAULT_PREFIX, QueueKeys, validate_prefix
from lane_pg.redis.rows import epoch_ms
from lane_pg.redis.scripts import Scripts
from lane_pg.types import JSON, validate_queue_name


class RedisBackend(JobQueueBackend):
    """The contract on one Redis server (or cluster), under the key prefix ``prefix``."""

    kind = "redis"

    def __init__(
        self,
        client: Redis,
        *,
        prefix: str = DEFAULT_PREFIX,
        rng: random.Random | None = None,
        owns_client: bool = True,
    ) -> None:
        from lane_pg.redis.dedup import RedisDedup
        from lane_pg.redis.events import RedisEvents
        from lane_pg.redis.jobs import RedisJobs
        from lane_pg.redis.reads import RedisReads
        from lane_pg.redis.repeats import RedisRepeats
        from lane_pg.redis.runs import RedisRuns

        self.client = client
        self.prefix = validate_prefix(prefix)
        self.scripts = Scripts(client)
        self.rng = rng or random.Random()
        self._owns_client = owns_client
        self._registered: set[str] = set()
        self._serve(
            {
                "jobs": RedisJobs(self),
                "runs": RedisRuns(self),
                "events": RedisEvents(self),
                "reads": RedisReads(self),
                "dedup": RedisDedup(self),
                "repeats": RedisRepeats(self),
            },
            default=NotYet(),
        )

    def keys(self, queue: str) -> QueueKeys:
        return QueueKeys(queue, self.prefix)

    @property
    def queues_key(self) -> str:
        """The set of every queue's name (in its own slot: scripts never touch it)."""
        return f"{{{self.prefix}}}:queues"

    async def call(self, script: str, queue: str, arguments: JSON) -> Any:
        """Run ``script`` on ``queue``'s keys (KEYS[1] is its meta key)."""
        return await self.scripts.call(script, [self.keys(queue).meta], arguments)

    async def now_ms(self, now: datetime | None) -> int:
        """``now`` in epoch milliseconds, else the server's clock (TIME), as the scripts
        read it: never this process's clock."""
        given = epoch_ms(now)
        if given is not None:
            return given
        seconds, micros = await self.client.time()
        return int(seconds) * 1000 + int(micros) // 1000

    async def register(self, queue: str) -> None:
        """Record ``queue`` in the set of queues (once per process and queue)."""
        if queue not in self._registered:
            await self.client.sadd(self.queues_key, queue)
            self._registered.add(queue)

    async def close(self) -> None:
        if self._owns_client:
            await self.client.aclose()


class RedisEntity:
    """Base of an entity's Redis implementation: the operations of one handle."""

    def __init__(self, backend: RedisBackend) -> None:
        self._backend = backend

    def __getattr__(self, name: str) -> Callable[[object], Awaitable[NoReturn]]:
        if name.startswith("_"):
            raise AttributeError(name)
        return NotYet().operation(name)


class NotYet:
    """The operations the Redis backend does not implement yet: each raises, naming
    itself, rather than doing part of its work."""

    def operation(self, name: str) -> Callable[[object], Awaitable[NoReturn]]:
        async def refuse(arguments: object) -> NoReturn:
            raise NotImplementedError(f"{name} is not available on the Redis backend yet")

        return refuse

    def __getattr__(self, name: str) -> Callable[[object], Awaitable[NoReturn]]:
        if name.startswith("_"):
            raise AttributeError(name)
        return self.operation(name)


def refused(status: str, queue: str, job_id: str) -> NoReturn:
    """The error of a fenced write's refusal (``lane._owned_job``)."""
    if status == "not_found":
        raise JobNotFound(f"job {job_id} not found in queue {queue}")
    raise LockMismatch(f"lock mismatch for job {job_id} in queue {queue}: the lease was lost")


def by_queue(queues: Sequence[str]) -> dict[str, list[int]]:
    """The positions of each queue's items, queues in first-seen order."""
    groups: dict[str, list[int]] = {}
    for position, queue in enumerate(queues):
        groups.setdefault(validate_queue_name(queue), []).append(position)
    return groups
