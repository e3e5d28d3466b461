"""A queue's settings on PostgreSQL: pause, retention, events and the queues that exist
(``lane.pause_queue`` ... ``lane.list_queues``, sql/functions/50_queues.sql)."""

from __future__ import annotations

from collections.abc import Sequence

from lane_pg.backend.queues import Queues, SetQueueRetention
from lane_pg.postgres.calls import Entity, Rows, nothing, statement, value
from lane_pg.types import PauseStatus, QueueRetention, validate_queue_name, validate_record_events


def queue_names(queues: Sequence[str] | None) -> list[str] | None:
    """The names, each checked; None (every queue) stays None."""
    return None if queues is None else [validate_queue_name(name) for name in queues]


def pause_status(rows: Rows) -> PauseStatus:
    [row] = rows
    return PauseStatus(row["all_paused"], frozenset(row["paused"]), row["restart_at"])


def retention(rows: Rows) -> QueueRetention:
    return QueueRetention(rows[0]["keep_completed"], rows[0]["keep_failed"])


def first_column(rows: Rows) -> list[str]:
    return [row[0] for row in rows]


class PostgresQueues(Entity, serves=Queues):
    pause_queue = statement(
        "SELECT lane.pause_queue($1)", result=nothing, queue=validate_queue_name
    )
    resume_queue = statement(
        "SELECT lane.resume_queue($1)", result=nothing, queue=validate_queue_name
    )
    pause_all = statement("SELECT lane.pause_all()", result=nothing)
    resume_all = statement("SELECT lane.resume_all()", result=nothing)
    signal_restart = statement("SELECT lane.signal_restart()", result=value)

    async def set_queue_retention(self, args: SetQueueRetention) -> None:
        validate_queue_name(args.queue)
        bounds = QueueRetention(args.keep_completed, args.keep_failed)
        await self._db.fetch(
            "SELECT lane.set_queue_retention($1, $2, $3)",
            args.queue,
            bounds.keep_completed,
            bounds.keep_failed,
        )

    set_queue_events = statement(
        "SELECT lane.set_queue_events($1, $2)",
        result=nothing,
        queue=validate_queue_name,
        record=validate_record_events,
    )
    is_queue_paused = statement("SELECT lane.is_queue_paused($1)", result=value)
    get_pause_status = statement(
        "SELECT all_paused, paused, restart_at FROM lane.pause_status($1::text[])",
        result=pause_status,
        queues=queue_names,
    )
    get_queue_retention = statement(
        "SELECT keep_completed, keep_failed FROM lane.get_queue_retention($1)",
        result=retention,
        queue=validate_queue_name,
    )
    get_queue_events = statement(
        "SELECT lane.get_queue_events($1)", result=value, queue=validate_queue_name
    )
    list_queues = statement("SELECT lane.list_queues()", result=first_column)
