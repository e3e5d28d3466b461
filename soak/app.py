"""The app the soak's worker processes run (``--app soak.app:app``): one processor per
kind of job, each writing one line per run to a ledger file of its own process.

The ledger lives outside the system under test, so it survives the faults the soak
injects: a line is written with one ``os.write`` on an ``O_APPEND`` descriptor before the
handler returns, so a SIGKILL after the write keeps it. A line says a handler ran, not
that its completion committed: the checks read the queue for outcomes and the ledger for
executions (``kind event id attempt unix-time extra``).
"""

from __future__ import annotations

import asyncio
import os
import random
import time
from dataclasses import dataclass
from pathlib import Path

from lane_pg import App, Job, JobRow, register_job
from lane_pg.batch import Batch, register_callback
from lane_pg.worker import JobContext

QUEUE = "soak"
FACADE_QUEUE = "soak-facade"
RETRIED_FAILURES = 2
"""A retried job fails its first two attempts and completes on the third."""

_descriptor: int | None = None


def ledger_directory() -> Path:
    return Path(os.environ["LANE_SOAK_DIR"])


def record(event: str, job_id: str, attempt: int, extra: str = "-") -> None:
    global _descriptor
    if _descriptor is None:
        path = ledger_directory() / f"runs-{os.getpid()}.log"
        _descriptor = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    os.write(_descriptor, f"{event} {job_id} {attempt} {time.time():.3f} {extra}\n".encode())


app = App(os.environ.get("LANE_SOAK_DSN"))


@app.processor("plain")
async def plain(job: JobRow, ctx: JobContext) -> int:
    await asyncio.sleep(random.uniform(0, 0.02))
    record("run", job.id, job.attempts_made)
    return job.attempts_made


@app.processor("slow")
async def slow(job: JobRow, ctx: JobContext) -> None:
    # Outlives several lease renewals, so a stopped or cut-off worker loses it mid-run.
    await asyncio.sleep(float(job.data["seconds"]))
    record("run", job.id, job.attempts_made)


@app.processor("retried")
async def retried(job: JobRow, ctx: JobContext) -> None:
    record("run", job.id, job.attempts_made)
    if job.attempts_made < RETRIED_FAILURES:
        raise RuntimeError(f"soak: planned failure of attempt {job.attempts_made + 1}")


@app.processor("doomed")
async def doomed(job: JobRow, ctx: JobContext) -> None:
    record("run", job.id, job.attempts_made)
    raise RuntimeError("soak: this job always fails")


@app.processor("child")
async def child(job: JobRow, ctx: JobContext) -> int:
    record("run", job.id, job.attempts_made)
    return int(job.data["n"])


@app.processor("parent")
async def parent(job: JobRow, ctx: JobContext) -> int:
    values = await ctx.children_values()
    # The checks compare this count with the children the flow was added with.
    record("run", job.id, job.attempts_made, str(len(values)))
    return sum(int(value) for value in values.values())


@app.processor("repeat")
async def repeat(job: JobRow, ctx: JobContext) -> None:
    record("fire", job.id, job.attempts_made, job.repeat_key or "-")


@dataclass
class BatchItem(Job):
    job_name = "SoakBatchItem"
    queue = FACADE_QUEUE
    max_tries = 3
    batch_tag: str
    n: int

    async def handle(self) -> None:
        record("item", f"{self.batch_tag}/{self.n}", 0)


@dataclass
class ChainStep(Job):
    job_name = "SoakChainStep"
    queue = FACADE_QUEUE
    max_tries = 3
    chain_tag: str
    step: int

    async def handle(self) -> None:
        record("step", self.chain_tag, 0, str(self.step))


class BatchThen:
    """The batches' ``then``: runs once the last item completed."""

    name = "soak-batch-then"

    async def handle(self, batch: Batch, error: str | None) -> None:
        record("then", batch.id, 0)


register_job(BatchItem)
register_job(ChainStep)
register_callback(BatchThen())
