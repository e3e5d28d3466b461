"""Value types shared by every layer: job snapshots, options, backoff, pages, events.

Options travel to PostgreSQL as one ``jsonb`` document whose keys are the same ones a
psql user writes by hand (``job_id``, ``priority``, ``lifo``, ``delay_ms``, ``attempts``,
``backoff``, ``timeout_ms``, ``remove_on_complete``, ``remove_on_fail``, ``deduplication``).
``JobOptions.to_json`` produces it, checked by ``lane_pg.options.parse_options`` (the rules
of the stored function ``lane._check_options``, tested equal), so a bad ``JobOptions`` is
refused before any SQL is sent. A dict document goes to the stored functions as written:
they are the authority (the memory backend runs ``parse_options`` in their place).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field, fields, make_dataclass
from datetime import datetime, timedelta
from typing import Any, Literal, TypeAlias, TypeVar, cast

from lane_pg.errors import (
    InvalidOptions,
    InvalidPayload,
    InvalidQueueName,
)
from lane_pg.options import MAX_DURATION_MS, ParsedOptions, parse_options
from lane_pg.options import MAX_JOB_ID_LENGTH as MAX_JOB_ID_LENGTH
from lane_pg.options import MAX_PRIORITY as MAX_PRIORITY
from lane_pg.options import OPTION_KEYS as OPTION_KEYS
from lane_pg.options import JobRetention as JobRetention
from lane_pg.options import to_millis as to_millis
from lane_pg.options import validate_custom_job_id as validate_custom_job_id
from lane_pg.options import validate_priority as validate_priority
from lane_pg.schedule import RepeatOptions

JobState: TypeAlias = Literal[
    "waiting", "delayed", "active", "waiting-children", "completed", "failed"
]
ALL_STATES: tuple[JobState, ...] = (
    "waiting",
    "delayed",
    "active",
    "waiting-children",
    "completed",
    "failed",
)
JSON: TypeAlias = Any
"""Any value ``json.dumps`` accepts: dict, list, str, int, float, bool or None."""

Duration: TypeAlias = timedelta | float | int
"""A duration: a ``timedelta`` or a number of seconds."""

MAX_NAME_LENGTH = 255
DEFAULT_MAX_STALLED_COUNT = 1
DEFAULT_KEEP_COMPLETED = 10_000
"""Completed jobs a queue keeps by default, newest first (``QueueRetention``); the column
default of ``lane.queues.keep_completed`` is the same number."""
DEFAULT_KEEP_FAILED = 100_000
"""Failed jobs a queue keeps by default (``lane.queues.keep_failed``)."""
DEFAULT_PRUNE_BATCH = 5_000
"""Most finished jobs one ``prune_finished`` call deletes per queue and state."""
_MAX_INT4 = 2**31 - 1

_QUEUE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:\-]{0,127}")


def validate_queue_name(queue: str) -> str:
    if not isinstance(queue, str) or not _QUEUE_NAME.fullmatch(queue):
        raise InvalidQueueName(
            f"invalid queue name {queue!r}: use 1-128 characters from A-Z a-z 0-9 _ . : -,"
            " starting with a letter or digit"
        )
    return queue


def validate_job_name(name: str) -> str:
    if not isinstance(name, str) or not name or len(name) > MAX_NAME_LENGTH:
        raise InvalidOptions(f"invalid job name {name!r}: use 1-{MAX_NAME_LENGTH} characters")
    return name


# An escaped NUL that is not itself an escaped backslash followed by "u0000".
_ESCAPED_NUL = re.compile(r"(?<!\\)(?:\\\\)*\\u0000")


# One encoder instance: json.dumps with keyword arguments builds a new encoder per call.
_ENCODER = json.JSONEncoder(allow_nan=False, separators=(",", ":"))


def dumps_json(value: JSON, what: str) -> str:
    """``value`` as compact JSON text for a jsonb cast, refused before any write unless it
    is plain JSON (SCH-10). NUL characters are refused too: jsonb cannot store them."""
    if value is None:
        return "null"
    try:
        text = _ENCODER.encode(value)
    except (TypeError, ValueError) as exc:
        raise InvalidPayload(f"{what} must be JSON-serialisable: {exc}") from exc
    if "\\u0000" in text and _ESCAPED_NUL.search(text):
        raise InvalidPayload(f"{what} must not contain NUL characters (jsonb cannot store them)")
    return text


def check_json(value: JSON, what: str) -> JSON:
    """``value`` itself, once ``dumps_json`` accepts it."""
    dumps_json(value, what)
    return value


@dataclass(frozen=True, slots=True)
class Backoff:
    """How long a failed job waits before its next attempt.

    ``fixed``: the same delay every time. ``exponential``: ``min(base * 2**(n-1), cap)``
    scaled by a uniform factor in ``[1 - jitter, 1 + jitter]`` for failed attempt n.
    ``sequence``: one delay per attempt, the last one repeating.
    """

    kind: Literal["fixed", "exponential", "sequence"]
    delay_ms: int = 0
    base_ms: int = 0
    cap_ms: int | None = None
    jitter: float = 0.0
    delays_ms: tuple[int, ...] = ()

    @classmethod
    def fixed(cls, delay: Duration) -> Backoff:
        return cls("fixed", delay_ms=to_millis(delay, "backoff delay"))

    @classmethod
    def exponential(
        cls, base: Duration, cap: Duration | None = None, jitter: float = 0.0
    ) -> Backoff:
        if not 0.0 <= jitter <= 1.0:
            raise InvalidOptions(f"backoff jitter must be within 0..1, got {jitter}")
        return cls(
            "exponential",
            base_ms=to_millis(base, "backoff base"),
            cap_ms=None if cap is None else to_millis(cap, "backoff cap"),
            jitter=float(jitter),
        )

    @classmethod
    def sequence(cls, delays: list[Duration] | tuple[Duration, ...]) -> Backoff:
        if not delays:
            raise InvalidOptions("a backoff sequence needs at least one delay")
        return cls("sequence", delays_ms=tuple(to_millis(d, "backoff delay") for d in delays))

    def delay_for(self, failed_attempt: int, uniform: float = 0.5) -> int:
        """Milliseconds to wait after failed attempt ``failed_attempt`` (1-based).

        ``uniform`` is a random draw in [0, 1); 0.5 means no jitter. The SQL function
        ``lane._backoff_ms`` computes the same thing.
        """
        n = max(failed_attempt, 1)
        if self.kind == "fixed":
            return self.delay_ms
        if self.kind == "sequence":
            return self.delays_ms[min(n, len(self.delays_ms)) - 1]
        raw = self.base_ms * 2 ** min(n - 1, 62)
        if self.cap_ms is not None:
            raw = min(raw, self.cap_ms)
        factor = 1.0 - self.jitter + 2.0 * self.jitter * uniform
        # Bounded like every stored duration: an uncapped exponential overflowed the due
        # time (interval, then bigint) from about the 44th failure of a 1 s base.
        return min(int(raw * factor), MAX_DURATION_MS)

    def to_json(self) -> dict[str, JSON]:
        if self.kind == "fixed":
            return {"type": "fixed", "delay_ms": self.delay_ms}
        if self.kind == "sequence":
            return {"type": "sequence", "delays_ms": list(self.delays_ms)}
        return {
            "type": "exponential",
            "base_ms": self.base_ms,
            "cap_ms": self.cap_ms,
            "jitter": self.jitter,
        }

    @classmethod
    def from_json(cls, doc: JSON) -> Backoff | None:
        if doc is None:
            return None
        if not isinstance(doc, dict):
            raise InvalidOptions(f"backoff must be an object, got {doc!r}")
        kind = doc.get("type")
        try:
            if kind == "fixed":
                return cls("fixed", delay_ms=int(doc["delay_ms"]))
            if kind == "exponential":
                cap = doc.get("cap_ms")
                return cls(
                    "exponential",
                    base_ms=int(doc["base_ms"]),
                    cap_ms=None if cap is None else int(cap),
                    jitter=float(doc.get("jitter", 0.0)),
                )
            if kind == "sequence":
                return cls("sequence", delays_ms=tuple(int(d) for d in doc["delays_ms"]))
        except (KeyError, TypeError, ValueError) as exc:
            raise InvalidOptions(f"invalid backoff {doc!r}: {exc}") from exc
        raise InvalidOptions(f"backoff type must be fixed, exponential or sequence: {doc!r}")


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """Retries as one value: ``retries`` more tries after the first, each after
    ``backoff`` (``None``: at once). For a job it is only a Python spelling of the
    ``attempts`` and ``backoff`` options: ``JobOptions(retry=RetryPolicy.fixed(3, 1))``
    stores exactly what ``JobOptions(attempts=4, backoff=Backoff.fixed(1))`` stores. The
    in-process lane scheduler retries its commands by the same value
    (``lane_pg.lanes.LaneConfig.retry_policy``)."""

    retries: int = 0
    backoff: Backoff | None = None

    def __post_init__(self) -> None:
        if (
            isinstance(self.retries, bool)
            or not isinstance(self.retries, int)
            or not 0 <= self.retries < _MAX_INT4
        ):
            raise InvalidOptions(
                f"retries must be an integer between 0 and {_MAX_INT4 - 1}, got {self.retries!r}"
            )

    @property
    def max_attempts(self) -> int:
        """Total tries: the first one plus the retries."""
        return self.retries + 1

    @classmethod
    def exponential(
        cls, retries: int, initial: Duration = 0.1, cap: Duration = 30.0
    ) -> RetryPolicy:
        """``retries`` retries after ``initial`` (100 ms), doubling each time, at most
        ``cap`` (30 s), no jitter."""
        return cls(retries, Backoff.exponential(initial, cap=cap))

    @classmethod
    def fixed(cls, retries: int, delay: Duration) -> RetryPolicy:
        """``retries`` retries, each ``delay`` after the failure."""
        return cls(retries, Backoff.fixed(delay))

    @classmethod
    def none(cls) -> RetryPolicy:
        """One try, no retry (what a job without options gets)."""
        return cls(0)

    def delay_for(self, retry: int) -> float:
        """Seconds to wait before retry number ``retry`` (1-based); no jitter drawn."""
        if self.backoff is None:
            return 0.0
        return self.backoff.delay_for(retry) / 1000.0


Retention: TypeAlias = bool | int | JobRetention


def _keep_count(value: int | None, what: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= _MAX_INT4:
        raise InvalidOptions(
            f"{what} must be None (keep all) or an integer between 0 and {_MAX_INT4}, got {value!r}"
        )
    return value


@dataclass(frozen=True, slots=True)
class QueueRetention:
    """The bound on a queue's finished jobs: the newest ``keep_completed`` completed and
    ``keep_failed`` failed jobs are kept and the workers' maintenance leader deletes the
    older ones in the background (``prune_finished``). ``None`` keeps every finished job
    of that state (RET-1). Per-job ``remove_on_complete`` / ``remove_on_fail`` (RET-2..5)
    still apply when a job finishes; this bound is an extra cap on top of them."""

    keep_completed: int | None
    keep_failed: int | None

    def __post_init__(self) -> None:
        _keep_count(self.keep_completed, "keep_completed")
        _keep_count(self.keep_failed, "keep_failed")

    @classmethod
    def default(cls) -> QueueRetention:
        """What a queue gets unless told otherwise: 10,000 completed, 100,000 failed."""
        return cls(DEFAULT_KEEP_COMPLETED, DEFAULT_KEEP_FAILED)


@dataclass(frozen=True, slots=True)
class JobRateLimit:
    """At most ``max`` jobs claimed from a queue in any window of ``duration`` (RATE-1/2).

    Any window: the limiter keeps a log of the claims, so "5 per second" never lets 6 jobs
    start within one second, across every worker of the queue, wherever the second begins
    (a fixed window would let 10 start around its boundary). ``duration`` is whole
    milliseconds, 1 ms to 2147483647 ms (a float is seconds); ``max`` 1 to 2147483647.
    """

    max: int
    duration: Duration

    def __post_init__(self) -> None:
        if (
            isinstance(self.max, bool)
            or not isinstance(self.max, int)
            or not 1 <= self.max <= _MAX_INT4
        ):
            raise InvalidOptions(
                f"a rate limit's max must be an integer between 1 and {_MAX_INT4}, got {self.max!r}"
            )
        millis = to_millis(self.duration, "a rate limit's duration")
        if not 1 <= millis <= _MAX_INT4:
            raise InvalidOptions(
                f"a rate limit's duration must be 1 ms to {_MAX_INT4} ms, got {self.duration!r}"
            )
        object.__setattr__(self, "duration", timedelta(milliseconds=millis))

    @property
    def duration_ms(self) -> int:
        return to_millis(self.duration, "duration")

    def __str__(self) -> str:
        """``5/1s``, ``100/500ms``: the form the ``limits`` command takes."""
        ms = self.duration_ms
        return f"{self.max}/{ms // 1000}s" if ms % 1000 == 0 else f"{self.max}/{ms}ms"


def validate_prune_batch(batch: int) -> int:
    """``prune_finished``'s batch: at least 1 job per queue and state."""
    if isinstance(batch, bool) or not isinstance(batch, int) or not 1 <= batch <= _MAX_INT4:
        raise InvalidOptions(f"batch must be an integer between 1 and {_MAX_INT4}, got {batch!r}")
    return batch


