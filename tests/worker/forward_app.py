"""The worker test app (``tests.worker.apps:app``) with a facade forward configured at
import, as an application module would: ``LANE_PG_TEST_FORWARD=SRC:DST`` runs
``Q.forward(SRC, DST)`` (ROUTE-5, PAUSE-8)."""

from __future__ import annotations

import os

from lane_pg import Q
from tests.worker.apps import app

FORWARD_ENV = "LANE_PG_TEST_FORWARD"

_source, _, _destination = os.environ.get(FORWARD_ENV, "").partition(":")
if _source and _destination:
    Q.forward(_source, _destination)

__all__ = ["FORWARD_ENV", "app"]
