"""The worker's side of the contract: what it claims with and settles with (not for users)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, TypeAlias

from lane_pg.types.base import JSON, JobState


@dataclass(frozen=True, slots=True)
class QueueDemand:
    """How many jobs a claimer wants from one queue; lists of these are in priority order."""

    queue: str
    limit: int
    pause_as: str | None = None
    """The queue whose pause decides for this one (None: its own). A worker started on
    ``default`` claims the destination of its forward under ``default``'s pause (PAUSE-8)."""


@dataclass(frozen=True, slots=True)
class LeaseRef:
    """A claimed job as its holder knows it: queue, id and the token of its claim."""

    queue: str
    id: str
    token: str


@dataclass(frozen=True, slots=True)
class Completion:
    queue: str
    id: str
    token: str
    result: JSON = None


@dataclass(frozen=True, slots=True)
class Failure:
    queue: str
    id: str
    token: str
    reason: str
    stacktrace: str | None = None
    discard_retry: bool = False
    stacktrace_limit: int | None = None
    """Keep at most this many tracebacks on the job, the newest (WORK-14); None keeps all
    (``lane.fail_jobs``' ``p_stacktrace_limits``)."""


FinalizeStatus: TypeAlias = Literal["ok", "lock_mismatch", "not_found", "pending_dependencies"]


@dataclass(frozen=True, slots=True)
class FinalizeOutcome:
    """Result of one item of a batched complete/fail; ``state`` is the state it moved to."""

    queue: str
    id: str
    status: FinalizeStatus
    state: JobState | None


@dataclass(frozen=True, slots=True)
class StalledOutcome:
    """One job recovered by ``recover_stalled``: back to ``waiting`` or ``failed``."""

    queue: str
    id: str
    state: JobState