def validate_record_events(record: bool) -> bool:
    """``set_queue_events``' flag: ``True`` or ``False`` itself (not 1, not "off")."""
    if not isinstance(record, bool):
        raise InvalidOptions(f"record must be True or False, got {record!r}")
    return record


def _retention_json(value: Retention | None) -> JSON:
    if isinstance(value, JobRetention):
        return value.to_json()
    return value


# Values a JobOptions field leaves out of the document (BullMQ's defaults).
_DEFAULTS: dict[str, JSON] = {
    "priority": 0,
    "lifo": False,
    "delay_ms": 0,
    "attempts": 1,
    "fail_parent_on_failure": False,
    "ignore_dependency_on_failure": False,
    "remove_dependency_on_failure": False,
    "continue_parent_on_failure": False,
    "fail_on_timeout": False,
}


@dataclass(frozen=True, slots=True)
class DeduplicationOptions:
    """Deduplication of adds by an id of the caller's (the ``deduplication``
    option document, checked by ``lane._check_options``).

    While a job owns ``id`` in its queue, an add carrying the same id returns that job
    instead of storing a new one. Without ``ttl`` the owner blocks until it completes,
    fails for good or is removed; with ``ttl`` it blocks for that long from the add, also
    after it finished. ``extend_ttl`` makes every duplicate restart the TTL (debounce);
    ``replace_delayed`` makes a duplicate replace an owner that is still delayed;
    ``keep_last_if_active`` keeps the latest duplicate that arrives while the owner runs
    and adds it when the owner finishes.
    """

    id: str
    ttl: Duration | None = None
    extend_ttl: bool = False
    replace_delayed: bool = False
    keep_last_if_active: bool = False

    def to_json(self) -> dict[str, JSON]:
        """The ``deduplication`` document (only the keys that differ from the defaults)."""
        doc: dict[str, JSON] = {"id": self.id}
        if self.ttl is not None:
            doc["ttl_ms"] = to_millis(self.ttl, "deduplication ttl")
        for flag in ("extend_ttl", "replace_delayed", "keep_last_if_active"):
            if getattr(self, flag) is not False:
                doc[flag] = getattr(self, flag)
        return doc


