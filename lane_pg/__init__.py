"""lane_pg: a job queue for Python whose truth lives in PostgreSQL.

Importing it loads no database driver: a backend's driver is imported when
``lane_pg.connect(url)`` (or ``App.backend()``) opens that backend. ``App`` and the worker
(``Worker``, ``WorkerConfig``, ``JobContext``) are loaded on first use of the name, so
``import lane_pg.lanes`` (whose parent package this is) does not load the worker either
(tests/test_layering.py). The facade's names (``Job``, ``Q``, ``register_job``, ...) load
the same way. ``lane_pg.Job`` is the typed job base class; a stored job's snapshot is
``lane_pg.JobRow``.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from lane_pg.backend import JobQueueBackend, connect
from lane_pg.errors import (
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
from lane_pg.metrics import DEFAULT_JOB_METRICS_RETENTION, JobMetrics
from lane_pg.schedule import RepeatOptions
from lane_pg.types import (
    ALL_STATES,
    DEFAULT_LANES,
    Backoff,
    ClaimedJob,
    Completion,
    DeduplicationOptions,
    Failure,
    FinalizeOutcome,
    JobOptions,
    JobPage,
    JobRateLimit,
    JobRetention,
    JobRow,
    JobSpec,
    JobState,
    Lane,
    LeaseRef,
    LogEntry,
    LogPage,
    QueueDemand,
    QueueEvent,
    QueueRetention,
    RepeatInfo,
    RetryPolicy,
    StalledOutcome,
)

if TYPE_CHECKING:
    from lane_pg.app import App
    from lane_pg.facade import (
        EnvelopeOverrides,
        Job,
        Q,
        QueueFacade,
        bootstrap_default,
        bootstrap_from_env,
        current_context,
        job,
        register_job,
        run_worker,
        run_worker_on,
        transaction,
    )
    from lane_pg.worker import JobContext, Worker, WorkerConfig, claim_next_blocking

_LAZY = {
    "App": "lane_pg.app",
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
    "run_worker": "lane_pg.facade",
    "run_worker_on": "lane_pg.facade",
    "JobContext": "lane_pg.worker",
    "Worker": "lane_pg.worker",
    "WorkerConfig": "lane_pg.worker",
    "claim_next_blocking": "lane_pg.worker",
}

__all__ = [
    "ALL_STATES",
    "DEFAULT_JOB_METRICS_RETENTION",
    "DEFAULT_LANES",
    "App",
    "Backoff",
    "ClaimedJob",
    "Completion",
    "ConfigurationError",
    "DeduplicationConflict",
    "DeduplicationOptions",
    "EnvelopeOverrides",
    "Failure",
    "FinalizeOutcome",
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
    "LeaseRef",
    "LockMismatch",
    "LogEntry",
    "LogPage",
    "ManuallyFailed",
    "MaxAttemptsExceeded",
    "Q",
    "QueueDemand",
    "QueueEvent",
    "QueueFacade",
    "QueueRetention",
    "RepeatConflict",
    "RepeatInfo",
    "RepeatOptions",
    "RetryPolicy",
    "SchemaVersionMismatch",
    "StalledOutcome",
    "TimeoutExceeded",
    "UnrecoverableJobError",
    "ValidationError",
    "Worker",
    "WorkerConfig",
    "bootstrap_default",
    "bootstrap_from_env",
    "claim_next_blocking",
    "connect",
    "current_context",
    "job",
    "register_job",
    "run_worker",
    "run_worker_on",
    "transaction",
]


def __getattr__(name: str) -> Any:
    """``lane_pg.App`` and the worker's names, imported when first asked for (PEP 562)."""
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'lane_pg' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
