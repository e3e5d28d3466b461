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

from dataclasses import KW_ONLY
from datetime import datetime

from lane_pg.backend.operation import Arguments, Handle, operation
from lane_pg.types import JSON, JobOptions, JobRow, RepeatInfo


class UpsertRepeat(Arguments[JobRow]):
    """Create the series of ``options.repeat``, or replace its owner: the old owner is
    removed (``removed``) and the new job starts the series again, its schedule
    rebuilt whole (REP-8, -13). ``JobStateConflict`` when the owner is active or in a
    flow, and nothing changes (REP-9). Returns the new owner."""

    queue: str
    name: str
    data: JSON = None
    options: JobOptions | dict[str, JSON] | None = None
    _: KW_ONLY
    now: datetime | None = None


class RemoveRepeat(Arguments[str | None]):
    """End the series and remove its owner through ``remove_job``; the removed
    owner's id, or None. ``JobLocked`` while the owner runs under a valid lease
    (REP-10)."""

    queue: str
    key: str
    _: KW_ONLY
    now: datetime | None = None


class GetRepeat(Arguments[RepeatInfo | None]):
    """The live series ``key``, or None (REP-11)."""

    queue: str
    key: str


class ListRepeats(Arguments[list[RepeatInfo]]):
    """Live series by the owner's due time, latest first unless ``ascending``,
    entries ``start`` .. ``end`` inclusive (-1: to the end). Rows whose owner is gone
    or finished are deleted on the way (REP-11, -12)."""

    queue: str
    start: int = 0
    end: int = -1
    _: KW_ONLY
    ascending: bool = False


class CountRepeats(Arguments[int]):
    """How many live series the queue has (REP-11)."""

    queue: str


class Repeats(Handle, name="repeats"):
    """Managing repeat series (REP-8..12)."""

    __slots__ = ()

    upsert_repeat = operation(UpsertRepeat)
    remove_repeat = operation(RemoveRepeat)
    get_repeat = operation(GetRepeat)
    list_repeats = operation(ListRepeats)
    count_repeats = operation(CountRepeats)
