"""lane_pg on a Redis Cluster of the module's own: three masters on free loopback ports, each
in a directory of its own, joined with ``redis-cli --cluster create`` and torn down after.
A machine whose ``redis-server`` cannot run a cluster skips these tests, saying why;
every wait is bounded.

Each queue's keys share one hash tag, so every script runs on one node: jobs added,
claimed, finished and retried on queues of two nodes; a worker process draining both
exactly once, and woken from either; a flushed script cache of one node reloaded there
alone; and the start-up check refusing a cluster one of whose masters evicts keys."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import shutil
import socket
import subprocess
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import asyncpg
import pytest
import pytest_asyncio
from redis.asyncio import Redis
from redis.asyncio.cluster import RedisCluster
from redis.crc import key_slot

import lane_pg
from lane_pg.errors import ConfigurationError
from lane_pg.redis.backend import RedisBackend
from lane_pg.redis.keys import QueueKeys
from lane_pg.redis.wakeups import MAX_BLOCKED_SLOTS, RedisWakeups
from lane_pg.types import JobOptions, JobSpec, QueueDemand
from tests.helpers import eventually, open_test_redis
from tests.worker.conftest import EFFECTS_TABLE, Workers, effects_dsn, queue_args

__all__ = ["effects_dsn"]  # the fixture, imported for this module

START_TIMEOUT = 30.0
"""Seconds the cluster may take to start and agree (slots covered, state ok)."""


def _free_port() -> int:
    """A free loopback port whose cluster bus port (+10000) is free too."""
    for _ in range(50):
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = int(probe.getsockname()[1])
        if port + 10000 > 65535:
            continue
        with socket.socket() as bus:
            try:
                bus.bind(("127.0.0.1", port + 10000))
            except OSError:
                continue
        return port
    raise RuntimeError("no free port pair for a cluster node")


def _cli(port: int, *args: str, timeout: float = 5.0) -> str:
    done = subprocess.run(
        [shutil.which("redis-cli") or "redis-cli", "-h", "127.0.0.1", "-p", str(port), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    return done.stdout + done.stderr


@dataclass
class OwnCluster:
    """Three masters, no replicas (``--cluster-replicas 0``)."""

    directory: Path
    ports: list[int] = field(default_factory=list)
    procs: list[subprocess.Popen[bytes]] = field(default_factory=list)

    def start(self) -> None:
        """Start the nodes and create the cluster; ``RuntimeError`` saying what failed."""
        for n in range(3):
            port = _free_port()
            home = self.directory / f"node{n}"
            home.mkdir()
            with (home / "server.log").open("wb") as log:
                self.procs.append(
                    subprocess.Popen(
                        [
                            shutil.which("redis-server") or "redis-server",
                            *("--port", str(port), "--bind", "127.0.0.1"),
                            *("--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf"),
                            *("--appendonly", "no", "--save", "", "--dir", str(home)),
                            *("--daemonize", "no"),
                        ],
                        stdout=log,
                        stderr=subprocess.STDOUT,
                    )
                )
            self.ports.append(port)
        self._until("every node answers PING", lambda: self._all("PING", "PONG"))
        created = subprocess.run(
            [
                shutil.which("redis-cli") or "redis-cli",
                "--cluster",
                "create",
                *(f"127.0.0.1:{port}" for port in self.ports),
                *("--cluster-replicas", "0", "--cluster-yes"),
            ],
            capture_output=True,
            text=True,
            timeout=START_TIMEOUT,
            check=False,
        )
        if created.returncode != 0:
            raise RuntimeError(f"redis-cli --cluster create failed: {created.stdout[-500:]}")
        self._until(
            "CLUSTER INFO says cluster_state:ok on every node",
            lambda: self._all("CLUSTER", "INFO", expect="cluster_state:ok"),
        )

    def _all(self, *command: str, expect: str = "") -> bool:
        wanted = expect or command[-1]
        return all(wanted in _cli(port, *command) for port in self.ports)

    def _until(self, what: str, check: object) -> None:
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            if any(proc.poll() is not None for proc in self.procs):
                raise RuntimeError(f"a node exited before {what}: {self.logs()}")
            try:
                if check():  # type: ignore[operator]
                    return
            except (OSError, subprocess.TimeoutExpired):
                pass
            time.sleep(0.1)
        raise RuntimeError(f"not within {START_TIMEOUT:.0f}s: {what}; {self.logs()}")

    def logs(self) -> str:
        tails = []
        for n in range(len(self.procs)):
            path = self.directory / f"node{n}" / "server.log"
            if path.exists():
                tails.append(path.read_text(errors="replace")[-300:])
        return " | ".join(tails)

    @property
    def url(self) -> str:
        return f"redis+cluster://127.0.0.1:{self.ports[0]}"

    def stop(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.terminate()
        for proc in self.procs:
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=5)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[OwnCluster]:
    for tool in ("redis-server", "redis-cli"):
        if shutil.which(tool) is None:
            pytest.skip(f"{tool} is not installed: the cluster tests start a cluster of their own")
    own = OwnCluster(tmp_path_factory.mktemp("redis-cluster"))
    try:
        try:
            own.start()
        except (RuntimeError, OSError, subprocess.TimeoutExpired) as exc:
            pytest.skip(f"redis-server cannot run a Redis Cluster here: {exc}")
        yield own
    finally:
        own.stop()


@pytest_asyncio.fixture
async def backend(cluster: OwnCluster) -> AsyncIterator[RedisBackend]:
    """A backend of ``lane_pg.connect`` on the cluster, under a prefix of the test's own."""
    prefix = f"c{uuid.uuid4().hex[:10]}"
    opened = await lane_pg.connect(f"{cluster.url}?prefix={prefix}")
    assert isinstance(opened, RedisBackend) and opened.cluster
    try:
        yield opened
    finally:
        client = opened.client
        async for key in client.scan_iter(match=f"{{{prefix}[:}}]*", count=500):
            await client.delete(key)
        await opened.close()


