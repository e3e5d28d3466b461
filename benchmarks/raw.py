"""The raw-SQL baseline: a plain jobs table driven through asyncpg with no framework.

Enqueue helpers (one INSERT, INSERT ... SELECT FROM unnest, COPY) and a worker process:

    python -m benchmarks.raw --dsn DSN --queue NAME [--burst] [--listen] [--delete]

The worker claims 10 ready jobs in one statement (``UPDATE ... WHERE id = ANY(ARRAY(SELECT
... ORDER BY id LIMIT 10 FOR UPDATE SKIP LOCKED))``), then marks each job done (or deletes
it, ``--delete``) with one UPDATE per job, each its own transaction; ``--batched`` is the
peer harness's stronger baseline (../shared/peers-bench/bench_raw.py): the claimed jobs'
handlers run concurrently and one UPDATE marks the whole batch done. With ``--listen`` it
sleeps on LISTEN between empty claims (woken by the NOTIFY of an enqueue); otherwise it
polls every 50 ms. ``--burst`` exits when a claim finds nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import signal
from collections.abc import Sequence
from datetime import UTC, datetime

import asyncpg

CHANNEL = "bench_raw"
CLAIM_BATCH = 10

INSERT_ONE = (
    "INSERT INTO bench_raw.jobs (queue, payload, state, run_at)"
    " VALUES ($1, $2::jsonb, 'ready', clock_timestamp())"
)
INSERT_ONE_NOTIFY = (
    "WITH j AS (INSERT INTO bench_raw.jobs (queue, payload, state, run_at)"
    " VALUES ($1, $2::jsonb, 'ready', clock_timestamp()) RETURNING id)"
    f" SELECT pg_notify('{CHANNEL}', $1) FROM j"
)
INSERT_MANY = (
    "INSERT INTO bench_raw.jobs (queue, payload, state, run_at)"
    " SELECT $1, p, 'ready', clock_timestamp() FROM unnest($2::text[]::jsonb[]) AS p"
)
INSERT_MANY_NOTIFY = (
    "WITH j AS (" + INSERT_MANY + " RETURNING 1)"
    f" SELECT pg_notify('{CHANNEL}', $1) WHERE EXISTS (SELECT 1 FROM j)"
)
CLAIM = f"""
UPDATE bench_raw.jobs
   SET state = 'active', locked_at = clock_timestamp(), attempts = attempts + 1
 WHERE id = ANY (ARRAY(SELECT id FROM bench_raw.jobs
                        WHERE queue = $1 AND state = 'ready'
                        ORDER BY id LIMIT {CLAIM_BATCH} FOR UPDATE SKIP LOCKED))
RETURNING id, payload
"""
DONE = "UPDATE bench_raw.jobs SET state = 'done', finished_at = clock_timestamp() WHERE id = $1"
DELETE = "DELETE FROM bench_raw.jobs WHERE id = $1"
DONE_BATCH = (
    "UPDATE bench_raw.jobs SET state = 'done', finished_at = clock_timestamp()"
    " WHERE id = ANY ($1::bigint[])"
)


async def _noop(payload: str) -> None:
    json.loads(payload)  # the no-op "processing"


async def insert_one(conn: asyncpg.Connection, queue: str, payload: str, notify: bool) -> None:
    await conn.execute(INSERT_ONE_NOTIFY if notify else INSERT_ONE, queue, payload)


async def insert_many(
    conn: asyncpg.Connection, queue: str, payloads: Sequence[str], notify: bool = False
) -> None:
    await conn.execute(INSERT_MANY_NOTIFY if notify else INSERT_MANY, queue, list(payloads))


async def copy_many(conn: asyncpg.Connection, queue: str, payloads: Sequence[str]) -> None:
    now = datetime.now(UTC)
    await conn.copy_records_to_table(
        "jobs",
        schema_name="bench_raw",
        columns=["queue", "payload", "state", "run_at"],
        records=[(queue, p, "ready", now) for p in payloads],
    )


async def work(
    dsn: str, queue: str, *, burst: bool, listen: bool, delete: bool, batched: bool = False
) -> int:
    """Process jobs until stopped (SIGTERM) or, in burst mode, until none is ready."""
    conn = await asyncpg.connect(dsn, server_settings={"application_name": "bench_raw worker"})
    # payload arrives as jsonb text; decode it like a real worker would.
    wake = asyncio.Event()
    stopping = False

    def stop() -> None:
        nonlocal stopping
        stopping = True
        wake.set()

    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop)
    if listen:
        await conn.add_listener(CHANNEL, lambda *_: wake.set())
    claim = await conn.prepare(CLAIM)
    finish = await conn.prepare(DELETE if delete else DONE)
    finish_batch = await conn.prepare(DONE_BATCH)
    done = 0
    try:
        while not stopping:
            wake.clear()  # before claiming, so a NOTIFY during the claim is not missed
            rows = await claim.fetch(queue)
            if batched and rows:
                await asyncio.gather(*(_noop(row["payload"]) for row in rows))
                await finish_batch.fetch([row["id"] for row in rows])
                done += len(rows)
                continue
            for row in rows:
                json.loads(row["payload"])  # the no-op "processing"
                await finish.fetch(row["id"])
                done += 1
            if rows:
                continue
            if burst:
                break
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(wake.wait(), 30.0 if listen else 0.05)
    finally:
        await conn.close()
    return done


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dsn", required=True)
    parser.add_argument("--queue", required=True)
    parser.add_argument("--burst", action="store_true")
    parser.add_argument("--listen", action="store_true")
    parser.add_argument("--delete", action="store_true")
    parser.add_argument("--batched", action="store_true")
    args = parser.parse_args()
    asyncio.run(
        work(
            args.dsn,
            args.queue,
            burst=args.burst,
            listen=args.listen,
            delete=args.delete,
            batched=args.batched,
        )
    )


if __name__ == "__main__":
    main()
