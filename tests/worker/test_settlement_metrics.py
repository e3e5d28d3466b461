"""OBS-7: an outcome whose write raises is counted (``lane_pg_settlement_failures_total``)
by operation, job name and what it meant, and the job stays to come back."""

from __future__ import annotations

import asyncio
from typing import Any

from prometheus_client import CollectorRegistry

from lane_pg.memory import MemoryBackend
from lane_pg.types import JSON, JobRow, Lane
from lane_pg.worker import JobContext, Worker, WorkerConfig
from lane_pg.worker.pausing import WorkerHooks
from lane_pg.worker.prometheus import MetricsHooks, WorkerMetrics


class _Runs:
    """The memory backend's ``runs``, whose first ``complete_jobs`` raises: a write lost to
    a dropped connection, as the worker meets it."""

    def __init__(self, runs: Any) -> None:
        self._runs = runs
        self.failed_once = False

    def __getattr__(self, name: str) -> Any:
        return getattr(self._runs, name)

    async def complete_jobs(self, *args: Any, **kwargs: Any) -> Any:
        if not self.failed_once:
            self.failed_once = True
            raise ConnectionError("connection lost while writing")
        return await self._runs.complete_jobs(*args, **kwargs)


class _Backend:
    def __init__(self, backend: MemoryBackend) -> None:
        self._backend = backend
        self.runs = _Runs(backend.runs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._backend, name)


async def test_a_lost_completion_write_is_counted_OBS_7() -> None:
    memory = MemoryBackend()
    backend = _Backend(memory)
    registry = CollectorRegistry()
    hooks = MetricsHooks(WorkerHooks(), WorkerMetrics(registry))
    job = await memory.add_job("q", "charge")

    async def charge(job: JobRow, ctx: JobContext) -> JSON:
        return "ok"

    worker = Worker(
        backend,  # type: ignore[arg-type]
        {"charge": charge},
        WorkerConfig(lanes=(Lane("q"),), poll_interval=0.05, burst=True, lease=0.2),
        hooks=hooks,
    )
    await asyncio.wait_for(worker.run(), 30)

    def value(name: str, **labels: str) -> float | None:
        return registry.get_sample_value(name, labels)

    assert (
        value("lane_pg_settlement_failures_total", operation="ack", job="charge", outcome="success")
        == 1
    )
    stored = await memory.get_job("q", job.id)
    assert stored is not None and stored.state == "active"  # back after its lease, not lost
    await memory.close()