def node_of(backend: RedisBackend, queue: str) -> str:
    assert isinstance(backend.client, RedisCluster)
    return str(backend.client.get_node_from_key(backend.keys(queue).meta).name)


def two_nodes(backend: RedisBackend) -> tuple[str, str]:
    """Two queue names whose keys live on two different masters (so in two slots)."""
    first = f"qa_{uuid.uuid4().hex[:8]}"
    for _ in range(200):
        other = f"qb_{uuid.uuid4().hex[:8]}"
        if node_of(backend, other) != node_of(backend, first):
            return first, other
    raise AssertionError("no two queues on two nodes in 200 names")


async def node_client(backend: RedisBackend, queue: str) -> Redis:
    """A plain client of the master that holds ``queue``'s keys."""
    host, port = node_of(backend, queue).rsplit(":", 1)
    return Redis(host=host, port=int(port))


async def test_jobs_of_queues_on_two_nodes_are_added_claimed_finished_and_retried(
    backend: RedisBackend,
) -> None:
    first, second = two_nodes(backend)
    a = await backend.add_job(first, "n", {"x": 1}, JobOptions(attempts=1))
    b = await backend.add_job(second, "n", {"x": 2}, JobOptions(attempts=1))
    claimed = await backend.claim_jobs("w1", [QueueDemand(first, 5), QueueDemand(second, 5)], 30)
    assert sorted((job.queue, job.id) for job in claimed) == sorted([(first, a.id), (second, b.id)])
    tokens = {job.queue: job.lock_token for job in claimed}
    assert all(tokens.values())
    done = await backend.complete_job(first, a.id, str(tokens[first]), {"ok": True})
    failed = await backend.fail_job(second, b.id, str(tokens[second]), "boom")
    assert (done.state, failed.state) == ("completed", "failed")
    retried = await backend.retry_job(second, b.id)
    assert retried.state == "waiting"
    [again] = await backend.claim_jobs("w2", [QueueDemand(first, 5), QueueDemand(second, 5)], 30)
    assert (again.queue, again.id) == (second, b.id)
    assert again.lock_token is not None
    await backend.complete_job(second, b.id, again.lock_token, None)
    for queue in (first, second):
        counts = await backend.get_job_counts(queue)
        assert counts["completed"] == 1 and counts["waiting"] == counts["active"] == 0


