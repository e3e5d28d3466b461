"""``PostgresLeader``: the workers' maintenance leader as a lease in ``lane.leaders``.

Each call is one ``SELECT lane.acquire_leadership(...)`` / ``lane.resign_leadership(...)``
(the rules are in sql/functions/55_leader.sql). The leader used to be the holder of a
session advisory lock on its LISTEN connection: a process frozen by SIGSTOP keeps its
session and so its lock, and nobody recovered stalled jobs. A lease lapses when its holder
stops renewing it, whatever became of the holder's connections.
"""

from __future__ import annotations

from lane_pg.backend.leader import Leader
from lane_pg.postgres.calls import Entity, statement, value
from lane_pg.types import to_millis


class PostgresLeader(Entity, serves=Leader):
    acquire_leadership = statement(
        "SELECT lane.acquire_leadership($1, $2, $3, $4)",
        result=value,
        lease=lambda lease: to_millis(lease, "lease"),
    )
    resign_leadership = statement("SELECT lane.resign_leadership($1, $2)", result=value)
