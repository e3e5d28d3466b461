"""SCH-9: ``lane_pg.postgres.sync.Queue``, the synchronous producer, round trip through psycopg.

Plain ``def`` tests: no event loop is running anywhere in them.
"""

from __future__ import annotations

import asyncio
import sys
from datetime import timedelta

import psycopg
import pytest
from sqlalchemy import create_engine
from sqlalchemy.engine import make_url

from lane_pg.errors import ConfigurationError, InvalidJobId, InvalidOptions, InvalidQueueName
from lane_pg.postgres.sync import Queue
from lane_pg.types import Backoff, JobOptions, JobSpec


def _no_running_loop() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return True
    return False


def test_round_trip_with_own_connection(pg_dsn: str, queue_name: str) -> None:
    assert _no_running_loop()
    with Queue(pg_dsn, queue_name) as q:
        assert q.get_job_counts() == dict.fromkeys(
            ["waiting", "delayed", "active", "waiting-children", "completed", "failed"], 0
        )

        job = q.add_job("send", {"to": "a@example.com"})
        assert (job.queue, job.name, job.data, job.state) == (
            queue_name,
            "send",
            {"to": "a@example.com"},
            "waiting",
        )
        assert q.get_job(job.id) == job

        delayed = q.add_job("later", None, delay=timedelta(minutes=5), priority=7, job_id="later-1")
        assert (delayed.id, delayed.state, delayed.priority) == ("later-1", "delayed", 7)
        # ADD-3: an existing custom id returns the stored job unchanged.
        assert q.add_job("other", {"x": 1}, job_id="later-1") == delayed

        bulk = q.add_jobs(
            [
                JobSpec("b0", {"i": 0}),
                JobSpec("b1", {"i": 1}, JobOptions(priority=2, attempts=3)),
                JobSpec("b2", [1, 2, 3], {"job_id": "bulk-2", "lifo": True}),
            ]
        )
        assert [(j.name, j.data) for j in bulk] == [
            ("b0", {"i": 0}),
            ("b1", {"i": 1}),
            ("b2", [1, 2, 3]),
        ]
        assert (bulk[1].priority, bulk[1].max_attempts) == (2, 3)
        assert (bulk[2].id, bulk[2].lifo) == ("bulk-2", True)
        assert [q.get_job(j.id) for j in bulk] == bulk
        assert q.add_jobs([]) == []

        counts = q.get_job_counts()
        assert counts["waiting"] == 4
        assert counts["delayed"] == 1
        assert sum(counts.values()) == 5

        assert q.get_job("missing") is None
        assert q.get_job("999999999999") is None
    assert isinstance(q.connection, psycopg.Connection)
    assert q.connection.closed


def test_keyword_options_merge(pg_dsn: str, queue_name: str) -> None:
    with Queue(pg_dsn, queue_name) as q:
        job = q.add_job(
            "a",
            None,
            JobOptions(priority=5, attempts=2),
            backoff=Backoff.fixed(1.5),
            timeout=30,
        )
        assert (job.priority, job.max_attempts, job.timeout_ms) == (5, 2, 30_000)
        assert job.backoff == Backoff.fixed(1.5)

        # Over a dict: a keyword overrides its key; a default value removes the key.
        job = q.add_job("b", None, {"priority": 4, "lifo": True}, priority=0, attempts=4)
        assert (job.priority, job.lifo, job.max_attempts) == (0, True, 4)

        with pytest.raises(InvalidOptions, match="unknown job options"):
            q.add_job("c", None, colour="red")
        with pytest.raises(InvalidJobId):
            q.add_job("c", None, job_id="42")
        assert sum(q.get_job_counts().values()) == 2


def test_given_connection_joins_the_callers_transaction(pg_dsn: str, queue_name: str) -> None:
    with psycopg.connect(pg_dsn) as conn, Queue(pg_dsn, queue_name) as reader:
        q = Queue(conn, queue_name)
        job = q.add_job("send", {"n": 1})
        assert q.get_job(job.id) == job  # visible inside the transaction
        assert reader.get_job(job.id) is None  # not outside it
        conn.rollback()
        assert q.get_job(job.id) is None

        job = q.add_job("send", {"n": 2})
        conn.commit()
        assert reader.get_job(job.id) == job
        q.close()  # a given connection is left open
        assert not conn.closed


def test_sqlalchemy_connection(pg_dsn: str, queue_name: str) -> None:
    engine = create_engine(make_url(pg_dsn).set(drivername="postgresql+psycopg"))
    try:
        with engine.connect() as conn:
            q = Queue(conn, queue_name)
            job = q.add_job("send", {"n": 1})
            assert q.get_job_counts()["waiting"] == 1
            conn.commit()
            assert q.get_job(job.id) == job
    finally:
        engine.dispose()


def test_bad_names_are_refused_before_connecting() -> None:
    with pytest.raises(InvalidQueueName):
        Queue("postgresql://nowhere.invalid/x", "bad queue")
    with pytest.raises(ConfigurationError):
        Queue("postgresql://nowhere.invalid/x", "q", schema="Bad-Schema")


def test_without_psycopg_the_error_says_what_to_install(
    pg_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """psycopg and SQLAlchemy stay dependencies of lane_pg (``migrate`` runs Alembic on
    them), but a broken install gets one clear line instead of a bare ImportError."""
    monkeypatch.setitem(sys.modules, "psycopg", None)  # `import psycopg` now fails
    with pytest.raises(ConfigurationError, match=r"pip install 'psycopg\[binary\]'"):
        Queue(pg_dsn, "emails")
