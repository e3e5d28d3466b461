"""Counting and listing a queue's jobs (MGMT-2, MGMT-23..27, INSP).

The rules every backend follows are in ``lane_pg.backend`` (the package docstring)."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import KW_ONLY, dataclass
from datetime import datetime, timedelta

from lane_pg.backend.operation import Arguments, Handle, operation
from lane_pg.errors import InvalidOptions
from lane_pg.types import (
    ALL_STATES,
    JSON,
    JobPage,
    JobSearchPage,
    JobState,
    QueueStats,
    dumps_json,
)

MAX_SEARCH_LIMIT = 500
"""The most jobs one ``search_jobs`` page holds (``lane.search_jobs`` has the same bound)."""
MAX_SEARCH_OFFSET = 100_000
"""The deepest ``search_jobs`` offset: a page walks the state's index past every match
before it, so a deep page is a slow one (``lane.search_jobs`` has the same bound)."""


class GetJobCounts(Arguments[dict[JobState, int]]):
    """Counts for the given states (all six when None or empty), in first-seen order,
    zero included (MGMT-23)."""

    queue: str
    states: Sequence[JobState] | None = None


class GetJobCount(Arguments[int]):
    """The sum of ``get_job_counts(queue, states)``: all six states when None or empty,
    a repeated state counted once (MGMT-24)."""

    queue: str
    states: Sequence[JobState] | None = None


class CountPendingJobs(Arguments[int]):
    """Jobs still to run: waiting + delayed + waiting-children (MGMT-25)."""

    queue: str


class CountReadyJobs(Arguments[int]):
    """Jobs ready to run now: waiting, plus delayed ones whose time has come (A16, the
    facade's ``pending_size``)."""

    queue: str
    _: KW_ONLY
    now: datetime | None = None


class CountScheduledJobs(Arguments[int]):
    """Delayed jobs whose time has not come (the facade's ``delayed_size``). A due one
    is ready (``count_ready_jobs``), so the two never count a job twice (INSP-1,
    INSP-5)."""

    queue: str
    _: KW_ONLY
    now: datetime | None = None


class ListReadyJobs(Arguments[JobPage]):
    """A page of the jobs ``count_ready_jobs`` counts: waiting ones, then delayed ones
    whose time has come, each part in insertion order (the facade's ``pending_jobs``);
    ``total`` is their count at the same instant."""

    queue: str
    _: KW_ONLY
    offset: int = 0
    limit: int = 20
    now: datetime | None = None


class ListScheduledJobs(Arguments[JobPage]):
    """A page of the jobs ``count_scheduled_jobs`` counts, in insertion order (the
    facade's ``delayed_jobs``)."""

    queue: str
    _: KW_ONLY
    offset: int = 0
    limit: int = 20
    now: datetime | None = None


class GetCountsPerPriority(Arguments[dict[int, int]]):
    """Waiting jobs per requested priority, zero included, a repeated priority once, in
    first-seen order (MGMT-26, ORD-5); ``InvalidPriority`` outside 0..2097152."""

    queue: str
    priorities: Sequence[int]


class GetQueueStats(Arguments[QueueStats]):
    """The pause flag and the six state counts from one snapshot (MGMT-27, PAUSE-13);
    not paused and zeros for a queue that does not exist."""

    queue: str


class ListJobs(Arguments[JobPage]):
    """A page of jobs in the given states (MGMT-2), ordered by state (in the order of
    ``ALL_STATES``) then by insertion order; ``descending`` reverses the whole order;
    ``total`` counts every match."""

    queue: str
    states: Sequence[JobState]
    _: KW_ONLY
    descending: bool = False
    offset: int = 0
    limit: int = 20


class SearchJobs(Arguments[JobSearchPage]):
    """A page of one queue's jobs in one state that match every filter given, for the
    dashboard and ``jobs --name``/``--data``: ``name`` the exact job name; ``data_path``
    the keys (array elements by their index as text, as PostgreSQL's ``#>``) of a value in
    the job's data, ``[]`` the whole document, which must equal the JSON value
    ``data_value`` (jsonb equality: ``1`` equals ``1.0``, ``"42"`` is not ``42``; None is
    JSON null, and a job whose data lacks the path never matches); ``data_value`` without
    ``data_path`` is refused. In the state's own order, the one its index keeps, so a page
    stops early: waiting in claim order, delayed by due time, active oldest first,
    waiting-children newest first, completed and failed newest finished first. ``has_more``
    when a match follows the page; no total (counting the matches would read every job of
    the state). ``InvalidOptions`` for an unknown state, a ``limit`` outside
    1..``MAX_SEARCH_LIMIT``, an ``offset`` outside 0..``MAX_SEARCH_OFFSET`` or a path
    element that is not a string; an unknown queue gives an empty page."""

    queue: str
    state: JobState
    _: KW_ONLY
    name: str | None = None
    data_path: Sequence[str] | None = None
    data_value: JSON = None
    offset: int = 0
    limit: int = 20


def search_path(path: Sequence[str] | None) -> list[str] | None:
    """``SearchJobs.data_path`` as a list; ``InvalidOptions`` unless it is None or a
    sequence of strings (a string alone is refused: it is not a path of its characters)."""
    if path is None:
        return None
    if isinstance(path, str | bytes) or not isinstance(path, Sequence):
        raise InvalidOptions(f"data_path must be a list of keys, got {path!r}")
    keys = list(path)
    for key in keys:
        if not isinstance(key, str):
            raise InvalidOptions(f"data_path keys must be strings, got {key!r} in {keys!r}")
    return keys


@dataclass(frozen=True, slots=True)
class SearchFilter:
    """A checked ``search_jobs`` request, as the backends that match in Python (memory,
    Redis) read it; PostgreSQL's ``lane.search_jobs`` makes the same checks in SQL."""

    state: JobState
    name: str | None
    path: list[str] | None
    """None: no data filter; ``[]``: the whole document."""
    wanted: JSON
    offset: int
    limit: int

    def matches(self, name: str, data: JSON) -> bool:
        """Whether a job of this name and data is a match (``data`` is not read when
        there is no ``path``)."""
        if self.name is not None and name != self.name:
            return False
        return self.path is None or json_holds(data, self.path, self.wanted)


def search_filter(args: SearchJobs) -> SearchFilter:
    """``args`` checked as ``lane.search_jobs`` checks them; ``InvalidOptions`` else."""
    path = search_path(args.data_path)
    # A JSON round trip, as the jsonb cast: tuples become lists, keys strings.
    wanted: JSON = (
        None
        if path is None and args.data_value is None
        else json.loads(dumps_json(args.data_value, "data_value"))
    )
    if args.state not in ALL_STATES:
        raise InvalidOptions(f"unknown job state {args.state!r}; use one of {list(ALL_STATES)}")
    offset, limit = args.offset, args.limit
    if not (_is_int(offset) and 0 <= offset <= MAX_SEARCH_OFFSET) or not (
        _is_int(limit) and 1 <= limit <= MAX_SEARCH_LIMIT
    ):
        raise InvalidOptions(
            f"a search page takes an offset of 0 to {MAX_SEARCH_OFFSET} and a limit of 1"
            f" to {MAX_SEARCH_LIMIT}, got {offset!r} and {limit!r}"
        )
    if path is None and wanted is not None:
        raise InvalidOptions("a data value to match needs the data path to compare it at")
    return SearchFilter(args.state, args.name, path, wanted, offset, limit)


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


MISSING = object()
"""What ``json_at_path`` finds where PostgreSQL's ``#>`` gives SQL NULL (never JSON null)."""

# An array element's index as PostgreSQL's `#>` reads it (strtoint): leading white space,
# a sign, decimal digits and nothing after; an int32, INT_MIN excepted.
_ARRAY_INDEX = re.compile(r"[ \t\n\v\f\r]*[+-]?[0-9]+")


def json_at_path(document: JSON, path: list[str]) -> object:
    """``document #> path``: the value at ``path`` (object keys, array indexes; negative
    ones count from the end), or ``MISSING``."""
    found: object = document
    for key in path:
        if isinstance(found, dict):
            if key not in found:
                return MISSING
            found = found[key]
        elif isinstance(found, list):
            if not _ARRAY_INDEX.fullmatch(key):
                return MISSING
            index = int(key)
            if not -(2**31) < index < 2**31:
                return MISSING
            if index < 0:
                index += len(found)
            if not 0 <= index < len(found):
                return MISSING
            found = found[index]
        else:
            return MISSING
    return found


def json_holds(document: JSON, path: list[str], wanted: JSON) -> bool:
    """``document #> path = wanted``: false where the path leads nowhere (SQL NULL)."""
    found = json_at_path(document, path)
    return found is not MISSING and jsonb_equal(found, wanted)


def jsonb_equal(a: object, b: object) -> bool:
    """jsonb ``=``: numbers by value (``1`` equals ``1.0``), never a boolean and a number
    (Python's ``True == 1``), objects whatever their key order."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, int | float) and isinstance(b, int | float):
        return a == b
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(jsonb_equal(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(jsonb_equal(a[k], b[k]) for k in a)
    if a is None or b is None:
        return a is b
    return type(a) is type(b) and a == b


class NextDueIn(Arguments[timedelta | None]):
    """Time until the earliest delayed job of these queues (all when None) is due, on
    the backend's clock: zero when one is due already, None when none is delayed."""

    queues: Sequence[str] | None = None


class Reads(Handle, name="reads"):
    """Counting and listing a queue's jobs (MGMT-2, MGMT-23..27, INSP)."""

    __slots__ = ()

    get_job_counts = operation(GetJobCounts)
    get_job_count = operation(GetJobCount)
    count_pending_jobs = operation(CountPendingJobs)
    count_ready_jobs = operation(CountReadyJobs)
    count_scheduled_jobs = operation(CountScheduledJobs)
    list_ready_jobs = operation(ListReadyJobs)
    list_scheduled_jobs = operation(ListScheduledJobs)
    get_counts_per_priority = operation(GetCountsPerPriority)
    get_queue_stats = operation(GetQueueStats)
    list_jobs = operation(ListJobs)
    search_jobs = operation(SearchJobs)
    next_due_in = operation(NextDueIn)