async def test_operations_over_every_queue_are_one_call_per_queue(backend: RedisBackend) -> None:
    first, second = two_nodes(backend)
    await backend.add_jobs(first, [JobSpec("n", None)] * 3)
    await backend.add_jobs(second, [JobSpec("n", None)] * 2)
    assert sorted(await backend.list_queues()) == sorted([first, second])
    await backend.pause_queue(first)
    await backend.pause_all()
    status = await backend.get_pause_status(None)  # every queue: flags of two nodes
    assert status.all_paused and status.paused == frozenset({first})
    assert await backend.claim_jobs("w", [QueueDemand(first, 9), QueueDemand(second, 9)], 30) == []
    await backend.resume_all()
    await backend.resume_queue(first)
    status = await backend.get_pause_status(None)
    assert not status.all_paused and not status.paused
    assert await backend.clear_queues() == 5
    assert await backend.remove_orphaned() == 0  # its SCAN visits each master in turn


async def test_a_flushed_script_cache_is_reloaded_on_its_node_only(
    backend: RedisBackend, cluster: OwnCluster
) -> None:
    first, second = two_nodes(backend)
    nodes = [Redis(host="127.0.0.1", port=port) for port in cluster.ports]
    try:
        for node in nodes:
            await node.script_flush()
        sha = backend.scripts.script("add_plain_jobs").sha
        await backend.add_job(first, "n")
        assert backend.scripts.loads == 1
        here, there = await node_client(backend, first), await node_client(backend, second)
        try:
            assert await here.script_exists(sha) == [True]
            assert await there.script_exists(sha) == [False]  # loaded where it was asked
            await backend.add_job(second, "n")
            assert backend.scripts.loads == 2
            await here.script_flush()
            await backend.add_job(first, "n")
            await backend.add_job(second, "n")
            assert backend.scripts.loads == 3  # the flushed node's one reload
            assert await here.script_exists(sha) == [True]
        finally:
            await here.aclose()
            await there.aclose()
    finally:
        for node in nodes:
            await node.aclose()
    assert (await backend.get_job_counts(first))["waiting"] == 2
    assert (await backend.get_job_counts(second))["waiting"] == 2


async def test_a_cluster_with_one_evicting_master_is_refused(cluster: OwnCluster) -> None:
    port = cluster.ports[-1]
    node = Redis(host="127.0.0.1", port=port)  # the cluster's own node, never 6379
    try:
        await node.config_set("maxmemory-policy", "allkeys-lru")
        with pytest.raises(ConfigurationError) as refused:
            await lane_pg.connect(cluster.url)
        message = str(refused.value)
        assert f"127.0.0.1:{port}" in message and "allkeys-lru" in message
    finally:
        await node.config_set("maxmemory-policy", "noeviction")
        await node.aclose()
    opened = await lane_pg.connect(cluster.url)  # every master keeps its keys again
    await opened.close()


async def test_a_waiting_worker_wakes_for_a_job_of_either_slot(backend: RedisBackend) -> None:
    first, second = two_nodes(backend)
    assert QueueKeys(first, backend.prefix).tag != QueueKeys(second, backend.prefix).tag
    wakeups = RedisWakeups(backend, [first, second], name="cluster test", block=1.0)
    await wakeups.start()
    try:
        for queue in (second, first):
            waiting = asyncio.create_task(wakeups.wait(20))
            await eventually(lambda: wakeups._waiters > 0, timeout=10)
            await backend.add_job(queue, "n")
            assert await waiting  # woken, not timed out
            [job] = await backend.claim_jobs("w", [QueueDemand(queue, 1)], 30)
            assert job.queue == queue
        assert wakeups.reconnects == 0  # woken by a marker, not by an error's wake-up
    finally:
        await wakeups.close()


@pytest_asyncio.fixture
async def effects(effects_dsn: str) -> AsyncIterator[tuple[asyncpg.Connection, list[str]]]:
    """The effects table and the queues a test names in it (their rows deleted after)."""
    conn = await asyncpg.connect(effects_dsn)
    names: list[str] = []
    try:
        yield conn, names
    finally:
        with contextlib.suppress(Exception):
            await conn.execute(f"DELETE FROM {EFFECTS_TABLE} WHERE queue = ANY($1)", names)
        await conn.close()


