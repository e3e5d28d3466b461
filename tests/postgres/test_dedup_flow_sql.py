"""Keep-last flow children on PostgreSQL under real concurrency (DEDUP-18): an owner
finishing while a keep-last child candidate is being added for a parent, in every order
the two transactions can meet in. Whatever the order, the parent ends with exactly one
pending dependency that is a real job (or the placeholder while the owner runs), and the
count it waits on matches its dependency rows: no parent waits forever, none is released
early, and neither call fails."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator

import asyncpg
import pytest_asyncio

from tests.helpers import eventually

KEEP = {"deduplication": {"id": "report", "keep_last_if_active": True}}


@pytest_asyncio.fixture
async def three(pg_dsn: str) -> AsyncIterator[list[asyncpg.Connection]]:
    opened = [await asyncpg.connect(pg_dsn) for _ in range(3)]
    try:
        yield opened
    finally:
        for connection in opened:
            await connection.close()


def _flow(queue: str, parent_id: str) -> str:
    return json.dumps(
        {
            "queue": queue,
            "name": "parent",
            "options": {"job_id": parent_id},
            "children": [{"name": "report", "data": parent_id, "options": KEEP}],
        }
    )


async def _running_owner(conn: asyncpg.Connection, queue: str) -> asyncpg.Record:
    await conn.execute(
        "SELECT lane.add_job($1, 'report', '\"v1\"', $2::jsonb)", queue, json.dumps(KEEP)
    )
    [owner] = await conn.fetch(
        "SELECT key, id, lock_token FROM lane.claim_jobs('w', ARRAY[$1], ARRAY[1], 30000)", queue
    )
    return owner


async def _waits_on_a_lock(conn: asyncpg.Connection, pid: int) -> bool:
    waiting: bool = await conn.fetchval(
        "SELECT wait_event_type = 'Lock' FROM pg_stat_activity WHERE pid = $1", pid
    )
    return waiting


async def _parent(
    conn: asyncpg.Connection, queue: str, parent_id: str
) -> tuple[str, int, list[str]]:
    """The parent's state, its pending count and its unprocessed dependency ids, which
    must agree."""
    row = await conn.fetchrow(
        "SELECT state, deps_pending, key FROM lane.jobs WHERE queue = $1 AND id = $2",
        queue,
        parent_id,
    )
    pending = await conn.fetch(
        "SELECT child_id FROM lane.flow_deps WHERE parent_key = $1 AND bucket = 'unprocessed'",
        row["key"],
    )
    ids = [r["child_id"] for r in pending]
    assert row["deps_pending"] == len(ids)
    return row["state"], row["deps_pending"], ids


async def test_a_completion_waits_for_an_open_add_that_keeps_a_child_DEDUP_18(
    three: list[asyncpg.Connection], queue_name: str
) -> None:
    """The add holds the owner row first: the completion waits for it, then stores the
    kept child under the parent."""
    adder, completer, observer = three
    owner = await _running_owner(observer, queue_name)
    async with adder.transaction():
        await adder.execute("SELECT lane.add_flow($1::jsonb)", _flow(queue_name, "P"))
        completing = asyncio.ensure_future(
            completer.execute(
                "SELECT lane.complete_job($1, $2, $3::uuid)",
                queue_name,
                owner["id"],
                owner["lock_token"],
            )
        )
        await eventually(lambda: _waits_on_a_lock(observer, completer.get_server_pid()))
    await completing
    state, pending, ids = await _parent(observer, queue_name, "P")
    assert (state, pending) == ("waiting-children", 1)
    child = await observer.fetchrow(
        "SELECT id, parent_id, data FROM lane.jobs WHERE queue = $1 AND id = $2", queue_name, ids[0]
    )
    assert (child["parent_id"], json.loads(child["data"])) == ("P", "P")


async def test_an_add_waits_for_an_open_completion_and_owns_the_id_DEDUP_18(
    three: list[asyncpg.Connection], queue_name: str
) -> None:
    """The completion releases the id first: the add, waiting on it, finds no owner and
    attaches its child as a plain pending one (no placeholder)."""
    adder, completer, observer = three
    owner = await _running_owner(observer, queue_name)
    async with completer.transaction():
        await completer.execute(
            "SELECT lane.complete_job($1, $2, $3::uuid)",
            queue_name,
            owner["id"],
            owner["lock_token"],
        )
        adding = asyncio.ensure_future(
            adder.execute("SELECT lane.add_flow($1::jsonb)", _flow(queue_name, "P"))
        )
        await eventually(lambda: _waits_on_a_lock(observer, adder.get_server_pid()))
    await adding
    state, pending, ids = await _parent(observer, queue_name, "P")
    assert (state, pending) == ("waiting-children", 1)
    assert not ids[0].startswith("0:")
    holder = await observer.fetchval(
        "SELECT lane.get_deduplication_job_id($1, 'report')", queue_name
    )
    assert holder == ids[0]


async def test_an_add_does_not_wait_for_a_completion_holding_the_owner_job_DEDUP_18(
    three: list[asyncpg.Connection], queue_name: str
) -> None:
    """A completer that has locked the owner's row (a batch locks its rows before it
    reaches the owner rows) while the add keeps a child: the add leaves the owner's row
    alone (before, its NOWAIT lock of the owner failed the whole flow), commits with the
    placeholder, and the completion then stores the child under the parent."""
    adder, completer, observer = three
    owner = await _running_owner(observer, queue_name)
    async with completer.transaction():
        await completer.execute("SELECT 1 FROM lane.jobs WHERE key = $1 FOR UPDATE", owner["key"])
        await adder.execute("SELECT lane.add_flow($1::jsonb)", _flow(queue_name, "P"))
        assert await _parent(observer, queue_name, "P") == ("waiting-children", 1, ["0:report"])
        await completer.execute(
            "SELECT lane.complete_job($1, $2, $3::uuid)",
            queue_name,
            owner["id"],
            owner["lock_token"],
        )
    state, pending, ids = await _parent(observer, queue_name, "P")
    assert (state, pending) == ("waiting-children", 1) and not ids[0].startswith("0:")


async def test_two_parents_race_for_one_kept_child_while_the_owner_finishes_DEDUP_18(
    pg_dsn: str, queue_name: str
) -> None:
    """Many parents add the same keep-last child at once while the owner completes: one
    child is stored under the latest kept parent (or owns the id outright), every other
    parent is released, and every count matches its rows."""
    conns = [await asyncpg.connect(pg_dsn) for _ in range(6)]
    try:
        owner = await _running_owner(conns[0], queue_name)
        start = asyncio.Event()

        async def add(conn: asyncpg.Connection, parent_id: str) -> None:
            await start.wait()
            await conn.execute("SELECT lane.add_flow($1::jsonb)", _flow(queue_name, parent_id))

        async def finish(conn: asyncpg.Connection) -> None:
            await start.wait()
            await conn.execute(
                "SELECT lane.complete_job($1, $2, $3::uuid)",
                queue_name,
                owner["id"],
                owner["lock_token"],
            )

        parents = [f"P{i}" for i in range(1, 5)]
        tasks = [add(c, p) for c, p in zip(conns[1:5], parents, strict=True)] + [finish(conns[5])]
        gathered = asyncio.gather(*tasks)
        start.set()
        await gathered
        waiting = []
        for parent_id in parents:
            state, pending, ids = await _parent(conns[0], queue_name, parent_id)
            assert all(not i.startswith("0:") for i in ids)  # the owner is done: no placeholder
            if state == "waiting-children":
                waiting.append((parent_id, ids))
            else:
                assert (state, pending) == ("waiting", 0)
        # Exactly the stored children have a parent waiting for them.
        stored = await conns[0].fetch(
            "SELECT id, parent_id FROM lane.jobs WHERE queue = $1 AND name = 'report'"
            " AND state = 'waiting' ORDER BY key",
            queue_name,
        )
        assert sorted((r["parent_id"], [r["id"]]) for r in stored) == sorted(waiting)
        assert len(stored) == 1
    finally:
        for conn in conns:
            await conn.close()
