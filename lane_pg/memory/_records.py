"""The memory backend's records: job rows, queues, deduplication owners, repeat series,
and the parsing and small helpers they share (the Python twin of the lane.* tables).

``_store`` holds the transitions over them; this module only defines them.
"""

from __future__ import annotations

import copy
import json
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from lane_pg.errors import (
    InvalidOptions,
)
from lane_pg.options import ParsedOptions, RetentionRule
from lane_pg.types import (
    ALL_STATES,
    DEFAULT_KEEP_COMPLETED,
    DEFAULT_KEEP_FAILED,
    JSON,
    Backoff,
    JobOptions,
    JobRow,
    JobState,
    LogEntry,
    QueueEvent,
    check_json,
    parse_job_options,
    validate_job_name,
)
from lane_pg.types.schedule import RepeatSpec, repeat_next

PRIORITY_BUCKET = 2**41
"""Width of one priority's range of order keys (ORD-2)."""
BUCKET_MIDDLE = 2**40
"""LIFO keys count down below the middle of a bucket, FIFO keys count up above it."""
STALLED_REASON = "job stalled more than allowable limit"
LEASE_EXPIRED = "lease expired"

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MILLISECOND = timedelta(milliseconds=1)
_MAX_EVENT_ID = 2**63 - 1

_Policy = RetentionRule


# --------------------------------------------------------------------------- helpers


def _utc(moment: datetime) -> datetime:
    # Naive datetimes are read as UTC, as asyncpg does for timestamptz parameters.
    if moment.tzinfo is None:
        return moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC)


def _epoch_ms(moment: datetime) -> int:
    """Epoch milliseconds, floored (SQL: ``floor(extract(epoch from t) * 1000)``)."""
    return (moment - _EPOCH) // _MILLISECOND


def _json_copy(value: JSON) -> JSON:
    # A JSON round trip stores what jsonb would: tuples become lists, keys strings.
    return json.loads(json.dumps(value))


def _same_token(current: str | None, token: str) -> bool:
    # Tokens are uuid columns in PostgreSQL: compare as UUIDs, reject non-UUID text.
    if current is None:
        return False
    try:
        return uuid.UUID(str(token)) == uuid.UUID(current)
    except ValueError:
        return False


