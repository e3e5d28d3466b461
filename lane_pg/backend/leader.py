"""The maintenance leader's election (STALL-8): one lease per role on the backend's clock.

The rules every backend follows are in ``lane_pg.backend`` (the package docstring)."""

from __future__ import annotations

from dataclasses import KW_ONLY
from datetime import datetime

from lane_pg.backend.operation import Arguments, Handle, operation
from lane_pg.types import Duration


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

    def __call__(self) -> Leader:
        """This handle: ``backend.leader()`` was how code reached the leader before the
        handles, and still works."""
        return self
