"""``lane.search_jobs`` walks the state's partial index in the page's order and stops once
the page is full: on a table of many jobs across queues, a page reads about ``(offset +
limit + 1) / selectivity`` rows of its queue and state, never all of them.

The planner guesses that a jsonb ``=`` matches 0.5 % of rows; left to itself, it expects
fewer matches than a page and fetches the state's every row to sort them (the function's
``SET enable_sort = off`` prevents it; without it this test reads all 2,000 waiting jobs).
The function's query runs inside PL/pgSQL, where a plain EXPLAIN does not reach:
``auto_explain`` (loaded into the test's own session, as in test_job_calls_plans.py) sends
the executed plan of each nested statement back as a notice, with ANALYZE's row counts.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import asyncpg

QUEUES = 4
JOBS = 40_000
SELECTIVITY = 10  # one job in ten has name 'a' and data {"t": 3}
LIMIT = 5

# Each queue: 50 % completed, 20 % waiting, 10 % delayed, 10 % failed, 8 % waiting-children
# and 2 % active, their times and order keys distinct, so every order is a total one.
_FILL = f"""
INSERT INTO lane.queues (name) SELECT 'sq' || g FROM generate_series(0, {QUEUES - 1}) g;
INSERT INTO lane.jobs (queue, id, name, data, state, order_key, created_at, available_at,
                       finished_at, lease_expires_at)
SELECT 'sq' || (g % {QUEUES}), 's' || g, CASE WHEN g / {QUEUES} % 2 = 0 THEN 'a' ELSE 'b' END,
       jsonb_build_object('i', g, 't', g / {QUEUES} % {SELECTIVITY // 2}), s.state, g,
       now() - g * interval '1 s', now() + g * interval '1 s',
       CASE WHEN s.state IN ('completed', 'failed') THEN now() - g * interval '1 ms' END,
       CASE WHEN s.state = 'active' THEN now() + interval '1 minute' END
  FROM generate_series(1, {JOBS}) g
 CROSS JOIN LATERAL (SELECT CASE WHEN g / {QUEUES} * 37 % 100 < 50 THEN 'completed'
                                 WHEN g / {QUEUES} * 37 % 100 < 70 THEN 'waiting'
                                 WHEN g / {QUEUES} * 37 % 100 < 80 THEN 'delayed'
                                 WHEN g / {QUEUES} * 37 % 100 < 90 THEN 'failed'
                                 WHEN g / {QUEUES} * 37 % 100 < 98 THEN 'waiting-children'
                                 ELSE 'active' END AS state) s;
"""

# The states whose index gives the page's order.
INDEXED = {
    "waiting": "jobs_waiting_idx",
    "delayed": "jobs_delayed_idx",
    "waiting-children": "jobs_waiting_children_idx",
    "completed": "jobs_finished_idx",
    "failed": "jobs_finished_idx",
}


def plan_nodes(node: dict[str, Any]) -> Iterator[dict[str, Any]]:
    yield node
    for child in node.get("Plans", []):
        yield from plan_nodes(child)


def inner_plan(notices: list[str]) -> dict[str, Any]:
    """Of the plans auto_explain sent, the one of lane.search_jobs' query on lane.jobs."""
    plans = [json.loads(text[text.index("{") :]) for text in notices if "plan:" in text]
    [inner] = [p for p in plans if "LIMIT p_limit + 1" in p["Query Text"]]
    plan: dict[str, Any] = inner["Plan"]
    return plan


async def test_a_search_page_reads_its_rows_through_the_states_index_and_stops(
    fresh_conn: asyncpg.Connection,
) -> None:
    conn = fresh_conn
    await conn.execute(_FILL)
    await conn.execute("ANALYZE lane.jobs")
    counts = dict(
        await conn.fetch("SELECT state, count(*) FROM lane.jobs WHERE queue = 'sq3' GROUP BY 1")
    )
    await conn.execute("LOAD 'auto_explain'")
    for setting, value in (
        ("log_min_duration", "0"),
        ("log_nested_statements", "on"),
        ("log_analyze", "on"),
        ("log_timing", "off"),
        ("log_format", "json"),
        ("log_level", "notice"),
    ):
        await conn.execute(f"SET auto_explain.{setting} = {value}")
    notices: list[str] = []
    conn.add_log_listener(lambda _, message: notices.append(str(message.message)))

    for state, index in INDEXED.items():
        notices.clear()
        await conn.fetch(
            "SELECT * FROM lane.search_jobs('sq3', $1, 'a', '{t}', '3', 0, $2)", state, LIMIT
        )
        plan = inner_plan(notices)
        nodes = list(plan_nodes(plan))
        [scan] = [node for node in nodes if node.get("Relation Name") == "jobs"]
        read = scan["Actual Rows"] + scan.get("Rows Removed by Filter", 0)
        where = f"{state}: {json.dumps(plan, indent=1)}"
        assert scan["Node Type"] == "Index Scan" and scan["Index Name"] == index, where
        newest_first = state in ("waiting-children", "completed", "failed")
        assert scan["Scan Direction"] == ("Backward" if newest_first else "Forward"), where
        assert not [node for node in nodes if node["Node Type"] == "Sort"], where
        assert scan["Actual Rows"] == LIMIT + 1, where  # a full page and the next match
        assert read <= 2 * (LIMIT + 1) * SELECTIVITY, where
        assert counts[state] > 5 * read, where  # far from the state's every row

    # Active jobs have no index by queue: the page sorts every queue's active jobs (as many
    # as the workers run at once), found through jobs_lease_idx, never the whole table.
    notices.clear()
    await conn.fetch("SELECT * FROM lane.search_jobs('sq3', 'active', 'a', '{t}', '3', 0, 5)")
    nodes = list(plan_nodes(inner_plan(notices)))
    [scan] = [node for node in nodes if node.get("Relation Name") == "jobs"]
    assert [node["Index Name"] for node in nodes if "Index Name" in node] == ["jobs_lease_idx"]
    active = await conn.fetchval("SELECT count(*) FROM lane.jobs WHERE state = 'active'")
    assert scan["Actual Rows"] + scan.get("Rows Removed by Filter", 0) == active
    # the function turns sorts off for its own statements only
    assert await conn.fetchval("SHOW enable_sort") == "on"
