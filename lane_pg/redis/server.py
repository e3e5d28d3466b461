"""Connecting to Redis and the checks a server must pass before lane_pg writes to it.

* ``maxmemory-policy`` must be ``noeviction``: under any other policy Redis deletes keys
  when memory runs short, and an evicted queue key is jobs lost without a trace (bullmq
  #419, #2215). With ``noeviction`` a full server refuses writes instead, which lane_pg
  reports as errors.
* The server must be at least ``MIN_VERSION``, which the scripts need.

Durability is the server's setting, not lane_pg's: with ``appendonly yes`` and
``appendfsync everysec`` a crash can lose about the last second of writes (jobs added or
settled then); ``appendfsync always`` loses none and costs a disk sync per write; without
AOF (RDB snapshots only, or nothing) a restart loses everything since the last snapshot.
"""

from __future__ import annotations

from dataclasses import dataclass

from redis.asyncio import BlockingConnectionPool, Redis
from redis.exceptions import ResponseError

from lane_pg.errors import ConfigurationError

MIN_VERSION = (6, 2)
"""Redis 6.2: ``ZRANGE ... BYSCORE LIMIT``, ``GETDEL`` and ``XADD ... MINID``."""


@dataclass(frozen=True, slots=True)
class ServerFacts:
    version: tuple[int, ...]
    maxmemory_policy: str
    appendonly: bool


def parse_version(text: str) -> tuple[int, ...]:
    """``"7.0.15"`` as ``(7, 0, 15)``; ``ConfigurationError`` for anything else."""
    try:
        return tuple(int(part) for part in text.strip().split("."))
    except ValueError:
        raise ConfigurationError(f"cannot read the Redis version {text!r}") from None


def refusal(facts: ServerFacts) -> str | None:
    """Why lane_pg must not use this server, or None."""
    if facts.version < MIN_VERSION:
        have = ".".join(map(str, facts.version))
        need = ".".join(map(str, MIN_VERSION))
        return f"Redis {have} is too old: lane_pg's scripts need Redis {need} or newer"
    if facts.maxmemory_policy != "noeviction":
        return (
            f"Redis maxmemory-policy is {facts.maxmemory_policy!r}: set it to 'noeviction'"
            " (CONFIG SET maxmemory-policy noeviction, and in redis.conf), or Redis may"
            " delete queue keys when memory runs short and jobs are lost"
        )
    return None


async def server_facts(client: Redis) -> ServerFacts:
    """Version, eviction policy and AOF, from INFO (CONFIG GET may be disabled on a
    managed server; INFO is not)."""
    server = await client.info("server")
    memory = await client.info("memory")
    persistence = await client.info("persistence")
    policy = memory.get("maxmemory_policy")
    if policy is None:  # older INFO: ask CONFIG
        try:
            policy = (await client.config_get("maxmemory-policy")).get("maxmemory-policy")
        except ResponseError:
            policy = "unknown"
    return ServerFacts(
        parse_version(str(server["redis_version"])),
        str(policy),
        bool(int(persistence.get("aof_enabled", 0))),
    )


async def check_server(client: Redis) -> ServerFacts:
    """The server's facts; ``ConfigurationError`` saying what to change when lane_pg must
    not use it."""
    facts = await server_facts(client)
    reason = refusal(facts)
    if reason is not None:
        raise ConfigurationError(reason)
    return facts


async def open_client(
    url: str, *, connect_timeout: float = 5.0, check: bool = True, max_connections: int = 10
) -> Redis:
    """A client for ``url`` (``redis://host:port/db``), its server checked; the caller
    closes it (``await client.aclose()``). An unreachable server fails within
    ``connect_timeout`` seconds."""
    # A blocking pool: a burst of calls beyond max_connections waits for a free connection
    # (the plain pool raises "Too many connections" instead).
    pool = BlockingConnectionPool.from_url(
        url, socket_connect_timeout=connect_timeout, max_connections=max_connections, timeout=30
    )
    client = Redis.from_pool(pool)
    try:
        await client.ping()
        if check:
            await check_server(client)
    except BaseException:
        await client.aclose()
        raise
    return client
