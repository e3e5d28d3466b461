"""A queue's settings: pause, retention, events, and the queues that exist (PAUSE, RET, EVS-3).

The rules every backend follows are in ``lane_pg.backend`` (the package docstring)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import KW_ONLY

from lane_pg.backend.operation import Arguments, Handle, operation
from lane_pg.types import (
    PauseStatus,
    QueueRetention,
)


class PauseQueue(Arguments[None]):
    """Stop claims from the queue (adds and promotion go on); event ``paused``."""

    queue: str


class ResumeQueue(Arguments[None]):
    """Allow claims again, event ``resumed``, and wake idle claimers."""

    queue: str


class PauseAll(Arguments[None]):
    """The connection-wide pause (PAUSE-4): no queue of this backend, existing or
    created later, yields a claim (adds and promotion go on) until ``resume_all``.
    Queue pauses are separate: ``pause_queue``'s flag is not touched. No event."""


class ResumeAll(Arguments[None]):
    """Lift the connection-wide pause and wake idle claimers; queues paused with
    ``pause_queue`` stay paused (PAUSE-4)."""


class SignalRestart(Arguments[int]):
    """Store the restart signal, now in milliseconds since the epoch (CLI-6), wake idle
    claimers, and return it; workers started before it exit at their next check."""


class SetQueueRetention(Arguments[None]):
    """Bound the queue's finished jobs: keep the newest ``keep_completed`` completed
    and ``keep_failed`` failed jobs (``None`` keeps all of that state, RET-1). A new
    queue starts at ``DEFAULT_KEEP_COMPLETED`` / ``DEFAULT_KEEP_FAILED``. The queue is
    created when missing; a negative count raises ``InvalidOptions`` and changes
    nothing. Jobs are deleted later, by ``prune_finished``; no event is written."""

    queue: str
    _: KW_ONLY
    keep_completed: int | None
    keep_failed: int | None


class SetQueueEvents(Arguments[None]):
    """Turn the queue's event recording on or off (on for every new queue). While
    off, no transition of the queue writes an event (the ``added``, ``active``,
    ``completed`` ... rows of EVS-4 are skipped; the jobs change as usual); events
    written before stay readable and are trimmed as before. The queue is created when
    missing; ``record`` must be ``True`` or ``False`` (else ``InvalidOptions``, and
    nothing changes). Writes no event itself."""

    queue: str
    _: KW_ONLY
    record: bool


class IsQueuePaused(Arguments[bool]):
    """Whether the queue's own pause flag is set (``pause_queue``); False for a queue that
    does not exist. The connection-wide pause is ``get_pause_status``'s."""

    queue: str


class GetPauseStatus(Arguments[PauseStatus]):
    """In one snapshot: the connection-wide pause, the ones among ``queues`` whose own
    pause flag is set (a queue that does not exist is not paused; ``None``: every
    queue whose flag is set), and the restart signal (PAUSE-5, PAUSE-7, CLI-6)."""

    queues: Sequence[str] | None = ()


class GetQueueRetention(Arguments[QueueRetention]):
    """The queue's bounds; the defaults for a queue that does not exist yet."""

    queue: str


class GetQueueEvents(Arguments[bool]):
    """Whether the queue records events; ``True`` for a queue that does not exist yet."""

    queue: str


class ListQueues(Arguments[list[str]]):
    """Every queue that exists (created by an add or a pause), by name."""


class Queues(Handle, name="queues"):
    """A queue's settings (pause, retention, events) and the queues that exist (PAUSE, RET)."""

    __slots__ = ()

    pause_queue = operation(PauseQueue)
    resume_queue = operation(ResumeQueue)
    pause_all = operation(PauseAll)
    resume_all = operation(ResumeAll)
    signal_restart = operation(SignalRestart)
    set_queue_retention = operation(SetQueueRetention)
    set_queue_events = operation(SetQueueEvents)
    is_queue_paused = operation(IsQueuePaused)
    get_pause_status = operation(GetPauseStatus)
    get_queue_retention = operation(GetQueueRetention)
    get_queue_events = operation(GetQueueEvents)
    list_queues = operation(ListQueues)
