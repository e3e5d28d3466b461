"""The ``null`` driver (DRV-4): every push is discarded without running.

A push returns a fresh id (so callers that log it still work) and writes nothing; counts
are 0, listings empty, ``pop`` finds nothing and ``clear`` removes nothing, because that is
literally true (CONN-14). A settle can only be of a reservation this driver never issued,
so it is stale.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence

from lane_pg.facade.driver import (
    DEFAULT_LISTING_LIMIT,
    STALE,
    Reservation,
    Settlement,
    SettleResult,
    SettleSpellings,
)
from lane_pg.facade.envelope import Envelope
from lane_pg.types import JobRow


class NullDriver(SettleSpellings):
    """Discards pushes (tests of code that dispatches, a disabled queue)."""

    filters_queues = True

    @property
    def driver_name(self) -> str:
        return "null"

    def __repr__(self) -> str:
        return "NullDriver()"

    async def push(self, envelope: Envelope, *, conn: object | None = None) -> str:
        return envelope.job_id or str(uuid.uuid4())

    async def bulk_push(
        self, envelopes: Sequence[Envelope], *, conn: object | None = None
    ) -> list[str]:
        return [await self.push(envelope) for envelope in envelopes]

    async def size(self, queue: str | None = None) -> int:
        return 0

    async def pending_size(self, queue: str | None = None) -> int:
        return 0

    async def delayed_size(self, queue: str | None = None) -> int:
        return 0

    async def reserved_size(self, queue: str | None = None) -> int:
        return 0

    async def pending_jobs(
        self, queue: str | None = None, *, limit: int = DEFAULT_LISTING_LIMIT
    ) -> list[JobRow]:
        return []

    async def delayed_jobs(
        self, queue: str | None = None, *, limit: int = DEFAULT_LISTING_LIMIT
    ) -> list[JobRow]:
        return []

    async def reserved_jobs(
        self, queue: str | None = None, *, limit: int = DEFAULT_LISTING_LIMIT
    ) -> list[JobRow]:
        return []

    async def clear(self, queue: str | None = None) -> int:
        return 0

    async def pop(self) -> Reservation | None:
        return None

    async def pop_from(self, queues: Sequence[str]) -> Reservation | None:
        return None

    async def settle(self, reservation: Reservation, outcome: Settlement) -> SettleResult:
        return STALE

    async def close(self) -> None:
        return None
