"""What a live subscriber (EVS-7) costs the completion path, and how soon it sees events.

One client claims 50 and completes them with ``lane.complete_jobs`` (each batch its own
autocommit transaction) while a ``subscribe_events`` subscriber at the default poll
interval is on for one block of batches and off for the next, interleaved; then the time
from a completion's commit to the subscriber's receipt of its ``completed`` event.

    python -m benchmarks.follow_cost --dsn postgresql://.../db [--blocks 20]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import statistics
import time

import asyncpg

from benchmarks.metrics_writes import add_claim_complete
from lane_pg.postgres.backend import PostgresBackend
from lane_pg.types import QueueDemand

QUEUE = "follow_bench"


async def batch(conn: asyncpg.Connection) -> float:
    elapsed, _ = await add_claim_complete(conn, QUEUE)
    await conn.execute("DELETE FROM lane.jobs WHERE queue = $1", QUEUE)
    return elapsed


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--dsn", required=True)
    parser.add_argument("--blocks", type=int, default=20)
    args = parser.parse_args()
    backend = await PostgresBackend.connect(args.dsn)
    conn = await asyncpg.connect(args.dsn)
    times: dict[bool, list[float]] = {False: [], True: []}
    seen: dict[str, float] = {}
    arrived = asyncio.Event()

    async def follow() -> None:
        async for event in backend.events.subscribe_events(QUEUE):
            if event.event == "completed" and event.job_id is not None:
                seen[event.job_id] = time.perf_counter()
                arrived.set()

    try:
        for block in range(args.blocks):
            following = block % 2 == 1
            task = asyncio.ensure_future(follow()) if following else None
            for _ in range(25):
                times[following].append(await batch(conn))
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        for following in (False, True):
            print(
                f"subscriber {'on ' if following else 'off'}: median"
                f" {statistics.median(times[following]):.3f} ms per claim 50 + complete 50"
                f" ({len(times[following])} batches)"
            )
        task = asyncio.ensure_future(follow())
        await asyncio.sleep(0.5)
        latencies = []
        for _ in range(100):
            job = await backend.jobs.add_job(QUEUE, "l")
            [claimed] = await backend.runs.claim_jobs("b", [QueueDemand(QUEUE, 1)], 60)
            assert claimed.lock_token is not None
            await backend.runs.complete_job(QUEUE, job.id, claimed.lock_token)
            committed = time.perf_counter()
            while job.id not in seen:
                arrived.clear()
                await arrived.wait()
            latencies.append((seen[job.id] - committed) * 1000)
            await asyncio.sleep(0.037)  # not in step with the poll
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        latencies.sort()
        print(
            f"commit to receipt: median {statistics.median(latencies):.1f} ms,"
            f" p90 {latencies[89]:.1f} ms, max {latencies[-1]:.1f} ms (100 completions)"
        )
    finally:
        await conn.close()
        await backend.close()


if __name__ == "__main__":
    asyncio.run(main())
