"""The workers of a backend: the maintenance leader's election (STALL-8), one lease per
role on the backend's clock, and the workers' presence (heartbeats, for ``workers``).

The rules every backend follows are in ``lane_pg.backend`` (the package docstring)."""

from __future__ import annotations

from dataclasses import KW_ONLY
from datetime import datetime

from lane_pg.backend.operation import Arguments, Handle, operation
from lane_pg.types import JSON, Duration, WorkerInfo


class AcquireLeadership(Arguments[bool]):
    """Take or renew ``role`` for ``holder`` until ``now + lease``: True when ``holder``
    holds it afterwards (it was free, expired before ``now``, or already its own),
    False when another holder's lease is still running (nothing changes then)."""

    role: str
    holder: str
    lease: Duration
    _: KW_ONLY
    now: datetime | None = None


class ResignLeadership(Arguments[bool]):
    """Give ``role`` up at once if ``holder`` holds it (True), so the next candidate
    need not wait for the lease to run out; False when it held nothing."""

    role: str
    holder: str


class WorkerHeartbeat(Arguments[None]):
    """Say that worker ``worker_id`` is alive now: its row is created (``started_at`` =
    now) or refreshed (``heartbeat_at`` = now, ``queues`` and ``meta`` replaced). Rows not
    refreshed for an hour are deleted by any heartbeat (workers killed without a word)."""

    worker_id: str
    hostname: str
    pid: int | None
    queues: list[str]
    _: KW_ONLY
    meta: dict[str, JSON] | None = None
    now: datetime | None = None


class ForgetWorker(Arguments[bool]):
    """Delete worker ``worker_id``'s row (a worker that stops); False when there was none."""

    worker_id: str


MAINTENANCE_ROLE = "maintenance"
"""The role the workers of one backend (one schema) compete for, to run its upkeep."""


class ListWorkers(Arguments[list[WorkerInfo]]):
    """The workers whose last heartbeat is at most ``stale_after`` old, oldest start first,
    each marked ``leader`` when it holds ``role``'s running lease."""

    stale_after: Duration
    role: str = MAINTENANCE_ROLE
    _: KW_ONLY
    now: datetime | None = None


class Leader(Handle, name="leader"):
    """Elects one holder of a role (the workers' maintenance) among the processes of a
    backend: a lease with an expiry on the backend's clock, renewed by the live holder and
    taken over by anyone once it lapsed.

    A holder that freezes (SIGSTOP, a long pause) stops renewing, so its lease runs out
    and another worker takes the role over; nothing else has to notice it died. Holding
    the role grants nothing by itself: the work a leader does must be safe to run twice
    (every maintenance call is), since a resumed old holder may run one more pass before
    it learns it lost the role.
    """

    __slots__ = ()

    acquire_leadership = operation(AcquireLeadership)
    resign_leadership = operation(ResignLeadership)
    worker_heartbeat = operation(WorkerHeartbeat)
    forget_worker = operation(ForgetWorker)
    list_workers = operation(ListWorkers)

    def __call__(self) -> Leader:
        """This handle: ``backend.leader()`` was how code reached the leader before the
        handles, and still works."""
        return self
