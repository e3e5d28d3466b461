"""The Laravel-style facade (seed 003): typed job classes, ``Q``, connections and routes.

It sits on the backend contract and the worker and imports no database driver and no
backend implementation but memory (the import contracts of pyproject.toml): a connection
(``lane_pg.facade.connection``) offers the Laravel-style operations over the handles of a
backend opened through ``lane_pg.backend.connect``.
"""

from __future__ import annotations

from lane_pg.facade.bootstrap import bootstrap_default, bootstrap_from_env
from lane_pg.facade.connection import (
    SETTLED,
    STALE,
    Ack,
    BackendDriver,
    Connection,
    DriverBase,
    Nack,
    QueueDriver,
    Release,
    Reservation,
)
from lane_pg.facade.envelope import DebounceOptions, Envelope, EnvelopeOverrides
from lane_pg.facade.events import (
    Events,
    JobAttempted,
    JobDebounced,
    JobExceptionOccurred,
    JobFailed,
    JobIdentity,
    JobProcessed,
    JobProcessing,
    JobQueued,
    JobQueueing,
    JobReleased,
    JobReleasedAfterException,
    JobTimedOut,
    Looping,
    QueueFailedOver,
    QueuePaused,
    QueueResumed,
    QueuesPaused,
    QueuesResumed,
    UniqueJobSkipped,
    WorkerInterrupted,
    WorkerQueuePaused,
    WorkerQueueResumed,
    WorkerStarting,
    WorkerStopping,
)
from lane_pg.facade.failover import ConnectionUnavailable, FailoverDriver
from lane_pg.facade.failover_worker import FailoverWorker
from lane_pg.facade.job import DEFAULT_BACKOFF, Job, current_context
from lane_pg.facade.middleware import (
    Completed,
    Deleted,
    Failed,
    FailOnException,
    JobOutcome,
    Middleware,
    RateLimited,
    Released,
    Skip,
    SkipIfBatchCancelled,
    ThrottlesExceptions,
    WithoutOverlapping,
)
from lane_pg.facade.null import NullBackend, NullDriver
from lane_pg.facade.pausing import FacadeWorkerHooks, PausesQueues
from lane_pg.facade.queue import Q, QueueFacade
from lane_pg.facade.registry import DEFAULT_REGISTRY, JobRegistry, job, register_job
from lane_pg.facade.runner import TypedJobProcessor, typed_processors
from lane_pg.facade.sync import SyncDriver
from lane_pg.facade.transaction import Transaction, current_transaction, transaction
from lane_pg.facade.workers import run_worker, run_worker_on

__all__ = [
    "DEFAULT_BACKOFF",
    "DEFAULT_REGISTRY",
    "SETTLED",
    "STALE",
    "Ack",
    "BackendDriver",
    "Completed",
    "Connection",
    "ConnectionUnavailable",
    "DebounceOptions",
    "Deleted",
    "DriverBase",
    "Envelope",
    "EnvelopeOverrides",
    "Events",
    "FacadeWorkerHooks",
    "FailOnException",
    "Failed",
    "FailoverDriver",
    "FailoverWorker",
    "Job",
    "JobAttempted",
    "JobDebounced",
    "JobExceptionOccurred",
    "JobFailed",
    "JobIdentity",
    "JobOutcome",
    "JobProcessed",
    "JobProcessing",
    "JobQueued",
    "JobQueueing",
    "JobRegistry",
    "JobReleased",
    "JobReleasedAfterException",
    "JobTimedOut",
    "Looping",
    "Middleware",
    "Nack",
    "NullBackend",
    "NullDriver",
    "PausesQueues",
    "Q",
    "QueueDriver",
    "QueueFacade",
    "QueueFailedOver",
    "QueuePaused",
    "QueueResumed",
    "QueuesPaused",
    "QueuesResumed",
    "RateLimited",
    "Release",
    "Released",
    "Reservation",
    "Skip",
    "SkipIfBatchCancelled",
    "SyncDriver",
    "ThrottlesExceptions",
    "Transaction",
    "TypedJobProcessor",
    "UniqueJobSkipped",
    "WithoutOverlapping",
    "WorkerInterrupted",
    "WorkerQueuePaused",
    "WorkerQueueResumed",
    "WorkerStarting",
    "WorkerStopping",
    "bootstrap_default",
    "bootstrap_from_env",
    "current_context",
    "current_transaction",
    "job",
    "register_job",
    "run_worker",
    "run_worker_on",
    "transaction",
    "typed_processors",
]
