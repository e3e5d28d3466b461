"""The LaneError hierarchy and the SQLSTATE codes the stored functions raise.

Every rule violation detected in SQL is raised with a SQLSTATE of class ``LN`` so a
psql user and a Python user see the same reason. ``SQLSTATE_ERRORS`` maps each code to
the exception class the Python backends raise; the memory backend raises the same
classes directly. Errors only Python raises have codes of their own too (LN014 onwards),
so every ``LaneError`` names one. One catalogue: every code the SQL raises is mapped here
and listed in docs/errors.md's table with every other code defined here
(tests/test_catalogues.py).
"""

from __future__ import annotations

from collections.abc import Callable


class LaneError(Exception):
    """Base class of every error lane_pg raises on purpose."""

    sqlstate: str = "LN000"


class ValidationError(LaneError, ValueError):
    """Bad input: nothing was written."""

    sqlstate = "LN000"


class InvalidJobId(ValidationError):
    """A custom job id that is empty, ``0``, starts with ``0:`` or is a pure integer."""

    sqlstate = "LN001"


class InvalidPriority(ValidationError):
    """A priority outside 0..2**21."""

    sqlstate = "LN002"


class InvalidOptions(ValidationError):
    """Job options that cannot be honoured (unknown key, wrong type, out of range)."""

    sqlstate = "LN003"


class InvalidQueueName(ValidationError):
    """A queue name that is empty, too long, or contains whitespace or control characters."""

    sqlstate = "LN013"


class InvalidPayload(ValidationError):
    """Job data, a result or progress that is not JSON-serialisable."""

    sqlstate = "LN014"


class JobNotFound(LaneError, LookupError):
    """The job does not exist (never added, removed, or cleaned by retention)."""

    sqlstate = "LN004"


class LockMismatch(LaneError):
    """The lock token is not the job's current one: the caller lost its lease.

    Raised by every token-checked call; the job was not changed.
    """

    sqlstate = "LN005"


class JobStateConflict(LaneError):
    """The job is not in a state that allows the requested transition."""

    sqlstate = "LN006"


class JobLocked(LaneError):
    """The job is active under a lease that has not expired."""

    sqlstate = "LN007"


class PendingDependencies(LaneError):
    sqlstate = "LN008"


class DeduplicationConflict(LaneError):
    sqlstate = "LN009"


class RepeatConflict(LaneError):
    sqlstate = "LN010"


class ParentConflict(LaneError):
    sqlstate = "LN011"


class FailedChildren(LaneError):
    sqlstate = "LN012"


class ConfigurationError(LaneError):
    """Bad configuration detected before any SQL was issued (schema name, DSN, ...)."""

    sqlstate = "LN015"


class SchemaVersionMismatch(LaneError):
    """The installed schema is older than this library, or newer and breaking."""

    sqlstate = "LN016"

    def __init__(self, installed: int | None, required: int, message: str) -> None:
        super().__init__(message)
        self.installed = installed
        self.required = required


class LeaseLost(LockMismatch):
    """The worker no longer holds this job's lease: another worker may be running it.

    Raised by ``JobContext.ensure_lease()`` and by context writes after the loss.
    """


class JobTimedOut(LaneError):
    """The processor ran longer than the job's timeout."""

    sqlstate = "LN017"


class TimeoutExceeded(JobTimedOut):
    """A timeout that ends the job for good (with ``fail_on_timeout``): a kind of
    ``JobTimedOut``, so it shares its code."""

    def __init__(self, job_name: str, timeout: float) -> None:
        super().__init__(
            f"TimeoutExceeded: job {job_name} ran longer than its timeout of {timeout:g}s"
            " (fail_on_timeout: no retry)"
        )
        self.job_name = job_name
        self.timeout = timeout


class UnknownJobName(LaneError):
    """No processor is registered for the job's name: the job fails terminally."""

    sqlstate = "LN018"


class MaxAttemptsExceeded(LaneError):
    """The job was delivered more times than its attempts allow."""

    sqlstate = "LN019"

    def __init__(self, job_name: str, attempts: int, reason: str) -> None:
        super().__init__(f"MaxAttemptsExceeded: job {job_name} after {attempts} attempts: {reason}")
        self.job_name = job_name
        self.attempts = attempts
        self.reason = reason


class ManuallyFailed(LaneError):
    """A job failed on purpose by its handler or an operator, not by an error."""

    sqlstate = "LN020"

    def __init__(self, job_name: str, reason: str) -> None:
        super().__init__(f"ManuallyFailed: job {job_name}: {reason}")
        self.job_name = job_name
        self.reason = reason


class BatchNotFound(LaneError, LookupError):
    """The batch does not exist (never dispatched, or pruned)."""

    sqlstate = "LN030"


class UpkeepDeferred(LaneError):
    """(maintenance) An upkeep step that would have waited on another session was not
    started (an index rebuild while a transaction holds an old snapshot); the next pass
    tries again."""

    sqlstate = "LN031"