def _deduplication_json(value: DeduplicationOptions | str | None) -> JSON:
    if isinstance(value, DeduplicationOptions):
        return value.to_json()
    if isinstance(value, str):
        return {"id": value}
    return value  # None, or something parse_options refuses with its message


@dataclass(frozen=True, slots=True)
class JobOptions:
    """Per-job options. Every field is optional; defaults are BullMQ's."""

    job_id: str | None = None
    priority: int = 0
    lifo: bool = False
    delay: Duration = 0
    attempts: int = 1
    backoff: Backoff | None = None
    timeout: Duration | None = None
    remove_on_complete: Retention | None = None
    remove_on_fail: Retention | None = None
    deduplication: DeduplicationOptions | str | None = None
    """A ``DeduplicationOptions``, or just its id (simple deduplication)."""
    repeat: RepeatOptions | None = None
    """Makes the job the first occurrence of a series."""
    fail_parent_on_failure: bool = False
    """As a flow child: a terminal failure releases the parent with a deferred failure,
    which the worker that claims it applies before its processor runs (FLOW-9)."""
    ignore_dependency_on_failure: bool = False
    """As a flow child: a terminal failure is recorded (ignored bucket) and the parent goes
    on when its other children finish (FLOW-6)."""
    remove_dependency_on_failure: bool = False
    """As a flow child: a terminal failure drops the dependency, unrecorded (FLOW-7)."""
    continue_parent_on_failure: bool = False
    """As a flow child: a terminal failure is recorded and releases the parent at once
    (FLOW-8)."""
    retry: RetryPolicy | None = None
    """``attempts`` and ``backoff`` as one value; give it or them, not both."""
    fail_on_timeout: bool = False
    """A run longer than ``timeout`` fails the job for good (``TimeoutExceeded``, RETRY-4),
    whatever the worker's own ``fail_on_timeout``."""
    meta: dict[str, JSON] | None = None
    """Stored with the job and returned in its snapshot's ``options``, never interpreted by
    the backend: the facade keeps its envelope here (connection label, unique and debounce
    tokens, propagated context)."""

    def to_json(self) -> dict[str, JSON]:
        """The ``options jsonb`` document ``lane.add_job`` takes (only non-default keys).

        Every field is checked by ``parse_options`` (the rules of ``lane._check_options``)
        before the defaults are left out, so ``priority=False`` is refused, not dropped.
        """
        attempts, backoff = self.attempts, self.backoff
        if self.retry is not None:
            if attempts != 1 or backoff is not None:
                raise InvalidOptions("give retry or attempts and backoff, not both")
            attempts, backoff = self.retry.max_attempts, self.retry.backoff
        full: dict[str, JSON] = {
            "job_id": self.job_id,
            "priority": self.priority,
            "lifo": self.lifo,
            "delay_ms": to_millis(self.delay, "delay"),
            "attempts": attempts,
            "backoff": None if backoff is None else backoff.to_json(),
            "timeout_ms": None if self.timeout is None else to_millis(self.timeout, "timeout"),
            "remove_on_complete": _retention_json(self.remove_on_complete),
            "remove_on_fail": _retention_json(self.remove_on_fail),
            "deduplication": _deduplication_json(self.deduplication),
            "repeat": self.repeat.to_json() if isinstance(self.repeat, RepeatOptions) else None,
            "fail_parent_on_failure": self.fail_parent_on_failure,
            "ignore_dependency_on_failure": self.ignore_dependency_on_failure,
            "remove_dependency_on_failure": self.remove_dependency_on_failure,
            "continue_parent_on_failure": self.continue_parent_on_failure,
            "fail_on_timeout": self.fail_on_timeout,
            "meta": self.meta,
        }
        parse_options(full)
        return {
            key: value
            for key, value in full.items()
            if value is not None and not (key in _DEFAULTS and value == _DEFAULTS[key])
        }


