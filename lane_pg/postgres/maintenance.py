"""The maintenance leader's upkeep on PostgreSQL (sql/functions/60_maintenance.sql), and the
expiry of idempotency keys (sql/functions/85_idempotency.sql, the ``idempotency``
capability): one stored function per operation."""

from __future__ import annotations

from collections.abc import Sequence

from lane_pg.backend.capabilities import Idempotency
from lane_pg.backend.maintenance import Maintenance
from lane_pg.postgres.calls import Entity, Rows, statement, value
from lane_pg.types import StalledOutcome, validate_prune_batch, validate_queue_name


def queue_names(queues: Sequence[str] | None) -> list[str] | None:
    """The queues as the ``text[]`` the functions take; None (every queue) stays None."""
    return None if queues is None else list(queues)


def stalled_outcomes(rows: Rows) -> list[StalledOutcome]:
    return [StalledOutcome(row["queue"], row["id"], row["state"]) for row in rows]


class PostgresMaintenance(Entity, serves=Maintenance):
    recover_stalled = statement(
        "SELECT queue, id, state FROM lane.recover_stalled($1::text[], $2, $3)",
        result=stalled_outcomes,
        queues=queue_names,
    )
    promote_due_jobs = statement(
        "SELECT lane.promote_due_jobs($1::text[], $2)", result=value, queues=queue_names
    )
    trim_events = statement("SELECT lane.trim_events($1::text[])", result=value, queues=queue_names)
    prune_finished = statement(
        "SELECT lane.prune_finished($1::text[], $2)",
        result=value,
        queues=lambda queues: (
            None if queues is None else [validate_queue_name(name) for name in queues]
        ),
        batch=validate_prune_batch,
    )


class PostgresIdempotency(Entity, serves=Idempotency):
    """The expiry of ``lane_pg.postgres.idempotency``'s keys (WORK-18)."""

    prune_idempotency_keys = statement("SELECT lane.prune_idempotency_keys($1, $2)", result=value)
