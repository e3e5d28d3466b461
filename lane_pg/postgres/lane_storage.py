"""``PostgresLaneStorage``: the in-process lane scheduler's ``LaneStorage`` in PostgreSQL.

    backend = await PostgresBackend.connect(dsn)
    storage = PostgresLaneStorage(backend, name="billing-app")
    manager = LaneManager.builder().with_default_lanes().with_storage(storage).build()

A ``LaneManager`` keeps each accepted persistable command in ``lane.lane_commands`` until
it settles, and its terminal failures in ``lane.lane_dead_letters`` (migration 0022), so a
manager restarted on any machine resubmits what was in flight. Every call is one stored
function (sql/functions/95_lane_storage.sql). ``name`` keeps the rows of several
applications sharing one database apart; the backend's pool and schema are used, and the
backend stays the caller's to close.
"""

from __future__ import annotations

import json

from lane_pg.postgres.backend import PostgresBackend
from lane_pg.types import JSON, dumps_json
from lane_pg.types.scheduler import DeadLetter, StoredCommand

DEFAULT_STORAGE_NAME = "default"


def _payload(value: JSON, what: str) -> str | None:
    return None if value is None else dumps_json(value, what)


def _loaded(text: str | None) -> JSON:
    return None if text is None else json.loads(text)


class PostgresLaneStorage:
    """``LaneStorage`` over a ``PostgresBackend`` (see the module docstring)."""

    def __init__(self, backend: PostgresBackend, *, name: str = DEFAULT_STORAGE_NAME) -> None:
        if not isinstance(name, str) or not name:
            raise ValueError(f"a lane storage name is a non-empty string, got {name!r}")
        self._db = backend.database
        self.name = name

    async def save_command(self, command: StoredCommand) -> None:
        await self._db.fetch(
            "SELECT lane.save_lane_command($1, $2, $3, $4, $5::jsonb, $6)",
            self.name,
            command.command_id,
            command.lane_id,
            command.command_type,
            _payload(command.payload, "command payload"),
            command.submitted_at,
        )

    async def load_commands(self) -> list[StoredCommand]:
        rows = await self._db.fetch(
            "SELECT command_id, lane_id, command_type, payload::text AS payload, submitted_at"
            " FROM lane.load_lane_commands($1)",
            self.name,
        )
        return [
            StoredCommand(
                command_id=row["command_id"],
                lane_id=row["lane_id"],
                command_type=row["command_type"],
                payload=_loaded(row["payload"]),
                submitted_at=row["submitted_at"],
            )
            for row in rows
        ]

    async def remove_command(self, command_id: str) -> None:
        await self._db.fetch("SELECT lane.remove_lane_command($1, $2)", self.name, command_id)

    async def save_dead_letter(self, letter: DeadLetter) -> None:
        await self._db.fetch(
            "SELECT lane.save_lane_dead_letter($1, $2, $3, $4, $5, $6, $7, $8::jsonb)",
            self.name,
            letter.lane_id,
            letter.command_id,
            letter.command_type,
            letter.error,
            letter.attempts,
            letter.failed_at,
            _payload(letter.payload, "dead letter payload"),
        )

    async def load_dead_letters(self) -> list[DeadLetter]:
        rows = await self._db.fetch(
            "SELECT lane_id, command_id, command_type, error, attempts, failed_at,"
            " payload::text AS payload FROM lane.load_lane_dead_letters($1)",
            self.name,
        )
        return [
            DeadLetter(
                lane_id=row["lane_id"],
                command_id=row["command_id"],
                command_type=row["command_type"],
                error=row["error"],
                attempts=row["attempts"],
                failed_at=row["failed_at"],
                payload=_loaded(row["payload"]),
            )
            for row in rows
        ]

    async def clear_all(self) -> None:
        await self._db.fetch("SELECT lane.clear_lane_storage($1)", self.name)


__all__ = ["DEFAULT_STORAGE_NAME", "PostgresLaneStorage"]