def _non_negative_int(value: JSON, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise InvalidOptions(f"{what} must be a non-negative integer, got {value!r}")
    return value


def _check_state(state: str) -> JobState:
    if state not in ALL_STATES:
        raise InvalidOptions(f"unknown job state {state!r}; use one of {list(ALL_STATES)}")
    return state


def _lrange(items: list[LogEntry], start: int, end: int) -> list[LogEntry]:
    """Redis LRANGE: inclusive bounds, negative indices count from the end."""
    size = len(items)
    first = size + start if start < 0 else start
    last = size + end if end < 0 else end
    first, last = max(first, 0), min(last, size - 1)
    return items[first : last + 1] if first <= last else []


# --------------------------------------------------------------------------- options


@dataclass(frozen=True, slots=True)
class _Options:
    """A checked options document (``lane_pg.options.parse_options``) with its backoff
    read once."""

    parsed: ParsedOptions
    backoff: Backoff | None


def _parse_options(options: JobOptions | dict[str, JSON] | None) -> _Options:
    parsed = parse_job_options(options)
    return _Options(parsed, Backoff.from_json(parsed.backoff))


@dataclass(frozen=True, slots=True)
class _NewJob:
    """One validated add request."""

    name: str
    data: JSON
    options: _Options


def _parse_spec(name: str, data: JSON, options: JobOptions | dict[str, JSON] | None) -> _NewJob:
    validate_job_name(name)
    return _NewJob(name, _json_copy(check_json(data, "data")), _parse_options(options))


# --------------------------------------------------------------------------- storage


@dataclass(slots=True)
class _Record:
    """One job row; ``key`` is the global insertion counter (``lane.jobs.key``)."""

    queue: str
    id: str
    key: int
    name: str
    data: JSON
    state: JobState
    priority: int
    lifo: bool
    order_key: int
    created_at: datetime
    available_at: datetime
    max_attempts: int
    backoff: Backoff | None
    timeout_ms: int | None
    options: dict[str, JSON]
    remove_on_complete: _Policy
    remove_on_fail: _Policy
    enqueued_seq: int | None = None
    processed_at: datetime | None = None
    finished_at: datetime | None = None
    attempts_started: int = 0
    attempts_made: int = 0
    lock_token: str | None = None
    worker_id: str | None = None
    lease_expires_at: datetime | None = None
    stalled_count: int = 0
    progress: JSON = None
    return_value: JSON = None
    failed_reason: str | None = None
    stacktrace: list[str] = field(default_factory=list)
    logs: list[LogEntry] = field(default_factory=list)
    dedup_id: str | None = None
    repeat_key: str | None = None
    parent_queue: str | None = None
    parent_id: str | None = None
    deps_pending: int | None = None
    """A flow parent's children still unprocessed (``lane.jobs.deps_pending``)."""
    deferred_failure: str | None = None
    batch_id: str | None = None
    """The batch the job settles against (``lane.jobs.batch_id``)."""

    def snapshot(self) -> JobRow:
        # Deep copies: a snapshot must not change when the stored job does.
        return JobRow(
            queue=self.queue,
            id=self.id,
            name=self.name,
            data=copy.deepcopy(self.data),
            state=self.state,
            priority=self.priority,
            lifo=self.lifo,
            order_key=self.order_key,
            enqueued_seq=self.enqueued_seq,
            created_at=self.created_at,
            available_at=self.available_at,
            processed_at=self.processed_at,
            finished_at=self.finished_at,
            attempts_started=self.attempts_started,
            attempts_made=self.attempts_made,
            max_attempts=self.max_attempts,
            backoff=self.backoff,
            timeout_ms=self.timeout_ms,
            lock_token=self.lock_token,
            worker_id=self.worker_id,
            lease_expires_at=self.lease_expires_at,
            stalled_count=self.stalled_count,
            progress=copy.deepcopy(self.progress),
            return_value=copy.deepcopy(self.return_value),
            failed_reason=self.failed_reason,
            stacktrace=list(self.stacktrace),
            options=copy.deepcopy(self.options),
            deduplication_id=self.dedup_id,
            repeat_key=self.repeat_key,
            parent_queue=self.parent_queue,
            parent_id=self.parent_id,
            deferred_failure=self.deferred_failure,
        )

    def finish_order(self) -> tuple[datetime, int]:
        """Oldest-first order of finished jobs for retention."""
        assert self.finished_at is not None
        return (self.finished_at, self.key)


@dataclass(slots=True)
class _Node:
    """One checked flow node."""

    queue: str
    new: _NewJob
    children: list[_Node] = field(default_factory=list)

    @property
    def job_id(self) -> str | None:
        return self.new.options.parsed.job_id


def _placeholder_id(dedup_id: str) -> str:
    """lane._flow_placeholder_id: the dependency id a parent waits under for the kept
    next job of ``dedup_id`` (DEDUP-18); ``0:`` ids are never a job's."""
    return "0:" + dedup_id


@dataclass(slots=True)
class _Dep:
    """A ``lane.flow_deps`` row: one child of a parent, its bucket and what it left
    (``child_key`` None: a placeholder for a kept next job, DEDUP-18)."""

    child_queue: str
    child_id: str
    child_key: int | None
    bucket: str
    policy: str
    seq: int
    value: JSON = None
    reason: str | None = None


@dataclass(slots=True)
class _Owner:
    """A ``lane.dedup_owners`` row: the job that owns a deduplication id in its queue."""

    job_key: int | None
    """None (with ``job_id``) for a reservation: taken before its job exists (TX-10)."""
    job_id: str | None
    expires_at: datetime | None
    keep_last: bool
    next_job: _NewJob | None = None
    """The latest duplicate kept while a keep-last owner runs (DEDUP-9)."""
    token: str | None = None
    """The push that took the id (migration 0015): the owner-scoped release matches it."""
    kind: str = "dedup"
    """``unique``: one lock in the whole connection (UNIQ-1, migration 0018)."""
    created_at: datetime | None = None
    """When the row was written (``lane.dedup_owners.created_at``): a debounce window's
    burst starts there, and goes on through a replacing add, which updates the row (read
    only by ``add_debounced_job``)."""

    def reserved_at(self, now: datetime) -> bool:
        """A live reservation: it blocks the id but names no job yet."""
        return self.job_key is None and self.expires_at is not None and self.expires_at > now

    next_parent: tuple[str, str, int] | None = None
    """The kept flow child's parent (queue, id, key), which waits for it (DEDUP-18)."""
    next_children: list[_Node] = field(default_factory=list)
    """The kept flow node's own children (DEDUP-18, -19)."""


@dataclass(slots=True)
class _Series:
    """A ``lane.repeat_schedulers`` row: a repeat series and its owner occurrence."""

    job_key: int
    job_id: str
    template: _NewJob
    spec: RepeatSpec
    count: int
    next_at: datetime
    """The owner's scheduled tick: the anchor of the next one."""


def series_key(name: str, repeat: JSON) -> str:
    """lane._repeat_key: the document's key, else the job name with the schedule."""
    if repeat.get("key") is not None:
        return str(repeat["key"])
    if repeat.get("every_ms") is not None:
        return f"{name}:every:{repeat['every_ms']}"
    zone = "" if repeat.get("tz") is None else f":{repeat['tz']}"
    return f"{name}:cron:{repeat['pattern']}{zone}"


def check_series_left(specs: Sequence[_NewJob], now: datetime) -> None:
    """ADD-13 for a whole call before it writes: every series it starts has an occurrence
    left (a spec continuing a series started earlier in the call is not checked, as in
    lane._store_jobs)."""
    seen: set[str] = set()
    for new in specs:
        if new.options.parsed.repeat is None:
            continue
        key = series_key(new.name, new.options.parsed.document["repeat"])
        if key not in seen:
            first_occurrence(new, now)
            seen.add(key)


def first_occurrence(new: _NewJob, now: datetime) -> datetime:
    """The first tick of a new job's series (lane._repeat_take); InvalidOptions when the
    series has none left (ADD-13). Checked for a whole call before it writes anything."""
    spec = new.options.parsed.repeat
    assert spec is not None
    first = repeat_next(spec, None, now)
    if first is None:
        key = series_key(new.name, new.options.parsed.document["repeat"])
        raise InvalidOptions(f"repeat series {key!r} has no occurrence left: its end_at has passed")
    return first


@dataclass(slots=True)
class _Batch:
    """The jobs one add call stores, whose events wait until the call has stored them all,
    and the events of later specs that met one of those jobs (written after it)."""

    jobs: list[_Record] = field(default_factory=list)
    later: list[tuple[str, str, dict[str, JSON]]] = field(default_factory=list)
    series: dict[str, _Record] = field(default_factory=dict)
    """The repeat series this call starts (or continues), by key."""


@dataclass(slots=True)
class _Settlement:
    """One job's settlement of its batch (``lane.batch_settlements``)."""

    outcome: str
    settled_at: datetime
    reason: str | None


@dataclass(slots=True)
class _BatchRecord:
    """One ``lane.batches`` row and its settlements by ``(queue, job id)``, in write order."""

    id: str
    name: str
    total_jobs: int
    options: dict[str, JSON]
    created_at: datetime
    cancelled_at: datetime | None = None
    finished_at: datetime | None = None
    settlements: dict[tuple[str, str], _Settlement] = field(default_factory=dict)

    def failures(self) -> list[tuple[tuple[str, str], _Settlement]]:
        """The failed settlements in ``lane.find_batch``'s order (time, queue, id)."""
        return sorted(
            ((key, s) for key, s in self.settlements.items() if s.outcome == "failed"),
            key=lambda item: (item[1].settled_at, item[0]),
        )


def _state_index() -> dict[JobState, dict[str, _Record]]:
    return {state: {} for state in ALL_STATES}


@dataclass(frozen=True, slots=True)
class _LoggedClaim:
    """One ``lane.claim_log`` row: a claim that took jobs under a rate limit."""

    claimed_at: datetime
    jobs: int
    window_ms: int

    def expires(self, window_ms: int | None = None) -> datetime:
        return self.claimed_at + (window_ms or self.window_ms) * _MILLISECOND


@dataclass(slots=True)
class _Queue:
    name: str
    paused: bool = False
    jobs: dict[str, _Record] = field(default_factory=dict)
    by_state: dict[JobState, dict[str, _Record]] = field(default_factory=_state_index)
    # Heaps with lazy deletion: an entry counts only while it matches the job's fields.
    waiting: list[tuple[int, int, str]] = field(default_factory=list)
    delayed: list[tuple[datetime, int, str]] = field(default_factory=list)
    events: list[QueueEvent] = field(default_factory=list)
    owners: dict[str, _Owner] = field(default_factory=dict)
    series: dict[str, _Series] = field(default_factory=dict)
    max_events: int = 10_000
    keep_completed: int | None = DEFAULT_KEEP_COMPLETED
    keep_failed: int | None = DEFAULT_KEEP_FAILED
    record_events: bool = True
    # Claim limits (lane.queues columns, migration 0009's lane.claim_log; memory/limits.py).
    rate_max: int | None = None
    rate_duration_ms: int | None = None
    max_active: int | None = None
    rate_blocked_until: datetime | None = None
    claim_log: list[_LoggedClaim] = field(default_factory=list)
    # OBS-6 (lane.metrics): per state, minute start (epoch ms) -> count, and the count of
    # the minutes compact_metrics folded away beyond the retained data points.
    metrics: dict[str, dict[int, int]] = field(default_factory=dict)
    metrics_folded: dict[str, int] = field(default_factory=dict)

    def drained(self) -> bool:
        return not self.by_state["waiting"] and not self.by_state["active"]


@dataclass(slots=True)
class _WorkerPresence:
    """One ``lane.workers`` row."""

    hostname: str
    pid: int | None
    queues: tuple[str, ...]
    started_at: datetime
    heartbeat_at: datetime
    meta: dict[str, JSON]


@dataclass(slots=True)
class _Leadership:
    """One role's lease (a ``lane.leaders`` row)."""

    holder: str
    term: int
    elected_at: datetime
    expires_at: datetime | None  # None: resigned


@dataclass(slots=True)
class _Lock:
    """One middleware lock (a ``lane.locks`` row): the run holding it and its expiry."""

    holder_key: int
    holder_queue: str
    holder_id: str
    holder_token: str
    acquired_at: datetime
    expires_at: datetime


@dataclass(slots=True)
class _Limiter:
    """One middleware limiter (a ``lane.limiters`` row): a rate limit's fixed window, or a
    throttle's consecutive failures and block."""

    updated_at: datetime
    window_start: datetime | None = None
    hits: int = 0
    failures: int = 0
    blocked_until: datetime | None = None
