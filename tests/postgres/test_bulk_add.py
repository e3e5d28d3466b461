"""ADD-1/ADD-11 on PostgreSQL's fast bulk path (W2): a batch without options goes through
``lane.add_jobs_brief`` and the snapshots are built in Python from what the database chose.
They must be exactly what the stored rows say."""

from __future__ import annotations

from datetime import UTC, datetime

import asyncpg
import pytest

from lane_pg import JobSpec
from lane_pg.errors import InvalidPayload
from lane_pg.postgres.backend import PostgresBackend


async def test_plain_bulk_snapshots_equal_the_stored_jobs(
    pg_backend: PostgresBackend, queue_name: str
) -> None:
    specs = [
        JobSpec("send", {"to": "a@example.com", "n": 1, "tags": ["x"], "nested": {"b": 1, "a": 2}}),
        JobSpec("send"),
        JobSpec("other", [1, 2.5, "three", None, True]),
        JobSpec("send", {}, {}),  # an empty options document is no options
    ]
    added = await pg_backend.add_jobs(queue_name, specs)
    stored = [await pg_backend.get_job(queue_name, job.id) for job in added]
    assert added == stored
    assert [job.name for job in added] == ["send", "send", "other", "send"]
    assert len({job.id for job in added}) == 4
    assert [job.enqueued_seq for job in added] == sorted(job.enqueued_seq for job in added)  # type: ignore[type-var]


async def test_plain_bulk_add_keeps_the_given_time_and_creates_the_queue(
    pg_backend: PostgresBackend, queue_name: str
) -> None:
    at = datetime(2026, 1, 2, 3, 4, 5, 678000, tzinfo=UTC)
    added = await pg_backend.add_jobs(queue_name, [JobSpec("a"), JobSpec("b")], now=at)
    assert {job.created_at for job in added} == {at}
    assert queue_name in await pg_backend.list_queues()
    assert added == [await pg_backend.get_job(queue_name, job.id) for job in added]


async def test_a_batch_with_options_still_returns_stored_rows(
    pg_backend: PostgresBackend, queue_name: str
) -> None:
    added = await pg_backend.add_jobs(
        queue_name, [JobSpec("a"), JobSpec("b", None, {"priority": 3, "delay_ms": 60_000})]
    )
    assert added == [await pg_backend.get_job(queue_name, job.id) for job in added]
    assert [job.state for job in added] == ["waiting", "delayed"]


async def test_add_jobs_brief_in_sql_reports_ids_in_input_order(
    pg_dsn: str, queue_name: str
) -> None:
    conn = await asyncpg.connect(pg_dsn)
    try:
        row = await conn.fetchrow(
            "SELECT * FROM lane.add_jobs_brief($1, ARRAY['a', 'b', 'c'],"
            " ARRAY['1', '2', '3']::jsonb[],"
            " ARRAY['{}', '{\"job_id\": \"custom-1\"}', '{}']::jsonb[])",
            queue_name,
        )
        assert row is not None
        ids = row["ids"]
        assert ids[1] == "custom-1"
        names = [
            await conn.fetchval(
                "SELECT name FROM lane.jobs WHERE queue = $1 AND id = $2", queue_name, i
            )
            for i in ids
        ]
        assert names == ["a", "b", "c"]
        keys = await conn.fetch(
            "SELECT enqueued_seq, order_key FROM lane.jobs WHERE queue = $1 AND id = ANY($2)"
            " ORDER BY array_position($2, id)",
            queue_name,
            ids,
        )
        assert [r["enqueued_seq"] for r in keys] == list(row["enqueued_seqs"])
        assert [r["order_key"] for r in keys] == list(row["order_keys"])
    finally:
        await conn.close()


async def test_a_single_add_without_options_returns_the_stored_job(
    pg_backend: PostgresBackend, queue_name: str
) -> None:
    """ADD-1 on add_job's fast path (W1): the snapshot is built from the id, sequence, order
    key and time the database chose."""
    plain = await pg_backend.add_job(queue_name, "send", {"b": [1, {"c": None}], "a": "é"})
    empty = await pg_backend.add_job(queue_name, "send", None, {})
    with_options = await pg_backend.add_job(queue_name, "send", 7, {"priority": 2})
    for job in (plain, empty, with_options):
        assert job == await pg_backend.get_job(queue_name, job.id)
    assert empty.data is None
    assert with_options.priority == 2


async def test_bulk_payloads_travel_as_one_json_array_ADD_11(
    pg_backend: PostgresBackend, queue_name: str
) -> None:
    """Every spec's data goes as one JSON array the database splits: each job stores its own
    element, in input order, as JSON (a tuple arrives a list, None the JSON null), and the
    snapshot's data is a copy, not the caller's object."""
    payload: dict[str, object] = {"k": ["v"]}
    specs = [
        JobSpec("a", payload),
        JobSpec("b", (1, "two")),
        JobSpec("c", None),
        JobSpec("d", 'é ☃ \\ " ,]'),
        JobSpec("e", [[], {}, [{"x": None}]]),
    ]
    added = await pg_backend.add_jobs(queue_name, specs)
    assert [job.data for job in added] == [{"k": ["v"]}, [1, "two"], None, "é ☃ \\ \" ,]",
                                           [[], {}, [{"x": None}]]]  # fmt: skip
    assert added == [await pg_backend.get_job(queue_name, job.id) for job in added]
    assert added[0].data is not payload
    payload["k"] = "changed"
    assert added[0].data == {"k": ["v"]}


async def test_a_bad_payload_in_a_bulk_add_writes_nothing_ADD_11_SCH_10(
    pg_backend: PostgresBackend, queue_name: str
) -> None:
    for bad in ({"s": {1, 2}}, {"n": float("nan")}, {"t": "a\x00b"}):
        with pytest.raises(InvalidPayload):
            await pg_backend.add_jobs(queue_name, [JobSpec("ok", 1), JobSpec("bad", bad)])
    assert sum((await pg_backend.get_job_counts(queue_name)).values()) == 0


async def test_add_jobs_brief_takes_null_options_as_all_defaults(
    pg_dsn: str, queue_name: str
) -> None:
    """SQL callers may pass NULL for p_options: every spec has the default options."""
    conn = await asyncpg.connect(pg_dsn)
    try:
        row = await conn.fetchrow(
            "SELECT * FROM lane.add_jobs_brief($1, ARRAY['a', 'b'], ARRAY['1', '2']::jsonb[],"
            " NULL)",
            queue_name,
        )
        assert row is not None and len(row["ids"]) == 2
        stored = await conn.fetch(
            "SELECT state, priority, max_attempts, options::text FROM lane.jobs"
            " WHERE queue = $1 ORDER BY key",
            queue_name,
        )
        assert [tuple(r) for r in stored] == [("waiting", 0, 1, "{}"), ("waiting", 0, 1, "{}")]
        with_mismatch = conn.fetchrow(
            "SELECT * FROM lane.add_jobs_brief($1, ARRAY['a'], ARRAY['1']::jsonb[],"
            " ARRAY['{}', '{}']::jsonb[])",
            queue_name,
        )
        try:
            await with_mismatch
        except asyncpg.PostgresError as exc:
            assert "equal length" in str(exc)
        else:
            raise AssertionError("options of another length were accepted")
    finally:
        await conn.close()
