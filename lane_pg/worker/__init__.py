"""The worker: claims jobs for its lanes, runs processors, settles results, keeps leases.

One asyncio event loop per process (DESIGN.md "Worker"), in modules by concern:
- ``runtime``: the claim loop asks for as many jobs as there are free slots, across its
  lanes in priority order, in one ``claim_jobs`` call, and otherwise waits for a NOTIFY, a
  freed slot, the next delayed job's due time, or the slow poll, whichever comes first;
- ``execution``: one task per running job (processor router by job name, per-job timeout);
- ``threads``: the pool of daemon threads that runs plain ``def`` handlers, so they never
  block the event loop (``SyncJobContext`` is their blocking job context);
- ``joblog``: the per-job log lines (``lane_pg.jobs``) and the worker's summary in words;
- ``renewal``: one loop renews every running lease in one batched call at a fraction of
  the lease and flags the jobs whose lease was lost. By default the handler is told, not
  cancelled (``cancel_on_lease_loss=False``): ``ctx.has_lost_lease()`` turns true,
  ``ctx.ensure_lease()`` raises ``LeaseLost``, and its result is never written;
- ``context``: ``JobContext``, whose writes carry the claim's lock token, so a run that no
  longer holds its job gets ``LeaseLost`` and changes nothing;
- ``settlement``: completions and failures written in batches: whatever finished while the
  previous batch was being written goes in the next one, so batching adds no delay;
- ``maintenance``: periodic tasks (stalled recovery, promotion, event trimming, pruning,
  vacuum) that one worker at a time runs, the holder of a leadership lease that lapses
  when its holder dies or freezes;
- ``claiming``: ``claim_next_blocking``, a blocking claim for scripts (CLAIM-7), and the
  wait it shares with ``Worker.run_once_blocking``;
- ``pausing``: ``PauseState``, pauses read outside the claim (drivers whose pause is not
  in it), failing open (PAUSE-11); ``SignalWatch``, the pause transitions and restart
  signal ``run()`` reports to its ``WorkerHooks`` (PAUSE-7, CLI-6);
- ``config``: ``WorkerConfig``.

The worker imports no database driver and nothing from ``lane_pg.postgres``: it talks to
the protocols of ``lane_pg.backend`` only.
"""

from lane_pg.worker.claiming import claim_next_blocking
from lane_pg.worker.config import WorkerConfig
from lane_pg.worker.context import (
    JobContext,
    JobProcessor,
    Processor,
    ProcessorLike,
    SyncJobContext,
)
from lane_pg.worker.pausing import PauseState, SignalWatch, WorkerHooks
from lane_pg.worker.runtime import Worker

__all__ = [
    "JobContext",
    "JobProcessor",
    "PauseState",
    "Processor",
    "ProcessorLike",
    "SignalWatch",
    "SyncJobContext",
    "Worker",
    "WorkerConfig",
    "WorkerHooks",
    "claim_next_blocking",
]
