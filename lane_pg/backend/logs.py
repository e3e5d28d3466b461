"""A job's log lines (MGMT-13..15).

The rules every backend follows are in ``lane_pg.backend`` (the package docstring)."""

from __future__ import annotations

from datetime import datetime

from lane_pg.backend.operation import Handle, operation
from lane_pg.types import (
    LogPage,
)


class Logs(Handle, name="logs"):
    """A job's log lines (MGMT-13..15)."""

    __slots__ = ()

    @operation
    async def add_job_log(
        self,
        queue: str,
        job_id: str,
        message: str,
        *,
        keep: int | None = None,
        now: datetime | None = None,
        token: str | None = None,
    ) -> int:
        """Append ``{ts, message}`` to the job's log, keep only the newest ``keep`` when
        given, and return the number of entries kept (MGMT-13). No event. ``token`` fences
        it as in ``update_job_data``."""

    @operation
    async def get_job_logs(
        self, queue: str, job_id: str, start: int = 0, end: int = -1, *, asc: bool = True
    ) -> LogPage:
        """A window of the log with inclusive, possibly negative indices; ``asc=False``
        indexes from the newest (MGMT-14). Missing job: empty page, count 0."""

    @operation
    async def clear_job_logs(self, queue: str, job_id: str, keep: int = 0) -> None:
        """Delete the log, or all but the newest ``keep`` entries (MGMT-15)."""
