"""The worker app of the browser tests: ``charge`` (a plain def: it reads the disk) fails
until the file its data names exists (so a test can make a failed job succeed on retry);
``noop`` completes."""

from __future__ import annotations

import os

from lane_pg import App
from lane_pg.types import JSON, JobRow
from lane_pg.worker import JobContext

app = App()


@app.processor("charge")
def charge(job: JobRow, ctx: JobContext) -> JSON:
    marker = job.data.get("marker") if isinstance(job.data, dict) else None
    if isinstance(marker, str) and not os.path.exists(marker):
        raise RuntimeError("card declined: the bank is down")
    return {"charged": True}


@app.processor("noop")
async def noop(job: JobRow, ctx: JobContext) -> JSON:
    return None
