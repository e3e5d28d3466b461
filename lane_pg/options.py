"""The one parser of job options documents (ADD-8): ``lane._check_options`` in Python.

A job's options travel as one JSON object whose keys a psql user writes by hand
(``OPTION_KEYS``). The stored function ``lane._check_options`` (sql/functions/09_options.sql)
is the authority on what it accepts; ``parse_options`` applies the same rules, with the same
error classes, in the same order, so every backend that is not PostgreSQL (the memory
backend, the Redis backend to come) and every Python-side pre-check refuses exactly what
SQL refuses. tests/conformance/test_options_agree.py feeds random documents to both and
compares; tests/test_catalogues.py checks the key lists are equal.

The rules, shortly: a JSON ``null`` value means "not given" (for any key); integers are
JSON integers (``5.0``, ``true`` and ``"5"`` are not), within the range the stored value and
the later arithmetic can hold; the first key found wrong in jsonb's key order (shorter keys
first, then bytewise) is the one reported, as ``lane._check_options`` walks ``jsonb_each``.

This module imports nothing but ``lane_pg.errors`` and ``lane_pg.types.schedule`` (the repeat
document's rules): ``lane_pg.types`` builds on it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import timedelta
from typing import Any, Literal, TypeAlias

from lane_pg.errors import InvalidJobId, InvalidOptions, InvalidPriority
from lane_pg.types.schedule import RepeatSpec, check_repeat

__all__ = [
    "DEDUPLICATION_KEYS",
    "FLOW_POLICY_FLAGS",
    "MAX_COUNT",
    "MAX_DURATION_MS",
    "MAX_JOB_ID_LENGTH",
    "MAX_PRIORITY",
    "OPTION_KEYS",
    "RETENTION_KEYS",
    "Deduplication",
    "FlowPolicy",
    "JobRetention",
    "ParsedOptions",
    "RetentionRule",
    "jsonb_key_order",
    "parse_options",
    "to_millis",
    "validate_custom_job_id",
    "validate_priority",
]

_JSON: TypeAlias = Any

MAX_PRIORITY = 2**21
MAX_JOB_ID_LENGTH = 255
MAX_DURATION_MS = 9_223_372_036_854
"""The longest duration in milliseconds (delay, timeout, backoff delays, retention age):
``n * interval '1 millisecond'`` must fit an interval (int64 microseconds)."""
MAX_COUNT = 2**31 - 1
"""The largest count (attempts, retention count and limit): an ``integer`` column, and a
limit is multiplied by a batch size in bigint arithmetic."""

RETENTION_KEYS: tuple[str, ...] = ("age_ms", "count", "limit")


def jsonb_key_order(key: str) -> tuple[int, bytes]:
    """jsonb stores an object's keys shorter first, then bytewise: ``jsonb_each`` order."""
    encoded = key.encode()
    return (len(encoded), encoded)


def to_millis(value: timedelta | float | int, what: str) -> int:
    """A duration (a ``timedelta`` or seconds) in whole milliseconds; negative durations
    are refused."""
    if isinstance(value, timedelta):
        millis = value // timedelta(milliseconds=1)
    elif isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidOptions(f"{what} must be a timedelta or a number of seconds, got {value!r}")
    else:
        millis = round(value * 1000)
    if millis < 0:
        raise InvalidOptions(f"{what} must not be negative, got {value!r}")
    return int(millis)


@dataclass(frozen=True, slots=True)
class JobRetention:
    """Which finished jobs to keep (RET-2): the newest ``count`` and/or those younger than
    ``age``; ``limit`` caps how many one finalisation removes by age.

    Built directly or with ``newest(n)`` (BullMQ's count form: the field ``count`` holds
    that name), ``age(d)``, ``age_and_count(d, n)`` and ``.with_limit(n)``; durations are
    a ``timedelta`` or seconds. ``remove_on_complete=True`` is ``newest(0)``'s effect and
    an ``int`` n is ``newest(n)``."""

    age_ms: int | None = None
    count: int | None = None
    limit: int | None = None

    @classmethod
    def newest(cls, count: int) -> JobRetention:
        """Keep the newest ``count`` finished jobs of the state."""
        return cls(count=count)

    @classmethod
    def age(cls, age: timedelta | float | int) -> JobRetention:
        """Keep the finished jobs younger than ``age``."""
        return cls(age_ms=to_millis(age, "age"))

    @classmethod
    def age_and_count(cls, age: timedelta | float | int, count: int) -> JobRetention:
        """Keep the newest ``count`` finished jobs that are also younger than ``age``."""
        return cls(age_ms=to_millis(age, "age"), count=count)

    def with_limit(self, limit: int) -> JobRetention:
        """The same rule, removing at most ``limit`` jobs by age per finalisation."""
        return replace(self, limit=limit)

    def to_json(self) -> dict[str, _JSON]:
        return {
            key: value
            for key, value in (
                ("age_ms", self.age_ms),
                ("count", self.count),
                ("limit", self.limit),
            )
            if value is not None
        }


