"""Flows on PostgreSQL under real concurrency (FLOW-3, -24, -26, MGMT-29): many
connections completing, failing and removing the children of the same parents at once
release each parent exactly once, in the transaction of its last child, with no deadlock
and a pending count that matches the dependency rows; a rolled-back flow leaves nothing;
the SQL interface a psql user has (`SELECT lane.add_flow(...)`)."""

from __future__ import annotations

import asyncio
import json
import random
from collections.abc import AsyncIterator

import asyncpg
import pytest_asyncio

from tests.postgres.conftest import refused

SETTLERS = 8


@pytest_asyncio.fixture
async def connections(pg_dsn: str) -> AsyncIterator[list[asyncpg.Connection]]:
    opened = [await asyncpg.connect(pg_dsn) for _ in range(SETTLERS + 1)]
    try:
        yield opened
    finally:
        for connection in opened:
            await connection.close()


def _flow(queue: str, parent_id: str, children: int, *child_queues: str) -> str:
    """A parent in ``queue`` whose children take turns in ``child_queues`` (its own queue
    when none is given)."""
    queues = child_queues or (queue,)
    return json.dumps(
        {
            "queue": queue,
            "name": "parent",
            "options": {"job_id": parent_id},
            "children": [
                {"name": "child", "data": i, "queue": queues[i % len(queues)]}
                for i in range(children)
            ],
        }
    )


async def _settle_until_empty(
    conn: asyncpg.Connection, queues: list[str], rng: random.Random, start: asyncio.Event
) -> int:
    """Claim a few children at a time and complete them in one call (in a random order),
    until nothing is claimable; gives how many this connection completed."""
    await start.wait()
    done = 0
    while True:
        rows = await conn.fetch(
            "SELECT queue, id, lock_token FROM lane.claim_jobs('w', $1::text[], $2::int[], 30000)",
            queues,
            [rng.randint(1, 7)] * len(queues),
        )
        if not rows:
            return done
        rng.shuffle(rows)
        await asyncio.sleep(rng.random() * 0.002)
        outcomes = await conn.fetch(
            "SELECT status FROM lane.complete_jobs($1::text[], $2::text[], $3::uuid[],"
            " $4::jsonb[])",
            [row["queue"] for row in rows],
            [row["id"] for row in rows],
            [row["lock_token"] for row in rows],
            [json.dumps(row["id"]) for row in rows],
        )
        assert {outcome["status"] for outcome in outcomes} <= {"ok"}
        done += len(rows)


async def _released(conn: asyncpg.Connection, queue: str, parent_id: str) -> int:
    return int(
        await conn.fetchval(
            "SELECT count(*) FROM lane.events e WHERE e.queue = $1 AND e.event = 'waiting'"
            " AND (e.job_id = $2 OR $2 = ANY (e.job_ids))"
            " AND e.data ->> 'prev' = 'waiting-children'",
            queue,
            parent_id,
        )
    )


async def _two_parents(admin: asyncpg.Connection, queue: str, children_each: int) -> list[str]:
    """Parents p1 and p2 in ``queue`` whose children share two queues (returned), so that
    every settler's batches mix both parents."""
    children = [f"{queue}_c1", f"{queue}_c2"]
    for parent in ("p1", "p2"):
        await admin.execute(
            "SELECT lane.add_flow($1::jsonb)", _flow(queue, parent, children_each, *children)
        )
    return children


def _settlers(
    settlers: list[asyncpg.Connection], queues: list[str], seed: int, start: asyncio.Event
) -> list[asyncio.Task[int]]:
    rng = random.Random(seed)
    return [
        asyncio.create_task(_settle_until_empty(conn, queues, random.Random(rng.random()), start))
        for conn in settlers
    ]


