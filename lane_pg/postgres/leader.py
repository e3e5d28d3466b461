"""``PostgresLeader``: the workers' maintenance leader as a lease in ``lane.leaders``.

Each call is one ``SELECT lane.acquire_leadership(...)`` / ``lane.resign_leadership(...)``
on the backend's pool (the rules are in sql/functions/55_leader.sql). The leader used to be
the holder of a session advisory lock on its LISTEN connection: a process frozen by SIGSTOP
keeps its session and so its lock, and nobody recovered stalled jobs. A lease lapses when
its holder stops renewing it, whatever became of the holder's connections.
"""

from __future__ import annotations

from datetime import datetime
from typing import cast

import asyncpg

from lane_pg.errors import translate_error
from lane_pg.postgres.schema import render_sql, validate_schema_name
from lane_pg.types import Duration, to_millis


class PostgresLeader:
    """``Leader`` over an asyncpg pool (``PostgresBackend.leader()``)."""

    def __init__(self, pool: asyncpg.Pool, schema: str = "lane") -> None:
        self._pool = pool
        schema = validate_schema_name(schema)
        self._acquire = render_sql("SELECT lane.acquire_leadership($1, $2, $3, $4)", schema)
        self._resign = render_sql("SELECT lane.resign_leadership($1, $2)", schema)

    async def acquire_leadership(
        self, role: str, holder: str, lease: Duration, *, now: datetime | None = None
    ) -> bool:
        return cast(
            bool, await self._call(self._acquire, role, holder, to_millis(lease, "lease"), now)
        )

    async def resign_leadership(self, role: str, holder: str) -> bool:
        return cast(bool, await self._call(self._resign, role, holder))

    async def _call(self, sql: str, *args: object) -> object:
        try:
            return await self._pool.fetchval(sql, *args)
        except asyncpg.PostgresError as exc:
            lane_error = translate_error(exc)
            if lane_error is None:
                raise
            raise lane_error from exc
