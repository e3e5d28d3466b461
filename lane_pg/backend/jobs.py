"""Adding, reading and changing single jobs (ADD, MGMT).

The rules every backend follows are in ``lane_pg.backend`` (the package docstring)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import KW_ONLY
from datetime import datetime

from lane_pg.backend.operation import Arguments, Handle, operation
from lane_pg.types import (
    JSON,
    Duration,
    FinishedResult,
    JobOptions,
    JobRow,
    JobSpec,
    JobState,
    QueuedSpec,
)


class AddJob(Arguments[JobRow]):
    """Add one job and return its snapshot (ADD-1..10).

    Without a custom ``job_id`` the id is the next value of one global sequence as a
    decimal string. With a custom id that already exists in the queue, the existing job
    is returned unchanged: no write, no event, no sequence advance (ADD-3). A delay > 0
    stores the job ``delayed`` with ``available_at = now + delay`` and writes
    ``added`` + ``delayed``; otherwise ``waiting`` with ``added`` + ``waiting`` and a
    wake-up for idle claimers (delivered at commit).
    """

    queue: str
    name: str
    data: JSON = None
    options: JobOptions | dict[str, JSON] | None = None
    _: KW_ONLY
    now: datetime | None = None


class AddJobs(Arguments[list[JobRow]]):
    """Add many jobs in one operation, results in input order (ADD-11).

    Same rules as ``add`` per spec; a repeated custom id inside the same call returns
    the job the earlier spec created. Any invalid spec rejects the whole call.
    """

    queue: str
    specs: Sequence[JobSpec]
    _: KW_ONLY
    now: datetime | None = None


class AddChain(Arguments[JobRow]):
    """Add the head of a chain (CHAIN-1) and return it: ``links`` run one after another,
    each added when the one before it completes, in the operation that completes it
    (fenced by its lock token: a run that lost its lease adds nothing). Every link's spec
    is checked before anything is stored (``add_job``'s rules, without ``job_id``,
    ``deduplication`` or ``repeat``). Link ``i`` (0 for the head) has the id
    ``<chain_id>-<i>`` and carries the chain in ``options.chain`` (``id``, ``index``, the
    ``links`` still to come, ``catch``, ``catch_queue``); a link's delay counts from the
    completion of the one before it. A link that fails for good ends the chain and, with
    ``catch``, adds the job ``chain-<chain_id>-catch`` named ``lane_pg:chain_callback`` to
    ``catch_queue`` (default: the head's queue); a removed link ends it quietly.
    ``chain_id``: 1-100 letters, digits, ``.``, ``-`` or ``_``, not all digits."""

    chain_id: str
    links: Sequence[QueuedSpec]
    _: KW_ONLY
    catch: str | None = None
    catch_queue: str | None = None
    now: datetime | None = None


class GetJob(Arguments[JobRow | None]):
    """The job as it is now, or None when the queue holds no job of that id."""

    queue: str
    job_id: str


class GetJobState(Arguments[JobState | None]):
    """The job's state, or None when the queue holds no job of that id."""

    queue: str
    job_id: str


class GetJobFinishedResult(Arguments[FinishedResult | None]):
    """``Completed(return_value)``, ``Failed(reason)`` or ``NotFinished(state)`` by the
    job's state, whatever its other fields hold; None for a missing job (STATE-4)."""

    queue: str
    job_id: str


class PromoteJob(Arguments[JobRow]):
    """``delayed -> waiting`` now (MGMT-3); ``JobStateConflict`` when not delayed."""

    queue: str
    job_id: str
    _: KW_ONLY
    now: datetime | None = None


class RescheduleJob(Arguments[JobRow]):
    """Move a delayed job's due time to ``now + delay`` (MGMT-5), event ``delayed``."""

    queue: str
    job_id: str
    delay: Duration
    _: KW_ONLY
    now: datetime | None = None


class RetryJob(Arguments[JobRow]):
    """``completed|failed -> waiting`` (MGMT-8): result/reason, timestamps, stack trace,
    attempts and stalled count reset; event ``waiting prev=<old state>``. A
    deduplicated job takes its id back (``DeduplicationConflict`` when another holds
    it, DEDUP-13); a unique one (``deduplication.kind`` unique) neither takes back nor
    checks its lock and loses its owner token (A9)."""

    queue: str
    job_id: str
    _: KW_ONLY
    now: datetime | None = None


class RemoveJob(Arguments[bool]):
    """Delete a job and its logs (MGMT-16); event ``removed prev=<state>``. An active
    job whose lease has not expired raises ``JobLocked``. False when missing."""

    queue: str
    job_id: str
    _: KW_ONLY
    now: datetime | None = None


class UpdateJobData(Arguments[JobRow]):
    """Replace the payload of any retained job (MGMT-10).

    ``token`` fences a write from a run (the job context passes its claim's token): the
    job must then be ``active`` under exactly that token, else ``LockMismatch`` (or
    ``JobNotFound``) and nothing changes, so a run whose lease was taken over cannot
    overwrite the new owner's job. ``None`` is an administrator's write, unchecked."""

    queue: str
    job_id: str
    data: JSON
    _: KW_ONLY
    token: str | None = None


class UpdateJobProgress(Arguments[JobRow]):
    """Store progress on any retained job and write ``progress {data}`` (MGMT-11).
    ``token`` fences it as in ``update_job_data``."""

    queue: str
    job_id: str
    progress: JSON
    _: KW_ONLY
    now: datetime | None = None
    token: str | None = None


class UpdateJobPriority(Arguments[JobRow]):
    """Change the priority (and LIFO flag when given) (MGMT-9). A waiting job is
    requeued with a fresh sequence in its new position; other states only store it."""

    queue: str
    job_id: str
    priority: int
    _: KW_ONLY
    lifo: bool | None = None
    now: datetime | None = None


class SaveJobStacktrace(Arguments[JobRow]):
    """Replace the job's stack trace list and failure reason together, in any state
    (MGMT-12); no event. ``JobNotFound`` when missing; a ``stacktrace`` that is not a
    sequence of strings (a plain string included) raises ``InvalidOptions``."""

    queue: str
    job_id: str
    stacktrace: Sequence[str]
    failed_reason: str | None


class Jobs(Handle, name="jobs"):
    """Adding, reading and changing single jobs (ADD, MGMT)."""

    __slots__ = ()

    add_job = operation(AddJob)
    add_jobs = operation(AddJobs)
    add_chain = operation(AddChain)
    get_job = operation(GetJob)
    get_job_state = operation(GetJobState)
    get_job_finished_result = operation(GetJobFinishedResult)
    promote_job = operation(PromoteJob)
    reschedule_job = operation(RescheduleJob)
    retry_job = operation(RetryJob)
    remove_job = operation(RemoveJob)
    update_job_data = operation(UpdateJobData)
    update_job_progress = operation(UpdateJobProgress)
    update_job_priority = operation(UpdateJobPriority)
    save_job_stacktrace = operation(SaveJobStacktrace)
