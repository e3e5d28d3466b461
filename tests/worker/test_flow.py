"""Flows served by real worker processes (FLOW-1, -3, -5..9, WORK-11, FIN-8, STALL-4): a
flow added with plain SQL runs every child before its parent, which reads their values;
each failure policy ends where FEATURES.md says, also when the child's workers are killed
until its stalled limit is spent."""

from __future__ import annotations

import json

import asyncpg
import pytest

from lane_pg.postgres.backend import PostgresBackend
from tests.worker.conftest import Workers, effects, queue_args, state_of, until, wait_for_state

LEASE = "1"


def _flow(queue: str, children: list[dict[str, object]], **parent_options: object) -> str:
    return json.dumps(
        {
            "queue": queue,
            "name": "combine",
            "options": {"job_id": "parent", **parent_options},
            "children": children,
        }
    )


async def _add(db: asyncpg.Connection, document: str) -> str:
    return str(await db.fetchval("SELECT lane.add_flow($1::jsonb)", document))


async def test_flow_added_with_sql_runs_children_first_and_parent_reads_them_FLOW_1_FLOW_3(
    workers: Workers, backend: PostgresBackend, db: asyncpg.Connection, queue_name: str
) -> None:
    other = f"{queue_name}_b"
    await workers.start_many(2, *queue_args(queue_name, other))
    parent = await _add(
        db,
        _flow(
            queue_name,
            [
                {"name": "record", "options": {"job_id": "c1"}},
                {"name": "sleep", "data": {"seconds": 0.3}, "options": {"job_id": "c2"}},
                {"name": "record", "queue": other, "options": {"job_id": "c3"}},
            ],
        ),
    )
    assert parent == "parent"

    await wait_for_state(db, queue_name, parent, "completed")
    rows = await db.fetch(
        "SELECT id, processed_at, finished_at FROM lane.jobs WHERE queue = ANY ($1::text[])",
        [queue_name, other],
    )
    times = {row["id"]: row for row in rows}
    last_child_done = max(times[c]["finished_at"] for c in ("c1", "c2", "c3"))
    assert times["parent"]["processed_at"] >= last_child_done
    done = await backend.get_job(queue_name, parent)
    assert done is not None
    assert set(done.return_value) == {f"{queue_name}:c1", f"{queue_name}:c2", f"{other}:c3"}
    assert done.return_value[f"{queue_name}:c2"]["slept"] == 0.3
    ran = [row["job_id"] for row in await effects(db, queue_name)]
    assert ran.count("parent") == 1 and ran[-1] == "parent"


@pytest.mark.parametrize(
    ("policy", "parent_state", "parent_runs"),
    [
        ({}, "failed", 0),  # FLOW-5
        ({"ignore_dependency_on_failure": True}, "completed", 1),  # FLOW-6
        ({"remove_dependency_on_failure": True}, "completed", 1),  # FLOW-7
        ({"fail_parent_on_failure": True}, "failed", 0),  # FLOW-9, WORK-11
    ],
    ids=["default", "ignore", "remove", "fail-parent"],
)
async def test_each_failure_policy_through_a_worker_FLOW_5_FLOW_6_FLOW_7_FLOW_9_WORK_11(
    workers: Workers,
    backend: PostgresBackend,
    db: asyncpg.Connection,
    queue_name: str,
    policy: dict[str, bool],
    parent_state: str,
    parent_runs: int,
) -> None:
    await workers.start(*queue_args(queue_name))
    parent = await _add(
        db,
        _flow(
            queue_name,
            [
                {"name": "record", "options": {"job_id": "good"}},
                {"name": "fail", "options": {"job_id": "bad", "attempts": 2, **policy}},
            ],
        ),
    )
    await wait_for_state(db, queue_name, parent, parent_state)
    job = await backend.get_job(queue_name, parent)
    assert job is not None
    runs = [row for row in await effects(db, queue_name) if row["job_id"] == parent]
    assert len(runs) == parent_runs  # the processor never ran for a failed parent
    bad = await backend.get_job(queue_name, "bad")
    assert bad is not None and bad.state == "failed" and bad.attempts_made == 2
    if parent_state == "failed":
        assert job.failed_reason is not None
        assert f"child bad of queue {queue_name} failed" in job.failed_reason