class UnrecoverableJobError(Exception):
    """Raised by a processor to fail its job terminally, skipping the remaining retries."""


class JobOutcomeSignal(Exception):
    """Raised by a processor to end its run otherwise than by a result or an error: how a
    job middleware's ``Released`` / ``Deleted`` / ``Failed`` outcome reaches the worker,
    which knows nothing of middleware (MW-2)."""


class ReleaseRequested(JobOutcomeSignal):
    """Hand the job back after ``delay`` seconds with its attempt given back (RETRY-6)."""

    def __init__(self, delay: float, reason: str) -> None:
        super().__init__(f"released for {delay:g}s: {reason}")
        self.delay = delay
        self.reason = reason


class DeleteRequested(JobOutcomeSignal):
    """Remove the job without a failed record (a middleware's ``Deleted``)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class FailRequested(JobOutcomeSignal, UnrecoverableJobError):
    """Fail the job for good now, its failed record written (a middleware's ``Failed``):
    an ``UnrecoverableJobError``, so a worker that only knows that one still ends it."""


SQLSTATE_ERRORS: dict[str, type[LaneError]] = {
    cls.sqlstate: cls
    for cls in (
        ValidationError,
        InvalidJobId,
        InvalidPriority,
        InvalidOptions,
        InvalidQueueName,
        InvalidPayload,
        JobNotFound,
        LockMismatch,
        JobStateConflict,
        JobLocked,
        PendingDependencies,
        DeduplicationConflict,
        RepeatConflict,
        ParentConflict,
        FailedChildren,
        BatchNotFound,
    )
}


def error_for_sqlstate(sqlstate: str | None, message: str) -> LaneError | None:
    """The LaneError for a SQLSTATE raised by a lane function, or None for other codes."""
    if sqlstate is None:
        return None
    cls = SQLSTATE_ERRORS.get(sqlstate)
    return cls(message) if cls is not None else None


def _driver_message(exc: BaseException) -> str:
    diag = getattr(exc, "diag", None)
    primary = getattr(diag, "message_primary", None)
    if isinstance(primary, str) and primary:
        return primary
    message = getattr(exc, "message", None)
    if isinstance(message, str) and message:
        return message
    return str(exc)


def translate_error(exc: BaseException) -> LaneError | None:
    """The LaneError for a driver error raised by a ``lane`` function, else None.

    Works for asyncpg, psycopg and SQLAlchemy alike: follows SQLAlchemy's ``.orig`` and the
    ``__cause__`` chain (SQLAlchemy's asyncpg adapter wraps twice) and takes the message from
    the innermost error carrying the SQLSTATE. A LaneError is returned as it is.
    """
    if isinstance(exc, LaneError):
        return exc
    found: BaseException | None = None
    code: str | None = None
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        state = getattr(current, "sqlstate", None) or getattr(current, "pgcode", None)
        if isinstance(state, str) and state in SQLSTATE_ERRORS:
            found, code = current, state
        orig = getattr(current, "orig", None)
        current = orig if isinstance(orig, BaseException) else current.__cause__
    if found is None:
        return None
    return error_for_sqlstate(code, _driver_message(found))


UNREACHABLE_SQLSTATE_CLASSES = ("08", "53", "57")
"""SQLSTATE classes of a server that cannot take the connection now: connection exceptions,
insufficient resources (too many connections), operator intervention (starting up,
shutting down)."""


def is_server_unreachable(
    exc: BaseException,
    *,
    also: tuple[type[BaseException], ...] = (),
    never: Callable[[BaseException], bool] | None = None,
) -> bool:
    """Whether ``exc`` says the server could not be reached, so trying again (or another
    store) may work: an ``OSError`` (refused, reset, timed out, a host name that does not
    resolve yet), one of ``also``, or a driver error of SQLSTATE class 08, 53 or 57, looked
    for along the ``__cause__`` chain. A ``LaneError`` (bad input, configuration, a missing
    or older schema) never is, nor what ``never`` accepts; a failed password, a database
    that does not exist and a malformed DSN are not fixed by waiting. The one rule of the
    worker's start-up wait and the failover driver."""
    current: BaseException | None = exc
    seen: set[int] = set()
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, LaneError) or (never is not None and never(current)):
            return False
        if isinstance(current, OSError) or (also and isinstance(current, also)):
            return True
        sqlstate = getattr(current, "sqlstate", None)
        if isinstance(sqlstate, str) and sqlstate[:2] in UNREACHABLE_SQLSTATE_CLASSES:
            return True
        current = current.__cause__
    return False


def describe_exception(error: BaseException | str) -> str:
    """``"ValueError: bad input"``, the one-line form of an exception that log lines, events
    and dead letters carry (a message that already starts with its type is kept as is; a
    string is taken as already described)."""
    if isinstance(error, str):
        return error
    name = type(error).__name__
    text = str(error)
    if not text:
        return name
    return text if text.startswith(f"{name}:") else f"{name}: {text}"
