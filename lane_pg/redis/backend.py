"""``RedisBackend``: the contract's handles over Lua scripts, one queue's keys per call.

Every state change is one script (``lua/<operation>.lua``), so it is atomic as one stored
function call is in PostgreSQL; reads that need one key only (a job's hash, a stream range)
are plain commands. A script touches one queue's keys, which share a hash tag (one cluster
slot), so an operation over several queues (a claim of a worker's queues) is one script per
queue, in the order the operation names them. A flow, batch or chain across queues is
the exception: its scripts reach the other queues' keys too (``lua/includes/job.lua``:
``lane_in``), on a standalone server, or on a cluster when they share a slot
(``check_slots``).

On a Redis Cluster (``redis+cluster://``) the client is redis-py's ``RedisCluster``, which
sends each call to the node of its first key's slot; a read over several queues' keys is
then one pipeline per node rather than one MULTI (``snapshot``).
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime
from typing import Any, NoReturn

from redis.asyncio.client import Pipeline
from redis.asyncio.cluster import ClusterPipeline, RedisCluster
from redis.crc import key_slot

from lane_pg.backend import JobQueueBackend, OperationCall, WakeupSource
from lane_pg.backend.url import redis_cluster_url, redis_url_parts
from lane_pg.errors import InvalidOptions, JobNotFound, LockMismatch
from lane_pg.redis.keys import DEFAULT_PREFIX, QueueKeys, validate_prefix
from lane_pg.redis.rows import epoch_ms
from lane_pg.redis.scripts import Scripts
from lane_pg.redis.server import RedisClient
from lane_pg.types import JSON, validate_queue_name


class RedisBackend(JobQueueBackend):
    """The contract on one Redis server (or cluster), under the key prefix ``prefix``."""

    kind = "redis"

    def __init__(
        self,
        client: RedisClient,
        *,
        prefix: str = DEFAULT_PREFIX,
        rng: random.Random | None = None,
        owns_client: bool = True,
    ) -> None:
        from lane_pg.redis.batches import RedisBatches
        from lane_pg.redis.cleanup import RedisCleanup
        from lane_pg.redis.dedup import RedisDedup
        from lane_pg.redis.events import RedisEvents
        from lane_pg.redis.flows import RedisFlows
        from lane_pg.redis.jobs import RedisJobs
        from lane_pg.redis.leader import RedisLeader
        from lane_pg.redis.limits import RedisLimits
        from lane_pg.redis.locks import RedisLocks
        from lane_pg.redis.logs import RedisLogs
        from lane_pg.redis.maintenance import RedisMaintenance
        from lane_pg.redis.metrics import RedisMetrics
        from lane_pg.redis.queues import RedisQueues
        from lane_pg.redis.reads import RedisReads
        from lane_pg.redis.repeats import RedisRepeats
        from lane_pg.redis.runs import RedisRuns

        self.client = client
        self.cluster = isinstance(client, RedisCluster)
        """On a Redis Cluster: reads of several queues are no MULTI (``snapshot``)."""
        self.prefix = validate_prefix(prefix)
        self.scripts = Scripts(client, hold=owns_client)
        self.rng = rng or random.Random()
        self._owns_client = owns_client
        self._registered: set[str] = set()
        self._metas: dict[str, str] = {}
        self._cluster: bool | None = True if self.cluster else None
        """Cluster mode as ``is_cluster`` read it: known for a cluster client, else read
        once (a plain client of a one-node cluster, in tests, reports it too)."""
        self._serve(
            {
                "jobs": RedisJobs(self),
                "logs": RedisLogs(self),
                "runs": RedisRuns(self),
                "events": RedisEvents(self),
                "reads": RedisReads(self),
                "queues": RedisQueues(self),
                "limits": RedisLimits(self),
                "cleanup": RedisCleanup(self),
                "maintenance": RedisMaintenance(self),
                "metrics": RedisMetrics(self),
                "leader": RedisLeader(self),
                "locks": RedisLocks(self),
                "dedup": RedisDedup(self),
                "repeats": RedisRepeats(self),
                "flows": RedisFlows(self),
                "batches": RedisBatches(self),
            }
        )
        self.hooks.add(honour_cancellation)

    async def is_cluster(self) -> bool:
        """Whether the server runs Redis Cluster (``INFO cluster``, read once): there a
        script reaches one slot only, so a flow, batch or chain across slots is refused."""
        if self._cluster is None:
            info: Any = await self.client.info("cluster")
            self._cluster = str(info.get("cluster_enabled", 0)) == "1"
        return self._cluster

    async def check_slots(self, queues: Sequence[str], what: str) -> None:
        """On Redis Cluster, ``InvalidOptions`` naming ``queues`` when they lie in more
        than one slot (one script cannot reach two); on a standalone server any go."""
        if not await self.is_cluster():
            return
        slots = {key_slot(self.keys(queue).meta.encode()) for queue in queues}
        if len(slots) > 1:
            names = ", ".join(dict.fromkeys(queues))
            raise InvalidOptions(
                f"{what} spans queues in different Redis Cluster slots ({names}): a script"
                " cannot reach two slots, so on Redis Cluster every queue of one flow, batch"
                " or chain (a callback queue included) must hash to one slot, e.g. by"
                " sharing a name in braces"
            )

    def keys(self, queue: str) -> QueueKeys:
        return QueueKeys(queue, self.prefix)

    @property
    def queues_key(self) -> str:
        """The set of every queue's name (in its own slot: scripts never touch it)."""
        return f"{{{self.prefix}}}:queues"

    async def call(
        self, script: str, queue: str, arguments: JSON, others: Sequence[str] = ()
    ) -> Any:
        """Run ``script`` on ``queue``'s keys (KEYS[1] is its meta key); ``others``: the
        queues a flow's script also reaches, their meta keys after it."""
        keys = [self._meta(queue)]
        if others:
            keys += [self._meta(name) for name in others]
        return await self.scripts.call(script, keys, arguments)

    def _meta(self, queue: str) -> str:
        """``queue``'s meta key, the first of every script's (built once per queue)."""
        key = self._metas.get(queue)
        if key is None:
            key = self._metas[queue] = self.keys(queue).meta
        return key

    async def now_ms(self, now: datetime | None) -> int:
        """``now`` in epoch milliseconds, else the server's clock (TIME), as the scripts
        read it: never this process's clock."""
        given = epoch_ms(now)
        if given is not None:
            return given
        seconds, micros = await self.client.time()
        return int(seconds) * 1000 + int(micros) // 1000

    def snapshot(self) -> Pipeline | ClusterPipeline:
        """A pipeline of reads over several queues' keys: one MULTI (one instant) on one
        server; on a cluster, where a MULTI holds keys of one slot only, a plain pipeline
        (each node's reads together, the nodes' not at one instant)."""
        return self.client.pipeline(transaction=not self.cluster)

    @property
    def settings_key(self) -> str:
        """The connection-wide settings (``paused_all`` and its generation
        ``pause_epoch``, ``restart_at``), in the slot of ``queues_key``."""
        return f"{{{self.prefix}}}:settings"

    async def register(self, queue: str) -> None:
        """Record ``queue`` in the set of queues (once per process and queue) and give it
        the connection-wide pause as it stands (PAUSE-4, ``lane_pg.redis.queues``)."""
        if queue not in self._registered:
            await self.take_switch(queue, await self.enlist(queue))
            self._registered.add(queue)

    def wakeups(
        self, queues: Sequence[str] | None, *, name: str, health_interval: float
    ) -> WakeupSource:
        """A ``BZPOPMIN`` on the markers of ``queues`` (``lane_pg.redis.wakeups``); its
        block window is ``health_interval``, so a dead connection shows within it."""
        from lane_pg.redis.wakeups import RedisWakeups

        return RedisWakeups(self, queues, name=name, block=min(health_interval, 5.0))

    async def enlist(self, queue: str) -> tuple[bool, int] | None:
        """Add ``queue`` to the set of queues and read the connection-wide pause, in one
        MULTI: a ``pause_all`` either finds the queue in the set or was read here. The
        switch as (paused, generation), None when it was never used."""
        async with self.client.pipeline(transaction=True) as pipe:
            pipe.sadd(self.queues_key, queue)
            pipe.hmget(self.settings_key, ["paused_all", "pause_epoch"])
            _, (paused, epoch) = await pipe.execute()
        return None if epoch is None else (paused == b"1", int(epoch))

    async def take_switch(self, queue: str, switch: tuple[bool, int] | None) -> None:
        """Give ``queue`` the switch ``enlist`` read (a later flip's value stays)."""
        if switch is not None:
            paused, epoch = switch
            await self.call("pause_all", queue, {"paused": paused, "epoch": epoch, "wake": False})

    async def unregister(self, queue: str) -> None:
        """Drop ``queue`` from the set of queues once it is gone (obliterated), unless a
        job added since has created it again."""
        await self.client.srem(self.queues_key, queue)
        self._registered.discard(queue)
        if await self.client.exists(self.keys(queue).meta):
            await self.register(queue)

    async def close(self) -> None:
        await self.scripts.close()
        if self._owns_client:
            await self.client.aclose()


