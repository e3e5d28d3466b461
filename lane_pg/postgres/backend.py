"""PostgresBackend: the JobQueueBackend on an asyncpg pool.

Every method is one ``SELECT`` of a ``lane.*`` stored function (one transaction), so the
rules live in SQL once and a psql user gets the same semantics. This module only converts
values: Python options to the jsonb document, durations to milliseconds, rows to ``JobRow``,
and SQLSTATE class ``LN`` errors to the ``lane_pg.errors`` classes.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import asyncpg

from lane_pg.backend import JobQueueBackend
from lane_pg.errors import ConfigurationError
from lane_pg.postgres import pooler
from lane_pg.postgres import schema as schema_mod
from lane_pg.postgres.batches import PostgresBatches
from lane_pg.postgres.cleanup import PostgresCleanup
from lane_pg.postgres.database import Database
from lane_pg.postgres.dedup import PostgresDedup
from lane_pg.postgres.events import PostgresEvents
from lane_pg.postgres.flows import PostgresFlows
from lane_pg.postgres.jobs import PostgresJobs, PostgresTransactions
from lane_pg.postgres.leader import PostgresLeader
from lane_pg.postgres.limits import PostgresLimits
from lane_pg.postgres.locks import PostgresLocks
from lane_pg.postgres.logs import PostgresLogs
from lane_pg.postgres.maintenance import PostgresIdempotency, PostgresMaintenance
from lane_pg.postgres.metrics import PostgresMetrics
from lane_pg.postgres.notifier import Notifier
from lane_pg.postgres.queues import PostgresQueues
from lane_pg.postgres.reads import PostgresReads
from lane_pg.postgres.repeats import PostgresRepeats
from lane_pg.postgres.runs import PostgresRuns
from lane_pg.postgres.space import PostgresSpace

log = logging.getLogger(__name__)


async def _keep_session(conn: asyncpg.Connection) -> None:
    """Pool release hook: nothing to undo.

    asyncpg's default reset sends ``pg_advisory_unlock_all(); CLOSE ALL; UNLISTEN *;
    RESET ALL`` on every release, one more round trip per call (~90 us of the ~300 us an
    autocommit ``add`` takes, W1). This pool's connections never take session locks,
    LISTEN or change settings: the worker's LISTEN and leader lock live on the notifier's
    own connection. asyncpg still rolls back a transaction left open before calling this.
    """


class PostgresBackend(
    JobQueueBackend,
):
    """Job queue backend over PostgreSQL (schema ``lane`` unless configured)."""

    kind = "postgres"

    def __init__(
        self,
        pool: asyncpg.Pool,
        schema: str = "lane",
        dsn: str | None = None,
        *,
        listen_dsn: str | None = None,
    ) -> None:
        self._pool = pool
        self._db = Database(pool, schema)
        self.schema = self._db.schema
        self.dsn = dsn
        """The DSN the pool was opened with (``pooler`` parameter included)."""
        self.listen_dsn = None if dsn is None else pooler.listen_dsn_of(dsn, listen_dsn)
        """Where the worker's LISTEN connection goes; None: the worker polls (a DSN through
        a transaction pooler and no direct one given, ``lane_pg.postgres.pooler``)."""
        runs = PostgresRuns(self._db)
        self._serve(
            {
                "leader": PostgresLeader(self._db),
                "batches": PostgresBatches(self._db),
                "locks": PostgresLocks(self._db),
                "jobs": PostgresJobs(self._db),
                "logs": PostgresLogs(self._db),
                "queues": PostgresQueues(self._db),
                "reads": PostgresReads(self._db),
                "events": PostgresEvents(self._db),
                "metrics": PostgresMetrics(self._db),
                "cleanup": PostgresCleanup(self._db),
                "dedup": PostgresDedup(self._db),
                "repeats": PostgresRepeats(self._db),
                "flows": PostgresFlows(self._db),
                "maintenance": PostgresMaintenance(self._db),
                "space": PostgresSpace(self._db),
                "idempotency": PostgresIdempotency(self._db),
                "transactions": PostgresTransactions(self._db),
                "runs": runs,
                "limits": PostgresLimits(self._db),
                "failed_records": runs,
            },
        )

    @classmethod
    async def connect(
        cls,
        dsn: str,
        *,
        schema: str = "lane",
        min_size: int = 1,
        max_size: int = 10,
        check_schema: bool = True,
        listen_dsn: str | None = None,
    ) -> PostgresBackend:
        """Open a pool and refuse to start against an old or newer-breaking schema.
        ``listen_dsn``: a direct DSN for the worker's LISTEN when ``dsn`` goes through a
        transaction pooler (default ``$LANE_PG_LISTEN_DSN``; ``lane_pg.postgres.pooler``)."""
        schema_mod.validate_schema_name(schema)
        target = pooler.target_of(dsn)
        listen_dsn = pooler.listen_dsn_of(dsn, listen_dsn)  # a bad one fails before any I/O
        if target.pool_size is not None:  # a cap from the DSN reaches every entry point
            max_size = min(max_size, target.pool_size)
            min_size = min(min_size, max_size)
        pool = await asyncpg.create_pool(
            target.dsn,
            min_size=min_size,
            max_size=max_size,
            reset=_keep_session,
            **target.asyncpg_options(),
        )
        try:
            if check_schema:
                async with pool.acquire() as conn:
                    await schema_mod.check_version(conn, schema)
        except BaseException:
            await pool.close()
            raise
        return cls(pool, schema, dsn, listen_dsn=listen_dsn)

    @property
    def database(self) -> Database:
        """The connections every entity of this backend sends its statements on."""
        return self._db

    @property
    def pool(self) -> asyncpg.Pool:
        return self._pool

    async def dedicated(self) -> PostgresBackend | None:
        """This backend over one connection of its own (an asyncpg pool of one, which
        reconnects by itself), for a caller that makes one call at a time: the worker's
        claim loop. The caller closes it. None when the DSN is unknown (a backend built
        on a pool of the caller's)."""
        if self.dsn is None:
            return None
        return await PostgresBackend.connect(
            self.dsn,
            schema=self.schema,
            min_size=1,
            max_size=1,
            check_schema=False,
            listen_dsn=self.listen_dsn,
        )

    def wakeups(
        self, queues: Sequence[str] | None, *, name: str, health_interval: float
    ) -> Notifier | None:
        """A LISTEN ``Notifier`` on a connection of its own for ``queues`` (all when None);
        the caller starts and closes it. Needs the DSN (``dsn`` given or ``connect``).
        None when the DSN goes through a transaction pooler and no direct LISTEN DSN was
        given: the worker polls."""
        if self.dsn is None:
            raise ConfigurationError(
                "this PostgresBackend was built on a pool without a DSN: it cannot open the"
                " LISTEN connection a worker's wake-ups need; build it with PostgresBackend."
                "connect(dsn) or pass dsn="
            )
        if self.listen_dsn is None:
            log.warning(
                "%s: the DSN goes through a transaction pooler (pooler=transaction) and no"
                " direct DSN for LISTEN is set ($%s): the worker polls for jobs",
                name,
                pooler.LISTEN_DSN_VARIABLE,
            )
            return None
        return Notifier(
            self.listen_dsn,
            schema=self.schema,
            queues=queues,
            application_name=name,
            health_interval=health_interval,
        )

    async def close(self) -> None:
        await self._db.close()

    # ----------------------------------------------------------------- plumbing
