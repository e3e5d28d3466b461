"""20 workers, one database, restarts without a connection storm.

    python -m soak.storm [--workers 20] [--pool-size 2] [--rounds 2] [--jobs 5000]

A private PostgreSQL (``max_connections`` 100, every connection logged) and N worker
processes on ``$dsn?pool_size=2``. Each round has two faults:

- A, server restart: ``pg_ctl -m immediate`` and a start; every worker loses every
  connection at the same instant and reconnects by itself;
- B, fleet restart: SIGTERM to every worker, and N new ones started at once.

After each (and after the first start) a batch of jobs is added once every worker is
connected again, and must be completed with every worker taking part. The server log is
the witness: connections received per 100 ms and 250 ms, "too many clients" and other
FATALs. ``pg_stat_activity`` is sampled for the peak number of the workers' connections;
each worker's connections carry its id as ``application_name`` (the LISTEN connection
``lane_pg listener ID``), so the log and the samples say which worker is back.

Exits 1 when a "too many clients" was logged, a job was not completed or a worker did not
come back. ``--pool-size 0`` runs the shipped pool (no cap), which docs/operations.md
("Connections") predicts overruns ``max_connections`` at 20 workers.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from types import FrameType
from typing import Any

import psycopg

from soak.servers import PostgresServer

QUEUE = "storm"
APP = "soak.storm_app:app"
DSN_VARIABLE = "LANE_STORM_DSN"  # soak.storm_app reads it
REPO = Path(__file__).resolve().parent.parent
MAX_CONNECTIONS = 100
SAMPLE_EVERY = 0.05  # seconds between pg_stat_activity samples while waiting
START_TIMEOUT = 120.0  # 20 interpreters importing lane_pg on two busy cores take a while
BACK_TIMEOUT = 60.0
DRAIN_TIMEOUT = 180.0  # a job lost to a failed completion comes back after its lease (30 s)
EXIT_TIMEOUT = 60.0
LISTENER = "lane_pg listener "  # the notifier's application_name prefix
TOO_MANY = "sorry, too many clients already"

LOG_LINE = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3}) UTC \[\d+\] (\w+):  (.*)$")


# --------------------------------------------------------------------------- the log


@dataclass
class LogWindow:
    """What the server logged between two offsets of its log."""

    received: list[float] = field(default_factory=list)
    authorized: list[tuple[float, str]] = field(default_factory=list)  # (time, app name)
    fatal: Counter[str] = field(default_factory=Counter)
    ready: float | None = None  # the last "ready to accept connections"


def log_offset(server: PostgresServer) -> int:
    return server.log.stat().st_size if server.log.exists() else 0


def read_log(server: PostgresServer, start: int) -> LogWindow:
    window = LogWindow()
    with server.log.open("rb") as log:
        log.seek(start)
        text = log.read().decode(errors="replace")
    for line in text.splitlines():
        match = LOG_LINE.match(line)
        if match is None:
            continue
        stamp, level, message = match.groups()
        # log_timezone is UTC (set in main), so the stamps compare with time.time().
        at = datetime.strptime(stamp, "%Y-%m-%d %H:%M:%S.%f").replace(tzinfo=UTC).timestamp()
        if message.startswith("connection received:"):
            window.received.append(at)
        elif message.startswith("connection authorized:"):
            window.authorized.append((at, message.partition("application_name=")[2]))
        elif level == "FATAL":
            window.fatal[message] += 1
        elif message == "database system is ready to accept connections":
            window.ready = at
    return window


def busiest(times: list[float], width: float) -> int:
    """The most connections received in one bucket of ``width`` seconds (wall clock)."""
    return max(Counter(math.floor(at / width) for at in times).values(), default=0)


def histogram(times: list[float], t0: float, width: float, limit: int) -> str:
    """Connections received per ``width`` seconds from ``t0``, up to the last one (at most
    ``limit`` buckets shown); those before ``t0`` (during recovery) are counted apart."""
    before = sum(at < t0 for at in times)
    counts = Counter(math.floor((at - t0) / width) for at in times if at >= t0)
    last = max(counts, default=-1)
    shown = " ".join(str(counts.get(i, 0)) for i in range(min(last + 1, limit)))
    more = f" ... ({last + 1 - limit} more buckets)" if last + 1 > limit else ""
    return (f"[{before} before t0] " if before else "") + shown + more


def reconnected(window: LogWindow, workers: list[str], t0: float) -> dict[str, float]:
    """Per worker back after ``t0``: seconds until it had both its LISTEN connection and
    another (claims or pool) authorized again."""
    listen: dict[str, float] = {}
    other: dict[str, float] = {}
    for at, app in window.authorized:
        if at < t0:
            continue
        if app.startswith(LISTENER):
            listen.setdefault(app.removeprefix(LISTENER), at)
        else:
            other.setdefault(app, at)
    return {
        worker: max(listen[worker], other[worker]) - t0
        for worker in workers
        if worker in listen and worker in other
    }


# --------------------------------------------------------------------------- the database


class Monitor:
    """The scenario's one connection (it holds one of the 100): samples, adds, checks.
    Reconnects after the server's restart; a failed sample is skipped."""

    def __init__(self, dsn: str) -> None:
        self.dsn = dsn
        self.conn: psycopg.Connection[Any] | None = None

    def _connection(self) -> psycopg.Connection[Any]:
        if self.conn is None or self.conn.closed:
            self.conn = psycopg.connect(self.dsn, autocommit=True, connect_timeout=5)
        return self.conn

    def drop(self) -> None:
        if self.conn is not None:
            self.conn.close()
        self.conn = None

    def rows(self, sql: str, *args: Any) -> list[tuple[Any, ...]]:
        try:
            return self._connection().execute(sql, args).fetchall()
        except psycopg.OperationalError:
            self.drop()
            raise

    def run(self, sql: str) -> None:
        self._connection().execute(sql)

    def retrying(self, sql: str, *args: Any, timeout: float = 30.0) -> list[tuple[Any, ...]]:
        deadline = time.monotonic() + timeout
        while True:
            try:
                return self.rows(sql, *args)
            except psycopg.OperationalError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)

    def connections(self) -> Counter[str] | None:
        """Client connections by application_name, the monitor's own left out; None when
        the sample failed."""
        try:
            found = self.rows(
                "SELECT application_name, count(*) FROM pg_stat_activity"
                " WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()"
                " GROUP BY 1"
            )
        except psycopg.OperationalError:
            return None
        return Counter({str(app): int(count) for app, count in found})

    def add_batch(self, batch: int, n: int) -> None:
        for start in range(0, n, 1000):
            k = min(1000, n - start)
            self.retrying(
                "SELECT count(*) FROM lane.add_jobs(%s, %s::text[], %s::text[]::jsonb[],"
                " %s::text[]::jsonb[])",
                QUEUE,
                ["noop"] * k,
                [json.dumps({"batch": batch, "n": start + i}) for i in range(k)],
                ["{}"] * k,
            )

    def batch_states(self, batch: int) -> Counter[str]:
        found = self.retrying(
            "SELECT state, count(*) FROM lane.jobs WHERE queue = %s"
            " AND (data->>'batch')::int = %s GROUP BY 1",
            QUEUE,
            batch,
        )
        return Counter({str(state): int(count) for state, count in found})

    def batch_workers(self, batch: int) -> Counter[str]:
        found = self.retrying(
            "SELECT worker_id, count(*) FROM lane.jobs WHERE queue = %s"
            " AND (data->>'batch')::int = %s AND state = 'completed' GROUP BY 1",
            QUEUE,
            batch,
        )
        return Counter({str(worker): int(count) for worker, count in found})


