"""``lane.failed_jobs`` from plain SQL (FAIL-1, FAIL-2, RET-7, A4): the record commits with
the terminal transition or not at all.

Each test runs inside a transaction rolled back at the end (``conn``); the savepoints
inside stand for the transaction of one ``lane.fail_jobs`` call.
"""

from __future__ import annotations

import json

import asyncpg
import pytest

from tests.postgres.conftest import refused

FAIL = (
    "SELECT status, state FROM lane.fail_jobs(ARRAY[$1], ARRAY[$2], ARRAY[$3::uuid],"
    " ARRAY[$4], ARRAY[$5::text], ARRAY[false], NULL, NULL, $6)"
)


async def claimed(
    conn: asyncpg.Connection, queue: str, options: dict[str, object], name: str = "Poison"
) -> tuple[str, str]:
    await conn.execute(
        "SELECT lane.add_job($1, $2, '{\"n\": 1}'::jsonb, $3::jsonb)",
        queue,
        name,
        json.dumps(options),
    )
    row = await conn.fetchrow(
        "SELECT id, lock_token::text AS token"
        " FROM lane.claim_jobs('w', ARRAY[$1], ARRAY[1], 30000)",
        queue,
    )
    assert row is not None
    return row["id"], row["token"]


async def records(conn: asyncpg.Connection, queue: str) -> list[asyncpg.Record]:
    return await conn.fetch(
        "SELECT connection, job_name, envelope_json::text AS envelope, exception, failed_at"
        " FROM lane.failed_jobs WHERE queue = $1",
        queue,
    )


async def state(conn: asyncpg.Connection, queue: str, job_id: str) -> asyncpg.Record:
    row = await conn.fetchrow(
        "SELECT state, attempts_made, lock_token::text AS token, finished_at"
        " FROM lane.jobs WHERE queue = $1 AND id = $2",
        queue,
        job_id,
    )
    assert row is not None
    return row


async def test_fail_jobs_records_a_terminal_failure_in_its_transaction_FAIL_2(
    conn: asyncpg.Connection, queue_name: str
) -> None:
    job_id, token = await claimed(conn, queue_name, {"attempts": 1, "meta": {"hidden": "h"}})
    [outcome] = await conn.fetch(FAIL, queue_name, job_id, token, "boom", "Traceback\nE", "pg")
    assert (outcome["status"], outcome["state"]) == ("ok", "failed")
    [record] = await records(conn, queue_name)
    assert (record["connection"], record["job_name"]) == ("pg", "Poison")
    assert record["exception"] == "Traceback\nE"
    envelope = json.loads(record["envelope"])
    assert envelope["id"] == job_id and envelope["data"] == {"n": 1}
    assert envelope["options"]["meta"] == {"hidden": "h"}
    assert envelope["attempts_made"] == 1 and envelope["failed_reason"] == "boom"
    assert record["failed_at"] == (await state(conn, queue_name, job_id))["finished_at"]


async def test_a_retried_failure_and_a_call_without_a_store_record_nothing_FAIL_2(
    conn: asyncpg.Connection, queue_name: str
) -> None:
    job_id, token = await claimed(conn, queue_name, {"attempts": 2})
    [retried] = await conn.fetch(FAIL, queue_name, job_id, token, "once", None, "pg")
    assert retried["state"] == "waiting"
    assert await records(conn, queue_name) == []

    again = await conn.fetchrow(
        "SELECT lock_token::text AS token FROM lane.claim_jobs('w', ARRAY[$1], ARRAY[1], 30000)",
        queue_name,
    )
    assert again is not None
    [ended] = await conn.fetch(FAIL, queue_name, job_id, again["token"], "twice", None, None)
    assert ended["state"] == "failed"
    assert await records(conn, queue_name) == []  # no store: no record


async def test_the_record_names_the_workers_connection_and_survives_removal_CONN_13_RET_7(
    conn: asyncpg.Connection, queue_name: str
) -> None:
    options = {"attempts": 1, "remove_on_fail": True, "meta": {"connection": "reports"}}
    job_id, token = await claimed(conn, queue_name, options)
    await conn.fetch(FAIL, queue_name, job_id, token, "boom", None, "worker-conn")
    gone = await conn.fetchval(
        "SELECT count(*) FROM lane.jobs WHERE queue = $1 AND id = $2", queue_name, job_id
    )
    assert gone == 0
    [record] = await records(conn, queue_name)
    assert record["connection"] == "worker-conn"  # not the push's label: CONN-13
    assert record["exception"] == "boom"


async def test_a_rolled_back_fail_jobs_leaves_neither_record_nor_failed_state_FAIL_2(
    conn: asyncpg.Connection, queue_name: str
) -> None:
    job_id, token = await claimed(conn, queue_name, {"attempts": 1})

    class Crash(Exception):
        pass

    with pytest.raises(Crash):
        async with conn.transaction():
            await conn.fetch(FAIL, queue_name, job_id, token, "boom", None, "pg")
            assert len(await records(conn, queue_name)) == 1
            assert (await state(conn, queue_name, job_id))["state"] == "failed"
            raise Crash  # the process dies before COMMIT
    assert await records(conn, queue_name) == []
    held = await state(conn, queue_name, job_id)
    assert (held["state"], held["attempts_made"], held["token"]) == ("active", 0, token)


