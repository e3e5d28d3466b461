"""The facade's drivers beside ``BackendDriver`` (``lane_pg.facade.driver``): ``sync`` runs
a push inline, ``null`` discards it, ``FailoverDriver`` tries a list of connections in
order (FOV), and ``LocalBackend`` is the store of the ``local`` driver (a memory store
persisted as a JSON snapshot, DRV-2), driven by a ``BackendDriver`` like any backend.
"""

from __future__ import annotations

from lane_pg.facade.drivers.failover import FailoverDriver, is_unavailable
from lane_pg.facade.drivers.local import LocalBackend
from lane_pg.facade.drivers.null import NullDriver
from lane_pg.facade.drivers.sync import SyncDriver

__all__ = ["FailoverDriver", "LocalBackend", "NullDriver", "SyncDriver", "is_unavailable"]