async def _done(conn: asyncpg.Connection, queues: list[str]) -> dict[tuple[str, str], int]:
    rows = await conn.fetch(
        f"SELECT queue, job_id, count(*) AS n FROM {EFFECTS_TABLE}"
        " WHERE queue = ANY($1) AND note = 'done' GROUP BY queue, job_id",
        queues,
    )
    return {(row["queue"], row["job_id"]): row["n"] for row in rows}


def _spawner(url: str, effects_dsn: str, tmp_path: Path, tag: str) -> Workers:
    workers = Workers(url, tmp_path, lane_prefix=f"{tag}.")
    base_env = workers._env

    def env(unbuffered: bool, extra: dict[str, str] | None) -> dict[str, str]:
        return base_env(unbuffered, {"LANE_PG_TEST_EFFECTS_DSN": effects_dsn, **(extra or {})})

    workers._env = env  # type: ignore[method-assign]
    return workers


async def test_worker_processes_drain_two_nodes_queues_exactly_once_and_wake_for_either(
    backend: RedisBackend,
    effects: tuple[asyncpg.Connection, list[str]],
    effects_dsn: str,
    cluster: OwnCluster,
    tmp_path: Path,
) -> None:
    conn, names = effects
    first, second = two_nodes(backend)
    names += [first, second]
    url = f"{cluster.url}?prefix={backend.prefix}"
    jobs = [
        (queue, job.id)
        for queue in (first, second)
        for job in await backend.add_jobs(queue, [JobSpec("record", {"n": n}) for n in range(60)])
    ]
    workers = _spawner(url, effects_dsn, tmp_path, first)
    try:
        runs = [workers.spawn(*queue_args(first, second), "--burst") for _ in range(2)]
        for worker in runs:
            assert await worker.wait_exit(timeout=60) == 0, worker.describe()
        assert await _done(conn, names) == dict.fromkeys(jobs, 1)

        # A long-running worker, idle on both queues, takes a job added to either.
        idle = await workers.start(*queue_args(first, second))
        later = [
            (queue, (await backend.add_job(queue, "record", {"late": True})).id)
            for queue in (second, first)
        ]

        async def all_completed() -> bool:  # the effect is recorded before the completion
            counts = [await backend.get_job_counts(queue) for queue in (first, second)]
            return all(c["completed"] == 61 for c in counts)

        await eventually(all_completed, timeout=30)
        assert idle.alive()
    finally:
        workers.close()
    assert await _done(conn, names) == dict.fromkeys(jobs + later, 1)
    for queue in (first, second):
        counts = await backend.get_job_counts(queue)
        assert counts["waiting"] == counts["active"] == counts["failed"] == 0


async def test_a_queue_whose_slot_moves_to_another_node_follows_it(
    backend: RedisBackend, cluster: OwnCluster
) -> None:
    """A reshard of an empty slot (CLUSTER SETSLOT ... NODE on every node): the blocked
    wake-up finds the slot's new node, the next script is redirected there and loaded
    there after its cache was flushed."""
    moving, staying = two_nodes(backend)
    slot = key_slot(backend.keys(moving).meta.encode())
    target = await node_client(backend, staying)
    nodes = [Redis(host="127.0.0.1", port=port) for port in cluster.ports]
    wakeups = RedisWakeups(backend, [moving], name="moving slot", block=1.0)
    await wakeups.start()
    try:
        first = asyncio.create_task(wakeups.wait(20))
        await eventually(lambda: bool(wakeups._slots), timeout=10)
        target_id = (await target.execute_command("CLUSTER", "MYID")).decode()
        for node in nodes:
            await node.execute_command("CLUSTER", "SETSLOT", slot, "NODE", target_id)
        await target.script_flush()
        assert await first  # the lost block wakes the worker once, to cover the gap

        async def blocked_on_target() -> bool:
            clients = await target.client_list()
            return any(c["name"] == "moving_slot" and c["cmd"] == "bzpopmin" for c in clients)

        # The wake-up blocks only while a worker waits: once ``first`` returned, nothing
        # blocks until the next wait (asserting the block before it raced the reconnect).
        second = asyncio.create_task(wakeups.wait(20))
        await eventually(blocked_on_target, timeout=20)
        if second.done():  # woken by a reconnect on the way: wait again, on the new node
            second = asyncio.create_task(wakeups.wait(20))
            await eventually(lambda: wakeups._waiters > 0, timeout=10)
        reconnects, loads = wakeups.reconnects, backend.scripts.loads
        await backend.add_job(moving, "n")
        assert await second
        assert wakeups.reconnects == reconnects  # woken by the marker on the new node
        assert node_of(backend, moving) == node_of(backend, staying)
        assert backend.scripts.loads == loads + 1  # loaded on the new node
        assert (await target.script_exists(backend.scripts.script("add_plain_jobs").sha)) == [True]
    finally:
        await wakeups.close()
        await target.aclose()
        for node in nodes:
            await node.aclose()


