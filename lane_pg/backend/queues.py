"""A queue's settings: pause, retention, events, and the queues that exist (PAUSE, RET, EVS-3).

The rules every backend follows are in ``lane_pg.backend`` (the package docstring)."""

from __future__ import annotations

from collections.abc import Sequence

from lane_pg.backend.operation import Handle, operation
from lane_pg.types import (
    PauseStatus,
    QueueRetention,
)


class Queues(Handle, name="queues"):
    """A queue's settings (pause, retention, events) and the queues that exist (PAUSE, RET)."""

    __slots__ = ()

    @operation
    async def pause_queue(self, queue: str) -> None:
        """Stop claims from the queue (adds and promotion go on); event ``paused``."""

    @operation
    async def resume_queue(self, queue: str) -> None:
        """Allow claims again, event ``resumed``, and wake idle claimers."""

    @operation
    async def pause_all(self) -> None:
        """The connection-wide pause (PAUSE-4): no queue of this backend, existing or
        created later, yields a claim (adds and promotion go on) until ``resume_all``.
        Queue pauses are separate: ``pause_queue``'s flag is not touched. No event."""

    @operation
    async def resume_all(self) -> None:
        """Lift the connection-wide pause and wake idle claimers; queues paused with
        ``pause_queue`` stay paused (PAUSE-4)."""

    @operation
    async def signal_restart(self) -> int:
        """Store the restart signal, now in milliseconds since the epoch (CLI-6), wake idle
        claimers, and return it; workers started before it exit at their next check."""

    @operation
    async def set_queue_retention(
        self, queue: str, *, keep_completed: int | None, keep_failed: int | None
    ) -> None:
        """Bound the queue's finished jobs: keep the newest ``keep_completed`` completed
        and ``keep_failed`` failed jobs (``None`` keeps all of that state, RET-1). A new
        queue starts at ``DEFAULT_KEEP_COMPLETED`` / ``DEFAULT_KEEP_FAILED``. The queue is
        created when missing; a negative count raises ``InvalidOptions`` and changes
        nothing. Jobs are deleted later, by ``prune_finished``; no event is written."""

    @operation
    async def set_queue_events(self, queue: str, *, record: bool) -> None:
        """Turn the queue's event recording on or off (on for every new queue). While
        off, no transition of the queue writes an event (the ``added``, ``active``,
        ``completed`` ... rows of EVS-4 are skipped; the jobs change as usual); events
        written before stay readable and are trimmed as before. The queue is created when
        missing; ``record`` must be ``True`` or ``False`` (else ``InvalidOptions``, and
        nothing changes). Writes no event itself."""

    @operation
    async def is_queue_paused(self, queue: str) -> bool: ...

    @operation
    async def get_pause_status(self, queues: Sequence[str] | None = ()) -> PauseStatus:
        """In one snapshot: the connection-wide pause, the ones among ``queues`` whose own
        pause flag is set (a queue that does not exist is not paused; ``None``: every
        queue whose flag is set), and the restart signal (PAUSE-5, PAUSE-7, CLI-6)."""

    @operation
    async def get_queue_retention(self, queue: str) -> QueueRetention:
        """The queue's bounds; the defaults for a queue that does not exist yet."""

    @operation
    async def get_queue_events(self, queue: str) -> bool:
        """Whether the queue records events; ``True`` for a queue that does not exist yet."""

    @operation
    async def list_queues(self) -> list[str]:
        """Every queue that exists (created by an add or a pause), by name."""
