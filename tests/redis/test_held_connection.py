"""The Redis backend keeps one pooled connection between script calls (Scripts._evalsha):
sequential calls reuse it, concurrent calls still run side by side, a connection the
server dropped is replaced before anything is sent, and a cancelled call never leaves a
connection with an unread reply for the next one (its connection is dropped, and the
check a held connection gets before each call would see the reply waiting)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest_asyncio
from redis.asyncio import Redis
from redis.asyncio.connection import Connection

import lane_pg
from lane_pg.redis.backend import RedisBackend
from lane_pg.redis.scripts import pack_evalsha
from tests.helpers import eventually

QUEUE = "held"


@pytest_asyncio.fixture
async def backend(redis_url: str, prefix: str) -> AsyncIterator[RedisBackend]:
    opened = await lane_pg.connect(f"{redis_url.split('?')[0]}?prefix={prefix}", max_size=4)
    assert isinstance(opened, RedisBackend)
    try:
        yield opened
    finally:
        await opened.close()


async def connection_id(conn: object) -> int:
    """The server's id of a redis-py connection (CLIENT ID sent on it)."""
    await conn.send_command("CLIENT", "ID")  # type: ignore[attr-defined]
    return int(await conn.read_response())  # type: ignore[attr-defined]


async def test_sequential_script_calls_use_one_connection(
    backend: RedisBackend, redis_client: Redis
) -> None:
    for n in range(5):
        await backend.jobs.add_job(QUEUE, "n", {"n": n})
    held = backend.scripts._held
    assert held is not None
    before = await backend.client.client_list()
    for n in range(5):
        await backend.jobs.add_job(QUEUE, "n", {"n": n})
    assert backend.scripts._held is held
    assert len(await backend.client.client_list()) == len(before)  # no new connection
    assert await connection_id(held) == await connection_id(backend.scripts._held)


async def test_concurrent_calls_each_get_a_connection(backend: RedisBackend) -> None:
    jobs = await asyncio.gather(*(backend.jobs.add_job(QUEUE, "n", {"n": n}) for n in range(8)))
    assert sorted(int(job.id) for job in jobs) == list(range(1, 9))
    counts = await backend.reads.get_job_counts(QUEUE, ["waiting"])
    assert counts == {"waiting": 8}


async def test_a_held_connection_the_server_dropped_is_replaced_unsent(
    backend: RedisBackend, redis_client: Redis
) -> None:
    await backend.jobs.add_job(QUEUE, "first")
    held = backend.scripts._held
    assert held is not None
    await redis_client.execute_command("CLIENT", "KILL", "ID", str(await connection_id(held)))
    job = await backend.jobs.add_job(QUEUE, "second")  # neither an error nor sent twice
    listed = await backend.reads.get_job_counts(QUEUE, ["waiting"])
    assert job.name == "second" and listed == {"waiting": 2}


async def test_a_cancelled_call_leaves_no_reply_for_the_next(
    backend: RedisBackend, redis_client: Redis
) -> None:
    await backend.jobs.add_job(QUEUE, "warm")
    await redis_client.execute_command("CLIENT", "PAUSE", "2000", "WRITE")
    try:
        adding = asyncio.create_task(backend.jobs.add_job(QUEUE, "paused"))
        await eventually(lambda: backend.scripts._held is None)  # the call took it
        adding.cancel()
        await asyncio.gather(adding, return_exceptions=True)
    finally:
        await redis_client.execute_command("CLIENT", "UNPAUSE")
    job = await backend.jobs.add_job(QUEUE, "after")
    assert job.name == "after"
    assert (await backend.jobs.get_job(QUEUE, job.id)) is not None


def test_the_packed_evalsha_is_what_redis_py_packs() -> None:
    """The held connection's EVALSHA is packed by lane_pg (``pack_evalsha``): byte for
    byte redis-py's packing, for keys and arguments with multi-byte characters, no keys,
    several, and an argument past redis-py's chunking size."""
    packer = Connection()
    sha = "0123456789abcdef0123456789abcdef01234567"
    cases: list[tuple[list[str], str]] = [
        (["{lane:q}:meta"], '{"now":null}'),
        ([], ""),
        (["{lane:é}:meta", "{lane:日本}:meta"], '{"data":"ü\\u0000"}'),
        (["{lane:q}:meta"], '{"specs":"' + "x" * 100_000 + '"}'),
    ]
    for keys, argv in cases:
        expected = b"".join(packer.pack_command("EVALSHA", sha, len(keys), *keys, argv))
        assert pack_evalsha(sha, keys, argv) == expected
