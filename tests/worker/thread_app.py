"""A worker test app whose one processor blocks a thread: ``thread_sleep`` runs
``time.sleep(payload["seconds"])`` in the event loop's default executor, as a handler
wrapping blocking code does. A forced stop must not wait for that thread."""

from __future__ import annotations

import asyncio
import time

from lane_pg import App
from lane_pg.types import JSON, JobRow
from lane_pg.worker import JobContext

app = App()


@app.processor("thread_sleep")
async def thread_sleep(job: JobRow, ctx: JobContext) -> JSON:
    await ctx.log("sleeping")  # the handler runs: a test may signal the worker now
    await asyncio.to_thread(time.sleep, float(job.payload["seconds"]))
    return {"slept": job.payload["seconds"]}