# --------------------------------------------------------------------------- the workers


@dataclass
class Worker:
    worker_id: str
    proc: subprocess.Popen[bytes]
    output: Path

    def started(self) -> bool:
        return f"worker {self.worker_id} started" in self.output.read_text(errors="replace")


class Fleet:
    """N ``python -m lane_pg worker`` processes, one generation at a time."""

    def __init__(self, dsn: str, count: int, pool_size: int, directory: Path, app: str) -> None:
        self.dsn = dsn
        self.app = app
        self.count = count
        self.pool_size = pool_size
        self.directory = directory
        self.generation = 0
        self.workers: list[Worker] = []

    @property
    def ids(self) -> list[str]:
        return [worker.worker_id for worker in self.workers]

    def launch(self) -> None:
        self.generation += 1
        path = os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))
        env = dict(os.environ, PYTHONPATH=path, PYTHONUNBUFFERED="1")
        env[DSN_VARIABLE] = self.dsn
        for n in range(self.count):
            worker_id = f"g{self.generation}-w{n:02d}"
            # application_name tags every connection of the worker (asyncpg sends it as a
            # server setting); the LISTEN connection names itself "lane_pg listener ID".
            params = [f"application_name={worker_id}"]
            if self.pool_size:
                params.insert(0, f"pool_size={self.pool_size}")
            dsn = f"{self.dsn}?{'&'.join(params)}"
            argv = [sys.executable, "-m", "lane_pg", "worker", "--app", self.app, "--queue", QUEUE,
                    "--dsn", dsn, "--worker-id", worker_id]  # fmt: skip
            output = self.directory / f"{worker_id}.log"
            with output.open("wb") as sink:
                # A session of its own: a Ctrl-C in the terminal reaches the scenario only,
                # which then stops the workers once (a second signal would stop them hard).
                proc = subprocess.Popen(
                    argv, cwd=REPO, env=env, stdin=subprocess.DEVNULL, stdout=sink,
                    stderr=subprocess.STDOUT, start_new_session=True,
                )  # fmt: skip
            self.workers.append(Worker(worker_id, proc, output))

    def wait_started(self, timeout: float) -> list[str]:
        """The ids of workers that did not print their startup line in time."""
        deadline = time.monotonic() + timeout
        waiting = list(self.workers)
        while waiting and time.monotonic() < deadline:
            waiting = [w for w in waiting if not w.started() and w.proc.poll() is None]
            time.sleep(0.05)
        return [w.worker_id for w in self.workers if not w.started()]

    def dead(self) -> list[str]:
        return [
            f"{w.worker_id} (rc {w.proc.poll()})" for w in self.workers if w.proc.poll() is not None
        ]

    def alive(self) -> bool:
        return any(w.proc.poll() is None for w in self.workers)

    def stop(self, timeout: float = EXIT_TIMEOUT) -> list[str]:
        """SIGTERM every worker and wait; the ids of those that had to be killed."""
        for worker in self.workers:
            if worker.proc.poll() is None:
                worker.proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + timeout
        killed = []
        for worker in self.workers:
            try:
                worker.proc.wait(max(deadline - time.monotonic(), 0.1))
            except subprocess.TimeoutExpired:
                worker.proc.kill()
                worker.proc.wait()
                killed.append(worker.worker_id)
        self.workers = []
        return killed


