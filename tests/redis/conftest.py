"""Fixtures of the Redis tests: a client of the test server (``LANE_PG_TEST_REDIS``), a
key prefix of each test's own, and the keys it wrote deleted afterwards (never FLUSHDB:
the server is shared). An unreachable server skips these tests within a second, saying
why, rather than hanging them."""

from __future__ import annotations

import asyncio
import shutil
import socket
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio
from redis.asyncio import Redis
from redis.crc import key_slot

from tests.helpers import delete_prefix, eventually, open_test_redis


@pytest_asyncio.fixture
async def redis_client(redis_url: str) -> AsyncIterator[Redis]:
    client: Redis = await open_test_redis(redis_url)
    try:
        yield client
    finally:
        await client.aclose()


@pytest_asyncio.fixture
async def prefix(redis_client: Redis) -> AsyncIterator[str]:
    """A key prefix no other test uses; its keys (the queues' ``{name:queue}:...`` and the
    connection-wide ``{name}:...``) are deleted at the end."""
    name = f"t{uuid.uuid4().hex[:12]}"
    try:
        yield name
    finally:
        await delete_prefix(redis_client, name)


# ------------------------------------------------------------------------ Redis Cluster


def _cluster_port() -> int:
    """A free port whose cluster bus port (10,000 above it) is free too."""
    while True:
        with socket.socket() as probe, socket.socket() as bus:
            probe.bind(("127.0.0.1", 0))
            port: int = probe.getsockname()[1]
            if port + 10_000 > 65_535:
                continue
            try:
                bus.bind(("127.0.0.1", port + 10_000))
            except OSError:
                continue
            return port


@pytest_asyncio.fixture
async def cluster_node(tmp_path: Path) -> AsyncIterator[Redis]:
    """A one-node Redis Cluster of the test's own, serving every slot: it reports cluster
    mode, and a plain client reaches every key (on a cluster of several nodes another
    slot's keys are often another node's, out of a script's reach)."""
    if shutil.which("redis-server") is None:
        pytest.skip("no redis-server to start a cluster node")
    port = _cluster_port()
    server = await asyncio.create_subprocess_exec(
        "redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
        "--appendonly", "no", "--dir", str(tmp_path), "--cluster-enabled", "yes",
        "--cluster-config-file", str(tmp_path / "nodes.conf"),
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL,
    )  # fmt: skip
    client = Redis(host="127.0.0.1", port=port, socket_connect_timeout=0.5)

    async def serving() -> bool:
        try:
            return bool((await client.cluster("INFO"))["cluster_state"] == "ok")
        except Exception:  # not accepting connections yet
            return False

    async def accepting() -> bool:
        try:
            return bool(await client.ping())
        except Exception:
            return False

    try:
        await eventually(accepting, timeout=30, interval=0.05)
        await client.execute_command("CLUSTER", "ADDSLOTSRANGE", 0, 16383)
        await eventually(serving, timeout=30, interval=0.05)
        yield client
    finally:
        await client.aclose()
        server.terminate()
        await server.wait()


def same_slot_queue(queue: str, prefix: str) -> str:
    """Another queue whose keys hash to ``queue``'s cluster slot."""
    slot = key_slot(f"{{{prefix}:{queue}}}".encode())
    return next(
        f"q{n}"
        for n in range(1, 1_000_000)
        if f"q{n}" != queue and key_slot(f"{{{prefix}:q{n}}}".encode()) == slot
    )
