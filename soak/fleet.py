"""The soak's worker processes and the faults injected into them and their server.

``Fleet`` keeps ``count`` worker processes running, as a process manager would: a worker
the soak kills is replaced at once, and one that exits by itself is replaced and reported.
``Faults`` picks a fault at random intervals (the first round of picks is every kind once,
shuffled, so a short run sees each) and records what it did and how many executions it may
have repeated, the bound the duplicate check uses.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from soak.app import FACADE_QUEUE, QUEUE
from soak.servers import PostgresServer, RedisServer

log = logging.getLogger("soak")
REPO = Path(__file__).resolve().parents[1]


@dataclass
class WorkerProcess:
    slot: int
    worker_id: str
    process: subprocess.Popen[bytes]
    killed: bool = False


@dataclass
class Fleet:
    directory: Path
    dsn: str
    count: int
    concurrency: int
    lease: float
    workers: list[WorkerProcess] = field(default_factory=list)
    started: int = 0
    unexpected_exits: list[str] = field(default_factory=list)

    def _start(self, slot: int) -> WorkerProcess:
        self.started += 1
        worker_id = f"soak-{slot}-{self.started}"
        argv = [
            sys.executable, "-m", "lane_pg", "worker", "--app", "soak.app:app",
            "--queue", f"{QUEUE},{FACADE_QUEUE}", "--concurrency", str(self.concurrency),
            "--lease", f"{self.lease:g}", "--worker-id", worker_id, "--dsn", self.dsn,
        ]  # fmt: skip
        env = {
            **os.environ,
            "LANE_SOAK_DIR": str(self.directory),
            "LANE_SOAK_DSN": self.dsn,
            "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
        }
        output = (self.directory / f"worker-{worker_id}.log").open("wb")
        process = subprocess.Popen(
            argv, cwd=REPO, env=env, stdin=subprocess.DEVNULL, stdout=output, stderr=output
        )
        output.close()
        return WorkerProcess(slot, worker_id, process)

    def start(self) -> None:
        self.workers = [self._start(slot) for slot in range(self.count)]

    def replace(self, worker: WorkerProcess) -> None:
        self.workers[worker.slot] = self._start(worker.slot)

    def supervise(self) -> None:
        """Replaces every worker that exited; one the soak did not kill is reported."""
        for worker in list(self.workers):
            code = worker.process.poll()
            if code is not None:
                if not worker.killed:
                    self.unexpected_exits.append(f"{worker.worker_id} exited {code}")
                self.replace(worker)

    def pick(self, rng: random.Random) -> WorkerProcess:
        return rng.choice([w for w in self.workers if w.process.poll() is None])

    def stop(self, timeout: float = 30.0) -> None:
        for worker in self.workers:
            if worker.process.poll() is None:
                worker.process.send_signal(signal.SIGCONT)
                worker.process.terminate()
        deadline = time.monotonic() + timeout
        for worker in self.workers:
            try:
                worker.process.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                worker.process.kill()
                worker.process.wait()
                self.unexpected_exits.append(f"{worker.worker_id} ignored SIGTERM for {timeout}s")


def local_ports(pid: int, remote_port: int) -> list[int]:
    """The local ports of ``pid``'s TCP connections to ``remote_port`` (Linux /proc)."""
    inodes = set()
    with contextlib.suppress(OSError):
        for fd in os.listdir(f"/proc/{pid}/fd"):
            with contextlib.suppress(OSError):
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
                if target.startswith("socket:["):
                    inodes.add(target[8:-1])
    ports = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(OSError), open(table) as lines:
            next(lines)
            for line in lines:
                parts = line.split()
                local, remote, inode = parts[1], parts[2], parts[9]
                if inode in inodes and int(remote.rsplit(":", 1)[1], 16) == remote_port:
                    ports.append(int(local.rsplit(":", 1)[1], 16))
    return ports


@dataclass
class FaultRecord:
    at: float
    kind: str
    detail: str
    may_repeat: int
    """Executions this fault may have repeated (at-least-once): the jobs it could have
    taken from under their workers."""


