"""lane_pg: a job queue for Python whose truth lives in PostgreSQL.

What a user calls is here: ``App`` (processors, ``app.run_worker(...)``, the one way to run
a worker from code), the facade (``Q``, the typed job base class ``Job``,
``register_job``), ``connect`` / ``migrate``, ``add_job`` / ``add_job_sync`` (and
``add_jobs`` / ``add_jobs_sync``) on the caller's own connection, inside its transaction,
``MemoryBackend``, the errors and the values users pass or read (``JobOptions``,
``Backoff``, ``JobSpec``, ``JobRow``, ``Lane``, ...). The types of the protocol between a
worker and a backend (``Completion``, ``Failure``, ``LeaseRef``, ...) live in
``lane_pg.types``; asking this package for them still works, with a
``DeprecationWarning``.

Importing it loads no database driver: every name that needs one (``add_job``,
``migrate``, ``MemoryBackend``) and every layer above the backend contract (``App``, the
facade, the worker) is imported on first use of the name (PEP 562), so
``import lane_pg.scheduler`` (whose parent package this is) loads neither the worker nor a
driver (tests/test_imports.py).
"""

from __future__ import annotations

import importlib
import warnings
from typing import TYPE_CHECKING, Any

from lane_pg import (
    _moved,  # noqa: F401 - old import paths keep working (lane_pg._moved)
    context,  # noqa: F401 - lane_pg.context.add(...) after "import lane_pg"; dependency-free
    tracing,  # noqa: F401 - lane_pg.tracing.enable(); imports OpenTelemetry only when enabled
)
from lane_pg.backend import JobQueueBackend, connect
from lane_pg.errors import (
    BatchNotFound,
    ConfigurationError,
    DeduplicationConflict,
    InvalidJobId,
    InvalidOptions,
    InvalidPayload,
    InvalidPriority,
    InvalidQueueName,
    JobLocked,
    JobNotFound,
    JobStateConflict,
    JobTimedOut,
    LaneError,
    LeaseLost,
    LockMismatch,
    ManuallyFailed,
    MaxAttemptsExceeded,
    RepeatConflict,
    SchemaVersionMismatch,
    TimeoutExceeded,
    UnrecoverableJobError,
    ValidationError,
)
from lane_pg.types import (
    ALL_STATES,
    DEFAULT_LANES,
    Backoff,
    Batch,
    DeduplicationOptions,
    JobOptions,
    JobPage,
    JobRateLimit,
    JobRetention,
    JobRow,
    JobSpec,
    JobState,
    Lane,
    LogEntry,
    LogPage,
    QueueEvent,
    QueueRetention,
    RepeatInfo,
    RetryPolicy,
)
from lane_pg.types.metrics import DEFAULT_JOB_METRICS_RETENTION, JobMetrics
from lane_pg.types.schedule import RepeatOptions

if TYPE_CHECKING:
    from lane_pg.facade import (
        EnvelopeOverrides,
        Job,
        Q,
        QueueFacade,
        bootstrap_default,
        bootstrap_from_env,
        current_context,
        register_job,
    )
    from lane_pg.facade.app import App
    from lane_pg.facade.fake import FakedBatch, FakedChain, QueueFake
    from lane_pg.facade.middleware import (
        Completed,
        Deleted,
        Failed,
        FailOnException,
        JobOutcome,
        RateLimited,
        Released,
        Skip,
        SkipIfBatchCancelled,
        ThrottlesExceptions,
        WithoutOverlapping,
    )
    from lane_pg.facade.registry import job
    from lane_pg.facade.transaction import transaction
    from lane_pg.memory import MemoryBackend
    from lane_pg.postgres.enqueue import add_job, add_job_sync, add_jobs, add_jobs_sync
    from lane_pg.postgres.schema import migrate
    from lane_pg.worker import JobContext, Worker, WorkerConfig, claim_next_blocking