# --------------------------------------------------------------------------- a phase


@dataclass
class Phase:
    round: int
    fault: str
    t0: float  # the server ready again (A), the new fleet launched (start, B)
    away: float | None = None
    back: dict[str, float] = field(default_factory=dict)
    log: LogWindow = field(default_factory=LogWindow)
    peak_total: int = 0
    peak_worker: int = 0
    added: int = 0
    states: Counter[str] = field(default_factory=Counter)
    drain: float = 0.0
    per_worker: Counter[str] = field(default_factory=Counter)
    workers: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    @property
    def too_many(self) -> int:
        return self.log.fatal[TOO_MANY]

    @property
    def all_back(self) -> float | None:
        return max(self.back.values()) if len(self.back) == len(self.workers) else None

    @property
    def drained_by(self) -> int:
        return sum(self.per_worker[w] > 0 for w in self.workers)

    def verdict(self) -> list[str]:
        found = list(self.problems)
        if self.too_many:
            found.append(f"{self.too_many} x too many clients")
        if self.states["completed"] < self.added:
            found.append(f"{self.added - self.states['completed']} jobs not completed")
        missing = [w for w in self.workers if w not in self.back]
        if missing:
            found.append(f"not reconnected: {', '.join(missing)}")
        idle = [w for w in self.workers if not self.per_worker[w]]
        if idle:
            found.append(f"took no job of the batch: {', '.join(idle)}")
        return found


class Sampler:
    """Peaks of the workers' connections, sampled while the scenario waits."""

    def __init__(self, monitor: Monitor, phase: Phase) -> None:
        self.monitor = monitor
        self.phase = phase

    def sample(self) -> Counter[str] | None:
        counts = self.monitor.connections()
        if counts is not None:
            self.phase.peak_total = max(self.phase.peak_total, sum(counts.values()))
            mine = [counts[w] + counts[LISTENER + w] for w in self.phase.workers]
            self.phase.peak_worker = max(self.phase.peak_worker, *mine)
        return counts

    def wait(self, seconds: float) -> Iterator[Counter[str] | None]:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            yield self.sample()
            time.sleep(SAMPLE_EVERY)


