"""The worker's dedicated LISTEN connection: wake-ups and reconnects (a ``WakeupSource``).

NOTIFY only makes a worker react sooner: the worker also polls at a slow interval, so a
notification lost while this connection was down costs latency, never a job (CLAIM-12).
After every reconnect the notifier wakes the worker once, to cover that gap at once.

It holds nothing else: the maintenance leader is a lease in ``lane.leaders``
(``lane_pg.postgres.leader``). A session advisory lock on this connection, as before,
stayed held by a leader frozen by SIGSTOP, and nobody recovered stalled jobs.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Collection

import asyncpg

from lane_pg.postgres.pooler import target_of
from lane_pg.postgres.schema import validate_schema_name
from lane_pg.types.workers import jittered

log = logging.getLogger("lane_pg.notifier")

_RECONNECT_MIN = 0.05
_RECONNECT_MAX = 5.0


class Notifier:
    """Wakes a worker when one of its queues may have work."""

    def __init__(
        self,
        dsn: str,
        *,
        schema: str = "lane",
        queues: Collection[str] | None = None,
        application_name: str = "lane_pg listener",
        health_interval: float = 5.0,
    ) -> None:
        self._dsn = dsn
        self._schema = validate_schema_name(schema)
        self._channel = f"{self._schema}.jobs"
        self._queues = None if queues is None else frozenset(queues)
        self._application_name = application_name[:63]
        self._health_interval = health_interval
        self._wake = asyncio.Event()
        self._conn: asyncpg.Connection | None = None
        self._lost = asyncio.Event()
        self._supervisor: asyncio.Task[None] | None = None
        self._closing = False
        self.reconnects = 0
        """How many times the connection was re-established (for tests and logs)."""

    async def start(self) -> None:
        """Connect (raising if the database is unreachable) and start supervising."""
        await self._connect()
        self._supervisor = asyncio.create_task(self._supervise(), name="lane_pg-notifier")

    async def close(self) -> None:
        self._closing = True
        if self._supervisor is not None:
            self._supervisor.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._supervisor
        await self._drop_connection()

    def wake(self) -> None:
        """Wake the waiting worker from inside the process (a slot freed, a stop)."""
        self._wake.set()

    async def wait(self, timeout: float | None) -> bool:  # noqa: ASYNC109 (bounded poll)
        """Wait for a wake-up or ``timeout`` seconds; True when woken."""
        # asyncio.timeout, not wait_for: wait_for wraps the wait in a task of its own, one
        # more event-loop turn between the NOTIFY and the claim (W4 latency).
        try:
            async with asyncio.timeout(timeout):
                await self._wake.wait()
        except TimeoutError:
            return False
        finally:
            self._wake.clear()
        return True

    # ----------------------------------------------------------------- internals
    def _on_notify(self, _conn: object, _pid: int, _channel: str, payload: object) -> None:
        if self._queues is None or payload in self._queues:
            self._wake.set()

    def _on_termination(self, _conn: object) -> None:
        self._lost.set()

    async def _connect(self) -> None:
        target = target_of(self._dsn)
        conn = await asyncpg.connect(
            target.dsn,
            server_settings={"application_name": self._application_name},
            **target.asyncpg_options(),
        )
        conn.add_termination_listener(self._on_termination)
        await conn.add_listener(self._channel, self._on_notify)
        self._conn = conn
        self._lost.clear()

    async def _drop_connection(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None and not conn.is_closed():
            with contextlib.suppress(Exception):
                await asyncio.wait_for(conn.close(), 2.0)

    async def _healthy(self) -> bool:
        conn = self._conn
        if conn is None or conn.is_closed():
            return False
        try:
            await conn.fetchval("SELECT 1", timeout=self._health_interval)
        except (asyncpg.PostgresError, OSError, asyncpg.InterfaceError, TimeoutError):
            return False
        return True

    async def _supervise(self) -> None:
        """Check the connection; replace it with backoff when it is gone or unhealthy."""
        while not self._closing:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self._health_interval):  # wait_for may swallow a cancel
                    await self._lost.wait()
            if await self._healthy():
                continue
            log.warning("LISTEN connection lost; reconnecting")
            await self._drop_connection()
            delay = _RECONNECT_MIN
            failed = 0
            while not self._closing:
                try:
                    await self._connect()
                except (asyncpg.PostgresError, OSError, asyncpg.InterfaceError) as exc:
                    # Once per outage as a warning, not once per attempt.
                    failed += 1
                    log.log(
                        logging.WARNING if failed == 1 else logging.DEBUG,
                        "LISTEN reconnect failed (%s); retrying with backoff, now in %.2fs",
                        exc,
                        delay,
                    )
                    await asyncio.sleep(jittered(delay))
                    delay = min(delay * 2, _RECONNECT_MAX)
                    continue
                self.reconnects += 1
                log.info("LISTEN connection re-established after %d failed attempts", failed)
                # Notifications sent while we were away are gone: look for work now.
                self._wake.set()
                break