_LAZY = {
    "App": "lane_pg.facade.app",
    "EnvelopeOverrides": "lane_pg.facade",
    "Job": "lane_pg.facade",
    "Q": "lane_pg.facade",
    "QueueFacade": "lane_pg.facade",
    "bootstrap_default": "lane_pg.facade",
    "bootstrap_from_env": "lane_pg.facade",
    "current_context": "lane_pg.facade",
    "job": "lane_pg.facade",
    "register_job": "lane_pg.facade",
    "transaction": "lane_pg.facade",
    "FakedBatch": "lane_pg.facade.fake",
    "FakedChain": "lane_pg.facade.fake",
    "QueueFake": "lane_pg.facade.fake",
    "Completed": "lane_pg.facade.middleware",
    "Deleted": "lane_pg.facade.middleware",
    "FailOnException": "lane_pg.facade.middleware",
    "Failed": "lane_pg.facade.middleware",
    "JobOutcome": "lane_pg.facade.middleware",
    "RateLimited": "lane_pg.facade.middleware",
    "Released": "lane_pg.facade.middleware",
    "Skip": "lane_pg.facade.middleware",
    "SkipIfBatchCancelled": "lane_pg.facade.middleware",
    "ThrottlesExceptions": "lane_pg.facade.middleware",
    "WithoutOverlapping": "lane_pg.facade.middleware",
    "JobContext": "lane_pg.worker",
    "Worker": "lane_pg.worker",
    "WorkerConfig": "lane_pg.worker",
    "claim_next_blocking": "lane_pg.worker",
    "MemoryBackend": "lane_pg.memory",
    "add_job": "lane_pg.postgres.enqueue",
    "add_job_sync": "lane_pg.postgres.enqueue",
    "add_jobs": "lane_pg.postgres.enqueue",
    "add_jobs_sync": "lane_pg.postgres.enqueue",
    "migrate": "lane_pg.postgres.schema",
}
"""Public names imported on first use, by their home module."""

_KEPT = {
    "run_worker": "lane_pg.facade",
    "run_worker_on": "lane_pg.facade",
}
"""Names code written earlier calls (WORK-17), still served but no longer offered:
``App.run_worker`` runs a worker the same way (``lane_pg.facade.workers``)."""

_MOVED = {
    "ClaimedJob": "lane_pg.types",
    "Completion": "lane_pg.types",
    "Failure": "lane_pg.types",
    "FinalizeOutcome": "lane_pg.types",
    "LeaseRef": "lane_pg.types",
    "QueueDemand": "lane_pg.types",
    "StalledOutcome": "lane_pg.types",
}
"""The worker <-> backend protocol's types, once exported here: served from their home
module with a ``DeprecationWarning`` naming it."""

__all__ = [
    "ALL_STATES",
    "DEFAULT_JOB_METRICS_RETENTION",
    "DEFAULT_LANES",
    "App",
    "Backoff",
    "Batch",
    "BatchNotFound",
    "Completed",
    "ConfigurationError",
    "DeduplicationConflict",
    "DeduplicationOptions",
    "Deleted",
    "EnvelopeOverrides",
    "FailOnException",
    "Failed",
    "FakedBatch",
    "FakedChain",
    "InvalidJobId",
    "InvalidOptions",
    "InvalidPayload",
    "InvalidPriority",
    "InvalidQueueName",
    "Job",
    "JobContext",
    "JobLocked",
    "JobMetrics",
    "JobNotFound",
    "JobOptions",
    "JobOutcome",
    "JobPage",
    "JobQueueBackend",
    "JobRateLimit",
    "JobRetention",
    "JobRow",
    "JobSpec",
    "JobState",
    "JobStateConflict",
    "JobTimedOut",
    "Lane",
    "LaneError",
    "LeaseLost",
    "LockMismatch",
    "LogEntry",
    "LogPage",
    "ManuallyFailed",
    "MaxAttemptsExceeded",
    "MemoryBackend",
    "Q",
    "QueueEvent",
    "QueueFacade",
    "QueueFake",
    "QueueRetention",
    "RateLimited",
    "Released",
    "RepeatConflict",
    "RepeatInfo",
    "RepeatOptions",
    "RetryPolicy",
    "SchemaVersionMismatch",
    "Skip",
    "SkipIfBatchCancelled",
    "ThrottlesExceptions",
    "TimeoutExceeded",
    "UnrecoverableJobError",
    "ValidationError",
    "WithoutOverlapping",
    "Worker",
    "WorkerConfig",
    "add_job",
    "add_job_sync",
    "add_jobs",
    "add_jobs_sync",
    "bootstrap_default",
    "bootstrap_from_env",
    "claim_next_blocking",
    "connect",
    "current_context",
    "job",
    "migrate",
    "register_job",
    "transaction",
]


def __getattr__(name: str) -> Any:
    """A public name imported on first use; an old name served from its home module."""
    module = _LAZY.get(name) or _KEPT.get(name)
    if module is not None:
        value = getattr(importlib.import_module(module), name)
        globals()[name] = value
        return value
    home = _MOVED.get(name)
    if home is None:
        raise AttributeError(f"module 'lane_pg' has no attribute {name!r}")
    # Not cached in globals(): every use outside the home module is told, once per place.
    warnings.warn(
        f"lane_pg.{name} is not part of the public API: import it from {home}",
        DeprecationWarning,
        stacklevel=2,
    )
    return getattr(importlib.import_module(home), name)


def __dir__() -> list[str]:
    return sorted({*__all__, *(n for n in globals() if n.startswith("__"))})