@dataclass
class Faults:
    fleet: Fleet
    server: PostgresServer | RedisServer
    rng: random.Random
    min_gap: float
    max_gap: float
    admin: Any = None
    """An asyncpg connection (PostgreSQL) or a redis client, for the server-side faults."""
    records: list[FaultRecord] = field(default_factory=list)
    held: list[asyncio.Task[None]] = field(default_factory=list)

    def kinds(self) -> dict[str, Callable[[], Awaitable[tuple[str, int]]]]:
        kinds: dict[str, Callable[[], Awaitable[tuple[str, int]]]] = {
            "kill-worker": self.kill_worker,
            "stop-worker": self.stop_worker,
            "restart-server": self.restart_server,
            "cut-connections": self.cut_connections,
        }
        if isinstance(self.server, PostgresServer):
            kinds["hold-snapshot"] = self.hold_snapshot
        return kinds

    async def run(self, stop: asyncio.Event) -> None:
        kinds = self.kinds()
        first = list(kinds)
        self.rng.shuffle(first)
        while not stop.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), self.rng.uniform(self.min_gap, self.max_gap))
            if stop.is_set():
                break
            kind = first.pop() if first else self.rng.choice(list(kinds))
            began = time.time()
            try:
                detail, may_repeat = await kinds[kind]()
            except Exception as error:  # the fault failed to apply: say so, go on
                detail, may_repeat = f"could not apply: {error!r}", 0
            self.records.append(FaultRecord(began, kind, detail, may_repeat))
            log.info("fault %s: %s", kind, detail)

    async def kill_worker(self) -> tuple[str, int]:
        worker = self.fleet.pick(self.rng)
        worker.killed = True
        worker.process.send_signal(signal.SIGKILL)
        await asyncio.to_thread(worker.process.wait)
        self.fleet.replace(worker)
        return f"SIGKILL {worker.worker_id}", self.fleet.concurrency

    async def stop_worker(self) -> tuple[str, int]:
        worker = self.fleet.pick(self.rng)
        seconds = self.fleet.lease + self.rng.uniform(2.0, 5.0)
        worker.process.send_signal(signal.SIGSTOP)
        await asyncio.sleep(seconds)
        worker.process.send_signal(signal.SIGCONT)
        return f"SIGSTOP {worker.worker_id} for {seconds:.1f}s, then SIGCONT", (
            self.fleet.concurrency
        )

    async def restart_server(self) -> tuple[str, int]:
        away = await asyncio.to_thread(self.server.restart)
        if self.admin is not None and isinstance(self.server, PostgresServer):
            await self.reconnect_admin()
        what = "PostgreSQL (immediate)" if isinstance(self.server, PostgresServer) else "Redis"
        return f"restarted {what}, away {away:.1f}s", self.fleet.count * self.fleet.concurrency

    async def reconnect_admin(self) -> None:
        import asyncpg

        with contextlib.suppress(Exception):
            await self.admin.close()
        self.admin = await asyncpg.connect(self.server.dsn)  # type: ignore[union-attr]

    async def cut_connections(self) -> tuple[str, int]:
        worker = self.fleet.pick(self.rng)
        ports = local_ports(worker.process.pid, self.server.port)
        if isinstance(self.server, PostgresServer):
            killed = await self._admin_call(
                "SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) FROM"
                " pg_stat_activity WHERE client_port = ANY($1::int[])",
                ports,
            )
        else:
            killed = 0
            for port in ports:
                killed += int(
                    await self.admin.client_kill_filter(_type=None, addr=f"127.0.0.1:{port}")
                )
        return f"killed {killed} connections of {worker.worker_id}", self.fleet.concurrency

    async def _admin_call(self, query: str, *args: object) -> Any:
        try:
            return await self.admin.fetchval(query, *args)
        except Exception:
            await self.reconnect_admin()
            return await self.admin.fetchval(query, *args)

    async def hold_snapshot(self) -> tuple[str, int]:
        seconds = self.rng.uniform(30.0, 120.0)
        self.held.append(asyncio.create_task(self._hold(seconds)))
        return f"a REPEATABLE READ snapshot held open for {seconds:.0f}s", 0

    async def _hold(self, seconds: float) -> None:
        import asyncpg

        assert isinstance(self.server, PostgresServer)
        try:
            conn = await asyncpg.connect(self.server.dsn)
        except Exception as error:
            log.info("hold-snapshot could not connect: %r", error)
            return
        try:
            async with conn.transaction(isolation="repeatable_read"):
                await conn.fetchval("SELECT count(*) FROM lane.jobs")
                await asyncio.sleep(seconds)
        except Exception as error:  # a server restart ends the hold early
            log.info("hold-snapshot ended early: %r", error)
        finally:
            with contextlib.suppress(Exception):
                await conn.close()

    def duplicates_bound(self) -> int:
        return sum(record.may_repeat for record in self.records)