async def test_continue_policy_runs_the_parent_early_and_completes_it_last_FLOW_8_FIN_8(
    workers: Workers, backend: PostgresBackend, db: asyncpg.Connection, queue_name: str
) -> None:
    await workers.start(*queue_args(queue_name), "--concurrency", "4")
    parent = await _add(
        db,
        _flow(
            queue_name,
            [
                {"name": "sleep", "data": {"seconds": 1.5}, "options": {"job_id": "slow"}},
                {"name": "fail", "options": {"job_id": "bad", "continue_parent_on_failure": True}},
            ],
            attempts=10,
            backoff={"type": "fixed", "delay_ms": 300},
        ),
    )
    await wait_for_state(db, queue_name, parent, "completed", timeout=30)
    job = await backend.get_job(queue_name, parent)
    assert job is not None
    # It ran while "slow" was pending: that run could not complete (FIN-8) and was retried.
    assert job.attempts_made >= 1
    runs = [row for row in await effects(db, queue_name) if row["job_id"] == parent]
    assert len(runs) == job.attempts_made + 1
    slow = await backend.get_job(queue_name, "slow")
    assert slow is not None and slow.finished_at is not None
    assert job.finished_at is not None and job.finished_at >= slow.finished_at
    # The run that completed read the values after its claim: claimed after "slow" finished,
    # it saw slow's value; claimed before, it may have read none and still completed once
    # "slow" had finished (FIN-8 holds back the completion, not the read), as in BullMQ.
    expected = {f"{queue_name}:slow": {"slept": 1.5, "pid": runs[0]["pid"]}}
    assert job.processed_at is not None
    if job.processed_at >= slow.finished_at:
        assert job.return_value == expected
    else:
        assert job.return_value in ({}, expected)


@pytest.mark.parametrize(
    ("policy", "parent_state"),
    [
        ({}, "failed"),
        ({"fail_parent_on_failure": True}, "failed"),
        ({"ignore_dependency_on_failure": True}, "completed"),
    ],
    ids=["default", "fail-parent", "ignore"],
)
async def test_a_child_that_kills_its_workers_applies_the_policy_STALL_4(
    workers: Workers,
    backend: PostgresBackend,
    db: asyncpg.Connection,
    queue_name: str,
    policy: dict[str, bool],
    parent_state: str,
) -> None:
    """BullMQ #2464: a child failed by stalled recovery ignored its parent's policy and the
    flow hung. Here the child's workers are killed until its stalled limit is spent."""
    args = [*queue_args(queue_name), "--lease", LEASE, "--concurrency", "1"]
    parent = await _add(
        db,
        _flow(
            queue_name,
            [
                {"name": "record", "options": {"job_id": "good"}},
                # Promoted once "good" has completed: a worker killed while good's
                # completion was still being written would stall good as well (a fixed
                # 1.5 s delay was not enough on a loaded machine).
                {
                    "name": "die",
                    "options": {"job_id": "killer", "attempts": 5, "delay_ms": 600_000, **policy},
                },
            ],
        ),
    )
    workers.spawn(*args)

    async def good_completed() -> bool:
        return await state_of(db, queue_name, "good") == "completed"

    await until(good_completed, timeout=60, interval=0.05)
    await backend.promote_job(queue_name, "killer")

    async def parent_settled_while_keeping_a_worker_alive() -> bool:
        if not any(worker.alive() for worker in workers.spawned):
            workers.spawn(*args)  # a replacement, as a supervisor would
        return await state_of(db, queue_name, parent) == parent_state

    await until(parent_settled_while_keeping_a_worker_alive, timeout=60, interval=0.05)
    killer = await backend.get_job(queue_name, "killer")
    assert killer is not None and killer.state == "failed"
    assert killer.failed_reason == "job stalled more than allowable limit"
    job = await backend.get_job(queue_name, parent)
    assert job is not None
    if parent_state == "failed":
        assert job.failed_reason == (
            f"child killer of queue {queue_name} failed: job stalled more than allowable limit"
        )
        assert [row for row in await effects(db, queue_name) if row["job_id"] == parent] == []
    else:
        assert list(job.return_value) == [f"{queue_name}:good"]


async def test_a_flow_of_10000_children_drains_and_releases_its_parent_once_FLOW_3(
    workers: Workers, backend: PostgresBackend, db: asyncpg.Connection, queue_name: str
) -> None:
    """The issue's check: 10,000 children, two worker processes, one release."""
    parent_queue = f"{queue_name}_p"
    parent = await db.fetchval(
        "SELECT lane.add_flow(jsonb_build_object('queue', $1::text, 'name', 'combine',"
        " 'children', (SELECT jsonb_agg(jsonb_build_object('name', 'noop', 'queue', $2::text,"
        " 'data', i)) FROM generate_series(1, 10000) i)))",
        parent_queue,
        queue_name,
    )
    await workers.start_many(2, *queue_args(queue_name), "--concurrency", "100")

    async def drained() -> bool:
        return await state_of(db, parent_queue, parent) == "waiting"

    await until(drained, timeout=120, interval=0.2)
    releases = await db.fetchval(
        "SELECT count(*) FROM lane.events e WHERE e.queue = $1 AND e.event = 'waiting'"
        " AND (e.job_id = $2 OR $2 = ANY (e.job_ids))"
        " AND e.data ->> 'prev' = 'waiting-children'",
        parent_queue,
        parent,
    )
    assert releases == 1
    counts = await backend.get_flow_dependency_counts(parent_queue, parent)
    assert counts is not None
    assert (counts.processed, counts.unprocessed, counts.missing) == (10000, 0, 0)
    pending = await db.fetchval(
        "SELECT deps_pending FROM lane.jobs WHERE queue = $1 AND id = $2", parent_queue, parent
    )
    assert pending == 0
