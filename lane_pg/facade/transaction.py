"""Ambient transactions for after-commit dispatch (TX-3..10, TX-12, TX-14).

    async with lane_pg.transaction(conn):          # conn: an asyncpg connection
        await conn.execute("INSERT INTO orders ...")
        await Q.push_after_commit(SendReceipt(order_id=7))
        async with lane_pg.transaction(conn):      # nested: a savepoint (TX-6)
            ...

``transaction(conn)`` opens a transaction on ``conn`` (a savepoint when one of lane_pg's is
already open on it) and makes it the task's ambient transaction (a contextvar, so tasks
started inside inherit it). A push that defers (``Job.after_commit``, a per-push
``after_commit=True``, ``LANE_PG_AFTER_COMMIT``) is resolved at once (so an unknown
connection raises inside the block, TX-14) and registered here; the block's commit runs
it, its rollback discards it and gives back any unique lock it took (TX-4, TX-10). A
savepoint that rolls back discards what was registered since it opened; one that is
released hands its pushes to the enclosing level. A transaction lane_pg does not track (a
raw ``BEGIN``) is no ambient transaction: pushes inside it happen at once (TX-12).

Supported connections: asyncpg ``Connection`` and psycopg ``AsyncConnection`` (anything
whose ``transaction()`` is an async context manager that nests as a savepoint) with
``async with``; a psycopg ``Connection`` with ``with``, for the sync pushes
(``lane_pg.facade.blocking``). A psycopg
connection should be in autocommit mode, as psycopg recommends for ``transaction()``
blocks. The outermost level must really begin the transaction: opening one on a
connection already inside a transaction lane_pg did not open raises ``ConfigurationError``
(its "commit" would only release a savepoint, and deferred pushes would run before the
data is committed). SQLAlchemy sessions are not tracked (their pushes are immediate,
TX-12).
"""

from __future__ import annotations

import contextvars
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from types import TracebackType
from typing import Any

from lane_pg.errors import ConfigurationError
from lane_pg.facade.blocking import run_blocking

log = logging.getLogger("lane_pg.facade")

_AMBIENT: contextvars.ContextVar[Transaction | None] = contextvars.ContextVar(
    "lane_pg_ambient_transaction", default=None
)


@dataclass(slots=True)
class Deferred:
    """One push waiting for the commit: ``run`` writes it (and emits its events), ``discard``
    gives back what it took at push time (a unique lock) when it never runs."""

    run: Callable[[], Awaitable[None]]
    discard: Callable[[], Awaitable[None]]
    what: str


async def _nothing() -> None:
    return None


class Transaction:
    """One level of a tracked transaction: the outermost one, or a savepoint in it."""

    def __init__(self, conn: Any) -> None:
        begin = getattr(conn, "transaction", None)
        if not callable(begin):
            raise TypeError(
                "lane_pg.transaction takes an asyncpg Connection or a psycopg (Async)Connection"
                f" (SQLAlchemy connections are not tracked), got {conn!r}"
            )
        self.conn = conn
        self.parent: Transaction | None = None
        self.pending: list[Deferred] = []
        self.identities: dict[int, bool] = {}
        """Per driver id: whether the driver writes to this transaction's database (A24)."""
        self.prepared: set[tuple[int, str]] = set()
        """(driver id, queue) known to exist outside the transaction (A24 writes)."""
        self._native: Any = None
        self._token: contextvars.Token[Transaction | None] | None = None

    @property
    def root(self) -> Transaction:
        level = self
        while level.parent is not None:
            level = level.parent
        return level

    def defer(self, item: Deferred) -> None:
        self.pending.append(item)

    async def __aenter__(self) -> Transaction:
        self._begin()
        await self._native.__aenter__()
        self._token = _AMBIENT.set(self)
        return self

    def _begin(self) -> None:
        outer = _AMBIENT.get()
        if outer is not None and outer.root.conn is self.conn:
            self.parent = outer
            self.identities = outer.root.identities
            self.prepared = outer.root.prepared
        elif _in_transaction(self.conn):
            raise ConfigurationError(
                "lane_pg.transaction: the connection is already inside a transaction lane_pg"
                " did not open, so this block's end would not commit it; open the outermost"
                " transaction with lane_pg.transaction (psycopg: use autocommit=True)"
            )
        self._native = self.conn.transaction()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        assert self._token is not None
        _AMBIENT.reset(self._token)
        try:
            await self._native.__aexit__(exc_type, exc, tb)  # commits, releases or rolls back
        except BaseException:
            # A refused COMMIT (a deferred constraint, a lost connection): nothing was
            # committed, so nothing deferred may run (TX-10).
            await self._discard()
            raise
        await self._ended(committed=exc is None)

    def __enter__(self) -> Transaction:
        """The block on a synchronous connection (a psycopg ``Connection``), for the sync
        pushes (``Q.push_sync``): deferred pushes run on their loop once it committed."""
        self._begin()
        self._native.__enter__()
        self._token = _AMBIENT.set(self)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        assert self._token is not None
        _AMBIENT.reset(self._token)
        try:
            self._native.__exit__(exc_type, exc, tb)
        except BaseException:
            run_blocking(self._discard())  # as in __aexit__
            raise
        run_blocking(self._ended(committed=exc is None))

    async def _ended(self, *, committed: bool) -> None:
        """After the native block ended: a rollback drops what was deferred (TX-4), a
        released savepoint hands it to the enclosing level (TX-6), the outermost commit
        runs it."""
        if not committed:
            await self._discard()
        elif self.parent is not None:
            self.parent.pending.extend(self.pending)
            self.pending = []
        else:
            await self._run()

    async def _discard(self) -> None:
        items, self.pending = self.pending, []
        for item in items:
            try:
                await item.discard()
            except Exception:
                # The lock then ends at its TTL; the rollback itself is not undone.
                log.exception("could not give back what %s took at push time", item.what)

    async def _run(self) -> None:
        """The deferred pushes, in push order, after the commit. One that fails gives back
        its lock and is logged; the first failure is raised once all ran (the data is
        committed, so the caller must learn that a push is missing)."""
        items, self.pending = self.pending, []
        first: Exception | None = None
        for item in items:
            try:
                await item.run()
            except Exception as exc:
                log.exception("the after-commit push of %s failed", item.what)
                first = first or exc
                try:
                    await item.discard()
                except Exception:
                    log.exception("could not give back what %s took at push time", item.what)
        if first is not None:
            raise first


def _in_transaction(conn: Any) -> bool:
    """Whether ``conn`` is inside a transaction already: asyncpg's ``is_in_transaction()``,
    psycopg's ``info.transaction_status`` (IDLE is 0)."""
    check = getattr(conn, "is_in_transaction", None)
    if callable(check):
        return bool(check())
    status = getattr(getattr(conn, "info", None), "transaction_status", None)
    return status is not None and int(status) != 0


def transaction(conn: Any) -> Transaction:
    """Open a tracked transaction (or, nested on the same connection, a savepoint) on
    ``conn`` for ``async with`` (a psycopg sync ``Connection``: ``with``)."""
    return Transaction(conn)


def current_transaction() -> Transaction | None:
    """The task's innermost tracked transaction, or None."""
    return _AMBIENT.get()


DISCARD_NOTHING = _nothing
