"""``MemoryLeader``: the rules of ``lane.acquire_leadership`` / ``lane.resign_leadership``."""

from __future__ import annotations

from lane_pg.backend.leader import AcquireLeadership, ResignLeadership
from lane_pg.errors import (
    InvalidOptions,
    ValidationError,
)
from lane_pg.memory._records import _MILLISECOND, _Leadership
from lane_pg.memory._store import MemoryEntity
from lane_pg.types import (
    to_millis,
)


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