@dataclass(frozen=True, slots=True)
class Deduplication:
    """A parsed ``deduplication`` option (DEDUP-1..9): while a job owns ``id`` in its
    queue, adds carrying the same id return that job instead of a new one."""

    id: str
    ttl_ms: int | None = None
    """Blocks duplicates this long from the add, also after the owner finished (DEDUP-4);
    None blocks until the owner finishes (DEDUP-3)."""
    extend_ttl: bool = False
    """A duplicate restarts the owner's TTL (DEDUP-6)."""
    replace_delayed: bool = False
    """A duplicate replaces an owner that is still delayed (DEDUP-7)."""
    keep_last_if_active: bool = False
    """A duplicate arriving while the owner runs is kept (only the latest) and added when
    the owner finishes (DEDUP-9)."""
    token: str | None = None
    """The push that takes the id (the facade's unique and debounce pushes): the owner row
    carries it, ``release_deduplication_key`` frees only a row carrying it, and an add with
    a reservation's token takes that reservation over (UNIQ-7, TX-10)."""
    kind: str = "dedup"
    """``dedup``: the id is owned per queue. ``unique`` (the facade's push_unique, UNIQ-1,
    migration 0018): one lock per id in the whole connection, held in the queue of its job;
    it needs ``ttl_ms``, never replaces or keeps a duplicate, and a retried job of this kind
    neither takes nor checks it (A9)."""


DEDUPLICATION_KEYS: tuple[str, ...] = (
    "id",
    "ttl_ms",
    "extend_ttl",
    "replace_delayed",
    "keep_last_if_active",
    "token",
    "kind",
)
DEDUPLICATION_KINDS: tuple[str, ...] = ("dedup", "unique")
_DEDUPLICATION_FLAGS = ("extend_ttl", "replace_delayed", "keep_last_if_active")


RetentionRule: TypeAlias = JobRetention | Literal[True] | None
"""A parsed ``remove_on_complete`` / ``remove_on_fail``: True deletes the finished job
itself, a JobRetention cleans by age and count, None (false, null, absent) keeps it."""


@dataclass(frozen=True, slots=True)
class ParsedOptions:
    """An options document ``parse_options`` accepted, with what each key means."""

    document: dict[str, _JSON]
    """The document itself, as the job stores it."""
    job_id: str | None = None
    priority: int = 0
    lifo: bool = False
    delay_ms: int = 0
    attempts: int = 1
    backoff: dict[str, _JSON] | None = None
    """The backoff object as given (``Backoff.from_json`` reads it)."""
    timeout_ms: int | None = None
    remove_on_complete: RetentionRule = None
    remove_on_fail: RetentionRule = None
    deduplication: Deduplication | None = None
    repeat: RepeatSpec | None = None
    fail_parent_on_failure: bool = False
    ignore_dependency_on_failure: bool = False
    remove_dependency_on_failure: bool = False
    continue_parent_on_failure: bool = False
    fail_on_timeout: bool = False
    meta: dict[str, _JSON] | None = None

    @property
    def parent_policy(self) -> FlowPolicy:
        """What this job's terminal failure does to its flow parent (FLOW-5..9)."""
        for flag, policy in _FLOW_FLAGS.items():
            if getattr(self, flag):
                return policy
        return "fail"


FlowPolicy: TypeAlias = Literal["fail", "fail-deferred", "ignore", "remove", "continue"]
"""A flow edge's failure policy as ``lane.flow_deps.policy`` stores it (lane._flow_policy):
``fail`` (the default) fails a waiting parent at once; ``fail-deferred``
(``fail_parent_on_failure``) releases it to be failed by the worker that claims it;
``ignore`` and ``continue`` record the failure and let it run, ``continue`` at once;
``remove`` forgets the child."""

_FLOW_FLAGS: dict[str, FlowPolicy] = {
    "fail_parent_on_failure": "fail-deferred",
    "ignore_dependency_on_failure": "ignore",
    "remove_dependency_on_failure": "remove",
    "continue_parent_on_failure": "continue",
}
FLOW_POLICY_FLAGS: tuple[str, ...] = tuple(_FLOW_FLAGS)


def _is_count(value: _JSON, maximum: int) -> bool:
    """A JSON integer in 0..maximum (Python's True is an int, JSON's true is not)."""
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= maximum


