"""The worker test app (``tests.worker.apps:app``) for failover connections, configured at
import as an application module would.

``LANE_PG_TEST_DEBUG_LOGGERS=a,b`` logs those loggers at DEBUG (the CLI logs WARNING and up
only), so a test can count a connection's retries on stderr. ``LANE_PG_TEST_LEGACY_FAILOVER
=1`` registers the connection ``legacy-failover``: the PostgreSQL of ``$LANE_PG_DSN`` and a
third-party driver that cannot claim from named queues only (FOV-8)."""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence

from lane_pg import Q
from lane_pg.facade import BackendDriver, DriverBase, FailoverDriver, Reservation
from tests.worker.apps import app

DEBUG_LOGGERS_ENV = "LANE_PG_TEST_DEBUG_LOGGERS"
LEGACY_FAILOVER_ENV = "LANE_PG_TEST_LEGACY_FAILOVER"


class PopsEverything(DriverBase):
    """A third-party driver whose pop cannot filter by queue (it never has a job)."""

    async def pop(self) -> Reservation | None:
        return None

    async def pop_from(self, queues: Sequence[str]) -> Reservation | None:
        raise AssertionError("a failover worker must not claim from a non-filtering driver")


for _name in filter(None, os.environ.get(DEBUG_LOGGERS_ENV, "").split(",")):
    logging.getLogger(_name).setLevel(logging.DEBUG)

if os.environ.get(LEGACY_FAILOVER_ENV) == "1":
    _primary = BackendDriver.lazy(os.environ["LANE_PG_DSN"], "postgres")
    Q.set_driver(_primary, name="postgres")
    Q.register_connection(
        "legacy-failover", FailoverDriver([("primary", _primary), ("legacy", PopsEverything())])
    )

__all__ = ["DEBUG_LOGGERS_ENV", "LEGACY_FAILOVER_ENV", "app"]
