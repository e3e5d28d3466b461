"""Optional capabilities beside the protocol: what some backends can do and others need not.

The worker checks for them with ``isinstance`` instead of widening ``JobQueueBackend``, so
the memory backend (and a Redis backend) stays free of methods that mean nothing to it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    from lane_pg.backend import JobQueueBackend


@runtime_checkable
class ReclaimsSpace(Protocol):
    """A backend whose tables the leader vacuums (PostgreSQL; the memory backend has none)."""

    async def dead_tuples(self) -> dict[str, int]:
        """Dead row versions per table of the backend's schema."""
        ...

    async def vacuum(self, table: str) -> int:
        """VACUUM one table without waiting for its lock; the dead row versions left."""
        ...


@runtime_checkable
class HasDedicatedConnection(Protocol):
    """A backend that can lend a sequential caller a connection of its own (PostgreSQL)."""

    async def dedicated(self) -> JobQueueBackend | None:
        """A backend over one connection of its own, which the caller closes; or None."""
        ...


@runtime_checkable
class WakeupSource(Protocol):
    """What wakes an idle worker early (PostgreSQL: LISTEN on its own connection).

    Only a speed-up: a worker also polls, so a lost wake-up costs latency, never a job.
    """

    async def start(self) -> None:
        """Connect and start listening (raises when the backend is unreachable)."""
        ...

    async def close(self) -> None: ...

    def wake(self) -> None:
        """Wake the waiting worker from inside the process (a slot freed, a stop)."""
        ...

    async def wait(self, timeout: float | None) -> bool:  # noqa: ASYNC109 (bounded poll)
        """Wait until woken or ``timeout`` seconds passed; True when woken."""
        ...