async def test_concurrent_completions_release_each_parent_once_FLOW_3(
    connections: list[asyncpg.Connection], queue_name: str
) -> None:
    admin, settlers = connections[0], connections[1:]
    children = await _two_parents(admin, queue_name, 300)
    start = asyncio.Event()
    tasks = _settlers(settlers, children, 11, start)
    start.set()
    completed = await asyncio.gather(*tasks)

    assert sum(completed) == 600
    for parent in ("p1", "p2"):
        row = await admin.fetchrow(
            "SELECT state, deps_pending FROM lane.jobs WHERE queue = $1 AND id = $2",
            queue_name,
            parent,
        )
        assert (row["state"], row["deps_pending"]) == ("waiting", 0)
        assert await _released(admin, queue_name, parent) == 1
        counts = await admin.fetchrow(
            "SELECT * FROM lane.get_flow_dependency_counts($1, $2)", queue_name, parent
        )
        assert (counts["processed"], counts["unprocessed"]) == (300, 0)


async def _remove_pending(
    conn: asyncpg.Connection, queue: str, parent: str, start: asyncio.Event
) -> list[str]:
    await start.wait()
    await asyncio.sleep(0.01)
    rows = await conn.fetch(
        "SELECT id FROM lane.remove_unprocessed_children($1, $2)", queue, parent
    )
    return [row["id"] for row in rows]


async def test_removal_racing_completions_never_loses_a_child_FLOW_24_MGMT_29(
    connections: list[asyncpg.Connection], queue_name: str
) -> None:
    admin, settlers = connections[0], connections[1:]
    await admin.execute(
        "SELECT lane.add_flow($1::jsonb)", _flow(queue_name, "p1", 400, f"{queue_name}_c")
    )
    start = asyncio.Event()
    rng = random.Random(5)
    settling = [
        asyncio.create_task(
            _settle_until_empty(conn, [f"{queue_name}_c"], random.Random(rng.random()), start)
        )
        for conn in settlers[1:]
    ]
    removing = asyncio.create_task(_remove_pending(settlers[0], queue_name, "p1", start))
    start.set()
    completed = sum(await asyncio.gather(*settling))
    removed = await removing

    # Every child was either completed or removed, never both, never neither.
    assert completed + len(removed) == 400
    counts = await admin.fetchrow(
        "SELECT * FROM lane.get_flow_dependency_counts($1, 'p1')", queue_name
    )
    assert (counts["processed"], counts["unprocessed"], counts["missing"]) == (
        completed,
        0,
        len(removed),
    )
    removed_rows = await admin.fetchval(
        "SELECT count(*) FROM lane.flow_deps d JOIN lane.jobs p ON p.key = d.parent_key"
        " WHERE p.queue = $1 AND p.id = 'p1' AND d.bucket = 'removed'",
        queue_name,
    )
    assert removed_rows == len(removed)
    parent = await admin.fetchrow(
        "SELECT state, deps_pending FROM lane.jobs WHERE queue = $1 AND id = 'p1'", queue_name
    )
    assert (parent["state"], parent["deps_pending"]) == ("waiting", 0)
    assert await _released(admin, queue_name, "p1") == 1


async def _remove_parent_midway(
    conn: asyncpg.Connection, queue: str, parent: str, start: asyncio.Event
) -> bool:
    """Removes ``parent`` once some of its children have completed."""
    await start.wait()
    for _ in range(20_000):  # a deadline of ~20 s
        if await conn.fetchval(
            "SELECT deps_pending < 150 FROM lane.jobs WHERE queue = $1 AND id = $2", queue, parent
        ):
            break
        await asyncio.sleep(0.001)
    else:
        raise AssertionError(f"no child of {parent} completed")
    return bool(await conn.fetchval("SELECT lane.remove_job($1, $2)", queue, parent))


