"""``PostgresBatches``: batches as ``lane.batches`` rows and their jobs' settlements
(sql/functions/19_batches.sql holds the rules; each call is one stored function)."""

from __future__ import annotations

import json
import uuid

from lane_pg.backend.batches import (
    AddBatch,
    AddToBatch,
    Batches,
    FindBatch,
)
from lane_pg.errors import BatchNotFound, InvalidOptions
from lane_pg.postgres.arguments import SPLIT_DATAS, spec_arrays
from lane_pg.postgres.calls import Entity, Rows, statement, value
from lane_pg.types import (
    BATCH_STATES,
    Batch,
    dumps_json,
    to_millis,
    validate_count,
)

_BATCH_COLUMNS = (
    "b.id::text AS id, b.name, b.total_jobs, b.pending_jobs, b.failed_jobs, b.failed_job_ids,"
    " b.options::text AS options, b.created_at, b.cancelled_at, b.finished_at"
)


def batch_id_text(batch_id: str) -> str:
    """The canonical text of a batch id (a UUID); ``BatchNotFound`` for anything else, as
    no batch can have that id."""
    try:
        return str(uuid.UUID(batch_id))
    except (ValueError, TypeError, AttributeError):
        raise BatchNotFound(f"batch {batch_id!r} not found: a batch id is a UUID") from None


def batch_from_row(row: object) -> Batch:
    record = row  # an asyncpg Record: indexable by column name
    return Batch(
        record["id"],  # type: ignore[index]
        record["name"],  # type: ignore[index]
        record["total_jobs"],  # type: ignore[index]
        record["pending_jobs"],  # type: ignore[index]
        record["failed_jobs"],  # type: ignore[index]
        tuple(record["failed_job_ids"]),  # type: ignore[index]
        json.loads(record["options"]),  # type: ignore[index]
        record["created_at"],  # type: ignore[index]
        record["cancelled_at"],  # type: ignore[index]
        record["finished_at"],  # type: ignore[index]
    )


def _one_batch(rows: Rows) -> Batch | None:
    return batch_from_row(rows[0]) if rows else None


def _batches(rows: Rows) -> list[Batch]:
    return [batch_from_row(row) for row in rows]


def _state(state: str | None) -> str | None:
    if state is not None and state not in BATCH_STATES:
        raise InvalidOptions(f"state must be one of {', '.join(BATCH_STATES)}, got {state!r}")
    return state


class PostgresBatches(Entity, serves=Batches):
    async def add_batch(self, args: AddBatch) -> list[str]:
        try:
            batch_id = str(uuid.UUID(args.batch_id))
        except (ValueError, TypeError, AttributeError):
            raise InvalidOptions(f"a batch id is a UUID, got {args.batch_id!r}") from None
        queues, names, datas, options = spec_arrays(args.jobs)
        ids: list[str] = await self._db.fetchval(
            f"SELECT lane.add_batch($1::uuid, $2, $6::jsonb, $7::text[], $8::text[],"
            f" {SPLIT_DATAS}, $4::text[]::jsonb[], $5)",
            batch_id,
            args.name,
            datas,
            options,
            args.now,
            dumps_json(dict(args.options or {}), "batch options"),
            queues,
            names,
        )
        return list(ids)

    async def add_to_batch(self, args: AddToBatch) -> list[str]:
        batch_id = batch_id_text(args.batch_id)
        queues, names, datas, options = spec_arrays(args.jobs)
        ids: list[str] = await self._db.fetchval(
            f"SELECT lane.add_to_batch($1::uuid, $6::text[], $2::text[], {SPLIT_DATAS},"
            " $4::text[]::jsonb[], $5)",
            batch_id,
            names,
            datas,
            options,
            args.now,
            queues,
        )
        return list(ids)

    async def find_batch(self, args: FindBatch) -> Batch | None:
        try:
            batch_id = str(uuid.UUID(args.batch_id))
        except (ValueError, TypeError, AttributeError):
            return None
        return _one_batch(
            await self._db.fetch(
                f"SELECT {_BATCH_COLUMNS} FROM lane.find_batch($1::uuid) AS b", batch_id
            )
        )

    list_batches = statement(
        f"SELECT {_BATCH_COLUMNS} FROM lane.list_batches($1, $2) AS b",
        result=_batches,
        limit=lambda limit: validate_count(limit, "limit"),
        state=_state,
    )
    cancel_batch = statement(
        "SELECT lane.cancel_batch($1::uuid, $2, $3)", result=value, batch_id=batch_id_text
    )
    prune_batches = statement(
        "SELECT lane.prune_batches($1, $2, $3)",
        result=value,
        finished_older_than=lambda age: to_millis(age, "finished_older_than"),
        unfinished_older_than=lambda age: (
            None if age is None else to_millis(age, "unfinished_older_than")
        ),
    )
