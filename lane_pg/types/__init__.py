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

from lane_pg.options import MAX_DURATION_MS as MAX_DURATION_MS
from lane_pg.options import MAX_JOB_ID_LENGTH as MAX_JOB_ID_LENGTH
from lane_pg.options import MAX_PRIORITY as MAX_PRIORITY
from lane_pg.options import OPTION_KEYS as OPTION_KEYS
from lane_pg.options import JobRetention as JobRetention
from lane_pg.options import to_millis as to_millis
from lane_pg.options import validate_custom_job_id as validate_custom_job_id
from lane_pg.options import validate_priority as validate_priority
from lane_pg.types.base import (
    ALL_STATES as ALL_STATES,
)
from lane_pg.types.base import (
    DEFAULT_KEEP_COMPLETED as DEFAULT_KEEP_COMPLETED,
)
from lane_pg.types.base import (
    DEFAULT_KEEP_FAILED as DEFAULT_KEEP_FAILED,
)
from lane_pg.types.base import (
    DEFAULT_MAX_STALLED_COUNT as DEFAULT_MAX_STALLED_COUNT,
)
from lane_pg.types.base import (
    DEFAULT_PRUNE_BATCH as DEFAULT_PRUNE_BATCH,
)
from lane_pg.types.base import (
    JSON as JSON,
)
from lane_pg.types.base import (
    MAX_NAME_LENGTH as MAX_NAME_LENGTH,
)
from lane_pg.types.base import (
    Duration as Duration,
)
from lane_pg.types.base import (
    JobState as JobState,
)
from lane_pg.types.base import (
    check_json as check_json,
)
from lane_pg.types.base import (
    dumps_json as dumps_json,
)
from lane_pg.types.base import (
    validate_clean_state as validate_clean_state,
)
from lane_pg.types.base import (
    validate_count as validate_count,
)
from lane_pg.types.base import (
    validate_flag as validate_flag,
)
from lane_pg.types.base import (
    validate_job_name as validate_job_name,
)
from lane_pg.types.base import (
    validate_prune_batch as validate_prune_batch,
)
from lane_pg.types.base import (
    validate_queue_name as validate_queue_name,
)
from lane_pg.types.base import (
    validate_record_events as validate_record_events,
)
from lane_pg.types.base import (
    validate_stacktrace as validate_stacktrace,
)
from lane_pg.types.groups import BATCH_CALLBACK_JOB as BATCH_CALLBACK_JOB
from lane_pg.types.groups import BATCH_CALLBACK_KINDS as BATCH_CALLBACK_KINDS
from lane_pg.types.groups import BATCH_STATES as BATCH_STATES
from lane_pg.types.groups import CHAIN_CALLBACK_JOB as CHAIN_CALLBACK_JOB
from lane_pg.types.groups import CHAIN_CATCH_RETRY as CHAIN_CATCH_RETRY
from lane_pg.types.groups import Batch as Batch
from lane_pg.types.groups import QueuedSpec as QueuedSpec
from lane_pg.types.lanes import (
    DEFAULT_LANES as DEFAULT_LANES,
)
from lane_pg.types.lanes import (
    Lane as Lane,
)
from lane_pg.types.options import (
    Backoff as Backoff,
)
from lane_pg.types.options import (
    DeduplicationOptions as DeduplicationOptions,
)
from lane_pg.types.options import (
    JobOptions as JobOptions,
)
from lane_pg.types.options import (
    JobRateLimit as JobRateLimit,
)
from lane_pg.types.options import (
    JobSpec as JobSpec,
)
from lane_pg.types.options import (
    Options as Options,
)
from lane_pg.types.options import (
    QueueRetention as QueueRetention,
)
from lane_pg.types.options import (
    Retention as Retention,
)
from lane_pg.types.options import (
    RetryPolicy as RetryPolicy,
)
from lane_pg.types.options import (
    options_document as options_document,
)
from lane_pg.types.options import (
    options_json as options_json,
)
from lane_pg.types.options import (
    parse_job_options as parse_job_options,
)
from lane_pg.types.pages import (
    JobPage as JobPage,
)
from lane_pg.types.pages import (
    JobSearchPage as JobSearchPage,
)
from lane_pg.types.pages import (
    LogEntry as LogEntry,
)
from lane_pg.types.pages import (
    LogPage as LogPage,
)
from lane_pg.types.pages import (
    PauseStatus as PauseStatus,
)
from lane_pg.types.pages import (
    QueueEvent as QueueEvent,
)
from lane_pg.types.pages import (
    QueueStats as QueueStats,
)
from lane_pg.types.schedule import RepeatOptions as RepeatOptions
from lane_pg.types.settle import (
    Completion as Completion,
)
from lane_pg.types.settle import (
    Failure as Failure,
)
from lane_pg.types.settle import (
    FinalizeOutcome as FinalizeOutcome,
)
from lane_pg.types.settle import (
    FinalizeStatus as FinalizeStatus,
)
from lane_pg.types.settle import (
    LeaseRef as LeaseRef,
)
from lane_pg.types.settle import (
    QueueDemand as QueueDemand,
)
from lane_pg.types.settle import (
    StalledOutcome as StalledOutcome,
)
from lane_pg.types.snapshots import (
    ClaimedJob as ClaimedJob,
)
from lane_pg.types.snapshots import (
    Completed as Completed,
)
from lane_pg.types.snapshots import (
    Failed as Failed,
)
from lane_pg.types.snapshots import (
    FinishedResult as FinishedResult,
)
from lane_pg.types.snapshots import (
    JobRow as JobRow,
)
from lane_pg.types.snapshots import (
    NotFinished as NotFinished,
)
from lane_pg.types.snapshots import (
    RepeatInfo as RepeatInfo,
)
from lane_pg.types.snapshots import (
    job_constructor as job_constructor,
)
from lane_pg.types.snapshots import (
    new_claimed_job as new_claimed_job,
)
from lane_pg.types.snapshots import (
    new_job as new_job,
)
from lane_pg.types.workers import WorkerInfo as WorkerInfo
