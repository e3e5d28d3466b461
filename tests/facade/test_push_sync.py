"""Sync pushes (``Q.push_sync`` and its twins): a web app with no event loop pushes typed
jobs, on lane_pg's connection or inside its own psycopg / SQLAlchemy transaction, with the
async pushes' unique, delay, context and after-commit rules. PostgreSQL only (a caller's
transaction is a PostgreSQL transaction). These tests are plain functions: no event loop
runs in the test's thread, as in a Flask or Django view."""

from __future__ import annotations

import asyncio
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.orm import Session

import lane_pg
from lane_pg.errors import ConfigurationError
from lane_pg.facade import BackendDriver, Job, JobQueued, JobRegistry, QueueFacade

RUN = uuid.uuid4().hex  # unique locks outlive a test run: keys of this run only


@dataclass
class Welcome(Job):
    job_name = "Welcome"
    user_id: int = 0

    def unique_id(self) -> str | None:
        return f"welcome:{RUN}:{self.user_id}"


@dataclass
class Receipt(Job):
    job_name = "Receipt"
    after_commit = True
    order: int = 0


@dataclass
class Reminder(Job):
    job_name = "Reminder"
    delay = timedelta(hours=1)
    user_id: int = 0


@dataclass
class Setup:
    facade: QueueFacade
    dsn: str
    queue: str
    queued: list[JobQueued]

    def rows(self) -> list[dict[str, Any]]:
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            cur = conn.execute(
                "SELECT id, name, data, available_at, created_at, options"
                " FROM lane.jobs WHERE queue = %s ORDER BY key",
                [self.queue],
            )
            names = [column.name for column in cur.description or ()]
            return [dict(zip(names, row, strict=True)) for row in cur.fetchall()]


@pytest.fixture
def setup(pg_dsn: str, queue_name: str) -> Iterator[Setup]:
    facade = QueueFacade(registry=JobRegistry())
    facade.set_driver(BackendDriver.lazy(pg_dsn, "postgres"))
    for cls in (Welcome, Receipt, Reminder):
        facade.registry.register(cls)
        facade.route(cls, queue=queue_name)
    queued: list[JobQueued] = []
    facade.events.listen(JobQueued, queued.append)
    yield Setup(facade, pg_dsn, queue_name, queued)
    facade.close_sync()


def test_push_sync_stores_the_job_without_an_event_loop(setup: Setup) -> None:
    job_id = setup.facade.push_sync(Welcome(user_id=42))

    [row] = setup.rows()
    assert (row["id"], row["name"], row["data"]) == (job_id, "Welcome", {"user_id": 42})
    assert [event.job_id for event in setup.queued] == [job_id]


def test_the_callers_context_travels_with_a_sync_push(setup: Setup) -> None:
    with lane_pg.context.scope(tenant_id="acme"):
        setup.facade.push_sync(Welcome(user_id=1))
    setup.facade.push_sync(Welcome(user_id=2))

    first, second = setup.rows()
    assert first["options"]["meta"]["context"]["visible"] == {"tenant_id": "acme"}
    assert "context" not in second["options"]["meta"]


def test_delays_apply_as_for_the_async_pushes(setup: Setup) -> None:
    before = datetime.now(UTC)
    setup.facade.push_sync(Reminder(user_id=1))  # Job.delay: one hour
    setup.facade.later_sync(timedelta(minutes=5), Reminder(user_id=2))
    at = before + timedelta(days=1)
    setup.facade.push_later_sync(Reminder(user_id=3), at)

    declared, later, exact = (row["available_at"] - before for row in setup.rows())
    assert timedelta(minutes=59) < declared < timedelta(minutes=61)
    assert timedelta(minutes=4) < later < timedelta(minutes=6)
    assert abs(exact - timedelta(days=1)) < timedelta(seconds=1)


def test_push_unique_sync_refuses_a_held_key(setup: Setup) -> None:
    assert setup.facade.push_unique_sync(Welcome(user_id=7)) is True
    assert setup.facade.push_unique_sync(Welcome(user_id=7)) is False
    assert setup.facade.push_unique_sync(Welcome(user_id=8)) is True
    assert sorted(row["data"]["user_id"] for row in setup.rows()) == [7, 8]


def test_a_psycopg_transaction_carries_the_job_and_its_rollback_discards_it(
    setup: Setup,
) -> None:
    with psycopg.connect(setup.dsn) as conn:  # not autocommit: a transaction is open
        job_id = setup.facade.push_sync(Welcome(user_id=1), conn=conn)
        assert setup.rows() == []  # not visible to another connection before the commit
        conn.commit()
    assert [row["id"] for row in setup.rows()] == [job_id]

    with psycopg.connect(setup.dsn) as conn:
        setup.facade.bulk_sync([Welcome(user_id=2), Welcome(user_id=3)], conn=conn)
        conn.rollback()
    assert [row["id"] for row in setup.rows()] == [job_id]


def test_a_sqlalchemy_session_carries_the_job(setup: Setup) -> None:
    engine = create_engine(setup.dsn.replace("postgresql://", "postgresql+psycopg://", 1))
    try:
        with Session(engine) as session:
            session.execute(text("SELECT 1"))
            setup.facade.push_sync(Welcome(user_id=5), conn=session)
            session.rollback()
        assert setup.rows() == []
        with Session(engine) as session, session.begin():
            job_id = setup.facade.push_sync(Welcome(user_id=6), conn=session)
        assert [row["id"] for row in setup.rows()] == [job_id]
    finally:
        engine.dispose()


def test_after_commit_waits_for_a_tracked_psycopg_transaction(setup: Setup) -> None:
    with psycopg.connect(setup.dsn, autocommit=True) as conn:
        with lane_pg.transaction(conn):
            setup.facade.push_sync(Receipt(order=1))
            assert setup.rows() == [] and setup.queued == []  # not before the commit
        assert [row["data"] for row in setup.rows()] == [{"order": 1}]
        assert len(setup.queued) == 1

        with pytest.raises(RuntimeError, match="abandon"), lane_pg.transaction(conn):
            setup.facade.push_sync(Receipt(order=2))
            raise RuntimeError("abandon the order")
    assert [row["data"] for row in setup.rows()] == [{"order": 1}]  # rolled back: never pushed
    assert len(setup.queued) == 1


def test_sync_pushes_from_many_threads_all_land(setup: Setup) -> None:
    errors: list[BaseException] = []

    def push_some(start: int) -> None:
        try:
            for user_id in range(start, start + 10):
                setup.facade.push_sync(Welcome(user_id=user_id))
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=push_some, args=(n * 10,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert sorted(row["data"]["user_id"] for row in setup.rows()) == list(range(40))


def test_a_sync_push_inside_an_event_loop_is_refused(setup: Setup) -> None:
    async def inside() -> None:
        setup.facade.push_sync(Welcome(user_id=1))

    with pytest.raises(ConfigurationError, match="await"):
        asyncio.run(inside())
    assert setup.rows() == []


def test_bad_input_raises_in_the_callers_thread_and_stores_nothing(setup: Setup) -> None:
    with pytest.raises(TypeError, match=r"lane_pg\.Job"):
        setup.facade.push_sync("not a job")  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="aware"):
        setup.facade.push_later_sync(Welcome(user_id=1), datetime(2030, 1, 1))
    assert setup.rows() == []
