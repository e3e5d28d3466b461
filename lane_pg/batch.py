"""Batches and chains of typed jobs: ``Q.batch()`` / ``Q.chain()`` build them, and the
callbacks they name are registered here, at boot, where workers import your code::

    class Notify:
        name = "notify"

        async def handle(self, batch: lane_pg.batch.Batch, error: str | None) -> None: ...

    lane_pg.batch.register_callback(Notify())
    batch_id = await Q.batch().add(ImportUser(1)).add(ImportUser(2)).then("notify").dispatch()
"""

from __future__ import annotations

from lane_pg.facade.batches import (
    BatchCallback,
    ChainFailure,
    PendingBatch,
    PendingChain,
    register_callback,
)
from lane_pg.types import Batch

__all__ = [
    "Batch",
    "BatchCallback",
    "ChainFailure",
    "PendingBatch",
    "PendingChain",
    "register_callback",
]
