"""The app the lane_pg worker processes run: one processor, ``noop``, that returns None."""

from __future__ import annotations

from benchmarks.common import bench_dsn
from lane_pg import App, JobRow
from lane_pg.worker import JobContext

app = App(bench_dsn())


@app.processor("noop")
async def noop(job: JobRow, ctx: JobContext) -> None:
    return None