Options: TypeAlias = JobOptions | dict[str, JSON] | None


def _options_text(options: Options, what: str) -> str:
    """The options as the jsonb text ``lane.add_job`` receives, not yet checked."""
    if options is None:
        return "{}"
    if isinstance(options, JobOptions):
        doc = options.to_json()
    elif isinstance(options, dict):
        doc = options
    else:
        raise InvalidOptions(f"options must be JobOptions or a dict, got {type(options).__name__}")
    return dumps_json(doc, what) if doc else "{}"


def parse_job_options(options: Options, what: str = "options") -> ParsedOptions:
    """The options checked as ``lane._check_options`` checks them, and what they mean: what
    a backend without the stored functions (memory, Redis) runs. ``parse_options`` sees the
    document exactly as jsonb would receive it (tuples become lists, keys strings)."""
    text = _options_text(options, what)
    return parse_options(json.loads(text) if text != "{}" else {})


def options_document(options: Options) -> dict[str, JSON]:
    """Options as the jsonb document (a copy), from a JobOptions (checked by ``to_json``) or
    a dict (checked by whoever judges it: the stored functions, or ``parse_job_options``)."""
    text = _options_text(options, "options")
    return {} if text == "{}" else cast(dict[str, JSON], json.loads(text))


def options_json(options: Options, what: str = "options") -> str:
    """The options encoded once for a jsonb cast; no options cost nothing.

    A JobOptions is checked in Python (``to_json``), so its errors leave a caller's
    transaction usable; a dict goes to the stored functions as it is: SQL is the authority
    on documents, and ``parse_options`` is tested to agree with it."""
    return _options_text(options, what)


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
class JobSpec:
    """One job of a bulk add."""

    name: str
    data: JSON = None
    options: JobOptions | dict[str, JSON] | None = None


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
new_claimed_job = _snapshot_builder(ClaimedJob)
"""``ClaimedJob(...)`` for the claim path (rows.py)."""


