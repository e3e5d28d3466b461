"""``PostgresLocks``: middleware locks and limiters in ``lane.locks`` / ``lane.limiters``.

Each operation is one ``SELECT lane.<function>(...)`` of sql/functions/57_locks.sql, where
the rules are (MW-3..6, MW-10).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

from lane_pg.backend.locks import Locks
from lane_pg.postgres.arguments import token_text
from lane_pg.postgres.calls import Entity, Rows, statement, value
from lane_pg.types import Duration, to_millis


def _wait(rows: Rows) -> timedelta | None:
    """A function's milliseconds to wait (NULL: no wait) as the declared result."""
    millis = rows[0][0]
    return None if millis is None else timedelta(milliseconds=millis)


def _millis(what: str) -> Callable[[Duration], int]:
    return lambda duration: to_millis(duration, what)


class PostgresLocks(Entity, serves=Locks):
    acquire_lock = statement(
        "SELECT lane.acquire_lock($1, $2, $3, $4::uuid, $5, $6)",
        result=value,
        token=token_text,
        ttl=_millis("ttl"),
    )
    release_lock = statement(
        "SELECT lane.release_lock($1, $2, $3, $4::uuid)", result=value, token=token_text
    )
    hit_rate_limit = statement(
        "SELECT lane.hit_rate_limit($1, $2, $3, $4)", result=_wait, decay=_millis("decay")
    )
    check_throttle = statement("SELECT lane.check_throttle($1, $2)", result=_wait)
    record_throttle_outcome = statement(
        "SELECT lane.record_throttle_outcome($1, $2, $3, $4, $5)",
        result=value,
        decay=_millis("decay"),
    )
