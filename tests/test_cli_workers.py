"""``python -m lane_pg workers``: the live workers as an operator lists them."""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator

import pytest

from lane_pg.backend.leader import MAINTENANCE_ROLE
from lane_pg.postgres.backend import PostgresBackend
from tests.test_cli_queue_commands import cli


@pytest.fixture
async def backend(pg_dsn: str) -> AsyncIterator[PostgresBackend]:
    be = await PostgresBackend.connect(pg_dsn, max_size=2)
    yield be
    await be.close()


async def test_workers_lists_live_workers_and_the_leader(
    pg_dsn: str, backend: PostgresBackend
) -> None:
    run = uuid.uuid4().hex[:8]
    first, second = f"w-{run}-1", f"w-{run}-2"
    leader = backend.leader
    await leader.worker_heartbeat(first, "host-a", 101, ["mail", "sms"], meta={"concurrency": 5})
    await leader.worker_heartbeat(second, "host-b", 202, [], meta={"all_queues": True})
    held = await leader.acquire_leadership(MAINTENANCE_ROLE, second, 30)
    try:
        listed = await cli("workers", dsn=pg_dsn)
        assert listed.returncode == 0, listed.stderr
        header, *lines = [line.split("\t") for line in listed.stdout.splitlines()]
        assert header == ["id", "hostname", "pid", "queues", "started_at", "heartbeat", "role"]
        ours = {line[0]: line for line in lines if line[0] in (first, second)}
        assert ours[first][1:4] == ["host-a", "101", "mail,sms"]
        assert ours[first][5].endswith("s ago") and ours[first][6] == "-"
        assert ours[second][1:4] == ["host-b", "202", "*"]
        assert ours[second][6] == ("leader" if held else "-")

        as_json = await cli("workers", "--json", dsn=pg_dsn)
        documents = {d["id"]: d for d in map(json.loads, as_json.stdout.splitlines())}
        assert documents[first]["queues"] == ["mail", "sms"]
        assert documents[first]["meta"] == {"concurrency": 5}
    finally:
        await leader.resign_leadership(MAINTENANCE_ROLE, second)
        for worker in (first, second):
            await leader.forget_worker(worker)

    gone = await cli("workers", "--json", dsn=pg_dsn)
    assert first not in gone.stdout and second not in gone.stdout


async def test_workers_refuses_a_bad_duration(pg_dsn: str) -> None:
    for value in ("soon", "0s"):
        result = await cli("workers", "--stale-after", value, dsn=pg_dsn)
        assert result.returncode == 1, result.stdout
        assert "stale" in result.stderr
