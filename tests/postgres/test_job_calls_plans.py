"""A call on one job (or one queue) reads its rows through an index, whatever the size of
the jobs table.

Every statement the call runs, its functions' statements included, is explained by
``auto_explain`` (loaded into the test's own session, its plans sent back as notices), on
a table of a few thousand other jobs with fresh statistics: no plan may read ``lane.jobs``
or ``lane.flow_deps`` with a sequential scan. A lookup of a key through a volatile
function in a WHERE clause, for one, is evaluated once per row of a full scan (it once made
``remove_child_dependency`` take 312 ms on a table of 10,000 jobs).
"""

from __future__ import annotations

import json
import re

import asyncpg
import pytest

OTHER_JOBS = 4000
QUEUE = "plans"

# (call, arguments): each runs in a transaction rolled back after it, on the jobs below.
CALLS: list[tuple[str, tuple[object, ...]]] = [
    ("SELECT * FROM lane.get_job($1, $2)", (QUEUE, "w1")),
    ("SELECT lane.get_job_state($1, $2)", (QUEUE, "w1")),
    ("SELECT lane.promote_job($1, $2)", (QUEUE, "d1")),
    ("SELECT lane.reschedule_job($1, $2, 5000)", (QUEUE, "d1")),
    ("SELECT lane.update_job_priority($1, $2, 3)", (QUEUE, "w1")),
    ("SELECT lane.update_job_data($1, $2, '{\"a\": 1}'::jsonb)", (QUEUE, "w1")),
    ("SELECT lane.update_job_progress($1, $2, '50'::jsonb)", (QUEUE, "w1")),
    ("SELECT lane.add_job_log($1, $2, 'a line')", (QUEUE, "w1")),
    ("SELECT * FROM lane.get_job_logs($1, $2)", (QUEUE, "w1")),
    ("SELECT lane.clear_job_logs($1, $2)", (QUEUE, "w1")),
    ("SELECT lane.remove_job($1, $2)", (QUEUE, "w1")),
    ("SELECT * FROM lane.get_flow_dependency_counts($1, $2)", (QUEUE, "parent")),
    ("SELECT * FROM lane.get_flow_dependencies($1, $2)", (QUEUE, "parent")),
    ("SELECT lane.remove_child_dependency($1, $2)", (QUEUE, "child-a")),
    ("SELECT lane.remove_unprocessed_children($1, $2)", (QUEUE, "parent")),
    ("SELECT * FROM lane.get_job_counts($1)", (QUEUE,)),
    ("SELECT lane.count_jobs($1, NULL)", (QUEUE,)),
    ("SELECT lane.count_pending_jobs($1)", (QUEUE,)),
    ("SELECT * FROM lane.list_jobs($1, lane._job_states())", (QUEUE,)),
]


@pytest.fixture
async def explained(fresh_conn: asyncpg.Connection) -> asyncpg.Connection:
    conn = fresh_conn
    await conn.execute(
        "SELECT count(*) FROM lane.add_jobs('filler', array_fill('n'::text, ARRAY[$1::int]),"
        " array_fill('{}'::jsonb, ARRAY[$1::int]), array_fill('{}'::jsonb, ARRAY[$1::int]))",
        OTHER_JOBS,
    )
    for job_id, options in (("w1", {}), ("d1", {"delay_ms": 60_000})):
        await conn.execute(
            "SELECT lane.add_job($1, 'n', '{}'::jsonb, $2::jsonb)",
            QUEUE,
            json.dumps({"job_id": job_id, **options}),
        )
    flow = {
        "queue": QUEUE,
        "name": "parent",
        "options": {"job_id": "parent"},
        "children": [
            {"name": "child", "options": {"job_id": "child-a"}},
            {"name": "child", "options": {"job_id": "child-b"}},
        ],
    }
    await conn.execute("SELECT lane.add_flow($1::jsonb)", json.dumps(flow))
    other_flow = {
        "queue": "filler",
        "name": "parent",
        "children": [{"name": "child"} for _ in range(OTHER_JOBS // 2)],
    }
    await conn.execute("SELECT lane.add_flow($1::jsonb)", json.dumps(other_flow))
    await conn.execute("ANALYZE lane.jobs")
    await conn.execute("ANALYZE lane.flow_deps")
    await conn.execute("LOAD 'auto_explain'")
    for setting, value in (
        ("log_min_duration", "0"),
        ("log_nested_statements", "on"),
        ("log_level", "notice"),
    ):
        await conn.execute(f"SET auto_explain.{setting} = {value}")
    return conn


async def test_a_call_on_one_job_or_queue_never_scans_the_jobs_table(
    explained: asyncpg.Connection,
) -> None:
    plans: list[str] = []
    explained.add_log_listener(lambda _, message: plans.append(str(message.message)))
    scanned: dict[str, str] = {}
    for call, arguments in CALLS:
        plans.clear()
        transaction = explained.transaction()
        await transaction.start()
        try:
            await explained.execute(call, *arguments)
        finally:
            await transaction.rollback()
        assert plans, f"auto_explain sent no plan for {call}"
        scans = [p for p in plans if re.search(r"Seq Scan on (jobs|flow_deps)\b", p)]
        if scans:
            scanned[call] = scans[0]
    assert not scanned, "\n\n".join(f"{call}:\n{plan}" for call, plan in scanned.items())
