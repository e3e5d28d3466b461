"""A stored job as the backends return it (``JobRow``, ``ClaimedJob``) and a finished
job's result."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, fields, make_dataclass
from datetime import datetime, timedelta
from typing import Any, TypeAlias, TypeVar, cast

from lane_pg.types.base import JSON, JobState
from lane_pg.types.options import Backoff


@dataclass(frozen=True, slots=True)
class RepeatInfo:
    """One live repeat series (REP-11): its key, the owner occurrence and when it is due,
    how many occurrences there were, and its schedule."""

    key: str
    job_id: str
    name: str
    next_at: datetime
    count: int
    every_ms: int | None
    pattern: str | None
    tz: str | None
    limit: int | None
    end_at: datetime | None
    options: dict[str, JSON]


@dataclass(frozen=True, slots=True)
class JobRow:
    """A snapshot of one job row. ``lock_token`` is set only while active."""

    queue: str
    id: str
    name: str
    data: JSON
    state: JobState
    priority: int
    lifo: bool
    order_key: int
    enqueued_seq: int | None
    created_at: datetime
    available_at: datetime
    processed_at: datetime | None
    finished_at: datetime | None
    attempts_started: int
    attempts_made: int
    max_attempts: int
    backoff: Backoff | None
    timeout_ms: int | None
    lock_token: str | None
    worker_id: str | None
    lease_expires_at: datetime | None
    stalled_count: int
    progress: JSON
    return_value: JSON
    failed_reason: str | None
    stacktrace: list[str]
    options: dict[str, JSON] = field(default_factory=dict)
    deduplication_id: str | None = None
    """The id this job deduplicates by (its ``deduplication`` option), whether or not it
    still owns it (``get_deduplication_job_id`` tells the current owner)."""
    repeat_key: str | None = None
    """The repeat series this job is an occurrence of."""
    parent_queue: str | None = None
    parent_id: str | None = None
    """The flow parent this job is a child of (FLOW-1), None for a job outside any flow."""
    deferred_failure: str | None = None
    """A flow parent's failure, set by a child's (FLOW-9), that the worker claiming it
    applies instead of running it (WORK-11)."""
    # MGMT-1: shown by get_job only (None in the snapshots claims and settlements return),
    # and left out of equality, so a job compares equal however it was read.
    logs_count: int | None = field(default=None, compare=False)
    deduplication_expires_at: datetime | None = field(default=None, compare=False)
    """When the deduplication id this job owns stops blocking duplicates (None: no TTL,
    or the job does not own it)."""
    child_ids: tuple[tuple[str, str], ...] | None = field(default=None, compare=False)
    """A flow parent's children as (queue, id), in attach order (FLOW-16)."""

    @property
    def payload(self) -> JSON:
        """The job's data (the name processors use)."""
        return self.data

    @property
    def timeout(self) -> timedelta | None:
        return None if self.timeout_ms is None else timedelta(milliseconds=self.timeout_ms)


_JOB_FIELDS = tuple(f.name for f in fields(JobRow))


_COMPARED_FIELDS = tuple(f.name for f in fields(JobRow) if f.compare)


@dataclass(frozen=True, slots=True, eq=False)
class ClaimedJob(JobRow):
    """A job as its claimer holds it: ``lock_token`` is the token of this claim, never None.

    What ``claim_jobs`` returns and processors receive. Every write the holder makes
    (settlement, renewal, context writes) carries this token, and the type makes a missing
    one a type error instead of a silent ``""`` that the database refuses later. A subclass
    rather than a (job, token) pair, so ``job.id``, ``job.payload`` and every other field
    read the same for a processor, a test and a caller of ``get_job``.
    """

    lock_token: str

    def __eq__(self, other: object) -> bool:
        # The same snapshot whether it came from the claim or from get_job: equal to a JobRow
        # with the same fields (a subclass's __eq__ is asked first, from either side).
        if not isinstance(other, JobRow):
            return NotImplemented
        return all(getattr(self, name) == getattr(other, name) for name in _COMPARED_FIELDS)

    __hash__ = JobRow.__hash__

    @classmethod
    def from_job(cls, job: JobRow) -> ClaimedJob:
        """``job`` (an active snapshot straight from a claim) as a ``ClaimedJob``."""
        if job.lock_token is None:
            raise ValueError(f"job {job.id} of queue {job.queue} carries no lock token")
        return cls(*(getattr(job, name) for name in _JOB_FIELDS))


