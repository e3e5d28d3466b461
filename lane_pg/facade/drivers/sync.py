"""The ``sync`` driver (DRV-3): a push runs the job's ``handle()`` inline, before the push
returns, with no worker.

Each push is written to a private, throw-away memory store and claimed from it, so the
handler runs through the same ``TypedJobProcessor`` as on a worker: ``current_context()``
works (logs, progress), and ``JobProcessing``/``JobProcessed``/``JobExceptionOccurred``
are emitted on the facade's listeners. Decisions (docs/decisions.md):

* one attempt, no retries: an exception from ``handle()`` propagates to the caller of
  ``push`` (as Laravel's sync driver does), so a failing job is seen where it was pushed;
* delays are ignored (the job runs now) and a debounce never collapses: every push runs;
* nothing stays behind: counts are 0 and listings empty, because that is literally true;
* ``conn=`` (in-transaction) is refused: the handler cannot run inside the caller's
  transaction and be rolled back with it;
* ``bulk`` runs the jobs one after another and is not atomic: an exception stops the batch
  with the earlier jobs already run.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime

from lane_pg.errors import ConfigurationError
from lane_pg.facade.driver import DEFAULT_VISIBILITY_TIMEOUT, mark_handler_error
from lane_pg.facade.drivers.null import NullDriver
from lane_pg.facade.envelope import Envelope
from lane_pg.facade.events import Events
from lane_pg.facade.runner import TypedJobProcessor
from lane_pg.types import QueueDemand

SYNC_WORKER_ID = "sync"


class SyncDriver(NullDriver):
    """Runs every push inline; reads answer as for ``null`` (nothing is ever stored)."""

    def __init__(self, events: Events | None = None) -> None:
        self._events = events

    @property
    def driver_name(self) -> str:
        return "sync"

    def __repr__(self) -> str:
        return "SyncDriver()"

    def attach_events(self, events: Events) -> None:
        """The facade's emitter (``set_driver`` / ``register_connection`` call this)."""
        if self._events is None:
            self._events = events

    async def push(self, envelope: Envelope, *, conn: object | None = None) -> str:
        if conn is not None:
            raise ConfigurationError(
                "the sync connection cannot enqueue inside a caller's transaction (conn=):"
                " the job runs at push time"
            )
        from lane_pg.memory import MemoryBackend
        from lane_pg.worker.context import JobContext

        job_id = envelope.job_id or f"sync-{uuid.uuid4()}"
        inline = dataclasses.replace(
            envelope, job_id=job_id, delay=0, available_at=None, deduplication=None
        )
        store = MemoryBackend()
        try:
            options = inline.options_document(datetime.now(UTC))
            await store.add_job(inline.queue, inline.job_name, inline.data, options)
            claimed = await store.runs.claim_jobs(
                SYNC_WORKER_ID, [QueueDemand(inline.queue, 1)], DEFAULT_VISIBILITY_TIMEOUT
            )
            job = claimed[0]
            processor = TypedJobProcessor(
                type(envelope.job), self._events or Events(), envelope.connection
            )
            try:
                await processor.process(job, JobContext(store, job, SYNC_WORKER_ID))
            except Exception as exc:
                # The job ran and failed: never a reason for a failover to run it again
                # elsewhere, whatever the handler raised (an OSError included).
                mark_handler_error(exc)
                raise
        finally:
            await store.close()
        return job_id

    async def bulk_push(
        self, envelopes: Sequence[Envelope], *, conn: object | None = None
    ) -> list[str]:
        return [await self.push(envelope, conn=conn) for envelope in envelopes]