@dataclass(frozen=True, slots=True)
class QueueDemand:
    """How many jobs a claimer wants from one queue; lists of these are in priority order."""

    queue: str
    limit: int
    pause_as: str | None = None
    """The queue whose pause decides for this one (None: its own). A worker started on
    ``default`` claims the destination of its forward under ``default``'s pause (PAUSE-8)."""


@dataclass(frozen=True, slots=True)
class LeaseRef:
    """A claimed job as its holder knows it: queue, id and the token of its claim."""

    queue: str
    id: str
    token: str


@dataclass(frozen=True, slots=True)
class Completion:
    queue: str
    id: str
    token: str
    result: JSON = None


@dataclass(frozen=True, slots=True)
class Failure:
    queue: str
    id: str
    token: str
    reason: str
    stacktrace: str | None = None
    discard_retry: bool = False
    stacktrace_limit: int | None = None
    """Keep at most this many tracebacks on the job, the newest (WORK-14); None keeps all
    (``lane.fail_jobs``' ``p_stacktrace_limits``)."""


FinalizeStatus: TypeAlias = Literal["ok", "lock_mismatch", "not_found", "pending_dependencies"]


@dataclass(frozen=True, slots=True)
class FinalizeOutcome:
    """Result of one item of a batched complete/fail; ``state`` is the state it moved to."""

    queue: str
    id: str
    status: FinalizeStatus
    state: JobState | None


