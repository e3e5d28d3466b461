"""Job middleware (MW-1..8, MW-10): layers a typed job's ``handle()`` runs through.

    class ImportUsers(lane_pg.Job):
        def middleware(self):
            return [WithoutOverlapping(f"import:{self.account_id}").expire_after(600),
                    RateLimited(10, timedelta(minutes=1)).by("crm-api"),
                    ThrottlesExceptions(5, timedelta(minutes=5))]

A middleware is any object with ``async def handle(self, job, next) -> JobOutcome``: ``job``
is the typed instance, ``next(job)`` runs the rest of the chain (the handler last) and
returns its outcome. The first one listed is the outermost. A handler that raises raises
through every layer (``ThrottlesExceptions`` and ``FailOnException`` see it); a handler that
returns gives ``Completed(result)``.

What the worker does with each outcome (``TypedJobProcessor``, lane_pg/facade/runner.py):
``Completed`` completes the job with the result; ``Released(delay)`` puts it back, delayed,
with the attempt given back (RETRY-6); ``Failed(reason)`` fails it for good now, its failed
record written; ``Deleted`` removes it without a failed record.

Locks and limiters live in the backend the job was claimed from (the ``locks`` handle:
``lane.locks`` and ``lane.limiters`` on PostgreSQL), so every worker of that database
agrees; a middleware reaches it through the running job's context.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Protocol, TypeAlias

from lane_pg.errors import ConfigurationError
from lane_pg.facade.job import Job, current_context, job_name_of
from lane_pg.types import JSON, Duration, to_millis

log = logging.getLogger("lane_pg.facade")

DEFAULT_LOCK_TTL = timedelta(days=1)
"""WithoutOverlapping's backstop expiry for a job without ``timeout`` or ``expire_after``:
the lock ends with its holder's run anyway (the job no longer active under its token), so
this only bounds a run that stays active and never releases."""
DEFAULT_RELEASE_AFTER = timedelta(seconds=1)
"""WithoutOverlapping's delay for a job whose key is held: 0 (Laravel's) makes the worker
claim and release the job in a tight loop for as long as the holder runs."""


# ------------------------------------------------------------------------------ outcomes


@dataclass(frozen=True, slots=True)
class Completed:
    """The handler ran (or a middleware answers for it): the job completes with ``result``."""

    result: JSON = None


@dataclass(frozen=True, slots=True)
class Released:
    """Back to the queue after ``delay`` without spending an attempt (RETRY-6)."""

    delay: Duration = 0
    reason: str = "released by a middleware"


@dataclass(frozen=True, slots=True)
class Failed:
    """Failed for good now, no retry; the failed record is written. ``exception``, when
    given, is kept as the cause (its traceback goes with the record)."""

    reason: str
    exception: BaseException | None = None


@dataclass(frozen=True, slots=True)
class Deleted:
    """Removed without a failed record."""

    reason: str = "deleted by a middleware"


JobOutcome: TypeAlias = Completed | Released | Failed | Deleted
OUTCOMES = (Completed, Released, Failed, Deleted)

Next: TypeAlias = Callable[[Any], Awaitable[JobOutcome]]
"""The rest of the chain: takes the job, returns its outcome."""


class Middleware(Protocol):
    """What ``Job.middleware()`` lists."""

    async def handle(self, job: Any, next: Next) -> JobOutcome: ...


async def run_middleware(middleware: Sequence[object], job: Job, handler: Next) -> JobOutcome:
    """``handler`` inside ``middleware``, the first listed outermost (MW-1)."""
    call = handler
    for layer in reversed(middleware):
        call = _layer(layer, call)
    outcome = await call(job)
    if not isinstance(outcome, OUTCOMES):
        raise ConfigurationError(
            f"a middleware of {type(job).__qualname__} returned {outcome!r}: return"
            " Completed, Released, Failed or Deleted (lane_pg.facade.middleware)"
        )
    return outcome


def _layer(layer: object, inner: Next) -> Next:
    handle = getattr(layer, "handle", None)
    if not callable(handle):
        raise ConfigurationError(
            f"{layer!r} is not a job middleware: it needs async def handle(self, job, next)"
        )

    async def step(job: Any) -> JobOutcome:
        outcome: JobOutcome = await handle(job, inner)
        return outcome

    return step


@dataclass(frozen=True, slots=True)
class _Run:
    """The running job as the locks know it (its claim's token names the run)."""

    backend: Any
    queue: str
    job_id: str
    token: str
    timeout_ms: int | None


def _run() -> _Run:
    ctx = current_context()
    job = ctx.job
    return _Run(ctx.backend, job.queue, job.id, job.lock_token, job.timeout_ms)


def _seconds(duration: Duration, what: str) -> float:
    millis = to_millis(duration, what)
    if millis < 0:
        raise ConfigurationError(f"{what} must not be negative, got {duration!r}")
    return millis / 1000


# ----------------------------------------------------------------------- the middleware


class WithoutOverlapping:
    """One job of a key runs at a time (MW-3): the lock ``overlap:{job_name}:{key}`` is
    held for the handler's duration. A job that finds it held is released after
    ``release_after`` (1 s by default), or deleted with ``dont_release()``.

    The lock names the run holding it, so it ends when that run ends, a worker killed
    mid-job included (once stalled recovery took its job back); ``expire_after`` is the
    backstop (default: the job's timeout, else a day). If the release after the handler
    fails, a warning is logged and the handler's outcome stands (MW-4)."""

    def __init__(self, key: str | int = "") -> None:
        self.key = str(key)
        self.prefix = "overlap:"
        self.release_delay: Duration = DEFAULT_RELEASE_AFTER
        self.releases = True
        self.ttl: Duration | None = None
        self.per_job_name = True

    def release_after(self, delay: Duration) -> WithoutOverlapping:
        _seconds(delay, "release_after")
        self.release_delay = delay
        return self

    def dont_release(self) -> WithoutOverlapping:
        self.releases = False
        return self

    def expire_after(self, ttl: Duration) -> WithoutOverlapping:
        if _seconds(ttl, "expire_after") <= 0:
            raise ConfigurationError(f"expire_after must be positive, got {ttl!r}")
        self.ttl = ttl
        return self

    def with_prefix(self, prefix: str) -> WithoutOverlapping:
        self.prefix = prefix
        return self

    def shared(self) -> WithoutOverlapping:
        """One lock for every job class using this key (the job name left out)."""
        self.per_job_name = False
        return self

    def lock_key(self, job: Job) -> str:
        name = f"{job_name_of(type(job))}:" if self.per_job_name else ""
        return f"{self.prefix}{name}{self.key}"

    async def handle(self, job: Job, next: Next) -> JobOutcome:
        run = _run()
        key = self.lock_key(job)
        ttl = self.ttl
        if ttl is None:
            ttl = DEFAULT_LOCK_TTL if run.timeout_ms is None else run.timeout_ms / 1000
        locks = run.backend.locks
        if not await locks.acquire_lock(key, run.queue, run.job_id, run.token, ttl):
            reason = f"WithoutOverlapping: {key} is held by another job"
            return Released(self.release_delay, reason) if self.releases else Deleted(reason)
        try:
            return await next(job)
        finally:
            try:
                await locks.release_lock(key, run.queue, run.job_id, run.token)
            except Exception as exc:
                # MW-4: the handler's side effects are done; failing the job would run
                # them again. The lock ends with this run anyway (or at its expiry).
                log.warning(
                    "job %s/%s: releasing lock %s failed (%s); the handler's outcome stands",
                    run.queue,
                    run.job_id,
                    key,
                    exc,
                )


class RateLimited:
    """At most ``max_attempts`` runs per ``decay`` for a key (MW-5): a job over the budget
    is released until the window ends (or after ``release_after``), its attempt given
    back. The key is the job name unless ``by(key)`` names one (jobs of several classes
    can share a budget). The budget is checked and counted in one step on the backend."""

    def __init__(self, max_attempts: int, decay: Duration) -> None:
        if max_attempts < 1:
            raise ConfigurationError(f"RateLimited needs max_attempts >= 1, got {max_attempts}")
        if _seconds(decay, "decay") <= 0:
            raise ConfigurationError(f"RateLimited needs a positive decay, got {decay!r}")
        self.max_attempts = max_attempts
        self.decay = decay
        self.key: str | None = None
        self.release_delay: Duration | None = None

    def by(self, key: str) -> RateLimited:
        self.key = key
        return self

    def release_after(self, delay: Duration) -> RateLimited:
        _seconds(delay, "release_after")
        self.release_delay = delay
        return self

    async def handle(self, job: Job, next: Next) -> JobOutcome:
        key = f"rate:{self.key or job_name_of(type(job))}"
        wait = await _run().backend.locks.hit_rate_limit(key, self.max_attempts, self.decay)
        if wait is None:
            return await next(job)
        delay = wait if self.release_delay is None else self.release_delay
        return Released(delay, f"RateLimited: {key} allows {self.max_attempts} per window")


class ThrottlesExceptions:
    """After ``max_attempts`` consecutive handler failures (a success resets the count),
    jobs of the key are released without running for ``decay`` (MW-6). Released jobs
    wait until the throttle closes, or ``backoff`` when set. The key is the job name
    unless ``by(key)`` names one. A failure still fails its own attempt as usual."""

    def __init__(self, max_attempts: int, decay: Duration) -> None:
        if max_attempts < 1:
            raise ConfigurationError(
                f"ThrottlesExceptions needs max_attempts >= 1, got {max_attempts}"
            )
        if _seconds(decay, "decay") <= 0:
            raise ConfigurationError(f"ThrottlesExceptions needs a positive decay, got {decay!r}")
        self.max_attempts = max_attempts
        self.decay = decay
        self.key: str | None = None
        self.backoff_delay: Duration | None = None

    def by(self, key: str) -> ThrottlesExceptions:
        self.key = key
        return self

    def backoff(self, delay: Duration) -> ThrottlesExceptions:
        _seconds(delay, "backoff")
        self.backoff_delay = delay
        return self

    async def handle(self, job: Job, next: Next) -> JobOutcome:
        key = f"throttle:{self.key or job_name_of(type(job))}"
        locks = _run().backend.locks
        open_for = await locks.check_throttle(key)
        if open_for is not None:
            delay = open_for if self.backoff_delay is None else self.backoff_delay
            return Released(delay, f"ThrottlesExceptions: {key} is throttled after failures")
        try:
            outcome = await next(job)
        except Exception:
            await locks.record_throttle_outcome(key, True, self.max_attempts, self.decay)
            raise
        if isinstance(outcome, Completed):
            await locks.record_throttle_outcome(key, False, self.max_attempts, self.decay)
        return outcome


class Skip:
    """Deletes the job without running it when a condition holds (MW-7): ``Skip.when(c)``
    or ``Skip.unless(c)``, ``c`` a bool or a function of no arguments read at run time."""

    def __init__(self, condition: bool | Callable[[], bool], *, skip_if: bool) -> None:
        self.condition = condition
        self.skip_if = skip_if

    @classmethod
    def when(cls, condition: bool | Callable[[], bool]) -> Skip:
        return cls(condition, skip_if=True)

    @classmethod
    def unless(cls, condition: bool | Callable[[], bool]) -> Skip:
        return cls(condition, skip_if=False)

    async def handle(self, job: Job, next: Next) -> JobOutcome:
        holds = self.condition() if callable(self.condition) else self.condition
        if bool(holds) == self.skip_if:
            return Deleted("skipped by Skip middleware")
        return await next(job)


class SkipIfBatchCancelled:
    """Deletes the job without running it when its batch is cancelled (MW-9): by an
    operator, or by the batch's first failure unless it allows failures. The deleted job
    still settles against its batch, so the batch can finish. A job of no batch goes on
    without a read."""

    async def handle(self, job: Job, next: Next) -> JobOutcome:
        ctx = current_context()
        meta = ctx.job.options.get("meta")
        batch_id = meta.get("batch_id") if isinstance(meta, dict) else None
        if isinstance(batch_id, str):
            batch = await ctx.backend.batches.find_batch(batch_id)
            if batch is not None and batch.cancelled:
                return Deleted(f"batch {batch_id} is cancelled")
        return await next(job)


class FailOnException:
    """Errors of the given types (or whose message contains ``on_substring(s)``) fail the
    job for good at once instead of being retried (MW-8)."""

    def __init__(self, exceptions: Sequence[type[BaseException]] = ()) -> None:
        self.exceptions = tuple(exceptions)
        self.substrings: list[str] = []

    def on_substring(self, text: str) -> FailOnException:
        self.substrings.append(text)
        return self

    def matches(self, error: BaseException) -> bool:
        message = str(error)
        return isinstance(error, self.exceptions) or any(s in message for s in self.substrings)

    async def handle(self, job: Job, next: Next) -> JobOutcome:
        try:
            return await next(job)
        except Exception as exc:
            if not self.matches(exc):
                raise
            return Failed(f"{type(exc).__name__}: {exc}", exc)


__all__ = [
    "Completed",
    "Deleted",
    "FailOnException",
    "Failed",
    "JobOutcome",
    "Middleware",
    "Next",
    "RateLimited",
    "Released",
    "Skip",
    "ThrottlesExceptions",
    "WithoutOverlapping",
    "run_middleware",
]
