"""Removing many jobs on Redis (MGMT-17..22): one script per queue for a drain, a clean or
a clear (``lua/drain_jobs.lua``, ``clean_jobs.lua``, ``clear_queues.lua``), an obliterate
in bounded steps (``obliterate_queue.lua``), and the orphaned log lines found by SCAN,
then the owner rows and series left without their job, queue by queue
(``remove_orphaned.lua``). The arguments are checked here, with the checks the other
backends make, before any script runs."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from redis.asyncio.cluster import RedisCluster

from lane_pg.backend.cleanup import (
    CleanJobs,
    ClearQueues,
    DrainJobs,
    ObliterateQueue,
    RemoveOrphaned,
    clear_queue_names,
)
from lane_pg.errors import JobStateConflict
from lane_pg.redis.backend import RedisBackend, RedisEntity
from lane_pg.redis.rows import epoch_ms, job_row, script_list
from lane_pg.types import (
    JobRow,
    to_millis,
    validate_clean_state,
    validate_count,
    validate_flag,
    validate_queue_name,
)

OBLITERATE_CHUNK = 1000
"""Jobs deleted per step of an obliterate: one script call, so a large queue never blocks
the server for its whole length (as lane._remove_in_chunks's 1,000 bound a statement)."""
ORPHAN_SCAN = 1000
"""Keys a SCAN call looks at when ``remove_orphaned`` is given no ``count``."""
_NO_LIMIT = 2**31 - 1


async def backend_queues(backend: RedisBackend) -> list[bytes]:
    """Every queue's name the backend has registered."""
    names: Any = await backend.client.smembers(backend.queues_key)
    return list(names)


class RedisCleanup(RedisEntity):
    """The ``cleanup`` handle on Redis."""

    async def drain_jobs(self, args: DrainJobs) -> int:
        validate_queue_name(args.queue)
        validate_flag(args.delayed, "delayed")
        removed = await self._backend.call(
            "drain_jobs", args.queue, {"delayed": args.delayed, "now": epoch_ms(args.now)}
        )
        return int(removed)

    async def clean_jobs(self, args: CleanJobs) -> list[JobRow]:
        validate_queue_name(args.queue)
        state = validate_clean_state(args.state)
        grace_ms = to_millis(args.grace, "grace")
        limit = validate_count(args.limit, "limit")
        await self._backend.register(args.queue)  # the `cleaned` event creates the queue
        hashes = await self._backend.call(
            "clean_jobs",
            args.queue,
            {"state": state, "grace_ms": grace_ms, "limit": limit, "now": epoch_ms(args.now)},
        )
        return [job_row(args.queue, fields) for fields in script_list(hashes)]

    async def clear_queues(self, args: ClearQueues) -> int:
        names = clear_queue_names(args.queues)
        if names is None:
            members: Any = await self._backend.client.smembers(self._backend.queues_key)
            names = [member.decode() for member in members]
        # One script per queue, in name order: each queue's clear is atomic, the whole is
        # not (one script cannot touch two queues' hash tags).
        now = await self._backend.now_ms(args.now)
        removed = 0
        for queue in sorted(set(names)):
            await self._backend.register(queue)  # its `cleaned` event creates the queue
            removed += int(await self._backend.call("clear_queues", queue, {"now": now}))
        return removed

    async def obliterate_queue(self, args: ObliterateQueue) -> int:
        validate_queue_name(args.queue)
        validate_flag(args.force, "force")
        backend = self._backend
        await backend.register(args.queue)  # the pause creates the queue, as pause_queue does
        now = epoch_ms(args.now)
        removed = 0
        first = True
        while True:
            answer = await backend.call(
                "obliterate_queue",
                args.queue,
                {"first": first, "force": args.force, "now": now, "chunk": OBLITERATE_CHUNK},
            )
            if answer[0] == "active":
                raise JobStateConflict(
                    f"queue {args.queue} has active jobs: it cannot be obliterated unless"
                    " forced (pause it and let them finish, or force)"
                )
            removed += int(answer[1])
            if answer[0] == "done":
                break
            first = False
        await backend.unregister(args.queue)
        return removed

    async def remove_orphaned(self, args: RemoveOrphaned) -> int:
        count = validate_count(args.count, "count") or ORPHAN_SCAN
        left = validate_count(args.limit, "limit") or None
        removed = 0
        async for queue, ids in self._log_keys(count):
            if left is not None and removed >= left:
                break
            limit = _NO_LIMIT if left is None else left - removed
            removed += int(
                await self._backend.call(
                    "remove_orphaned", queue, {"part": "logs", "ids": ids, "limit": limit}
                )
            )
        # Then owner rows of every queue, then series, each by (queue, key), as in SQL.
        now = epoch_ms(args.now)
        queues = sorted(raw.decode() for raw in await backend_queues(self._backend))
        for part in ("owners", "series"):
            for queue in queues:
                if left is not None and removed >= left:
                    return removed
                limit = _NO_LIMIT if left is None else left - removed
                removed += int(
                    await self._backend.call(
                        "remove_orphaned", queue, {"part": part, "limit": limit, "now": now}
                    )
                )
        return removed

    async def _log_keys(self, count: int) -> AsyncIterator[tuple[str, list[str]]]:
        """The job ids of the log lists of every queue, as (queue, ids) per SCAN call
        and queue. A job id may hold any character, so the key is split at the first
        ``}`` (a queue name has none) and at the ``:logs:`` right after it. On a
        cluster, each master's keys are scanned in turn (a SCAN sees one node's)."""
        head = f"{{{self._backend.prefix}:"
        client = self._backend.client
        nodes: list[Any] = (
            sorted(client.get_primaries(), key=lambda node: node.name)
            if isinstance(client, RedisCluster)
            else [None]
        )
        for node in nodes:
            target: dict[str, Any] = {} if node is None else {"target_nodes": node}
            cursor: Any = 0
            keys: Any
            while True:
                cursor, keys = await client.scan(
                    cursor, match=f"{head}*}}:logs:*", count=count, **target
                )
                if isinstance(cursor, dict):  # a cluster client's: {node name: cursor}
                    cursor = next(iter(cursor.values()))
                found: dict[str, list[str]] = {}
                for raw in keys:
                    key = raw.decode()
                    queue, _, rest = key[len(head) :].partition("}")
                    if rest.startswith(":logs:"):
                        found.setdefault(queue, []).append(rest[len(":logs:") :])
                for queue, ids in found.items():
                    yield queue, ids
                if cursor == 0:
                    break