@dataclass(frozen=True, slots=True)
class StalledOutcome:
    """One job recovered by ``recover_stalled``: back to ``waiting`` or ``failed``."""

    queue: str
    id: str
    state: JobState


@dataclass(frozen=True, slots=True)
class JobPage:
    items: list[JobRow]
    total: int
    offset: int
    limit: int


@dataclass(frozen=True, slots=True)
class LogEntry:
    ts: datetime
    message: str


@dataclass(frozen=True, slots=True)
class LogPage:
    logs: list[LogEntry]
    count: int


@dataclass(frozen=True, slots=True)
class QueueEvent:
    """One retained event (EVS-4): ``id`` increases per database; ``job_id`` may be None."""

    id: int
    queue: str
    event: str
    job_id: str | None
    data: dict[str, JSON]
    created_at: datetime


@dataclass(frozen=True, slots=True)
class Lane:
    """A queue a worker serves, with its priority (0 first) and concurrency bounds.

    ``max_concurrency=None`` lets the lane use every free slot of the worker.
    ``min_concurrency`` is advisory (slots kept warm, never preemption).
    """

    name: str
    priority: int = 0
    max_concurrency: int | None = None
    min_concurrency: int = 0
    pause_as: str | None = None
    """For a lane served because a queue the worker was started on is forwarded here
    (ROUTE-5): that queue, whose pause decides for this lane (PAUSE-8); None: its own."""

    def __post_init__(self) -> None:
        validate_queue_name(self.name)
        if self.pause_as is not None:
            validate_queue_name(self.pause_as)
        if self.priority < 0:
            raise InvalidOptions(f"lane {self.name!r}: priority must be >= 0")
        if self.max_concurrency is not None and self.max_concurrency < 1:
            raise InvalidOptions(f"lane {self.name!r}: max_concurrency must be >= 1")
        if self.min_concurrency < 0 or (
            self.max_concurrency is not None and self.min_concurrency > self.max_concurrency
        ):
            raise InvalidOptions(f"lane {self.name!r}: need 0 <= min_concurrency <= max")