_Snapshot = TypeVar("_Snapshot", bound=JobRow)


def _snapshot_builder(cls: type[_Snapshot]) -> type[_Snapshot]:
    """A faster constructor for ``cls`` snapshots, with ``cls``'s signature and result.

    A frozen dataclass sets each field through ``object.__setattr__``: 9.0 us for JobRow's
    27 fields on this machine, 11 ms of a 73 ms 1,000-job bulk add (W2), and the claim
    path builds one per claimed job. This mutable twin has the same fields, hence the same
    slots and memory layout, sets them with plain attribute stores and, once they are set,
    turns itself into a ``cls`` (CPython allows ``__class__`` assignment between identical
    layouts): 0.9 us with positional arguments, 2.7 us with keywords from a dict. The
    result is an ordinary frozen ``cls``; tests/test_snapshots.py checks equality and
    immutability.
    """

    def become(self: Any) -> None:
        self.__class__ = cls

    twin = make_dataclass(
        f"_{cls.__name__}Builder",
        [(f.name, f.type) for f in fields(cls)],
        namespace={"__post_init__": become},
        slots=True,
        eq=False,
        repr=False,
    )
    layout = tuple(name for c in reversed(cls.__mro__) for name in c.__dict__.get("__slots__", ()))
    if twin.__dict__["__slots__"] != layout:
        raise TypeError(f"{cls.__name__}'s slots {layout} are not its fields: no layout twin")
    return cast(type[_Snapshot], twin)


new_job = _snapshot_builder(JobRow)
"""``JobRow(...)`` for the read paths that build many (rows.py)."""


def job_constructor(parameters: Sequence[str], values: Mapping[str, str]) -> Callable[..., JobRow]:
    """A constructor of ``JobRow`` snapshots whose fields are mostly fixed: it takes
    ``parameters`` (positionally) and sets each field to ``values[field]``, a Python
    expression over them (a parameter, or a literal: ``[]`` and ``{}`` are new each call).

    For a bulk add's snapshots, whose 35 fields are 27 defaults: a twin with only the
    varying parameters and the defaults set in its body took 0.50 ms per 1,000 against
    1.02 ms for ``new_job`` with every field passed (about 4 % of a W2 call)."""
    names = [f.name for f in fields(JobRow)]
    if sorted(values) != sorted(names):
        raise TypeError(f"job_constructor needs a value for each field of JobRow: {names}")
    lines = [f"def construct({', '.join(parameters)}):", "    job = _new(_twin)"]
    lines += [f"    job.{name} = {values[name]}" for name in names]
    lines += ["    job.__class__ = _JobRow", "    return job"]
    namespace: dict[str, Any] = {"_new": object.__new__, "_twin": new_job, "_JobRow": JobRow}
    exec("\n".join(lines), namespace)
    return cast(Callable[..., JobRow], namespace["construct"])


new_claimed_job = _snapshot_builder(ClaimedJob)
"""``ClaimedJob(...)`` for the claim path (rows.py)."""


@dataclass(frozen=True, slots=True)
class NotFinished:
    """``get_job_finished_result`` of a job that is neither completed nor failed."""

    state: JobState


@dataclass(frozen=True, slots=True)
class Completed:
    """``get_job_finished_result`` of a completed job: its return value (None for JSON
    null, which a processor returning nothing stores)."""

    return_value: JSON


@dataclass(frozen=True, slots=True)
class Failed:
    """``get_job_finished_result`` of a failed job: its failure reason."""

    reason: str


FinishedResult: TypeAlias = NotFinished | Completed | Failed
"""What ``get_job_finished_result`` says of a job that exists (STATE-4)."""
