"""The web dashboard (``pip install 'lane_pg[web]'``): ``python -m lane_pg dashboard``, or
``create_app(...)`` mounted in your own Starlette or FastAPI app.

It reads and acts only through the backend contract, so every backend serves it. See
``lane_pg.dashboard.app`` for the pages and actions and ``lane_pg.dashboard.access`` for
who may do what.
"""

from __future__ import annotations

from lane_pg.dashboard.access import (
    ACTIONS,
    AccessHook,
    Grant,
    environment_access,
    full_access,
    read_only,
    read_only_access,
)
from lane_pg.dashboard.app import DataFormatter, create_app

__all__ = [
    "ACTIONS",
    "AccessHook",
    "DataFormatter",
    "Grant",
    "create_app",
    "environment_access",
    "full_access",
    "read_only",
    "read_only_access",
]
