"""A job class with a plain ``def handle`` runs in the worker's thread pool, with
``current_context()`` the blocking ``SyncJobContext`` of its thread."""

from __future__ import annotations

import asyncio
import threading
from dataclasses import dataclass

from lane_pg.backend import JobQueueBackend
from lane_pg.facade import Job, JobProcessed, QueueFacade, run_worker
from lane_pg.facade.job import current_context
from lane_pg.types import Lane
from lane_pg.worker import WorkerConfig

THREADS: list[str] = []


@dataclass
class Resize(Job):
    job_name = "Resize"
    width: int

    def handle(self) -> dict[str, int]:
        THREADS.append(threading.current_thread().name)
        current_context().update_progress({"width": self.width})  # blocks, from the thread
        return {"width": self.width}


async def test_a_def_handle_runs_once_in_a_thread(
    facade: QueueFacade, backend: JobQueueBackend, queue_name: str
) -> None:
    THREADS.clear()
    facade.registry.register(Resize)
    facade.route(Resize, queue=queue_name)
    processed: list[JobProcessed] = []
    facade.events.listen(JobProcessed, processed.append)
    job_id = await facade.push(Resize(width=640))
    config = WorkerConfig(lanes=(Lane(queue_name),), poll_interval=0.05, burst=True)
    worker = await asyncio.wait_for(run_worker(config=config, facade=facade), 20)
    row = await backend.get_job(queue_name, job_id)
    assert row is not None
    assert (row.state, row.return_value, row.progress) == (
        "completed",
        {"width": 640},
        {"width": 640},
    )
    assert worker.counts["completed"] == 1 and len(processed) == 1
    assert len(THREADS) == 1 and THREADS[0].startswith("lane_pg-sync")
