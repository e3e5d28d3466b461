"""Pages, counts, events and pause states that the reads return."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from lane_pg.types.base import JSON, JobState
from lane_pg.types.snapshots import JobRow


@dataclass(frozen=True, slots=True)
class JobPage:
    items: list[JobRow]
    total: int
    offset: int
    limit: int


@dataclass(frozen=True, slots=True)
class JobSearchPage:
    """A page of ``search_jobs``: the matches at ``offset``, at most ``limit`` of them, and
    whether at least one more match follows. No total: counting the matches of a filter
    would read every job of the state."""

    items: list[JobRow]
    offset: int
    limit: int
    has_more: bool


@dataclass(frozen=True, slots=True)
class LogEntry:
    ts: datetime
    message: str


@dataclass(frozen=True, slots=True)
class LogPage:
    logs: list[LogEntry]
    count: int


@dataclass(frozen=True, slots=True)
class QueueEvent:
    """One retained event (EVS-4): ``id`` increases per database; ``job_id`` may be None."""

    id: int
    queue: str
    event: str
    job_id: str | None
    data: dict[str, JSON]
    created_at: datetime


@dataclass(frozen=True, slots=True)
class QueueStats:
    """A queue's pause flag and its six state counts, read in one snapshot (MGMT-27,
    PAUSE-13): the counts always add up to the jobs the queue held at one instant."""

    paused: bool
    waiting: int
    delayed: int
    active: int
    waiting_children: int
    completed: int
    failed: int

    @classmethod
    def from_counts(cls, paused: bool, counts: dict[JobState, int]) -> QueueStats:
        """From the pause flag and ``get_job_counts``' six counts."""
        return cls(
            paused,
            counts["waiting"],
            counts["delayed"],
            counts["active"],
            counts["waiting-children"],
            counts["completed"],
            counts["failed"],
        )

    @property
    def counts(self) -> dict[JobState, int]:
        """The counts by state name, in ``ALL_STATES`` order."""
        return {
            "waiting": self.waiting,
            "delayed": self.delayed,
            "active": self.active,
            "waiting-children": self.waiting_children,
            "completed": self.completed,
            "failed": self.failed,
        }


@dataclass(frozen=True, slots=True)
class PauseStatus:
    """What ``get_pause_status`` read in one snapshot (PAUSE-5, PAUSE-7, CLI-6)."""

    all_paused: bool
    """The connection-wide switch (``pause_all``)."""
    paused: frozenset[str]
    """The asked queues whose own pause flag is set."""
    restart_at_ms: int | None
    """The last restart signal, milliseconds since the epoch; None when none was given."""

    def is_paused(self, queue: str) -> bool:
        return self.all_paused or queue in self.paused
