"""``Database``: one PostgresBackend's connections and the statements it sends on them.

Every entity's calls (``lane_pg.postgres.jobs``, ``runs``, ...) go through one ``Database``:
the pool, the one connection held between statements, the schema the statements name, and
SQLSTATE class ``LN`` errors turned into the ``lane_pg.errors`` classes.
"""

from __future__ import annotations

from typing import Any, cast

import asyncpg

from lane_pg.errors import JobNotFound
from lane_pg.postgres import schema as schema_mod
from lane_pg.postgres.arguments import reraise
from lane_pg.postgres.rows import JOB_COLUMNS, job_from_row
from lane_pg.types import JobRow


class Database:
    """A pool, the schema its statements name, and the connection held between them."""

    def __init__(self, pool: asyncpg.Pool, schema: str = "lane") -> None:
        self.pool = pool
        self.schema = schema_mod.validate_schema_name(schema)
        # One pooled connection kept out of the pool between statements (see call); never
        # with a pool of one, whose only connection a transaction may need.
        self._held: Any = None
        self._may_hold = pool.get_max_size() >= 2

    async def close(self) -> None:
        self._may_hold = False
        held, self._held = self._held, None
        if held is not None:
            await self.pool.release(held)
        await self.pool.close()

    def sql(self, text: str) -> str:
        """The statement with the schema substituted (the name is validated)."""
        return text if self.schema == "lane" else schema_mod.render_sql(text, self.schema)

    async def fetch(self, sql: str, *args: Any) -> list[asyncpg.Record]:
        return cast(list[asyncpg.Record], await self.call("fetch", self.sql(sql), args))

    async def fetchval(self, sql: str, *args: Any) -> Any:
        return await self.call("fetchval", self.sql(sql), args)

    async def job(self, function_call: str, *args: Any) -> JobRow:
        """The job row ``function_call`` returns; ``JobNotFound`` when it returns none."""
        rows = await self.fetch(f"SELECT {JOB_COLUMNS} FROM {function_call} AS j", *args)
        if not rows or rows[0]["id"] is None:
            raise JobNotFound("job not found")
        return job_from_row(rows[0])

    async def call(self, method: str, sql: str, args: tuple[Any, ...]) -> Any:
        """One autocommit statement: on the held connection when no other call is using
        it, else on one from the pool; afterwards the connection is held again if none is.

        asyncpg's ``Pool.fetch`` (acquire, then a shielded release task) took 316 us per
        ``SELECT 1`` on this VM against 113 us on a bare connection: every event-loop turn
        is an epoll syscall, and syscalls are dear under nested virtualisation. A caller
        that runs one statement after another (a producer's adds, W1; the worker's claim
        loop and settlement, W3) takes the held connection every time; concurrent callers
        use the pool as before. Only a connection whose statement got an answer (a result
        or a server error) is held again; after a cancellation or a broken connection it
        goes back to the pool, whose release waits out the cancellation or replaces it.
        """
        conn = self._held
        self._held = None
        if conn is not None and not _usable(conn):
            # The server ended it while it was held (a restart, pg_terminate_backend):
            # asyncpg gave its slot back to the pool. Nothing was sent on it yet, so the
            # statement goes to a new connection instead of failing (found by the soak).
            # The release is a no-op for a detached proxy and frees a closed one's slot.
            await self.pool.release(conn)
            conn = None
        held = conn is not None
        if conn is None:
            conn = await self.pool.acquire()
        answered = False
        try:
            try:
                result = await getattr(conn, method)(sql, *args)
            except asyncpg.InternalClientError:
                if not held:
                    raise
                # The server's termination notice reached the held connection before its
                # closed socket did: asyncpg refuses the statement before sending it
                # ("another operation is in progress"). Close it and use a new one.
                conn.terminate()
                await self.pool.release(conn)
                conn = await self.pool.acquire()
                result = await getattr(conn, method)(sql, *args)
            answered = True
            return result
        except asyncpg.PostgresError as exc:
            answered = True
            reraise(exc)
        finally:
            if answered and self._held is None and self._may_hold:
                self._held = conn
            else:
                await self.pool.release(conn)


def _usable(conn: Any) -> bool:
    """Whether a held pool connection still has its server connection: a lost one is
    closed, or already detached from its proxy (every call on it then raises)."""
    try:
        return not conn.is_closed()
    except asyncpg.InterfaceError:
        return False
