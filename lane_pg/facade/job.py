"""Typed job classes (PUSH-1, PUSH-2): a ``Job`` subclass is one kind of work, its fields
are the payload, and ``handle()`` does the work.

    @dataclass
    class SendWelcomeEmail(lane_pg.Job):
        job_name = "SendWelcomeEmail"
        queue = "mail"
        max_tries = 5
        user_id: int

        async def handle(self) -> None: ...

The class attributes are the job type's defaults; a push may override some of them
(``EnvelopeOverrides``) and operator routes may move it (``Q.route``). Only the fields travel:
they are stored as the job's ``data`` (a JSON object), so ``SELECT data->>'user_id' FROM
lane.jobs WHERE name = 'SendWelcomeEmail'`` reads them. A class is a dataclass or a pydantic
model (anything with ``model_dump`` / ``model_validate``).

The snapshot of a stored job is ``lane_pg.JobRow``; this class is what applications write
(docs/decisions.md).
"""

from __future__ import annotations

import contextvars
import dataclasses
from collections.abc import Sequence
from datetime import timedelta
from typing import Any, ClassVar, NoReturn

from lane_pg.errors import ConfigurationError, InvalidPayload, ManuallyFailed
from lane_pg.types import JSON, Backoff, Duration, check_json

DEFAULT_MAX_TRIES = 3
DEFAULT_BACKOFF = Backoff.exponential(timedelta(seconds=2), timedelta(seconds=300), jitter=0.25)
"""Seed 003's retry default for job classes (A3): 2 s doubling up to 300 s, +-25 %."""
DEFAULT_UNIQUE_FOR: Duration = timedelta(seconds=300)
DEFAULT_QUEUE = "default"


class Job:
    """Base class of typed jobs. Subclasses set ``job_name`` and implement ``handle``."""

    job_name: ClassVar[str]
    queue: ClassVar[str | None] = None
    """The queue the type belongs to; None is ``default`` (ROUTE-1)."""
    connection: ClassVar[str | None] = None
    """The connection the type belongs to; None is the default connection (CONN-8)."""
    delay: ClassVar[Duration] = 0
    """Added to the push time by ``push``/``push_with``/``bulk``; a call-site time wins."""
    max_tries: ClassVar[int] = DEFAULT_MAX_TRIES
    """Total tries, the first included (A1): stored as the job's ``attempts``."""
    backoff: ClassVar[Backoff | None] = DEFAULT_BACKOFF
    timeout: ClassVar[Duration | None] = None
    fail_on_timeout: ClassVar[bool] = False
    after_commit: ClassVar[bool] = False
    """Deferred to the commit of the ambient transaction (TX-3); an instance decides with
    an ``after_commit`` property or ``dispatch_after_commit`` (TX-13)."""
    unique_for: ClassVar[Duration] = DEFAULT_UNIQUE_FOR
    unique_until_processing: ClassVar[bool] = False
    debounce_for: ClassVar[Duration | None] = None
    max_debounce_wait: ClassVar[Duration | None] = None

    def unique_id(self) -> str | None:
        """The key of ``push_unique`` (UNIQ-1); None refuses a unique push (UNIQ-2)."""
        return None

    def dispatch_after_commit(self) -> bool:
        """Whether this instance waits for the ambient transaction's commit (TX-13): the
        class's ``after_commit`` unless a subclass decides per message (a shared carrier
        job for mail, say). A per-push override and ``LANE_PG_AFTER_COMMIT`` outrank it.

        Read on the instance, so an ``after_commit`` property decides per message too
        (read on the class, the property object itself would be truthy)."""
        value: object = self.after_commit
        if not isinstance(value, bool):
            raise ConfigurationError(
                f"{type(self).__qualname__}.after_commit must be a bool (a class attribute"
                f" or a property), got {value!r}"
            )
        return value

    def debounce_id(self) -> str | None:
        """The scope of a debounce window (UNIQ-10); None: one window for the whole type."""
        return None

    def middleware(self) -> Sequence[object]:
        """The middleware ``handle()`` runs through on a worker, the first listed outermost
        (``lane_pg.facade.middleware``: WithoutOverlapping, RateLimited, ...); none by
        default. Called once per run, on the instance, so it can read the job's fields."""
        return ()

    def fail(self, reason: str | BaseException = "failed by its handler") -> NoReturn:
        """Fail this job for good from ``handle()``, skipping its remaining tries (Laravel's
        ``$this->fail()``): raises ``ManuallyFailed``, the cause ``JobFailed`` carries
        (RETRY-9); an exception given is its ``__cause__``."""
        failure = ManuallyFailed(job_name_of(type(self)), str(reason) or type(reason).__name__)
        if isinstance(reason, BaseException):
            raise failure from reason
        raise failure

    def handle(self) -> Any:  # a plain def here, so both kinds override it cleanly
        """Do the work: ``async def handle``, or a plain ``def handle`` that the worker
        runs in a thread of its pool for sync handlers. Returning completes the job (the
        value is its result); raising fails the attempt under the retry rules (PUSH-8)."""
        raise NotImplementedError(f"{type(self).__name__} does not implement handle()")


def job_name_of(cls: type[Job]) -> str:
    name = getattr(cls, "job_name", None)
    if not isinstance(name, str) or not name:
        raise ConfigurationError(
            f"{cls.__qualname__} needs a job_name: a non-empty class attribute naming the job"
            ' type, e.g. job_name = "SendWelcomeEmail"'
        )
    return name


def encode_fields(job: Job) -> dict[str, JSON]:
    """The job's fields as the JSON object stored as its data."""
    dump = getattr(job, "model_dump", None)
    cls: Any = type(job)
    if callable(dump):
        data: Any = dump(mode="json")
    elif dataclasses.is_dataclass(cls):
        data = {
            field.name: _plain(getattr(job, field.name))
            for field in dataclasses.fields(cls)
            if field.init
        }
    else:
        raise ConfigurationError(
            f"{type(job).__qualname__}: a job class is a dataclass or a pydantic model, so its"
            " fields can be stored as JSON"
        )
    check_json(data, f"the fields of {type(job).__qualname__}")
    if not isinstance(data, dict):
        raise InvalidPayload(f"the fields of {type(job).__qualname__} are not a JSON object")
    return data


def _plain(value: Any) -> Any:
    """A nested dataclass as a dict (``dataclasses.asdict``'s rule), anything else as is."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    return value


def decode_fields(cls: type[Job], data: JSON) -> Job:
    """An instance of ``cls`` from a stored job's data; ``InvalidPayload`` when the data
    does not fit the class (a renamed field, a job pushed by an older version)."""
    if not isinstance(data, dict):
        raise InvalidPayload(f"{cls.__qualname__}: stored data is not a JSON object: {data!r}")
    validate = getattr(cls, "model_validate", None)
    try:
        if callable(validate):
            instance: Job = validate(data)
        else:
            instance = cls(**data)
    except (TypeError, ValueError) as exc:
        raise InvalidPayload(f"{cls.__qualname__}: stored data does not fit: {exc}") from exc
    return instance


_CURRENT: contextvars.ContextVar[Any] = contextvars.ContextVar("lane_pg_job_context")


def current_context() -> Any:
    """The ``JobContext`` of the typed job running in this task (logs, progress, lease
    checks); ``LookupError`` outside a job's ``handle``."""
    return _CURRENT.get()
