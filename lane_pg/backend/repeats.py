"""Repeatable jobs (REP): series of occurrences on an interval or a cron schedule.

An add whose options carry ``repeat`` (``RepeatOptions``) starts a series, or returns the
series' owner when it has one. The rules every backend follows:

* A series is keyed by ``repeat.key``, else by the job name and the schedule. It has at
  most one unfinished occurrence, its owner; an add of the series while it has one returns
  the owner and writes ``duplicated`` on it (REP-6).
* The first occurrence of an ``every_ms`` series is due at once, a cron series' at the
  pattern's first match after the add. Completing the owner stores the next occurrence in
  the same operation, anchored to the owner's tick (the first ``tick + k * every`` after
  now; the first match after now), until ``limit`` occurrences ran or the next tick would
  be after ``end_at`` (REP-2..4). An occurrence due while no worker ran runs once when one
  is back, and its successor is the first tick after that: missed ticks are skipped.
* A terminal failure or a removal of the owner ends the series; ``retry_job`` of an
  occurrence starts it again, or raises ``RepeatConflict`` while another occurrence owns
  it (REP-7, -15). An add whose series has no occurrence left is refused (ADD-13).
* Cron patterns and time zones: ``lane_pg.types.schedule`` (the rules of
  sql/functions/08_schedule.sql).
"""

from __future__ import annotations

from datetime import datetime

from lane_pg.backend.operation import Handle, operation
from lane_pg.types import JSON, JobOptions, JobRow, RepeatInfo


class Repeats(Handle, name="repeats"):
    """Managing repeat series (REP-8..12)."""

    __slots__ = ()

    @operation
    async def upsert_repeat(
        self,
        queue: str,
        name: str,
        data: JSON = None,
        options: JobOptions | dict[str, JSON] | None = None,
        *,
        now: datetime | None = None,
    ) -> JobRow:
        """Create the series of ``options.repeat``, or replace its owner: the old owner is
        removed (``removed``) and the new job starts the series again, its schedule
        rebuilt whole (REP-8, -13). ``JobStateConflict`` when the owner is active or in a
        flow, and nothing changes (REP-9). Returns the new owner."""

    @operation
    async def remove_repeat(
        self, queue: str, key: str, *, now: datetime | None = None
    ) -> str | None:
        """End the series and remove its owner through ``remove_job``; the removed
        owner's id, or None. ``JobLocked`` while the owner runs under a valid lease
        (REP-10)."""

    @operation
    async def get_repeat(self, queue: str, key: str) -> RepeatInfo | None:
        """The live series ``key``, or None (REP-11)."""

    @operation
    async def list_repeats(
        self, queue: str, start: int = 0, end: int = -1, *, ascending: bool = False
    ) -> list[RepeatInfo]:
        """Live series by the owner's due time, latest first unless ``ascending``,
        entries ``start`` .. ``end`` inclusive (-1: to the end). Rows whose owner is gone
        or finished are deleted on the way (REP-11, -12)."""

    @operation
    async def count_repeats(self, queue: str) -> int:
        """How many live series the queue has (REP-11)."""
