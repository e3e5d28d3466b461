"""``MemoryLeader``: the rules of ``lane.acquire_leadership`` / ``lane.resign_leadership``."""

from __future__ import annotations

from datetime import timedelta

from lane_pg.backend.leader import (
    AcquireLeadership,
    ForgetWorker,
    ListWorkers,
    ResignLeadership,
    WorkerHeartbeat,
)
from lane_pg.errors import (
    InvalidOptions,
    ValidationError,
)
from lane_pg.memory._records import _MILLISECOND, _json_copy, _Leadership, _WorkerPresence
from lane_pg.memory._store import MemoryEntity
from lane_pg.types import (
    WorkerInfo,
    to_millis,
)

FORGOTTEN_AFTER = timedelta(hours=1)
"""A worker silent this long is deleted by the next heartbeat (as lane.worker_heartbeat)."""


class MemoryLeader(MemoryEntity):
    """``Leader`` over a ``MemoryBackend``: the rules of ``lane.acquire_leadership`` and
    ``lane.resign_leadership``, on the backend's clock, for workers sharing the backend."""

    async def acquire_leadership(self, args: AcquireLeadership) -> bool:
        role = args.role
        holder = args.holder
        if not role or not holder:
            raise ValidationError(
                f"acquire_leadership needs a role and a holder, got {role!r} and {holder!r}"
            )
        lease_ms = to_millis(args.lease, "lease")
        if lease_ms <= 0:
            raise InvalidOptions(f"lease must be positive, got {lease_ms} ms")
        store = self._store
        moment = store._now(args.now)
        until = moment + lease_ms * _MILLISECOND
        current = store._leaders.get(role)
        if current is None:
            store._leaders[role] = _Leadership(holder, 1, moment, until)
            return True
        if current.holder == holder:
            current.expires_at = until
            return True
        if current.expires_at is None or current.expires_at < moment:
            store._leaders[role] = _Leadership(holder, current.term + 1, moment, until)
            return True
        return False

    async def resign_leadership(self, args: ResignLeadership) -> bool:
        current = self._store._leaders.get(args.role)
        if current is None or current.holder != args.holder or current.expires_at is None:
            return False
        current.expires_at = None
        return True

    async def worker_heartbeat(self, args: WorkerHeartbeat) -> None:
        if not args.worker_id:
            raise ValidationError("worker_heartbeat needs a worker id")
        if args.meta is not None and not isinstance(args.meta, dict):
            raise InvalidOptions(f"meta must be a JSON object, got {args.meta!r}")
        store = self._store
        moment = store._now(args.now)
        known = store._workers.get(args.worker_id)
        store._workers[args.worker_id] = _WorkerPresence(
            hostname=args.hostname or "",
            pid=args.pid,
            queues=tuple(args.queues or ()),
            started_at=moment if known is None else known.started_at,
            heartbeat_at=moment,
            meta=_json_copy(args.meta or {}),
        )
        for worker_id, presence in list(store._workers.items()):
            if presence.heartbeat_at < moment - FORGOTTEN_AFTER:
                del store._workers[worker_id]

    async def forget_worker(self, args: ForgetWorker) -> bool:
        return self._store._workers.pop(args.worker_id, None) is not None

    async def list_workers(self, args: ListWorkers) -> list[WorkerInfo]:
        stale_ms = to_millis(args.stale_after, "stale_after")
        if stale_ms <= 0:
            raise InvalidOptions(f"stale_after must be positive, got {stale_ms} ms")
        store = self._store
        moment = store._now(args.now)
        oldest = moment - stale_ms * _MILLISECOND
        lease = store._leaders.get(args.role)
        leader = (
            lease.holder
            if lease is not None and lease.expires_at is not None and lease.expires_at >= moment
            else None
        )
        live = [
            (presence.started_at, worker_id, presence)
            for worker_id, presence in store._workers.items()
            if presence.heartbeat_at >= oldest
        ]
        return [
            WorkerInfo(
                id=worker_id,
                hostname=presence.hostname,
                pid=presence.pid,
                queues=presence.queues,
                started_at=presence.started_at,
                heartbeat_at=presence.heartbeat_at,
                leader=worker_id == leader,
                meta=_json_copy(presence.meta),
            )
            for _, worker_id, presence in sorted(live, key=lambda item: (item[0], item[1]))
        ]
