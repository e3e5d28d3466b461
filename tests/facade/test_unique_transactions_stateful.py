"""Unique locks under after-commit dispatch, a Hypothesis state machine (TX-4, -6, -10,
UNIQ-1, -3): random sequences of push / push_unique / after-commit push / begin / savepoint
/ commit / rollback / refused COMMIT, on a real asyncpg transaction, checked after every
step against a model of FEATURES.md:

* a key is held while a committed push_unique holds it (its TTL, 5 min, outlives the test),
  or while a push_unique of an open transaction level holds it;
* a rollback, a savepoint rollback and a refused COMMIT free the keys taken since that
  level opened (Laravel PR #55420: a lock taken inside a rolled-back transaction stayed),
  a released savepoint hands them to its parent, a commit makes them committed;
* stored rows are exactly the committed pushes.

Run once with the memory backend as the default connection (another store: deferred
writes and reservations) and once with the test database itself (A24: in-transaction
writes).
"""

from __future__ import annotations

import asyncio
import contextvars
import os
import uuid
from collections.abc import Coroutine
from dataclasses import dataclass, field
from typing import Any, TypeVar

import asyncpg
import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

import lane_pg
from lane_pg.backend import Dedup, JobQueueBackend
from lane_pg.facade import BackendDriver, Job, JobRegistry, QueueFacade, Transaction
from lane_pg.memory import MemoryBackend
from lane_pg.postgres.backend import PostgresBackend
from lane_pg.types import ALL_STATES
from tests.helpers import precondition_named

T = TypeVar("T")
KEYS = ("a", "b", "c")


@dataclass
class Lock(Job):
    job_name = "Lock"
    after_commit = True
    key: str = "a"
    scope: str = ""
    """The machine's queue: a unique lock is one per connection (UNIQ-1), and the database
    is shared by every machine and test."""

    def unique_id(self) -> str | None:
        return f"{self.scope}:{self.key}"


@dataclass
class Plain(Job):
    job_name = "Plain"
    n: int = 0


class Rolled(Exception):
    pass


@dataclass
class Level:
    """What one open transaction level took (model side)."""

    keys: set[str] = field(default_factory=set)
    rows: list[str] = field(default_factory=list)


