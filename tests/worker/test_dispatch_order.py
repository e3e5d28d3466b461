"""A claimed job's handler starts before the worker's next statement (W4 latency): the
claim loop yields once after starting its jobs, so the handlers' first steps run before
the loop builds and sends its next query (the sleep's next_claim_in, or the next claim).
An order of calls, not a timing."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import lane_pg
from lane_pg.backend import OperationCall
from lane_pg.memory import MemoryBackend


async def test_handlers_start_before_the_next_backend_call_W4(queue_name: str) -> None:
    app = lane_pg.App("memory://")
    calls: list[str] = []
    handled = asyncio.Event()

    @app.processor("send")
    async def send(job: lane_pg.JobRow, ctx: lane_pg.JobContext) -> None:
        calls.append(f"handler {job.id}")
        handled.set()

    try:
        backend = await app.backend()
        assert isinstance(backend, MemoryBackend)

        async def record(call: OperationCall, proceed: Callable[[], Awaitable[Any]]) -> Any:
            if call.operation.name == "next_claim_in":
                calls.append("next_claim_in")
            result = await proceed()
            if call.operation.name == "claim_jobs":
                calls.append(f"claim {[job.id for job in result]}")
            return result

        backend.hooks.add(record)
        job = await app.add_job(queue_name, "send")
        worker = await app.create_worker(lanes=(lane_pg.Lane(queue_name),), poll_interval=0.05)
        task = asyncio.create_task(worker.run())
        await asyncio.wait_for(handled.wait(), 10)
        worker.stop()
        await asyncio.wait_for(task, 10)
    finally:
        await app.close()
    claimed = calls.index(f"claim {[job.id]}")
    assert calls[claimed + 1] == f"handler {job.id}", calls
