"""Adding jobs (ADD): what an application that only enqueues needs.

The rules every backend follows are in ``lane_pg.backend`` (the package docstring)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Protocol, runtime_checkable

from lane_pg.types import (
    JSON,
    JobOptions,
    JobRow,
    JobSpec,
)


@runtime_checkable
class Producer(Protocol):
    """Adding jobs (ADD): what an application that only enqueues needs."""

    async def add_job(
        self,
        queue: str,
        name: str,
        data: JSON = None,
        options: JobOptions | dict[str, JSON] | None = None,
        *,
        now: datetime | None = None,
    ) -> JobRow:
        """Add one job and return its snapshot (ADD-1..10).

        Without a custom ``job_id`` the id is the next value of one global sequence as a
        decimal string. With a custom id that already exists in the queue, the existing job
        is returned unchanged: no write, no event, no sequence advance (ADD-3). A delay > 0
        stores the job ``delayed`` with ``available_at = now + delay`` and writes
        ``added`` + ``delayed``; otherwise ``waiting`` with ``added`` + ``waiting`` and a
        wake-up for idle claimers (delivered at commit).
        """
        ...

    async def add_jobs(
        self, queue: str, specs: Sequence[JobSpec], *, now: datetime | None = None
    ) -> list[JobRow]:
        """Add many jobs in one operation, results in input order (ADD-11).

        Same rules as ``add`` per spec; a repeated custom id inside the same call returns
        the job the earlier spec created. Any invalid spec rejects the whole call.
        """
        ...
