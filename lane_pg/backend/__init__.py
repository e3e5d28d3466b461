"""The one contract every backend implements: ``JobQueueBackend``, a set of handles.

Each handle (``backend.jobs``, ``backend.runs``, ``backend.queues``, ...) declares one
entity's operations once (``lane_pg.backend.operation``); a backend serves each handle over
its implementation of that entity, and every call goes through one dispatcher where hooks
(spans, metrics) can be installed (``backend.hooks``). A capability is a handle that some
backends have and others do not (``backend.space`` is None on memory).

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
  ``waiting-children {prev?}`` (a flow parent waiting, ``lane_pg.types.flows``).
* Completions and terminal failures also count into per-minute terminal metrics
  (``lane_pg.backend.metrics``, OBS-6); ``subscribe_events`` follows the event stream live
  (``lane_pg.backend.events``, EVS-7).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, ClassVar

from lane_pg.backend.batches import Batches
from lane_pg.backend.capabilities import (
    FailedRecords,
    HasDedicatedConnection,
    HasWakeups,
    Idempotency,
    IndexSize,
    Space,
    Transactions,
    WakeupSource,
)
from lane_pg.backend.cleanup import Cleanup
from lane_pg.backend.dedup import DebouncedAdd, Dedup
from lane_pg.backend.events import Events
from lane_pg.backend.flows import Flows
from lane_pg.backend.jobs import Jobs
from lane_pg.backend.leader import Leader
from lane_pg.backend.limits import Limits
from lane_pg.backend.locks import Locks
from lane_pg.backend.logs import Logs
from lane_pg.backend.maintenance import Maintenance
from lane_pg.backend.metrics import Metrics
from lane_pg.backend.operation import (
    Arguments,
    Handle,
    Hooks,
    Operation,
    OperationCall,
    OperationHook,
    operation,
    stream_operation,
)
from lane_pg.backend.queues import Queues
from lane_pg.backend.reads import Reads
from lane_pg.backend.repeats import Repeats
from lane_pg.backend.runs import Runs
from lane_pg.backend.url import backend_kind, connect, resolve_url

__all__ = [
    "CAPABILITIES",
    "HANDLES",
    "Arguments",
    "Batches",
    "Cleanup",
    "DebouncedAdd",
    "Dedup",
    "Events",
    "FailedRecords",
    "Flows",
    "Handle",
    "HasDedicatedConnection",
    "HasWakeups",
    "Hooks",
    "Idempotency",
    "IndexSize",
    "JobQueueBackend",
    "Jobs",
    "Leader",
    "Limits",
    "Locks",
    "Logs",
    "Maintenance",
    "Metrics",
    "Operation",
    "OperationCall",
    "OperationHook",
    "Queues",
    "Reads",
    "Repeats",
    "Runs",
    "Space",
    "Transactions",
    "WakeupSource",
    "backend_kind",
    "connect",
    "operation",
    "resolve_url",
    "stream_operation",
]

HANDLES: tuple[type[Handle], ...] = (
    Jobs,
    Runs,
    Queues,
    Reads,
    Logs,
    Events,
    Cleanup,
    Dedup,
    Repeats,
    Flows,
    Limits,
    Maintenance,
    Metrics,
    Leader,
    Batches,
    Locks,
)
"""The handles every backend serves, each over its implementation of that entity."""

CAPABILITIES: tuple[type[Handle], ...] = (Space, Idempotency, Transactions, FailedRecords)
"""The handles a backend may lack: its attribute is None then."""

_HANDLE_OF: dict[str, str] = {
    name: handle.name
    for handle in (*HANDLES, *CAPABILITIES)
    for name in dir(handle)
    if not name.startswith("_") and callable(getattr(handle, name))
}
"""The handle of each operation (and derived read) by its name: names are unique across
handles (``tests/test_operations.py``)."""


class JobQueueBackend:
    """A job queue backend: its handles, the hooks around their calls, and ``close``.

    A subclass builds its handles in ``__init__`` with ``_serve``. A caller that needs one
    entity only (a producer, a dashboard) can take that handle (``backend.jobs``).
    """

    kind: ClassVar[str] = ""
    """The backend's kind, as URLs and connection labels name it (``postgresql``)."""

    jobs: Jobs
    runs: Runs
    queues: Queues
    reads: Reads
    logs: Logs
    events: Events
    cleanup: Cleanup
    dedup: Dedup
    repeats: Repeats
    flows: Flows
    limits: Limits
    maintenance: Maintenance
    metrics: Metrics
    leader: Leader
    batches: Batches
    locks: Locks
    space: Space | None = None
    idempotency: Idempotency | None = None
    transactions: Transactions | None = None
    failed_records: FailedRecords | None = None

    def _serve(
        self, implementations: Mapping[str, object], *, default: object | None = None
    ) -> None:
        """Build every handle over ``implementations[handle name]``, else ``default`` (a
        backend that answers every operation alike, such as the facade's null store); a
        capability is served only when ``implementations`` names it."""
        self.hooks = Hooks(self.kind)
        for handle in HANDLES:
            implementation = implementations.get(handle.name, default)
            if implementation is None:
                raise TypeError(f"{type(self).__name__} serves no {handle.name} handle")
            setattr(self, handle.name, handle(implementation, self.hooks))
        for capability in CAPABILITIES:
            implementation = implementations.get(capability.name)
            if implementation is not None:
                setattr(self, capability.name, capability(implementation, self.hooks))

    async def close(self) -> None:
        return None

    if not TYPE_CHECKING:

        def __getattr__(self, name: str) -> Any:
            """Every operation by its name on the backend itself (``backend.add_job``), as
            before the handles: the typed path is the handle (``backend.jobs.add_job``)."""
            handle = _HANDLE_OF.get(name)
            if handle is None:
                raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
            served = self.__dict__.get(handle)
            if served is None:
                raise AttributeError(f"{type(self).__name__} has no {handle} handle ({name})")
            return getattr(served, name)