async def test_a_record_that_cannot_be_written_fails_the_whole_call_FAIL_2(
    conn: asyncpg.Connection, queue_name: str
) -> None:
    job_id, token = await claimed(conn, queue_name, {"attempts": 1})
    async with conn.transaction():  # the constraint goes with the test's transaction
        await conn.execute(
            "ALTER TABLE lane.failed_jobs ADD CONSTRAINT test_refuses"
            " CHECK (exception <> 'refuse me')"
        )
        with pytest.raises(asyncpg.CheckViolationError):
            async with conn.transaction():
                await conn.fetch(FAIL, queue_name, job_id, token, "refuse me", None, "pg")
        held = await state(conn, queue_name, job_id)
        assert (held["state"], held["attempts_made"], held["token"]) == ("active", 0, token)
        assert await records(conn, queue_name) == []
        events = await conn.fetchval(
            "SELECT count(*) FROM lane.events WHERE queue = $1 AND event = 'failed'", queue_name
        )
        assert events == 0


@pytest.mark.parametrize(("meta", "recorded"), [({"connection": "pg"}, True), (None, False)])
async def test_stalled_recovery_past_the_limit_records_typed_jobs_FAIL_2(
    conn: asyncpg.Connection, queue_name: str, meta: dict[str, str] | None, recorded: bool
) -> None:
    options: dict[str, object] = {"attempts": 3}
    if meta is not None:
        options["meta"] = meta
    job_id, _ = await claimed(conn, queue_name, options)
    outcomes = await conn.fetch(
        "SELECT id, state FROM lane.recover_stalled(ARRAY[$1], 0,"
        " clock_timestamp() + interval '1 hour')",
        queue_name,
    )
    assert [(o["id"], o["state"]) for o in outcomes] == [(job_id, "failed")]
    found = await records(conn, queue_name)
    if recorded:
        [record] = found
        assert record["connection"] == "pg"
        assert record["exception"] == "job stalled more than allowable limit"
    else:
        assert found == []  # a plain job stays a retained failed row (seed 000)


async def test_store_functions_refuse_bad_input_FAIL_1(
    conn: asyncpg.Connection, queue_name: str
) -> None:
    await refused(conn, "LN003", "SELECT * FROM lane.failed_jobs_page(NULL, NULL, 0)")
    await refused(conn, "LN003", "SELECT * FROM lane.failed_jobs_page(now(), NULL, 10)")
    log = "SELECT lane.log_failed_job(NULL, $2, $1, 'J', $3::jsonb, 'x')"
    await refused(conn, "LN003", log, queue_name, "c", "[1]")
    await refused(conn, "LN003", log, queue_name, "", "{}")
    assert await records(conn, queue_name) == []
    record_id = await conn.fetchval(
        "SELECT lane.log_failed_job(NULL, 'c', $1, 'J', '{}'::jsonb, 'x')", queue_name
    )
    assert await conn.fetchval("SELECT lane.count_failed_jobs($1)", queue_name) == 1
    assert await conn.fetchval("SELECT lane.forget_failed_job($1)", record_id) is True
    assert await conn.fetchval("SELECT lane.forget_failed_job($1)", record_id) is False


@pytest.mark.parametrize(("meta", "recorded"), [({"connection": "pg"}, True), (None, False)])
async def test_a_parent_failed_by_its_child_records_typed_parents_FAIL_2(
    conn: asyncpg.Connection, queue_name: str, meta: dict[str, str] | None, recorded: bool
) -> None:
    parent_options: dict[str, object] = {"job_id": "report-1"}
    if meta is not None:
        parent_options["meta"] = meta
    flow = {
        "queue": queue_name,
        "name": "Report",
        "options": parent_options,
        "children": [{"name": "Fetch", "data": 1, "queue": f"{queue_name}_c"}],
    }
    await conn.execute("SELECT lane.add_flow($1::jsonb)", json.dumps(flow))
    child = await conn.fetchrow(
        "SELECT id, lock_token::text AS token"
        " FROM lane.claim_jobs('w', ARRAY[$1], ARRAY[1], 30000)",
        f"{queue_name}_c",
    )
    assert child is not None
    [outcome] = await conn.fetch(
        FAIL, f"{queue_name}_c", child["id"], child["token"], "fetch broke", None, None
    )
    assert outcome["state"] == "failed"
    assert (await state(conn, queue_name, "report-1"))["state"] == "failed"
    assert await records(conn, f"{queue_name}_c") == []  # the child's worker had no store
    found = await records(conn, queue_name)
    if recorded:
        [record] = found
        assert (record["connection"], record["job_name"]) == ("pg", "Report")
        assert "fetch broke" in record["exception"]
    else:
        assert found == []
