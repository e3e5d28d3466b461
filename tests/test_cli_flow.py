"""``python -m lane_pg flow PARENT_ID``, ``flow remove-unprocessed PARENT_ID`` and ``flow
detach CHILD_ID`` in a subprocess, as an administrator runs them to see why a parent
waits and to unstick it (CLI-12, FLOW-16, -17, -24, -25)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from lane_pg.postgres.backend import PostgresBackend
from lane_pg.types import QueueDemand
from lane_pg.types.flows import FlowJob
from tests.test_cli_queue_commands import cli, unique_queue


@pytest.fixture
async def backend(pg_dsn: str) -> AsyncIterator[PostgresBackend]:
    be = await PostgresBackend.connect(pg_dsn, max_size=2)
    yield be
    await be.close()


async def test_flow_shows_counts_and_pending_children_then_unsticks_CLI_12_FLOW_24(
    pg_dsn: str, backend: PostgresBackend
) -> None:
    queue = unique_queue("flow")
    parent = f"monthly-{queue}"  # unique in the database: `flow ID` searches every queue
    flow = await backend.add_flow(
        FlowJob(
            "report",
            queue=queue,
            options={"job_id": parent},
            children=[FlowJob("part", i, {"job_id": f"part-{i}"}) for i in range(4)],
        )
    )
    [first] = await backend.claim_jobs("w", [QueueDemand(queue, 1)], 30)
    assert first.lock_token is not None
    await backend.complete_job(queue, first.id, first.lock_token, "ok")

    shown = await cli("flow", parent, dsn=pg_dsn)
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.splitlines() == [
        f"{queue}\t{parent}\treport\twaiting-children",
        "processed 1\tunprocessed 3\tignored 0\tfailed 0\tmissing 0",
        f"pending\t{queue}\tpart-1\twaiting",
        f"pending\t{queue}\tpart-2\twaiting",
        f"pending\t{queue}\tpart-3\twaiting",
    ]
    limited = await cli("flow", parent, "--queue", queue, "--limit", "1", dsn=pg_dsn)
    assert limited.stdout.splitlines()[2:] == [
        f"pending\t{queue}\tpart-1\twaiting",
        "... and 2 more pending (--limit)",
    ]

    detached = await cli("flow", "detach", "part-3", "--queue", queue, dsn=pg_dsn)
    assert detached.returncode == 0, detached.stderr
    assert detached.stdout == f"lane_pg: detached {queue} part-3 from its parent {queue} {parent}\n"
    removed = await cli("flow", "remove-unprocessed", parent, dsn=pg_dsn)
    assert removed.returncode == 0, removed.stderr
    assert removed.stdout == (
        f"lane_pg: removed 2 pending children of {queue} {parent}; it is waiting\n"
    )
    assert await backend.get_job_state(queue, "part-1") is None
    assert await backend.get_job_state(queue, "part-3") == "waiting"  # detached, kept
    assert flow.job.id == parent


async def test_flow_refuses_what_it_cannot_find(pg_dsn: str) -> None:
    queue = unique_queue("flow")
    missing = await cli("flow", "nope", "--queue", queue, dsn=pg_dsn)
    assert missing.returncode == 1
    assert f"no job 'nope' in queue '{queue}'" in missing.stderr
    wrong = await cli("flow", "a", "b", "c", dsn=pg_dsn)
    assert wrong.returncode == 1
    assert "use `flow PARENT_ID`" in wrong.stderr


async def test_detach_of_a_job_without_parent_is_refused(
    pg_dsn: str, backend: PostgresBackend
) -> None:
    queue = unique_queue("flow")
    await backend.add_job(queue, "alone", options={"job_id": "solo"})
    refused = await cli("flow", "detach", "solo", "--queue", queue, dsn=pg_dsn)
    assert refused.returncode == 1
    assert f"job 'solo' of queue '{queue}' has no flow parent" in refused.stderr