async def open_redis(
    url: str,
    *,
    schema: str = "lane",
    min_size: int = 1,
    max_size: int = 10,
    check_schema: bool = True,
) -> RedisBackend:
    """``RedisBackend`` for ``redis://host:port/db?prefix=NAME`` (``lane_pg.connect``):
    the server refused unless it keeps every key (``noeviction``) and runs a version the
    scripts need (``lane_pg.redis.server``). ``prefix`` (default ``lane``) puts the
    queues' keys under ``{NAME:queue}``; PostgreSQL's ``schema`` does not apply.
    ``redis+cluster://host:port?prefix=NAME`` opens a Redis Cluster through one of its
    nodes, every master checked."""
    from lane_pg.redis.server import open_client, open_cluster_client

    base, prefix = redis_url_parts(url)
    validate_prefix(prefix)
    cluster = redis_cluster_url(base)
    client: RedisClient
    if cluster is not None:
        client = await open_cluster_client(cluster, max_connections=max(max_size, 1))
    else:
        client = await open_client(base, max_connections=max(max_size, 1))
    return RedisBackend(client, prefix=prefix)


async def honour_cancellation(call: OperationCall, proceed: Callable[[], Awaitable[Any]]) -> Any:
    """Every operation: a call whose task is cancelled while it runs ends in
    ``CancelledError``. redis-py's asyncio client can return normally (or raise an error
    of its own) from a command it was cancelled in, and a loop that logs errors and goes
    on then outlived its worker's stop (the worker waited 30 s for its maintenance
    loops): before this, a script of 30 stops hung within its first 20, after it none
    did. Only a cancellation that arrives during the call counts: a task that caught an
    earlier one and goes on (a forced stop giving its job back) is let through."""
    task = asyncio.current_task()
    before = 0 if task is None else task.cancelling()
    try:
        result = await proceed()
    except Exception:
        _raise_if_cancelled(task, before)
        raise
    _raise_if_cancelled(task, before)
    return result


def _raise_if_cancelled(task: asyncio.Task[Any] | None, before: int) -> None:
    if task is not None and task.cancelling() > before:
        raise asyncio.CancelledError


class RedisEntity:
    """Base of an entity's Redis implementation: the operations of one handle."""

    def __init__(self, backend: RedisBackend) -> None:
        self._backend = backend


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
