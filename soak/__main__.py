"""``python -m soak``: a steady stream of every kind of job through several worker
processes, faults injected at random intervals, and checks at the end (``make soak``).

The servers are the soak's own (``soak.servers``): a PostgreSQL cluster or a Redis server
started for the run on a free port, so restarting them touches nothing else. The run's
directory keeps the ledger, every worker's log, the server's log and ``report.txt``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import random
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import lane_pg
from lane_pg import App, Q
from soak.checks import (
    Check,
    Ledger,
    job_checks,
    logged_failures_check,
    postgres_checks,
    series_check,
    size_check,
)
from soak.fleet import Faults, Fleet
from soak.servers import PostgresServer, RedisServer
from soak.traffic import CHAIN_LENGTH, Traffic

log = logging.getLogger("soak")
MB = 1024 * 1024


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m soak", description=__doc__.split("\n\n")[0])
    parser.add_argument("--backend", choices=("postgres", "redis"), default="postgres")
    parser.add_argument("--minutes", type=float, default=10.0, help="traffic and faults (10)")
    parser.add_argument("--workers", type=int, default=3, help="worker processes (3)")
    parser.add_argument("--concurrency", type=int, default=10, help="per worker (10)")
    parser.add_argument("--lease", type=float, default=5.0, help="worker lease seconds (5)")
    parser.add_argument("--rate", type=float, default=40.0, help="adds per second (40)")
    parser.add_argument("--fault-gap", default="10,40", help="seconds between faults, MIN,MAX")
    parser.add_argument("--seed", type=int, default=None, help="random seed (printed)")
    parser.add_argument("--drain-timeout", type=float, default=300.0)
    parser.add_argument("--dir", type=Path, default=None, help="run directory (a new one)")
    args = parser.parse_args(argv)
    low, high = (float(x) for x in args.fault_gap.split(","))
    args.fault_gap = (low, high)
    if args.seed is None:
        args.seed = random.SystemRandom().randrange(1 << 30)
    return args


async def sample_size(server: PostgresServer | RedisServer, admin: Any) -> float:
    if isinstance(server, PostgresServer):
        size: int = await admin.fetchval(
            "SELECT pg_total_relation_size('lane.jobs') + pg_total_relation_size('lane.events')"
        )
        return size / MB
    info = await admin.info("memory")
    return float(info["used_memory"]) / MB


async def connect_admin(server: PostgresServer | RedisServer) -> Any:
    if isinstance(server, PostgresServer):
        import asyncpg

        return await asyncpg.connect(server.dsn)
    import redis.asyncio

    return redis.asyncio.Redis.from_url(server.url)


async def soak(args: argparse.Namespace, directory: Path) -> int:
    rng = random.Random(args.seed)
    server: PostgresServer | RedisServer
    if args.backend == "postgres":
        server = PostgresServer(directory / "server")
        server.start()
        dsn = server.dsn
        migrate = [sys.executable, "-m", "lane_pg", "migrate", "--dsn", dsn]
        await asyncio.to_thread(subprocess.run, migrate, check=True, capture_output=True)
    else:
        server = RedisServer(directory / "server")
        server.start()
        dsn = server.url
    fleet = Fleet(directory, dsn, args.workers, args.concurrency, args.lease)
    backend = await lane_pg.connect(dsn)
    app = App(dsn)
    await app.bind(Q)
    admin = await connect_admin(server)
    low, high = args.fault_gap
    faults = Faults(fleet, server, rng, low, high, admin=admin)
    traffic = Traffic(backend, args.rate, rng)
    sizes: list[tuple[float, float]] = []
    try:
        fleet.start()
        await traffic.start_series()
        began = time.monotonic()
        stop = asyncio.Event()
        tasks = [
            asyncio.create_task(traffic.run(stop)),
            asyncio.create_task(traffic.watch(stop)),
            asyncio.create_task(faults.run(stop)),
        ]
        deadline = began + args.minutes * 60
        next_sample = began
        while time.monotonic() < deadline:
            fleet.supervise()
            if time.monotonic() >= next_sample:
                with contextlib.suppress(Exception):
                    sizes.append(
                        (time.monotonic() - began, await sample_size(server, faults.admin))
                    )
                next_sample += 15.0
            await asyncio.sleep(1.0)
        stop.set()
        await asyncio.gather(*tasks)
        log.info("traffic stopped; draining")
        for held in faults.held:
            held.cancel()
        await asyncio.gather(*faults.held, return_exceptions=True)
        soaked = time.monotonic() - began
        await traffic.stop_series()
        drained_in = await drain(traffic, fleet, directory, args.drain_timeout)
        fleet.stop()
        await traffic.confirm()
        with contextlib.suppress(Exception):
            sizes.append((time.monotonic() - began, await sample_size(server, faults.admin)))
        ledger = Ledger.read(directory)
        checks = job_checks(traffic, ledger, faults.duplicates_bound())
        kills = sum(r.kind in ("kill-worker", "stop-worker") for r in faults.records)
        checks.append(logged_failures_check(traffic, directory))
        checks.append(series_check(ledger, traffic.series_keys(), soaked, kills))
        if isinstance(server, PostgresServer):
            checks += await postgres_checks(faults.admin, set())
        else:
            checks += await redis_checks(backend)
        checks.append(size_check(sizes, "jobs + events" if args.backend == "postgres"
                                 else "Redis memory", args.minutes))  # fmt: skip
        checks.append(Check(
            "workers exited only when killed",
            "; ".join(fleet.unexpected_exits) or "none other",
            not fleet.unexpected_exits,
        ))  # fmt: skip
        text = report(args, traffic, faults, fleet, checks, soaked, drained_in, directory)
        print(text)
        (directory / "report.txt").write_text(text + "\n")
        return 0 if all(check.ok for check in checks) else 1
    finally:
        fleet.stop()
        await backend.close()
        await app.close()
        with contextlib.suppress(Exception):
            await (faults.admin.close() if args.backend == "postgres" else faults.admin.aclose())
        server.stop()


async def drain(traffic: Traffic, fleet: Fleet, directory: Path, limit: float) -> float | None:
    """Seconds until every tracked job, batch and chain finished; None at the timeout."""
    began = time.monotonic()
    while time.monotonic() - began < limit:
        fleet.supervise()
        pending = await traffic.confirm()
        steps = Ledger.read(directory).steps
        chains_left = sum(len(steps.get(tag, {})) < CHAIN_LENGTH for tag in traffic.chains)
        if pending == 0 and chains_left == 0:
            return time.monotonic() - began
        await asyncio.sleep(1.0)
    return None


async def redis_checks(backend: Any) -> list[Check]:
    from soak.app import FACADE_QUEUE, QUEUE

    left = 0
    for queue in (QUEUE, FACADE_QUEUE):
        counts = await backend.get_job_counts(queue)
        left += sum(n for state, n in counts.items() if state not in ("completed", "failed"))
    return [Check("nothing left waiting or leased", f"{left} jobs not finished", left == 0)]


def report(
    args: argparse.Namespace, traffic: Traffic, faults: Faults, fleet: Fleet,
    checks: list[Check], soaked: float, drained_in: float | None, directory: Path,
) -> str:  # fmt: skip
    kinds = Counter(record.kind for record in faults.records)
    restarts = [r.detail for r in faults.records if r.kind == "restart-server"]
    lines = [
        f"lane_pg soak: {args.backend}, {soaked / 60:.1f} min of traffic and faults,"
        f" {args.workers} workers x {args.concurrency}, lease {args.lease:g}s, seed {args.seed}",
        f"traffic  {sum(traffic.adds.values())} adds at {args.rate:g}/s"
        f" ({', '.join(f'{k} {n}' for k, n in traffic.adds.most_common())});"
        f" {len(traffic.added)} jobs tracked, {len(traffic.batches)} batches,"
        f" {len(traffic.chains)} chains",
        f"         adds refused during faults: {sum(traffic.add_errors.values())}"
        f" ({', '.join(f'{k} {n}' for k, n in traffic.add_errors.most_common(3)) or 'none'})",
        f"faults   {len(faults.records)}: "
        + ", ".join(f"{kind} {n}" for kind, n in sorted(kinds.items())),
        f"         workers started {fleet.started}; restarts: {'; '.join(restarts) or 'none'}",
        "drain    "
        + (
            f"{drained_in:.1f}s after the traffic stopped"
            if drained_in is not None
            else "NOT drained within the timeout"
        ),
        "checks",
        *(f"  [{'ok' if c.ok else 'FAIL'}] {c.name}: {c.seen}" for c in checks),
        f"result   {'PASS' if all(c.ok for c in checks) else 'FAIL'}   (run directory {directory})",
    ]
    return "\n".join(lines)


def main() -> int:
    args = parse_args()
    logging.basicConfig(level=logging.INFO, format="[soak %(asctime)s] %(message)s",
                        datefmt="%H:%M:%S", stream=sys.stderr)  # fmt: skip
    # asyncpg logs a traceback for each retry to refill a pool while the server restarts;
    # the workers' logs say so in one line (lane_pg's CLI logging), the soak's need not.
    logging.getLogger("asyncpg.pool").setLevel(logging.ERROR)
    directory = args.dir or Path(tempfile.mkdtemp(prefix="lane_soak-"))
    directory.mkdir(parents=True, exist_ok=True)
    log.info("run directory %s, seed %d", directory, args.seed)
    # SIGTERM and SIGINT (ignored by default in a background job) interrupt the run the
    # same way: the workers and the server are stopped on the way out.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    try:
        return asyncio.run(soak(args, directory))
    except KeyboardInterrupt:
        log.info("interrupted: workers and server stopped")
        return 130


if __name__ == "__main__":
    sys.exit(main())
