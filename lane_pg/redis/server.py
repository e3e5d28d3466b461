"""Connecting to Redis and the checks a server must pass before lane_pg writes to it.

* ``maxmemory-policy`` must be ``noeviction``: under any other policy Redis deletes keys
  when memory runs short, and an evicted queue key is jobs lost without a trace (bullmq
  #419, #2215). With ``noeviction`` a full server refuses writes instead, which lane_pg
  reports as errors.
* The server must be at least ``MIN_VERSION``, which the scripts need.

On a Redis Cluster (``redis+cluster://``) every master is checked, each refusal naming its
node: a queue's keys live on one master, and one evicting master loses that queue's jobs.
A cluster node reached through a plain ``redis://`` URL is refused: that client cannot
follow the cluster's redirections (MOVED) to the other nodes' slots.

Durability is the server's setting, not lane_pg's: with ``appendonly yes`` and
``appendfsync everysec`` a crash can lose about the last second of writes (jobs added or
settled then); ``appendfsync always`` loses none and costs a disk sync per write; without
AOF (RDB snapshots only, or nothing) a restart loses everything since the last snapshot.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, TypeAlias, TypeVar

from redis.asyncio import BlockingConnectionPool, Redis
from redis.asyncio.cluster import ClusterNode, RedisCluster
from redis.exceptions import RedisClusterException, ResponseError

from lane_pg.errors import ConfigurationError

RedisClient: TypeAlias = Redis | RedisCluster
"""A client of one server, or of a cluster (which routes each key to its slot's node)."""

_C = TypeVar("_C", Redis, RedisCluster)

CLUSTER_CONNECTIONS = 100
"""Connections per cluster node at least (the cluster client's pool raises beyond it
rather than wait, so it is sized past what one process's calls hold at once)."""

MIN_VERSION = (6, 2)
"""Redis 6.2: ``ZRANGE ... BYSCORE LIMIT``, ``GETDEL`` and ``XADD ... MINID``."""


@dataclass(frozen=True, slots=True)
class ServerFacts:
    version: tuple[int, ...]
    maxmemory_policy: str
    appendonly: bool
    cluster: bool = False
    """A node of a Redis Cluster (``cluster_enabled``)."""


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


async def server_facts(client: RedisClient, node: ClusterNode | None = None) -> ServerFacts:
    """Version, eviction policy and AOF, from INFO (CONFIG GET may be disabled on a
    managed server; INFO is not); of ``node`` of a cluster client."""
    target: dict[str, Any] = {} if node is None else {"target_nodes": node}
    server = await client.info("server", **target)
    memory = await client.info("memory", **target)
    persistence = await client.info("persistence", **target)
    cluster = await client.info("cluster", **target)
    policy = memory.get("maxmemory_policy")
    if policy is None:  # older INFO: ask CONFIG
        try:
            got = await client.execute_command("CONFIG GET", "maxmemory-policy", **target)
            policy = got.get("maxmemory-policy")
        except ResponseError:
            policy = "unknown"
    return ServerFacts(
        parse_version(str(server["redis_version"])),
        str(policy),
        bool(int(persistence.get("aof_enabled", 0))),
        bool(int(cluster.get("cluster_enabled", 0))),
    )


async def check_server(client: RedisClient) -> ServerFacts:
    """The server's facts (a cluster's first master's); ``ConfigurationError`` saying what
    to change when lane_pg must not use it, or one of a cluster's masters."""
    if not isinstance(client, RedisCluster):
        facts = await server_facts(client)
        reason = refusal(facts)
        if reason is not None:
            raise ConfigurationError(reason)
        if facts.cluster:  # its client would fail on the keys of other nodes' slots
            raise ConfigurationError(
                "this Redis server is a node of a Redis Cluster: connect with"
                " redis+cluster://host:port (rediss+cluster:// for TLS), which follows"
                " each queue to its node"
            )
        return facts
    every: list[ServerFacts] = []
    for node in sorted(client.get_primaries(), key=lambda node: node.name):
        facts = await server_facts(client, node)
        reason = refusal(facts)
        if reason is not None:
            raise ConfigurationError(f"cluster node {node.name}: {reason}")
        every.append(facts)
    if not every:
        raise ConfigurationError("the Redis Cluster has no master serving slots")
    return every[0]


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
    return await _checked(client, check)


async def open_cluster_client(
    url: str, *, connect_timeout: float = 5.0, check: bool = True, max_connections: int = 10
) -> RedisCluster:
    """A client of the Redis Cluster one of whose nodes ``url`` (``redis://host:port``)
    names, every master checked; the caller closes it."""
    client = RedisCluster.from_url(
        url,
        socket_connect_timeout=connect_timeout,
        max_connections=max(max_connections, CLUSTER_CONNECTIONS),
    )
    try:
        await client.initialize()
    except RedisClusterException as exc:
        await client.aclose()
        if "not enabled" in str(exc):
            raise ConfigurationError(
                f"{exc}: this server is not a Redis Cluster node, connect with redis://"
            ) from exc
        raise
    except BaseException:
        await client.aclose()
        raise
    return await _checked(client, check)


async def _checked(client: _C, check: bool) -> _C:
    """``client`` once it answers and (``check``) its server passes, else closed."""
    try:
        await client.ping()
        if check:
            await check_server(client)
    except BaseException:
        await client.aclose()
        raise
    return client
