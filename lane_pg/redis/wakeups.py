"""Waking idle workers on Redis (a ``WakeupSource``): ``BZPOPMIN`` on the queues' markers.

A script that makes a job ready adds the member ``0`` at score 0 to its queue's marker set
unless the queue is paused or at its max-active ceiling, and one that stores a delayed job
sets the member ``1`` to the earliest due time (``lane_wake`` and ``lane_wake_at`` in
``lua/includes/events.lua``); either wakes a blocked claimer at once. A worker with nothing
to do blocks on the markers of its queues on a connection of its own. ``BZPOPMIN`` hands a
marker to one blocked worker only, unlike PostgreSQL's NOTIFY, which reaches every
listener; so a claim that leaves jobs behind adds the marker again (``claim_jobs.lua``),
waking the next idle worker in turn, and a marker popped when nobody in this process was
waiting any more (the worker found work meanwhile) is put back for another worker.

Only a speed-up, as LISTEN is: the worker also polls, so a lost wake-up costs latency, never
a job. The connection's socket timeout exceeds the block window: with a shorter one the
client gives up on a healthy blocked call (redis-py #2807). A lost connection is replaced
with backoff and jitter, and the worker is woken once after each reconnect to cover the gap.

On a Redis Cluster one ``BZPOPMIN`` may only name keys of one slot, so the markers are
grouped by slot and each group blocks on a connection of its own to the slot's node: a
worker of two queues in two slots holds two blocked connections and wakes for either. A
worker whose queues span more than ``MAX_BLOCKED_SLOTS`` slots does not block (that many
connections per worker would crowd the nodes): it says so once in the log and polls.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from redis.asyncio import ConnectionPool, Redis
from redis.asyncio.cluster import RedisCluster
from redis.crc import key_slot
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import MovedError, RedisError
from redis.exceptions import TimeoutError as RedisTimeoutError

if TYPE_CHECKING:
    from lane_pg.redis.backend import RedisBackend

log = logging.getLogger("lane_pg.redis.wakeups")

_RECONNECT_MIN = 0.05
_RECONNECT_MAX = 5.0
_SOCKET_MARGIN = 5.0
"""Seconds the socket timeout exceeds the block window by."""
MAX_BLOCKED_SLOTS = 16
"""On a cluster, the most slots a worker blocks on (one connection each); beyond, it polls."""


class RedisWakeups:
    """Wakes a worker when one of its queues (every queue when None) may have work."""

    def __init__(
        self,
        backend: RedisBackend,
        queues: Sequence[str] | None,
        *,
        name: str,
        block: float = 5.0,
    ) -> None:
        self._backend = backend
        self._queues = None if queues is None else list(dict.fromkeys(queues))
        self._name = name
        self._block = max(block, 0.1)
        self._wake = asyncio.Event()
        self._waiters = 0
        self._someone_waits = asyncio.Event()
        self._client: Redis | None = None
        self._task: asyncio.Task[None] | None = None
        self._closing = False
        self._slots: dict[int, list[str]] = {}
        """On a cluster: the markers of each slot blocked on."""
        self._polling = False
        self.reconnects = 0
        """How many times the blocking connection was replaced (for tests and logs)."""

    def _open(self) -> Redis:
        """A client of one connection to the backend's server, its socket timeout past
        the block window."""
        client = self._backend.client
        if isinstance(client, RedisCluster):
            raise TypeError("a cluster's wake-ups block per slot (_open_slot)")
        pool = client.connection_pool
        return self._one_connection(pool.connection_class, pool.connection_kwargs)

    def _open_slot(self, slot: int) -> Redis:
        """A client of one connection to the node that serves ``slot`` now."""
        client = self._backend.client
        assert isinstance(client, RedisCluster)
        node = client.nodes_manager.get_node_from_slot(slot)
        return self._one_connection(node.connection_class, node.connection_kwargs)

    def _one_connection(self, connection_class: Any, connection_kwargs: dict[str, Any]) -> Redis:
        kwargs: dict[str, Any] = dict(connection_kwargs)
        kwargs["socket_timeout"] = self._block + _SOCKET_MARGIN
        kwargs["client_name"] = self._name.replace(" ", "_")[:60]
        return Redis(
            connection_pool=ConnectionPool(
                connection_class=connection_class, max_connections=1, **kwargs
            )
        )

    async def start(self) -> None:
        """Connect (raising when Redis is unreachable) and start the blocking loop."""
        if self._backend.cluster:
            await self._backend.client.ping()
            self._task = asyncio.create_task(self._serve_cluster(), name="lane_pg-redis-wakeups")
            return
        client = self._open()
        try:
            await client.ping()
        except BaseException:
            await _discard(client)
            raise
        self._client = client
        self._task = asyncio.create_task(self._serve(), name="lane_pg-redis-wakeups")

    async def close(self) -> None:
        self._closing = True
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        if self._client is not None:
            await _discard(self._client)
            self._client = None

    def wake(self) -> None:
        """Wake the waiting worker from inside the process (a slot freed, a stop)."""
        self._wake.set()

    async def wait(self, timeout: float | None) -> bool:  # noqa: ASYNC109 (bounded poll)
        """Wait for a wake-up or ``timeout`` seconds; True when woken."""
        self._waiters += 1
        self._someone_waits.set()
        try:
            async with asyncio.timeout(timeout):
                await self._wake.wait()
        except TimeoutError:
            return False
        finally:
            self._waiters -= 1
            if self._waiters == 0:
                self._someone_waits.clear()
            self._wake.clear()
        return True

    async def _markers(self) -> list[str]:
        backend = self._backend
        queues = self._queues
        if queues is None:
            members: Any = await backend.client.smembers(backend.queues_key)
            queues = sorted(m.decode() if isinstance(m, bytes) else m for m in members)
        return [backend.keys(queue).marker for queue in queues]

    async def _serve(self) -> None:
        delay = _RECONNECT_MIN
        while not self._closing:
            await self._someone_waits.wait()  # block only for a worker that waits
            try:
                markers = await self._markers()
                if not markers:
                    await asyncio.sleep(self._block)
                    continue
                assert self._client is not None
                popped: Any = await self._client.bzpopmin(markers, timeout=self._block)
                delay = _RECONNECT_MIN
            except (RedisConnectionError, RedisTimeoutError, OSError) as exc:
                delay = await self._reconnect(exc, delay)
                continue
            if popped is not None:
                await self._popped(popped)

    async def _popped(self, popped: Any) -> None:
        """Wake the waiting worker, or put the marker back when none waits any more."""
        if self._waiters > 0:
            self._wake.set()
            # Let the woken worker send its claim before this loop sends the next
            # BZPOPMIN: it used to go first (MONITOR: the claim arrived after it), and a
            # send on this 2-vCPU VM costs 0.1-0.25 ms of the job's wait (cProfile).
            await asyncio.sleep(0)
        else:  # found work meanwhile: leave the wake-up to another idle worker
            key, member, score = popped
            with contextlib.suppress(RedisConnectionError, RedisTimeoutError, OSError):
                # NX: the set may hold the member again (a newer earliest due time).
                await self._backend.client.zadd(key, {member: score}, nx=True)

    async def _serve_cluster(self) -> None:
        """Keep one blocking loop per slot of the markers (the set of queues, when the
        worker takes every queue, read again each block window)."""
        tasks: dict[int, asyncio.Task[None]] = {}
        try:
            while not self._closing:
                await self._someone_waits.wait()
                try:
                    markers = await self._markers()
                except (RedisError, OSError) as exc:
                    log.warning("Redis wake-ups: cannot read the queues (%s)", exc)
                    markers = [m for group in self._slots.values() for m in group]
                slots: dict[int, list[str]] = {}
                for marker in markers:
                    slots.setdefault(key_slot(marker.encode()), []).append(marker)
                if len(slots) > MAX_BLOCKED_SLOTS:
                    if not self._polling:
                        log.warning(
                            "Redis Cluster wake-ups: the queues of %s span %d slots (more"
                            " than %d): this worker polls for jobs instead of blocking",
                            self._name,
                            len(slots),
                            MAX_BLOCKED_SLOTS,
                        )
                    self._polling = True
                    slots = {}
                else:
                    self._polling = False
                self._slots = slots
                for slot in [slot for slot in tasks if slot not in slots]:
                    tasks.pop(slot).cancel()
                for slot in slots:
                    if slot not in tasks or tasks[slot].done():
                        tasks[slot] = asyncio.create_task(
                            self._serve_slot(slot), name=f"lane_pg-redis-wakeups-{slot}"
                        )
                await asyncio.sleep(self._block)
        finally:
            for task in tasks.values():
                task.cancel()
            for task in tasks.values():
                with contextlib.suppress(asyncio.CancelledError):
                    await task

    async def _refresh_slots(self) -> None:
        """Read the cluster's slot map again (the client learns it from its own MOVED
        answers only, and this connection's are not the client's)."""
        client = self._backend.client
        assert isinstance(client, RedisCluster)
        with contextlib.suppress(RedisError, OSError):
            await client.nodes_manager.initialize()

    async def _serve_slot(self, slot: int) -> None:
        """``BZPOPMIN`` on the markers of ``slot`` while it is wanted; a lost connection,
        or a slot moved to another node (MOVED), is replaced as ``_serve``'s is."""
        client: Redis | None = None
        delay = _RECONNECT_MIN
        try:
            while not self._closing:
                await self._someone_waits.wait()
                markers = self._slots.get(slot)
                if not markers:
                    return
                try:
                    if client is None:
                        client = self._open_slot(slot)
                    popped: Any = await client.bzpopmin(markers, timeout=self._block)
                    delay = _RECONNECT_MIN
                except (RedisError, OSError) as exc:
                    log.warning(
                        "Redis wake-up connection of slot %d lost (%s); reconnecting in %.2fs",
                        slot,
                        exc,
                        delay,
                    )
                    if client is not None:
                        await _discard(client)
                        client = None
                    if isinstance(exc, MovedError):  # resharded: learn the slot's new node
                        await self._refresh_slots()
                    await asyncio.sleep(delay * random.uniform(0.5, 1.5))
                    delay = min(delay * 2, _RECONNECT_MAX)
                    self.reconnects += 1
                    self._wake.set()  # cover what may have been missed while it was down
                    continue
                if popped is not None:
                    await self._popped(popped)
        finally:
            if client is not None:
                await _discard(client)

    async def _reconnect(self, exc: BaseException, delay: float) -> float:
        """Replace the blocking connection after ``delay`` (with jitter); the next delay."""
        log.warning("Redis wake-up connection lost (%s); reconnecting in %.2fs", exc, delay)
        old, self._client = self._client, None
        if old is not None:
            await _discard(old)
        await asyncio.sleep(delay * random.uniform(0.5, 1.5))
        self._client = self._open()
        self.reconnects += 1
        self._wake.set()  # cover what may have been missed while it was down
        return min(delay * 2, _RECONNECT_MAX)


async def _discard(client: Redis) -> None:
    """Close the client and its one connection, also one blocked in BZPOPMIN (a client
    given a pool leaves the pool open on ``aclose``)."""
    with contextlib.suppress(Exception):
        await client.aclose()
        await client.connection_pool.disconnect()