async def test_a_url_of_the_wrong_kind_is_refused_saying_which_to_use(
    cluster: OwnCluster, redis_url: str
) -> None:
    with pytest.raises(ConfigurationError, match=r"redis\+cluster://"):
        await lane_pg.connect(f"redis://127.0.0.1:{cluster.ports[0]}/0")
    if "+cluster://" in redis_url:
        return  # the test server is itself a cluster: no plain server to point at
    plain = await open_test_redis(redis_url)  # skips when the test server is unreachable
    await plain.aclose()
    host_port = redis_url.split("://", 1)[1].split("/", 1)[0].split("?", 1)[0]
    with pytest.raises(ConfigurationError, match="not a Redis Cluster node"):
        await lane_pg.connect(f"redis+cluster://{host_port}")


async def test_a_worker_of_queues_in_too_many_slots_polls_and_says_so(
    backend: RedisBackend, cluster: OwnCluster, caplog: pytest.LogCaptureFixture
) -> None:
    queues = [f"qp_{n}_{uuid.uuid4().hex[:6]}" for n in range(MAX_BLOCKED_SLOTS + 1)]
    slots = {key_slot(backend.keys(queue).marker.encode()) for queue in queues}
    assert len(slots) > MAX_BLOCKED_SLOTS
    wakeups = RedisWakeups(backend, queues, name="many slots", block=0.5)
    nodes = [Redis(host="127.0.0.1", port=port) for port in cluster.ports]
    await wakeups.start()
    try:
        with caplog.at_level(logging.WARNING, logger="lane_pg.redis.wakeups"):
            for _ in range(3):  # each wait ends at its timeout: nothing wakes it
                assert await wakeups.wait(1.0) is False
        said = [r.getMessage() for r in caplog.records if "instead of blocking" in r.getMessage()]
        assert len(said) == 1 and f"{len(slots)} slots" in said[0]
        for node in nodes:
            assert not [c for c in await node.client_list() if c["name"] == "many_slots"]
    finally:
        await wakeups.close()
        for node in nodes:
            await node.aclose()


async def test_a_script_reaches_a_slot_in_migration_whose_new_node_lacks_it(
    backend: RedisBackend, cluster: OwnCluster
) -> None:
    """A slot MIGRATING from one node and IMPORTING on another, with the queue's keys on
    neither yet: the old node answers ASK, the new one NOSCRIPT while the client's map
    still names the old one; the script reaches the new node all the same."""
    moving, staying = two_nodes(backend)
    slot = key_slot(backend.keys(moving).meta.encode())
    source, target = await node_client(backend, moving), await node_client(backend, staying)
    nodes = [Redis(host="127.0.0.1", port=port) for port in cluster.ports]
    try:
        source_id = (await source.execute_command("CLUSTER", "MYID")).decode()
        target_id = (await target.execute_command("CLUSTER", "MYID")).decode()
        await target.execute_command("CLUSTER", "SETSLOT", slot, "IMPORTING", source_id)
        await source.execute_command("CLUSTER", "SETSLOT", slot, "MIGRATING", target_id)
        await target.script_flush()
        job = await backend.add_job(moving, "n", {"x": 1})
        loads = backend.scripts.loads
        assert loads >= 2  # on the slot's node in the map, then on every master
        count = ("CLUSTER", "COUNTKEYSINSLOT", slot)
        assert await source.execute_command(*count) == 0
        assert await target.execute_command(*count) > 0  # the job went to the new node
    finally:
        for node in nodes:  # the migration done: the slot is the new node's
            await node.execute_command("CLUSTER", "SETSLOT", slot, "NODE", target_id)
        for client in (source, target, *nodes):
            await client.aclose()
    row = await backend.get_job(moving, job.id)
    assert row is not None and row.data == {"x": 1}
