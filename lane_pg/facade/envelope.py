"""What a push stores (PUSH-5, PUSH-7): a job class instance resolved against overrides,
routes and declarations into the queue, connection and options of one stored job.

The job type's settings map onto the runtime's ``JobOptions``: ``max_tries`` is
``attempts``, ``backoff`` the backoff, ``timeout`` and ``fail_on_timeout`` are stored, so the
worker applies the same retry and timeout rules as for ``add_job``. What only the facade
reads (the connection label, unique and debounce tokens, propagated context) rides in
``options.meta``, which the backend stores and never interprets.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta

import lane_pg.context as context
from lane_pg.facade.job import DEFAULT_QUEUE, Job, encode_fields, job_name_of
from lane_pg.types import JSON, Backoff, Duration, JobOptions, JobRow, JobSpec, to_millis

META_CONNECTION = "connection"
"""``options.meta`` key: the connection name the push resolved (CONN-6: a label)."""
META_CONTEXT = "context"
"""``options.meta`` key: the pusher's ``lane_pg.context.snapshot()`` (CTX-1), absent when
the context was empty; the worker restores it for each attempt (CTX-2)."""


@dataclass(frozen=True, slots=True)
class EnvelopeOverrides:
    """Per-push settings (PUSH-5): each one set outranks routes and the job's declaration
    for this push only; None defers to the normal resolution."""

    queue: str | None = None
    connection: str | None = None
    timeout: Duration | None = None
    max_tries: int | None = None
    backoff: Backoff | None = None
    after_commit: bool | None = None


NO_OVERRIDES = EnvelopeOverrides()


@dataclass(frozen=True, slots=True)
class DebounceOptions:
    """A debounced push (UNIQ-9, -10): run once, ``window`` after the burst's last dispatch,
    or at once when the burst has waited ``max_wait`` since its first; ``id`` scopes the
    window (None: one window for the job type)."""

    window: Duration
    max_wait: Duration | None = None
    id: str | None = None


@dataclass(slots=True)
class Envelope:
    """One resolved push: everything the driver writes."""

    job: Job
    job_name: str
    data: dict[str, JSON]
    queue: str
    connection: str
    max_tries: int
    backoff: Backoff | None
    timeout: Duration | None
    fail_on_timeout: bool
    delay: Duration = 0
    """From the push time; ``available_at`` wins when set."""
    available_at: datetime | None = None
    job_id: str | None = None
    deduplication: dict[str, JSON] | None = None
    meta: dict[str, JSON] = field(default_factory=dict)
    after_commit: bool | None = None
    """The per-push after-commit override (TX-7); None: the process switch, then the job."""
    debounce: DebounceOptions | None = None
    """Set for a debounced push (``push_debounced`` or ``Job.debounce_for``, UNIQ-9)."""
    declared_delay: bool = False
    """``delay`` is the job type's ``Job.delay``, not a call-site time: a deferred push
    counts it from the commit (TX-9)."""
    overrides: EnvelopeOverrides = NO_OVERRIDES
    """The per-push overrides it was resolved with, kept for ``Q.fake()`` (TEST-2)."""

    def carry_context(self, snapshot: dict[str, JSON] | None) -> None:
        """Store ``snapshot`` (``lane_pg.context.snapshot()``) as the job's context, in
        place of the one taken when the envelope was built: a builder that collects jobs
        (a batch, a chain) gives each the snapshot taken when it was made (CTX-4)."""
        if snapshot is None:
            self.meta.pop(META_CONTEXT, None)
        else:
            self.meta[META_CONTEXT] = snapshot

    def delay_from(self, now: datetime) -> timedelta:
        """The delay the backend stores, for a push written at ``now``."""
        if self.available_at is not None:
            return max(self.available_at - now, timedelta(0))
        delay = self.delay
        return delay if isinstance(delay, timedelta) else timedelta(seconds=delay)

    def options(self, now: datetime) -> JobOptions:
        delay = self.delay_from(now)
        return JobOptions(
            job_id=self.job_id,
            delay=delay,
            attempts=self.max_tries,
            backoff=self.backoff,
            timeout=self.timeout,
            fail_on_timeout=self.fail_on_timeout,
            meta={**self.meta, META_CONNECTION: self.connection},
        )

    def options_document(self, now: datetime) -> dict[str, JSON]:
        document = self.options(now).to_json()
        if self.deduplication is not None:
            document["deduplication"] = self.deduplication
        return document

    def spec(self, now: datetime) -> JobSpec:
        return JobSpec(self.job_name, self.data, self.options_document(now))


def build_envelope(
    job: Job,
    *,
    queue: str,
    connection: str,
    overrides: EnvelopeOverrides = NO_OVERRIDES,
    delay: Duration | None = None,
    available_at: datetime | None = None,
) -> Envelope:
    """``job`` with ``queue`` and ``connection`` already resolved (``Routing.resolve``);
    ``delay``/``available_at`` from the call site win over ``Job.delay`` (PUSH-4). The
    caller's ``lane_pg.context`` is snapshotted now, at push time: a deferred push carries
    what was set when ``push`` was called, not at the commit (CTX-1, CTX-4)."""
    cls = type(job)
    snapshot = context.snapshot()
    max_tries = overrides.max_tries if overrides.max_tries is not None else cls.max_tries
    to_millis(delay if delay is not None else cls.delay, "delay")  # refused before any write
    return Envelope(
        job=job,
        job_name=job_name_of(cls),
        data=encode_fields(job),
        queue=queue,
        connection=connection,
        max_tries=max_tries,
        backoff=overrides.backoff if overrides.backoff is not None else cls.backoff,
        timeout=overrides.timeout if overrides.timeout is not None else cls.timeout,
        fail_on_timeout=cls.fail_on_timeout,
        delay=delay if delay is not None else cls.delay,
        available_at=available_at,
        after_commit=overrides.after_commit,
        declared_delay=delay is None and available_at is None,
        overrides=overrides,
        meta={} if snapshot is None else {META_CONTEXT: snapshot},
    )


def stored_context(job: JobRow) -> JSON:
    """The context snapshot a push stored on ``job`` (None: none)."""
    meta = job.options.get("meta")
    return meta.get(META_CONTEXT) if isinstance(meta, dict) else None


def declared_queue(job: Job) -> str:
    return type(job).queue or DEFAULT_QUEUE
