"""The workers of a Redis backend: the maintenance leader's election (STALL-8) and the
workers' presence (``python -m lane_pg workers``).

Neither belongs to a queue, so each has hash tags of its own under the backend's prefix:
a role is the hash ``{prefix:leader:<role>}`` (one key, one slot per role), the workers'
presence the keys of ``{prefix:workers}`` (``lua/worker_heartbeat.lua``). Times are the
caller's ``now`` or the server's clock, as for jobs.
"""

from __future__ import annotations

import json
from typing import Any

from lane_pg.backend.leader import (
    AcquireLeadership,
    ForgetWorker,
    ListWorkers,
    ResignLeadership,
    WorkerHeartbeat,
)
from lane_pg.errors import InvalidOptions, ValidationError
from lane_pg.redis.backend import RedisEntity
from lane_pg.redis.rows import dump, epoch_ms, from_ms
from lane_pg.types import WorkerInfo, check_json, to_millis


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


class RedisLeader(RedisEntity):
    """The ``leader`` handle on Redis."""

    def _role_key(self, role: str) -> str:
        return f"{{{self._backend.prefix}:leader:{role}}}"

    @property
    def _workers_key(self) -> str:
        """KEYS[1] of the presence scripts; ``:started`` and ``:heartbeats`` share its tag."""
        return f"{{{self._backend.prefix}:workers}}:info"

    async def _run(self, script: str, key: str, arguments: dict[str, Any]) -> Any:
        return await self._backend.scripts.call(script, [key], arguments)

    async def acquire_leadership(self, args: AcquireLeadership) -> bool:
        if not args.role or not args.holder:
            raise ValidationError(
                "acquire_leadership needs a role and a holder,"
                f" got {args.role!r} and {args.holder!r}"
            )
        lease_ms = to_millis(args.lease, "lease")
        if lease_ms <= 0:
            raise InvalidOptions(f"lease must be positive, got {lease_ms} ms")
        arguments = {"holder": args.holder, "lease_ms": lease_ms, "now": epoch_ms(args.now)}
        return bool(await self._run("acquire_leadership", self._role_key(args.role), arguments))

    async def resign_leadership(self, args: ResignLeadership) -> bool:
        if not args.role:
            return False
        key = self._role_key(args.role)
        return bool(await self._run("resign_leadership", key, {"holder": args.holder}))

    async def worker_heartbeat(self, args: WorkerHeartbeat) -> None:
        if not args.worker_id:
            raise ValidationError("worker_heartbeat needs a worker id")
        if args.meta is not None and not isinstance(args.meta, dict):
            raise InvalidOptions(f"meta must be a JSON object, got {args.meta!r}")
        info = {
            "hostname": args.hostname or "",
            "pid": args.pid,
            "queues": list(args.queues or ()),
            "meta": check_json(args.meta or {}, "meta"),
        }
        arguments = {"id": args.worker_id, "info": dump(info), "now": epoch_ms(args.now)}
        await self._run("worker_heartbeat", self._workers_key, arguments)

    async def forget_worker(self, args: ForgetWorker) -> bool:
        return bool(await self._run("forget_worker", self._workers_key, {"id": args.worker_id}))

    async def list_workers(self, args: ListWorkers) -> list[WorkerInfo]:
        stale_ms = to_millis(args.stale_after, "stale_after")
        if stale_ms <= 0:
            raise InvalidOptions(f"stale_after must be positive, got {stale_ms} ms")
        now = await self._backend.now_ms(args.now)
        rows = await self._run("list_workers", self._workers_key, {"oldest": now - stale_ms})
        # The role's lease is another slot's key: read after the workers, judged at `now`.
        holder, expires = await self._backend.client.hmget(
            self._role_key(args.role), ["holder", "expires_at"]
        )
        leader = (
            _text(holder)
            if holder is not None and expires is not None and int(expires) >= now
            else None
        )
        workers: list[WorkerInfo] = []
        for worker_id, info_text, started, beat in rows:
            info = json.loads(info_text)
            workers.append(
                WorkerInfo(
                    id=worker_id,
                    hostname=info["hostname"],
                    pid=info["pid"],
                    queues=tuple(info["queues"]),
                    started_at=from_ms(int(started)),
                    heartbeat_at=from_ms(int(float(beat))),
                    leader=worker_id == leader,
                    meta=info["meta"],
                )
            )
        return sorted(workers, key=lambda worker: (worker.started_at, worker.id))
