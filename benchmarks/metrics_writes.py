"""Cost of the terminal-metrics write on the completion path (OBS-6; docs/decisions.md).

Claims 50 jobs and completes them with ``complete_jobs``, each batch its own autocommit
transaction, through variants of ``lane._complete`` that differ only in the metrics
write, interleaved batch by batch on one database: ``none`` (main's function, no write),
``own_row`` (this branch: the connection's own row, 75_metrics.sql), ``shared_row`` (one
UPSERTed row per queue, state and minute) and ``append`` (one INSERT per batch into a
table without a key). The variants live in a scratch schema; ``lane`` stays as migrated.
Run with ``--clients 4`` for workers of one queue completing at the same time.

    python -m benchmarks.metrics_writes --dsn postgresql://.../db [--clients 4] [--rounds 60]
"""

from __future__ import annotations

import argparse
import asyncio
import re
import statistics
import time
from pathlib import Path

import asyncpg

ROOT = Path(__file__).resolve().parent.parent
VARIANTS = ("none", "own_row", "shared_row", "append")
BATCH = 50

_COUNTERS = {
    "own_row": """
        INSERT INTO lane.metrics AS m (queue, state, minute, count)
        VALUES (p_queue, p_state,
                date_trunc('minute', p_now, 'UTC') + pg_backend_pid() * interval '1 microsecond',
                p_count)
        ON CONFLICT (queue, state, minute) DO UPDATE SET count = m.count + excluded.count;""",
    "shared_row": """
        INSERT INTO lane.metrics AS m (queue, state, minute, count)
        VALUES (p_queue, p_state, date_trunc('minute', p_now, 'UTC'), p_count)
        ON CONFLICT (queue, state, minute) DO UPDATE SET count = m.count + excluded.count;""",
    "append": """
        INSERT INTO metrics_bench.metrics_log (queue, state, minute, count)
        VALUES (p_queue, p_state, date_trunc('minute', p_now, 'UTC'), p_count);""",
}


def _complete_source() -> str:
    """lane._complete and lane.complete_jobs of sql/functions/30_runs_finish.sql."""
    text = (ROOT / "sql/functions/30_runs_finish.sql").read_text()
    start = text.index("CREATE OR REPLACE FUNCTION lane._complete(")
    end = text.index("CREATE OR REPLACE FUNCTION lane.complete_job(")
    return text[start:end]


async def install(conn: asyncpg.Connection) -> None:
    source = _complete_source()
    count_call = re.compile(r"    -- OBS-6.*?\n    END IF;\n", re.DOTALL)
    assert count_call.search(source), "the metrics write moved: update this benchmark"
    await conn.execute(
        "DROP SCHEMA IF EXISTS metrics_bench CASCADE; CREATE SCHEMA metrics_bench;"
        " CREATE TABLE metrics_bench.metrics_log (queue text, state text,"
        " minute timestamptz, count bigint)"
    )
    for variant in VARIANTS:
        if variant == "none":
            text = count_call.sub("", source)
        else:
            # Each variant's write in a function of the same shape as lane._count_finished
            # (own_row is its body, copied): the variants differ in the statement only.
            body = _COUNTERS[variant]
            text = source.replace("lane._count_finished(", f"metrics_bench.count_{variant}(")
            await conn.execute(
                f"CREATE FUNCTION metrics_bench.count_{variant}(p_queue text, p_state text,"
                " p_count bigint, p_now timestamptz) RETURNS void LANGUAGE plpgsql AS $$ BEGIN "
                + body
                + " END $$"
            )
        text = text.replace("lane._complete(", f"metrics_bench.complete_{variant}(")
        text = text.replace("lane.complete_jobs(", f"metrics_bench.complete_jobs_{variant}(")
        await conn.execute(text)


async def add_claim_complete(
    conn: asyncpg.Connection, queue: str, complete_jobs: str = "lane.complete_jobs"
) -> tuple[float, float]:
    """Adds BATCH jobs, then claims and completes them with ``complete_jobs`` (a function
    of lane.complete_jobs' signature), each its own autocommit transaction: the ms of the
    claim and the completion, and of the completion alone."""
    await conn.execute(
        "SELECT 1 FROM lane.add_jobs_brief($1, $2::text[], $3::jsonb[], $3::jsonb[])",
        queue,
        ["j"] * BATCH,
        ["{}"] * BATCH,
    )
    started = time.perf_counter()
    jobs = await conn.fetch(
        "SELECT queue, id, lock_token FROM lane.claim_jobs('bench', ARRAY[$1],"
        " ARRAY[$2::integer], 60000)",
        queue,
        BATCH,
    )
    completing = time.perf_counter()
    await conn.fetch(
        f"SELECT 1 FROM {complete_jobs}($1::text[], $2::text[], $3::uuid[], $4::jsonb[])",
        [j["queue"] for j in jobs],
        [j["id"] for j in jobs],
        [j["lock_token"] for j in jobs],
        ["null"] * len(jobs),
    )
    done = time.perf_counter()
    return (done - started) * 1000, (done - completing) * 1000


async def client(
    dsn: str,
    sync_commit: str,
    queue: str,
    rounds: int,
    times: dict[str, list[float]],
    complete_times: dict[str, list[float]],
) -> None:
    conn = await asyncpg.connect(dsn, server_settings={"synchronous_commit": sync_commit})
    try:
        for n in range(rounds):
            variant = VARIANTS[n % len(VARIANTS)]  # interleaved, every client alike
            total, completing = await add_claim_complete(
                conn, queue, f"metrics_bench.complete_jobs_{variant}"
            )
            times[variant].append(total)
            complete_times[variant].append(completing)
            # Outside the timing: as the maintenance leader's pruning would, so the
            # queue's index walks stay what a pruned queue costs.
            await conn.execute(
                "DELETE FROM lane.jobs WHERE queue = $1 AND state = 'completed'", queue
            )
    finally:
        await conn.close()


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--dsn", required=True)
    parser.add_argument("--clients", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=200)
    parser.add_argument("--queues", type=int, default=1, help="queues the clients share")
    parser.add_argument(
        "--synchronous-commit",
        default="on",
        help="'off' leaves the WAL flush out of each batch, so the CPU cost shows",
    )
    args = parser.parse_args()
    conn = await asyncpg.connect(args.dsn)
    try:
        await install(conn)
        await conn.execute("DELETE FROM lane.jobs WHERE queue LIKE 'metrics_bench%'")
        await conn.execute("VACUUM lane.jobs")
    finally:
        await conn.close()
    times: dict[str, list[float]] = {v: [] for v in VARIANTS}
    complete_times: dict[str, list[float]] = {v: [] for v in VARIANTS}
    await asyncio.gather(
        *(
            client(
                args.dsn,
                args.synchronous_commit,
                f"metrics_bench_{c % args.queues}",
                args.rounds,
                times,
                complete_times,
            )
            for c in range(args.clients)
        )
    )
    for variant in VARIANTS:
        print(
            f"{variant:>10}: median {statistics.median(times[variant]):.3f} ms per claim 50 +"
            f" complete 50, {statistics.median(complete_times[variant]):.3f} ms the complete"
            f" ({len(times[variant])} batches, {args.clients} clients)"
        )


if __name__ == "__main__":
    asyncio.run(main())
