"""The listings and ``clear`` of the default connection (CONN-9, DRV-5, A16), a mixin of
``QueueFacade`` beside its counts: ``Q.pending_jobs("billing")`` reads the default
connection, ``Q.connection("reports").pending_jobs()`` another one. A driver that cannot
list raises ``NotImplementedError`` (CONN-14)."""

from __future__ import annotations

from lane_pg.facade.connection import DEFAULT_LISTING_LIMIT, Connection
from lane_pg.types import JobRow


class ConnectionReads:
    """Listings and ``clear`` on ``self.driver()`` (the default connection)."""

    def driver(self) -> Connection:
        raise NotImplementedError

    async def pending_jobs(
        self, queue: str | None = None, *, limit: int = DEFAULT_LISTING_LIMIT
    ) -> list[JobRow]:
        """Jobs of ``queue`` (every queue when None) ready to run, at most ``limit``:
        waiting ones, then delayed ones whose time has come (the next claim promotes them),
        the jobs ``pending_size`` counts (INSP-5)."""
        return await self.driver().pending_jobs(queue, limit=limit)

    async def delayed_jobs(
        self, queue: str | None = None, *, limit: int = DEFAULT_LISTING_LIMIT
    ) -> list[JobRow]:
        """Delayed jobs whose time has not come, at most ``limit``: the jobs
        ``delayed_size`` counts (a due one is pending)."""
        return await self.driver().delayed_jobs(queue, limit=limit)

    async def reserved_jobs(
        self, queue: str | None = None, *, limit: int = DEFAULT_LISTING_LIMIT
    ) -> list[JobRow]:
        return await self.driver().reserved_jobs(queue, limit=limit)

    async def clear(self, queue: str | None = None) -> int:
        """Remove the clearable jobs (A16: never a validly leased one); returns the count."""
        return await self.driver().clear(queue)