def finish_phase(
    phase: Phase, fleet: Fleet, monitor: Monitor, server: PostgresServer, offset: int,
    batch: int, jobs: int,
) -> Phase:  # fmt: skip
    """Wait for every worker to be connected again, add a batch, wait until it drained,
    and read what the server logged since ``offset``."""
    sampler = Sampler(monitor, phase)
    phase.workers = fleet.ids
    for counts in sampler.wait(BACK_TIMEOUT):
        # Back: its LISTEN connection (without it a worker only polls, every 5 s) and
        # another one (claims, pool).
        if counts is not None and all(counts[LISTENER + w] and counts[w] for w in phase.workers):
            break
        if not fleet.alive():  # nothing to wait for (a broken --app, say)
            break
    monitor.add_batch(batch, jobs)
    phase.added = jobs
    began = time.monotonic()
    for _ in sampler.wait(DRAIN_TIMEOUT):
        phase.states = monitor.batch_states(batch)
        if phase.states["completed"] >= jobs or not fleet.alive():
            break
    phase.drain = time.monotonic() - began
    phase.per_worker = monitor.batch_workers(batch)
    sampler.sample()
    dead = fleet.dead()
    phase.problems += [f"exited: {', '.join(dead)}"] if dead else []
    phase.log = read_log(server, offset)
    phase.back = reconnected(phase.log, phase.workers, phase.t0)
    return phase


def fleet_start(
    round_: int, fault: str, fleet: Fleet, monitor: Monitor, server: PostgresServer,
    batch: int, jobs: int,
) -> Phase:  # fmt: skip
    offset = log_offset(server)
    problems = [f"killed at SIGTERM: {k}" for k in fleet.stop()] if fleet.workers else []
    phase = Phase(round_, fault, time.time(), problems=problems)
    fleet.launch()
    late = fleet.wait_started(START_TIMEOUT)
    phase.problems += [f"no startup line: {', '.join(late)}"] if late else []
    return finish_phase(phase, fleet, monitor, server, offset, batch, jobs)


def server_restart(
    round_: int, fleet: Fleet, monitor: Monitor, server: PostgresServer, batch: int, jobs: int
) -> Phase:
    offset = log_offset(server)
    monitor.drop()
    away = server.restart()
    ready = read_log(server, offset).ready
    phase = Phase(round_, "A restart", ready if ready is not None else time.time(), away=away)
    return finish_phase(phase, fleet, monitor, server, offset, batch, jobs)


# --------------------------------------------------------------------------- the report


