"""A job's log lines (MGMT-13..15).

The rules every backend follows are in ``lane_pg.backend`` (the package docstring)."""

from __future__ import annotations

from dataclasses import KW_ONLY
from datetime import datetime

from lane_pg.backend.operation import Arguments, Handle, operation
from lane_pg.types import (
    LogPage,
)


class AddJobLog(Arguments[int]):
    """Append ``{ts, message}`` to the job's log, keep only the newest ``keep`` when
    given, and return the number of entries kept (MGMT-13). No event. ``token`` fences
    it as in ``update_job_data``."""

    queue: str
    job_id: str
    message: str
    _: KW_ONLY
    keep: int | None = None
    now: datetime | None = None
    token: str | None = None


class GetJobLogs(Arguments[LogPage]):
    """A window of the log with inclusive, possibly negative indices; ``asc=False``
    indexes from the newest (MGMT-14). Missing job: empty page, count 0."""

    queue: str
    job_id: str
    start: int = 0
    end: int = -1
    _: KW_ONLY
    asc: bool = True


class ClearJobLogs(Arguments[None]):
    """Delete the log, or all but the newest ``keep`` entries (MGMT-15)."""

    queue: str
    job_id: str
    keep: int = 0


class Logs(Handle, name="logs"):
    """A job's log lines (MGMT-13..15)."""

    __slots__ = ()

    add_job_log = operation(AddJobLog)
    get_job_logs = operation(GetJobLogs)
    clear_job_logs = operation(ClearJobLogs)
