"""What a job is added with: options, backoff, retries, deduplication, retention and rate
limits, and the spec of one job to add."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import timedelta
from typing import Literal, TypeAlias, cast

from lane_pg.errors import (
    InvalidOptions,
)
from lane_pg.options import MAX_DURATION_MS, JobRetention, ParsedOptions, parse_options, to_millis
from lane_pg.types.base import (
    _MAX_INT4,
    DEFAULT_KEEP_COMPLETED,
    DEFAULT_KEEP_FAILED,
    JSON,
    Duration,
    dumps_json,
)
from lane_pg.types.schedule import RepeatOptions


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
    (``lane_pg.scheduler.LaneConfig.retry_policy``)."""

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
class JobSpec:
    """One job of a bulk add."""

    name: str
    data: JSON = None
    options: JobOptions | dict[str, JSON] | None = None