def _is_fraction(value: _JSON) -> bool:
    """A JSON number in 0..1 (jitter)."""
    return isinstance(value, int | float) and not isinstance(value, bool) and 0 <= value <= 1


def validate_custom_job_id(job_id: str) -> str:
    """ADD-4: custom ids must not collide with generated (decimal) ids or marker ids."""
    if not isinstance(job_id, str):
        raise InvalidJobId(f"job_id must be a string, got {job_id!r}")
    if not job_id or len(job_id) > MAX_JOB_ID_LENGTH:
        raise InvalidJobId(f"invalid job id {job_id!r}: use 1-{MAX_JOB_ID_LENGTH} characters")
    if job_id == "0" or job_id.startswith("0:") or (job_id.isascii() and job_id.isdigit()):
        raise InvalidJobId(
            f"invalid job id {job_id!r}: custom ids may not be 0, start with '0:' or be a pure"
            " integer (those are reserved for generated ids)"
        )
    return job_id


def validate_priority(priority: int) -> int:
    if not _is_count(priority, MAX_PRIORITY):
        raise InvalidPriority(
            f"priority must be an integer between 0 and {MAX_PRIORITY}, got {priority!r}"
        )
    return priority


def _lifo(value: _JSON) -> bool:
    if not isinstance(value, bool):
        raise InvalidOptions(f"lifo must be true or false, got {value!r}")
    return value


def _duration(key: str) -> Callable[[_JSON], int]:
    def check(value: _JSON) -> int:
        if not _is_count(value, MAX_DURATION_MS):
            raise InvalidOptions(
                f"{key} must be a non-negative integer number of milliseconds (at most"
                f" {MAX_DURATION_MS}), got {value!r}"
            )
        return int(value)

    return check


def _attempts(value: _JSON) -> int:
    if not _is_count(value, MAX_COUNT) or value < 1:
        raise InvalidOptions(
            f"attempts must be an integer >= 1 (at most {MAX_COUNT}), got {value!r}"
        )
    return int(value)


def _backoff_is_valid(doc: dict[str, _JSON]) -> bool:
    # Keys other than the ones of the backoff's type are ignored, as in SQL.
    kind = doc.get("type")
    if kind == "fixed":
        return _is_count(doc.get("delay_ms"), MAX_DURATION_MS)
    if kind == "exponential":
        cap = doc.get("cap_ms")
        return (
            _is_count(doc.get("base_ms"), MAX_DURATION_MS)
            and (cap is None or _is_count(cap, MAX_DURATION_MS))
            and ("jitter" not in doc or _is_fraction(doc["jitter"]))
        )
    if kind == "sequence":
        delays = doc.get("delays_ms")
        return (
            isinstance(delays, list | tuple)
            and len(delays) > 0
            and all(_is_count(delay, MAX_DURATION_MS) for delay in delays)
        )
    return False


def _backoff(value: _JSON) -> dict[str, _JSON]:
    if not isinstance(value, dict) or not _backoff_is_valid(value):
        raise InvalidOptions(
            f"invalid backoff {value!r}: use {{'type': 'fixed', 'delay_ms': n}},"
            " {'type': 'exponential', 'base_ms': n, 'cap_ms': n, 'jitter': 0..1} or"
            f" {{'type': 'sequence', 'delays_ms': [n, ...]}} with n in 0..{MAX_DURATION_MS}"
        )
    return value


_RETENTION_BOUNDS = {"age_ms": MAX_DURATION_MS, "count": MAX_COUNT, "limit": MAX_COUNT}


def _retention(key: str) -> Callable[[_JSON], RetentionRule]:
    def check(value: _JSON) -> RetentionRule:
        if isinstance(value, bool):
            return True if value else None
        if _is_count(value, MAX_COUNT):
            return JobRetention(count=int(value))
        if isinstance(value, dict) and all(
            part in _RETENTION_BOUNDS
            and (number is None or _is_count(number, _RETENTION_BOUNDS[part]))
            for part, number in value.items()
        ):
            return JobRetention(
                age_ms=value.get("age_ms"), count=value.get("count"), limit=value.get("limit")
            )
        raise InvalidOptions(
            f"{key} must be true, false, a count (0..{MAX_COUNT}), or"
            f" {{'age_ms', 'count', 'limit'}}, got {value!r}"
        )

    return check


