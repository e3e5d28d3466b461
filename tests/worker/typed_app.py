"""A worker test app of job classes only, no ``App`` and no lanes: ``python -m lane_pg
worker --app tests.worker.typed_app`` serves the queue its class declares,
``<prefix>typed`` (the prefix from ``$LANE_PG_TEST_LANE_PREFIX``, per test)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import ClassVar

from lane_pg import Job, register_job

LANE_PREFIX_ENV = "LANE_PG_TEST_LANE_PREFIX"
PREFIX = os.environ.get(LANE_PREFIX_ENV, "worker_tests.")


@register_job
@dataclass
class TypedRecord(Job):
    job_name: ClassVar[str] = "typed.record"
    queue: ClassVar[str | None] = f"{PREFIX}typed"

    async def handle(self) -> dict[str, bool]:
        return {"handled": True}
