"""The facade's drivers that are not a plain backend (``BackendDriver`` is in
``lane_pg.facade.driver``): ``sync`` runs a push inline, ``null`` discards it, and
``FailoverDriver`` tries a list of connections in order (FOV).

The ``local`` driver (DRV-2: a memory store persisted as a JSON snapshot) is not shipped
yet: ``LANE_PG_DRIVER=local`` is a ``ConfigurationError`` saying so.
"""

from __future__ import annotations

from lane_pg.facade.drivers.failover import FailoverDriver, is_unavailable
from lane_pg.facade.drivers.null import NullDriver
from lane_pg.facade.drivers.sync import SyncDriver

__all__ = ["FailoverDriver", "NullDriver", "SyncDriver", "is_unavailable"]