def report(phases: list[Phase], args: argparse.Namespace, elapsed: float) -> list[str]:
    cap = f"pool_size={args.pool_size}" if args.pool_size else "no pool_size (shipped pool)"
    lines = [
        f"storm: {args.workers} workers, {cap}, max_connections {MAX_CONNECTIONS},"
        f" {args.jobs} jobs a batch, {args.rounds} rounds ({elapsed:.0f} s)",
        "",
        "round fault      away  all back  spread  recv (early)  /100ms  /100ms+  /250ms+"
        "  too many  FATAL  peak  /worker  done/added   drain  drained by",
    ]
    for p in phases:
        back = "-" if p.all_back is None else f"{p.all_back:.2f}s"
        spread = "-"
        if p.all_back is not None and p.back:
            spread = f"{p.all_back - min(p.back.values()):.2f}s"
        other = sum(p.log.fatal.values()) - p.too_many
        later = [at for at in p.log.received if at >= p.t0]
        early = len(p.log.received) - len(later)
        lines.append(
            f"{p.round:>5} {p.fault:<9} {'-' if p.away is None else f'{p.away:.2f}s':>6}"
            f" {back:>9} {spread:>7} {len(p.log.received):>5} ({early:>4})"
            f" {busiest(p.log.received, 0.1):>7} {busiest(later, 0.1):>8}"
            f" {busiest(later, 0.25):>8} {p.too_many:>9} {other:>6} {p.peak_total:>5}"
            f" {p.peak_worker:>8} {p.states['completed']:>5}/{p.added:<5} {p.drain:>6.1f}s"
            f" {p.drained_by:>5}/{len(p.workers)}"
        )
    lines += [
        "",
        "t0: A the server ready again; start, B the new fleet launched.",
        "all back: t0 until every worker had its LISTEN and another connection authorized;"
        " spread: first to last.",
        "recv: connections received; (early): before t0, during recovery (all refused);"
        " /100ms, /250ms: the busiest",
        "bucket; +: from t0 on. peak: the workers' connections in pg_stat_activity"
        " (sampled; the scenario holds 1 more).",
    ]
    lines += ["", "connections received per 250 ms from t0 (A: server ready; B: fleet launched):"]
    for p in phases:
        lines.append(f"  {p.round} {p.fault:<9} {histogram(p.log.received, p.t0, 0.25, 32)}")
    backs = [(p, sorted(p.back.values())) for p in phases if p.back]
    lines += ["", "seconds from t0 until each worker had LISTEN + another connection:"]
    for p, times in backs:
        lines.append(
            f"  {p.round} {p.fault:<9} min {times[0]:.2f}  median"
            f" {statistics.median(times):.2f}  max {times[-1]:.2f}  ({len(times)} workers)"
        )
    fatal = Counter[str]()
    for p in phases:
        fatal.update(p.log.fatal)
    if fatal:
        lines += ["", "FATAL lines in the server log:"]
        lines += [f"  {count:>5}  {message}" for message, count in fatal.most_common()]
    failures = [f"round {p.round} {p.fault}: {f}" for p in phases for f in p.verdict()]
    lines += ["", *(f"FAIL {failure}" for failure in failures)] if failures else ["", "PASS"]
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m soak.storm",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--workers", type=int, default=20)
    parser.add_argument("--pool-size", type=int, default=2, help="?pool_size=N; 0: no cap")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--jobs", type=int, default=5000, help="jobs added after each fault")
    parser.add_argument("--app", default=APP, help=f"the workers' app ({APP})")
    parser.add_argument("--keep", action="store_true", help="keep the server log and outputs")
    args = parser.parse_args(argv)

    # SIGTERM (make, CI) unwinds like Ctrl-C, through the finally below.
    def interrupted(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, interrupted)
    began = time.monotonic()
    root = Path(tempfile.mkdtemp(prefix="lane-storm-"))
    server = PostgresServer(root / "pg", max_connections=MAX_CONNECTIONS, log_connections=True)
    (root / "workers").mkdir()
    fleet = Fleet(server.dsn, args.workers, args.pool_size, root / "workers", args.app)
    monitor = Monitor(server.dsn)
    phases: list[Phase] = []
    batches = iter(range(1, 1_000_000))
    try:
        server.start()
        subprocess.run(
            [sys.executable, "-m", "lane_pg", "migrate", "--dsn", server.dsn],
            cwd=REPO, env=dict(os.environ, PYTHONPATH=str(REPO)), check=True,
            capture_output=True,
        )  # fmt: skip
        monitor.run("ALTER SYSTEM SET log_timezone = 'UTC'")
        monitor.rows("SELECT pg_reload_conf()")
        # Every finished job is kept, so each batch is checked job by job at the end.
        monitor.rows("SELECT lane.set_queue_retention(%s, NULL, NULL)", QUEUE)
        phases.append(fleet_start(0, "start", fleet, monitor, server, next(batches), args.jobs))
        for round_ in range(1, args.rounds + 1):
            for fault in ("A restart", "B fleet"):
                print(f"storm: round {round_}, {fault}", file=sys.stderr, flush=True)
                if fault == "A restart":
                    phase = server_restart(round_, fleet, monitor, server, next(batches), args.jobs)
                else:
                    phase = fleet_start(
                        round_, fault, fleet, monitor, server, next(batches), args.jobs
                    )
                phases.append(phase)
    except KeyboardInterrupt:
        print("storm: interrupted", file=sys.stderr)
        return 130
    finally:
        fleet.stop(timeout=30.0)
        monitor.drop()
        server.stop()
        if args.keep:
            print(f"storm: kept {root}", file=sys.stderr)
        else:
            shutil.rmtree(root, ignore_errors=True)
    lines = report(phases, args, time.monotonic() - began)
    print("\n".join(lines))
    return 1 if any(p.verdict() for p in phases) else 0


if __name__ == "__main__":
    sys.exit(main())
