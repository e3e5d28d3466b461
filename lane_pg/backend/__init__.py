"""The one contract every backend implements: ``JobQueueBackend``, split by role.

The PostgreSQL backend is a thin caller of the ``lane.*`` stored functions; the memory
backend re-implements the same rules in Python as the reference model; the Redis backend
(a later issue) will use Lua scripts. ``tests/conformance`` runs one suite against all of
them, so the rules written below are checked, not just described. ``connect(url)``
(``lane_pg.backend.url``) opens one from a URL: ``postgresql://...`` or ``memory://``.

Common rules
------------
* Every mutating method takes an optional ``now``. When it is None the backend's clock is
  used (the database clock for PostgreSQL, the injected clock for memory). Durations are
  ``timedelta`` or seconds.
* A method that refuses its input raises a ``ValidationError`` subclass and writes
  nothing. A token-checked method raises ``LockMismatch`` when the job is not ``active``
  under that exact token (the caller lost its lease) and writes nothing.
* Queues are created on first use (add, pause, ...). Queue names follow
  ``types.validate_queue_name``.
* Ordering inside a queue: lower priority first; within a priority, LIFO entries (newest
  first) before FIFO entries (oldest first); a released job goes to the very front of its
  priority (ORD-1..4). Every move into ``waiting`` takes a fresh enqueue sequence number.
* Events (EVS-4 names and fields) are written in the same operation as the change, for
  every queue that records events (the default; ``set_queue_events``):
  ``added {name}``, ``waiting {prev?}``, ``delayed {delay (epoch ms), prev?, failedReason?}``,
  ``active {prev}``, ``completed {prev, returnvalue}``, ``failed {prev, failedReason}``,
  ``retries-exhausted {attemptsMade}``, ``stalled {reason}``, ``drained {}`` (no job id),
  ``removed {prev}``, ``cleaned {count}`` (no job id), ``progress {data}``, ``paused {}``,
  ``resumed {}``,
  ``duplicated {}`` (an add whose custom id exists), ``debounced`` / ``deduplicated``
  ``{deduplicationId, deduplicatedJobId}`` (``lane_pg.backend.dedup``),
  ``waiting-children {prev?}`` (a flow parent waiting, ``lane_pg.flows``).
* Completions and terminal failures also count into per-minute terminal metrics
  (``lane_pg.backend.metrics``, OBS-6); ``subscribe_events`` follows the event stream live
  (``lane_pg.backend.follow``, EVS-7).
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from lane_pg.backend.admin import Administrator
from lane_pg.backend.capabilities import (
    AddsInTransaction,
    ExpiresIdempotencyKeys,
    HasDedicatedConnection,
    HasLeader,
    HasWakeups,
    IndexSize,
    Leader,
    ReclaimsSpace,
    RecordsFailedJobs,
    WakeupSource,
)
from lane_pg.backend.cleanup import Cleaner
from lane_pg.backend.dedup import DebouncedAdd, Debounces, DeduplicationLocks, Deduplicator
from lane_pg.backend.flow import Flows
from lane_pg.backend.follow import EventFollower
from lane_pg.backend.limits import ClaimLimits
from lane_pg.backend.maintain import Maintainer
from lane_pg.backend.metrics import MetricsReader
from lane_pg.backend.produce import Producer
from lane_pg.backend.read import Reader
from lane_pg.backend.repeat import Repeater
from lane_pg.backend.settle import Settler
from lane_pg.backend.url import backend_kind, connect, resolve_url

__all__ = [
    "AddsInTransaction",
    "Administrator",
    "ClaimLimits",
    "Cleaner",
    "DebouncedAdd",
    "Debounces",
    "DeduplicationLocks",
    "Deduplicator",
    "EventFollower",
    "ExpiresIdempotencyKeys",
    "Flows",
    "HasDedicatedConnection",
    "HasLeader",
    "HasWakeups",
    "IndexSize",
    "JobQueueBackend",
    "Leader",
    "Maintainer",
    "MetricsReader",
    "Producer",
    "Reader",
    "ReclaimsSpace",
    "RecordsFailedJobs",
    "Repeater",
    "Settler",
    "WakeupSource",
    "backend_kind",
    "connect",
    "resolve_url",
]


@runtime_checkable
class JobQueueBackend(
    Producer,
    Settler,
    Administrator,
    Cleaner,
    ClaimLimits,
    Deduplicator,
    Repeater,
    Flows,
    Reader,
    MetricsReader,
    EventFollower,
    Maintainer,
    Protocol,
):
    """Connection-level job queue: every method names the queue(s) it acts on.

    A caller that needs one role only (a producer, a dashboard) can type against that role.
    """

    async def close(self) -> None: ...
