"""A DSN through a connection pooler in transaction mode (PgBouncer, Odyssey, PgCat, ...).

``?pooler=transaction`` on a PostgreSQL URL says the server end of each transaction may be
any of the pooler's server connections, so nothing may outlive a transaction on one:

- statements are not prepared by name: asyncpg's statement cache is off (its unnamed
  statements need no server state between transactions) and psycopg prepares nothing;
- no LISTEN goes through it (a notification reaches whichever client holds that server
  connection next, or none): the worker listens on ``$LANE_PG_LISTEN_DSN`` (or
  ``listen_dsn=``), a direct connection to the server, and polls when none is given.

Everything else lane_pg sends is one autocommit statement or one transaction (the leader
is a lease row, locks are transaction-scoped), which a transaction pooler carries as is.
``?pooler=session`` (a session pooler, or none) keeps the defaults.

``?pool_size=N`` caps the connections of a process's pool (default 10): with the worker's
claim and LISTEN connections, a worker process holds at most N + 2 (docs/operations.md,
"Connections"). Both parameters are lane_pg's: they are taken out of the URL before a
driver sees them.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from lane_pg.errors import ConfigurationError

__all__ = ["LISTEN_DSN_VARIABLE", "POOLER_MODES", "Target", "listen_dsn_of", "target_of"]

POOLER_PARAMETER = "pooler"
POOL_SIZE_PARAMETER = "pool_size"
POOLER_MODES = ("transaction", "session")
LISTEN_DSN_VARIABLE = "LANE_PG_LISTEN_DSN"
"""The environment variable naming a direct DSN for the worker's LISTEN connection."""


@dataclass(frozen=True, slots=True)
class Target:
    """A PostgreSQL URL as its driver gets it, and whether a transaction pooler serves it."""

    dsn: str
    transaction_pooler: bool
    pool_size: int | None = None
    """The DSN's cap on a pool's connections, if it gives one."""

    def asyncpg_options(self) -> dict[str, Any]:
        """asyncpg ``connect``/``create_pool`` keywords: no statement cache behind a pooler."""
        return {"statement_cache_size": 0} if self.transaction_pooler else {}

    def psycopg_options(self) -> dict[str, Any]:
        """psycopg ``connect`` keywords: no automatic prepare behind a pooler."""
        return {"prepare_threshold": None} if self.transaction_pooler else {}


def target_of(dsn: str) -> Target:
    """``dsn`` without lane_pg's ``pooler`` and ``pool_size`` parameters, and what they
    said; a ``ConfigurationError`` for a pooler other than ``transaction`` or ``session``
    or a pool size that is not a positive integer."""
    if "://" not in dsn or "?" not in dsn:
        return Target(dsn, False)
    parts = urlsplit(dsn)
    query = parse_qsl(parts.query, keep_blank_values=True)
    ours = {POOLER_PARAMETER, POOL_SIZE_PARAMETER}
    given = {name: value for name, value in query if name in ours}
    if not given:
        return Target(dsn, False)
    mode = given.get(POOLER_PARAMETER, "session")
    if mode not in POOLER_MODES:
        raise ConfigurationError(
            f"pooler={mode!r} in the DSN: expected one of {', '.join(POOLER_MODES)}"
            " (transaction: a PgBouncer-style pool in transaction mode)"
        )
    size = given.get(POOL_SIZE_PARAMETER)
    if size is not None and not (size.isdigit() and int(size) >= 1):
        raise ConfigurationError(
            f"pool_size={size!r} in the DSN: expected a whole number of connections, at least 1"
        )
    rest = urlencode([(name, value) for name, value in query if name not in ours])
    return Target(
        urlunsplit(parts._replace(query=rest)),
        mode == "transaction",
        None if size is None else int(size),
    )


def listen_dsn_of(dsn: str, given: str | None) -> str | None:
    """Where the worker's LISTEN connection goes: ``given``, else ``$LANE_PG_LISTEN_DSN``,
    else ``dsn`` itself unless a transaction pooler serves it (then None: the worker
    polls)."""
    chosen = given or os.environ.get(LISTEN_DSN_VARIABLE) or None
    if chosen is not None:
        if target_of(chosen).transaction_pooler:
            raise ConfigurationError(
                "the LISTEN DSN names a transaction pooler (pooler=transaction): LISTEN needs"
                " a direct connection to the server (or a session pooler)"
            )
        return chosen
    return None if target_of(dsn).transaction_pooler else dsn
