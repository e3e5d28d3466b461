"""Space upkeep on PostgreSQL (the ``space`` capability): dead row versions, VACUUM, index
sizes, bounded row counts and REINDEX CONCURRENTLY, each on a pooled connection outside any
transaction."""

from __future__ import annotations

from lane_pg.backend.capabilities import (
    CountRows,
    DeadTuples,
    IndexSize,
    IndexSizes,
    Reindex,
    Space,
    Vacuum,
)
from lane_pg.errors import InvalidOptions, UpkeepDeferred
from lane_pg.postgres.arguments import server_errors
from lane_pg.postgres.calls import Entity

# How long a rebuild (and the drop of a failed one's leftover) waits for a table lock before
# it gives up until the next pass: an autovacuum or a report's open transaction, say.
REINDEX_LOCK_TIMEOUT_MS = 5000
# A transaction of this database that has held a snapshot for longer than this puts a
# rebuild off: REINDEX CONCURRENTLY waits for every older snapshot, so it would give up at
# its lock timeout and leave an invalid copy behind on every pass while the transaction
# stays open (W6 with a snapshot held for 300 s: one `_ccnew` copy per pass).
REINDEX_DEFER_AFTER_S = 5.0

_OLD_SNAPSHOT = """
SELECT pid, extract(epoch FROM clock_timestamp() - xact_start)::float8 AS age
  FROM pg_stat_activity
 WHERE datname = current_database() AND pid <> pg_backend_pid()
   AND backend_type = 'client backend' AND backend_xmin IS NOT NULL
   AND xact_start <= clock_timestamp() - make_interval(secs => $1)
 ORDER BY xact_start
 LIMIT 1
"""


class PostgresSpace(Entity, serves=Space):
    """The upkeep operations on the pool of the backend's ``Database``, for its schema."""

    async def dead_tuples(self, args: DeadTuples) -> dict[str, int]:
        """Dead row versions per table of this schema (``pg_stat_user_tables``)."""
        async with server_errors():
            rows = await self._db.pool.fetch(
                "SELECT relname, n_dead_tup FROM pg_stat_user_tables WHERE schemaname = $1",
                self._db.schema,
            )
        return {row["relname"]: row["n_dead_tup"] for row in rows}

    async def _table_name(self, table: str) -> str:
        """``table`` of this schema, quoted; InvalidOptions when the schema has no such
        table (names are checked against the catalog, never interpolated unchecked)."""
        if table not in await self.dead_tuples(DeadTuples()):
            raise InvalidOptions(f"no table {table!r} in schema {self._db.schema!r}")
        return '"{}"."{}"'.format(self._db.schema, table.replace('"', '""'))

    async def vacuum(self, args: Vacuum) -> int:
        """``VACUUM (SKIP_LOCKED)`` one table of this schema (a vacuum already running on
        it, autovacuum's say, is not waited for); returns the dead row versions it left.
        VACUUM cannot run in a transaction: it goes alone on a pooled connection."""
        name = await self._table_name(args.table)
        async with server_errors():
            await self._db.pool.execute(f"VACUUM (SKIP_LOCKED) {name}")
        return (await self.dead_tuples(DeadTuples())).get(args.table, 0)

    async def index_sizes(self, args: IndexSizes) -> list[IndexSize]:
        """Every valid index of this schema's tables, with its size and the table's live
        rows (``pg_stat_user_tables.n_live_tup``)."""
        async with server_errors():
            rows = await self._db.pool.fetch(
                "SELECT t.relname AS table_name, i.relname AS index_name,"
                " pg_relation_size(i.oid) AS bytes, greatest(s.n_live_tup, 0) AS live"
                " FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid"
                " JOIN pg_class t ON t.oid = x.indrelid"
                " JOIN pg_stat_user_tables s ON s.relid = t.oid"
                " WHERE s.schemaname = $1 AND x.indisvalid ORDER BY 1, 2",
                self._db.schema,
            )
        return [
            IndexSize(row["table_name"], row["index_name"], row["bytes"], row["live"])
            for row in rows
        ]

    async def count_rows(self, args: CountRows) -> int:
        """``count(*)`` of one table of this schema, reading at most ``limit`` rows."""
        name = await self._table_name(args.table)
        async with server_errors():
            count: int = await self._db.pool.fetchval(
                f"SELECT count(*) FROM (SELECT 1 FROM {name} LIMIT $1) AS s", max(args.limit, 0)
            )
        return count

    async def reindex(self, args: Reindex) -> int:
        """``REINDEX INDEX CONCURRENTLY`` one index of this schema: writers and claims go on
        while it is rebuilt. B-tree pages emptied by deletions are reused only within their
        key range and never given back, so a queue's indexes grow with every wave of jobs
        (W6: 18 to 48 MB over ten rounds of 100,000 jobs, with ~20,000 rows live); the
        rebuilt index holds only the live entries. A rebuild that failed earlier leaves an
        invalid ``<index>_ccnew`` copy behind: it is dropped first. Waits at most 5 s for a
        lock (an autovacuum of the table, say). Runs outside any transaction, like VACUUM.
        Returns the index's size afterwards; ``UpkeepDeferred`` (nothing done) while
        another session's transaction has held a snapshot for over 5 s."""
        index = args.index
        names = {size.index for size in await self.index_sizes(IndexSizes())}
        if index not in names:
            raise InvalidOptions(f"no index {index!r} in schema {self._db.schema!r}")
        schema = '"{}"'.format(self._db.schema.replace('"', '""'))
        async with server_errors(), self._db.pool.acquire() as conn:
            holder = await conn.fetchrow(_OLD_SNAPSHOT, REINDEX_DEFER_AFTER_S)
            if holder is not None:
                raise UpkeepDeferred(
                    f"rebuilding {index} put off: the transaction of session {holder['pid']}"
                    f" has held a snapshot for {holder['age']:.0f}s, and the rebuild would"
                    " wait for it"
                )
            leftovers = await conn.fetch(
                "SELECT i.relname FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid"
                " JOIN pg_namespace n ON n.oid = i.relnamespace"
                " WHERE n.nspname = $1 AND NOT x.indisvalid AND i.relname LIKE $2",
                self._db.schema,
                index.replace("_", "\\_") + "\\_ccnew%",
            )
            # The drops wait under the same timeout: DROP INDEX CONCURRENTLY waits for every
            # transaction holding a lock on the table, and a session that kept one open
            # (a report's REPEATABLE READ read of lane.jobs) froze the leader's whole
            # maintenance loop for as long as it stayed open (W6 under a held snapshot).
            await conn.execute(f"SET lock_timeout = '{REINDEX_LOCK_TIMEOUT_MS}ms'")
            try:
                for row in leftovers:
                    name = '"{}"'.format(row["relname"].replace('"', '""'))
                    await conn.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {schema}.{name}")
                name = '"{}"'.format(index.replace('"', '""'))
                await conn.execute(f"REINDEX INDEX CONCURRENTLY {schema}.{name}")
            finally:
                await conn.execute("RESET lock_timeout")
            size: int = await conn.fetchval(
                "SELECT pg_relation_size(format('%I.%I', $1::text, $2::text)::regclass)",
                self._db.schema,
                index,
            )
        return size