class UniqueTransactions(RuleBasedStateMachine):
    dsn = ""
    shared = False

    def __init__(self) -> None:
        super().__init__()
        self.loop = asyncio.new_event_loop()
        self.context = contextvars.copy_context()
        self.queue = f"ut_{uuid.uuid4().hex[:12]}"
        self.conn: asyncpg.Connection = self.run(asyncpg.connect(self.dsn))
        self.run(
            self.conn.execute(
                "CREATE TEMP TABLE refuse (id int,"
                " CONSTRAINT once UNIQUE (id) DEFERRABLE INITIALLY DEFERRED)"
            )
        )
        if self.shared:
            postgres = self.run(PostgresBackend.connect(self.dsn, min_size=1, max_size=2))
            self.run(postgres.set_queue_events(self.queue, record=True))
            self.backend: JobQueueBackend = postgres
        else:
            self.backend = MemoryBackend()
        self.facade = QueueFacade(registry=JobRegistry())
        kind = "postgres" if self.shared else "memory"
        self.facade.set_driver(BackendDriver(self.backend, kind))
        for cls in (Lock, Plain):
            self.facade.route(cls, queue=self.queue)
        self.levels: list[Transaction] = []
        self.model: list[Level] = []
        self.committed_keys: set[str] = set()
        self.committed_rows: list[str] = []
        self.pushes = 0

    def run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        # Every step in one context, as the body of one ``async with`` block would be: the
        # ambient transaction is a contextvar, and each task would otherwise get a copy.
        return self.loop.run_until_complete(self.loop.create_task(coroutine, context=self.context))

    def teardown(self) -> None:
        async def close() -> None:
            while self.levels:
                await self.levels.pop().__aexit__(Rolled, Rolled(), None)
            await self.conn.close()
            await self.backend.close()

        self.run(close())
        self.loop.close()

    # -- model -----------------------------------------------------------------------

    def model_held(self, key: str) -> bool:
        return key in self.committed_keys or any(key in level.keys for level in self.model)

    async def real_held(self, key: str) -> bool:
        dedup_id = f"Lock:{self.queue}:{key}"
        if self.shared:
            # On the transaction's own connection: it sees its uncommitted owner rows (and
            # another connection would wait on them).
            owner = await self.conn.fetchval(
                "SELECT lane.get_deduplication_job_id($1, $2)", self.queue, dedup_id
            )
            return owner is not None
        assert isinstance(self.backend.dedup, Dedup)
        probe = f"probe-{uuid.uuid4().hex}"
        taken = await self.backend.reserve_deduplication_key(self.queue, dedup_id, probe, 60)
        if taken:
            await self.backend.release_deduplication_key(self.queue, dedup_id, probe)
        return not taken

    # -- rules -----------------------------------------------------------------------

    @rule(key=st.sampled_from(KEYS))
    def push_unique(self, key: str) -> None:
        expected = not self.model_held(key)
        assert self.run(self.facade.push_unique(Lock(key, self.queue))) is expected
        if expected:
            if self.model:
                self.model[-1].keys.add(key)
                self.model[-1].rows.append(f"Lock:{key}")
            else:
                self.committed_keys.add(key)
                self.committed_rows.append(f"Lock:{key}")

    @rule(deferred=st.booleans())
    def push_plain(self, deferred: bool) -> None:
        self.pushes += 1
        job = Plain(self.pushes)
        if deferred:
            self.run(self.facade.push_after_commit(job))
        else:
            self.run(self.facade.push(job))
        if deferred and self.model:
            self.model[-1].rows.append("Plain")
        else:
            self.committed_rows.append("Plain")

    @precondition(precondition_named(lambda self: len(self.levels) < 3))
    @rule()
    def begin(self) -> None:
        """A transaction, or a savepoint inside the open one (TX-6)."""
        level = lane_pg.transaction(self.conn)
        self.run(level.__aenter__())
        self.levels.append(level)
        self.model.append(Level())

    @precondition(precondition_named(lambda self: bool(self.levels)))
    @rule()
    def commit(self) -> None:
        """COMMIT, or RELEASE SAVEPOINT: the parent takes the level's pushes over."""
        self.run(self.levels.pop().__aexit__(None, None, None))
        done = self.model.pop()
        if self.model:
            self.model[-1].keys |= done.keys
            self.model[-1].rows += done.rows
        else:
            self.committed_keys |= done.keys
            self.committed_rows += done.rows

    @precondition(precondition_named(lambda self: bool(self.levels)))
    @rule()
    def rollback(self) -> None:
        """ROLLBACK, or ROLLBACK TO SAVEPOINT: the level's keys are free again (TX-4, -6)."""
        self.run(self.levels.pop().__aexit__(Rolled, Rolled(), None))
        self.model.pop()

    @precondition(precondition_named(lambda self: len(self.levels) == 1))
    @rule()
    def refused_commit(self) -> None:
        """A COMMIT the server refuses (a deferred constraint): nothing happened (TX-10)."""
        self.run(self.conn.execute("INSERT INTO refuse VALUES (1), (1)"))
        with pytest.raises(asyncpg.UniqueViolationError):
            self.run(self.levels.pop().__aexit__(None, None, None))
        self.model.pop()

    # -- checks ----------------------------------------------------------------------

    @invariant()
    def keys_are_held_exactly_as_modelled(self) -> None:
        for key in KEYS:
            assert self.run(self.real_held(key)) is self.model_held(key), key

    @invariant()
    def stored_rows_are_the_committed_pushes(self) -> None:
        page = self.run(self.backend.list_jobs(self.queue, ALL_STATES, limit=500))
        stored = sorted(
            f"Lock:{row.data['key']}" if row.name == "Lock" else "Plain" for row in page.items
        )
        assert stored == sorted(self.committed_rows)


SETTINGS = settings(
    max_examples=int(os.environ.get("LANE_PG_STATEFUL_EXAMPLES", "40")) // 2,
    stateful_step_count=25,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)


@pytest.mark.timeout(600)
def test_unique_locks_follow_the_model_on_another_store_TX_4_TX_6_TX_10(pg_dsn: str) -> None:
    UniqueTransactions.dsn, UniqueTransactions.shared = pg_dsn, False
    run_state_machine_as_test(UniqueTransactions, settings=SETTINGS)


@pytest.mark.timeout(600)
def test_unique_locks_follow_the_model_on_the_same_database_A24_TX_10(pg_dsn: str) -> None:
    UniqueTransactions.dsn, UniqueTransactions.shared = pg_dsn, True
    run_state_machine_as_test(UniqueTransactions, settings=SETTINGS)