async def test_parent_removed_while_its_children_complete_FLOW_3_FLOW_4(
    connections: list[asyncpg.Connection], queue_name: str
) -> None:
    """A parent removed while its children complete in batches that mix two parents: no
    completion fails or deadlocks (a completion reads its dependency rows before it takes
    the parent's lock), the removed parent's rows go with it, and the other parent holds
    every child's value and is released once."""
    admin, settlers = connections[0], connections[1:]
    children = await _two_parents(admin, queue_name, 200)
    start = asyncio.Event()
    settling = _settlers(settlers[1:], children, 23, start)
    removing = asyncio.create_task(_remove_parent_midway(settlers[0], queue_name, "p1", start))
    start.set()
    completed = sum(await asyncio.gather(*settling))

    assert await removing is True
    assert completed == 400
    assert (
        await admin.fetchval(
            "SELECT count(*) FROM lane.jobs WHERE queue = $1 AND id = 'p1'", queue_name
        )
        == 0
    )
    assert (
        await admin.fetchval(
            "SELECT count(*) FROM lane.flow_deps d WHERE d.child_queue = ANY ($1::text[])"
            " AND NOT EXISTS (SELECT 1 FROM lane.jobs p WHERE p.key = d.parent_key)",
            children,
        )
        == 0
    )
    parent = await admin.fetchrow(
        "SELECT state, deps_pending FROM lane.jobs WHERE queue = $1 AND id = 'p2'", queue_name
    )
    assert (parent["state"], parent["deps_pending"]) == ("waiting", 0)
    assert await _released(admin, queue_name, "p2") == 1
    # FLOW-4: each child's value (its id, as _settle_until_empty completes it) under p2.
    mismatched = await admin.fetchval(
        "SELECT count(*) FROM lane.flow_deps d JOIN lane.jobs p ON p.key = d.parent_key"
        " WHERE p.queue = $1 AND p.id = 'p2'"
        " AND (d.bucket <> 'processed' OR d.value IS DISTINCT FROM to_jsonb(d.child_id))",
        queue_name,
    )
    assert mismatched == 0


async def test_rolled_back_or_refused_flow_leaves_nothing_FLOW_1(
    connections: list[asyncpg.Connection], queue_name: str
) -> None:
    conn = connections[0]
    other = f"{queue_name}_b"
    transaction = conn.transaction()
    await transaction.start()
    await conn.execute(
        "SELECT lane.add_flow($1::jsonb)", _flow(queue_name, "p9", 5, queue_name, other)
    )
    await transaction.rollback()
    # A bad node deep in the tree refuses the whole of it.
    bad = json.loads(_flow(queue_name, "p8", 3))
    bad["children"][2]["children"] = [{"name": "grandchild", "options": {"priority": -1}}]
    await refused(conn, "LN002", "SELECT lane.add_flow($1::jsonb)", json.dumps(bad))

    for queue in (queue_name, other):
        assert await conn.fetchval("SELECT count(*) FROM lane.jobs WHERE queue = $1", queue) == 0
        assert await conn.fetchval("SELECT count(*) FROM lane.events WHERE queue = $1", queue) == 0
        assert (
            await conn.fetchval("SELECT count(*) FROM lane.flow_deps WHERE child_queue = $1", queue)
            == 0
        )


async def test_psql_flow_interface_FLOW_1(
    connections: list[asyncpg.Connection], queue_name: str
) -> None:
    conn = connections[0]
    parent = await conn.fetchval(
        "SELECT lane.add_flow($1::jsonb)",
        json.dumps(
            {
                "queue": queue_name,
                "name": "report",
                "data": {"month": 11},
                "children": [
                    {"name": "fetch", "data": 1},
                    {"name": "fetch", "data": 2, "options": {"ignore_dependency_on_failure": True}},
                ],
            }
        ),
    )
    rows = await conn.fetch(
        "SELECT id, state, parent_id FROM lane.jobs WHERE queue = $1 ORDER BY key", queue_name
    )
    assert [(r["state"], r["parent_id"]) for r in rows] == [
        ("waiting-children", None),
        ("waiting", parent),
        ("waiting", parent),
    ]
    page = await conn.fetch(
        "SELECT child_id FROM lane.get_flow_dependency_page($1, $2, 'unprocessed', 0, 10)",
        queue_name,
        parent,
    )
    assert [r["child_id"] for r in page] == [rows[1]["id"], rows[2]["id"]]
    await refused(
        conn,
        "LN013",
        "SELECT lane.add_flow($1::jsonb)",
        json.dumps({"name": "no queue", "children": []}),
    )
    await refused(
        conn, "LN003", "SELECT lane.get_flow_dependency_page($1, $2, 'bogus')", queue_name, parent
    )