def _deduplication(value: _JSON) -> Deduplication:
    # One predicate and one message for the whole object, as lane._check_options has.
    valid = (
        isinstance(value, dict)
        and all(key in DEDUPLICATION_KEYS for key in value)
        and isinstance(value.get("id"), str)
        and 1 <= len(value["id"]) <= MAX_JOB_ID_LENGTH
        and (value.get("ttl_ms") is None or _is_count(value["ttl_ms"], MAX_DURATION_MS))
        and value.get("ttl_ms") != 0
        and all(
            value.get(flag) is None or isinstance(value[flag], bool)
            for flag in _DEDUPLICATION_FLAGS
        )
        and not (value.get("extend_ttl") and value.get("ttl_ms") is None)
        and (
            value.get("token") is None
            or (isinstance(value["token"], str) and 1 <= len(value["token"]) <= MAX_JOB_ID_LENGTH)
        )
        and (value.get("kind") is None or value["kind"] in DEDUPLICATION_KINDS)
        and not (
            value.get("kind") == "unique"
            and (
                value.get("ttl_ms") is None
                or value.get("replace_delayed") is True
                or value.get("keep_last_if_active") is True
            )
        )
    )
    if not valid:
        raise InvalidOptions(
            f"invalid deduplication {value!r}: use {{'id': '1-{MAX_JOB_ID_LENGTH} characters',"
            f" 'ttl_ms': 1..{MAX_DURATION_MS}, 'extend_ttl': bool, 'replace_delayed': bool,"
            f" 'keep_last_if_active': bool, 'token': '1-{MAX_JOB_ID_LENGTH} characters',"
            " 'kind': 'dedup' | 'unique'}; extend_ttl needs ttl_ms; kind 'unique' needs"
            " ttl_ms and takes neither replace_delayed nor keep_last_if_active"
        )
    return Deduplication(
        id=value["id"],
        ttl_ms=value.get("ttl_ms"),
        token=value.get("token"),
        kind=value.get("kind") or "dedup",
        **{flag: bool(value.get(flag)) for flag in _DEDUPLICATION_FLAGS},
    )


def _flag(key: str) -> Callable[[_JSON], bool]:
    def check(value: _JSON) -> bool:
        if not isinstance(value, bool):
            raise InvalidOptions(f"{key} must be true or false, got {value!r}")
        return value

    return check


def _meta(value: _JSON) -> dict[str, _JSON]:
    if not isinstance(value, dict):
        raise InvalidOptions(f"meta must be a JSON object, got {value!r}")
    return value


_CHECKS: dict[str, Callable[[_JSON], Any]] = {
    "lifo": _lifo,
    "job_id": validate_custom_job_id,
    "backoff": _backoff,
    "attempts": _attempts,
    "delay_ms": _duration("delay_ms"),
    "priority": validate_priority,
    "timeout_ms": _duration("timeout_ms"),
    "remove_on_fail": _retention("remove_on_fail"),
    "remove_on_complete": _retention("remove_on_complete"),
    "deduplication": _deduplication,
    "repeat": check_repeat,
    **{flag: _flag(flag) for flag in _FLOW_FLAGS},
    "fail_on_timeout": _flag("fail_on_timeout"),
    "meta": _meta,
}
OPTION_KEYS: tuple[str, ...] = tuple(sorted(_CHECKS, key=jsonb_key_order))
"""Every key of an options document, in jsonb's key order (the order errors are found)."""


def parse_options(document: _JSON) -> ParsedOptions:
    """Check a decoded options document (what ``json.loads`` gives for the jsonb text) and
    say what it means; raises the ``ValidationError`` subclass SQL raises (``InvalidJobId``
    LN001, ``InvalidPriority`` LN002, ``InvalidOptions`` LN003), for the first bad key in
    jsonb's order. The document is not copied."""
    if not isinstance(document, dict):
        raise InvalidOptions(f"options must be a JSON object, got {document!r}")
    if not document:
        return ParsedOptions(document=document)
    values: dict[str, Any] = {}
    for key in sorted(document, key=jsonb_key_order):
        value = document[key]
        if value is None:  # "not given", for any key (SQL skips nulls before the key check)
            continue
        check = _CHECKS.get(key)
        if check is None:
            raise InvalidOptions(
                f"unknown option {key!r}: known options are {', '.join(sorted(OPTION_KEYS))}"
            )
        values[key] = check(value)
    # As lane._check_options, after every key: one failure policy per child, and a series
    # schedules and names its occurrences.
    if sum(1 for flag in _FLOW_FLAGS if values.get(flag) is True) > 1:
        raise InvalidOptions(
            "a flow child takes at most one of fail_parent_on_failure,"
            " ignore_dependency_on_failure, remove_dependency_on_failure and"
            " continue_parent_on_failure"
        )
    if "repeat" in values and (values.get("job_id") is not None or values.get("delay_ms", 0) != 0):
        raise InvalidOptions(
            "repeat does not take job_id or delay_ms: every occurrence gets its own id, due"
            " when its schedule says"
        )
    return ParsedOptions(document=document, **values)