# LANE-1: the default lanes (priority 0 is served first).
DEFAULT_LANES: tuple[Lane, ...] = (
    Lane("system", 0, 5, 1),
    Lane("control", 1, 3, 1),
    Lane("query", 2, 10, 1),
    Lane("session", 3, 5, 1),
    Lane("skill", 4, 3, 1),
    Lane("prompt", 5, 2, 1),
)


@dataclass(frozen=True, slots=True)
class QueueStats:
    """A queue's pause flag and its six state counts, read in one snapshot (MGMT-27,
    PAUSE-13): the counts always add up to the jobs the queue held at one instant."""

    paused: bool
    waiting: int
    delayed: int
    active: int
    waiting_children: int
    completed: int
    failed: int

    @classmethod
    def from_counts(cls, paused: bool, counts: dict[JobState, int]) -> QueueStats:
        """From the pause flag and ``get_job_counts``' six counts."""
        return cls(
            paused,
            counts["waiting"],
            counts["delayed"],
            counts["active"],
            counts["waiting-children"],
            counts["completed"],
            counts["failed"],
        )

    @property
    def counts(self) -> dict[JobState, int]:
        """The counts by state name, in ``ALL_STATES`` order."""
        return {
            "waiting": self.waiting,
            "delayed": self.delayed,
            "active": self.active,
            "waiting-children": self.waiting_children,
            "completed": self.completed,
            "failed": self.failed,
        }


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


def validate_clean_state(state: str) -> JobState:
    """``clean_jobs``' state: completed, failed, active, waiting or delayed (MGMT-18).
    waiting-children is refused: a parent waiting for its children goes with its flow."""
    if state not in ALL_STATES:
        raise InvalidOptions(f"unknown job state {state!r}; use one of {list(ALL_STATES)}")
    if state == "waiting-children":
        raise InvalidOptions(
            "clean does not take waiting-children: a parent waiting for its children is"
            " removed with remove_job, or its flow; use completed, failed, active, waiting"
            " or delayed"
        )
    return cast(JobState, state)


def validate_count(value: int, what: str) -> int:
    """A count of jobs or rows where 0 means none or the default: 0 to 2147483647."""
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= _MAX_INT4:
        raise InvalidOptions(f"{what} must be an integer between 0 and {_MAX_INT4}, got {value!r}")
    return value


def validate_flag(value: bool, what: str) -> bool:
    """A switch argument: ``True`` or ``False`` itself (not 1, not "yes")."""
    if not isinstance(value, bool):
        raise InvalidOptions(f"{what} must be True or False, got {value!r}")
    return value


def validate_stacktrace(stacktrace: object, failed_reason: object) -> tuple[list[str], str | None]:
    """``save_job_stacktrace``' arguments: a sequence of strings (not a string itself) and
    a reason or None."""
    if isinstance(stacktrace, str) or not isinstance(stacktrace, list | tuple):
        raise InvalidOptions(f"stacktrace must be a list of strings, got {stacktrace!r}")
    if not all(isinstance(entry, str) for entry in stacktrace):
        raise InvalidOptions(f"every stacktrace entry must be a string, got {stacktrace!r}")
    if failed_reason is not None and not isinstance(failed_reason, str):
        raise InvalidOptions(f"failed_reason must be a string or None, got {failed_reason!r}")
    return list(stacktrace), failed_reason


@dataclass(frozen=True, slots=True)
class PauseStatus:
    """What ``get_pause_status`` read in one snapshot (PAUSE-5, PAUSE-7, CLI-6)."""

    all_paused: bool
    """The connection-wide switch (``pause_all``)."""
    paused: frozenset[str]
    """The asked queues whose own pause flag is set."""
    restart_at_ms: int | None
    """The last restart signal, milliseconds since the epoch; None when none was given."""

    def is_paused(self, queue: str) -> bool:
        return self.all_paused or queue in self.paused
