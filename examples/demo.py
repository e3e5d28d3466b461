"""lane_pg in one file: enqueue jobs and process them with a tiny claim loop.

Three plain jobs (one delayed, one that fails once and is retried), a deduplicated add
that returns the job already holding its id, a repeat series that runs three times, each
run's successor written by its completion, and a flow: a report whose two children run
first, released by the last child's completion and combining what they returned.

Then the facade: a typed job class pushed with ``Q.push`` / ``Q.later`` / ``Q.bulk``, a
unique one pushed twice with ``Q.push_unique`` (True, then False) and a plain ``def``
processor (run in the worker's thread pool); a batch of three imports (each behind a
``WithoutOverlapping`` middleware) whose ``then`` and ``finally`` callbacks run once the
last import settles, and a chain Fetch -> Transform -> Upload pushed inside a
``lane_pg.context`` scope that every link sees; all run by one ``lane_pg.Worker``
(LISTEN/NOTIFY, leases).

    make demo            # or: python examples/demo.py

With ``LANE_PG_DSN`` unset this starts an embedded PostgreSQL whose data lives in
``./.lane_pg`` (``pip install 'lane_pg[embedded]'``). The loop below is what
``lane_pg.Worker`` does for you, minus concurrency, lease renewal and shutdown handling.
"""

from __future__ import annotations

import asyncio
import os
import sys
import threading
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import lane_pg
from lane_pg import (
    App,
    Backoff,
    DeduplicationOptions,
    Job,
    JobOptions,
    JobRow,
    Lane,
    Q,
    RepeatOptions,
    WithoutOverlapping,
    register_job,
)
from lane_pg.backend import JobQueueBackend, backend_kind
from lane_pg.batch import Batch, register_callback
from lane_pg.postgres.embedded import resolve_dsn
from lane_pg.postgres.schema import migrate
from lane_pg.types import QueueDemand
from lane_pg.types.flows import FlowJob
from lane_pg.worker import SyncJobContext

QUEUE = "demo"
DEADLINE_SECONDS = 15.0
SERIES = "demo-heartbeat"
SERIES_RUNS = 3


# --------------------------------------------------------------------------- handlers
async def send_email(job: JobRow, backend: JobQueueBackend) -> dict[str, str]:
    return {"sent_to": job.data["to"]}


async def send_reminder(job: JobRow, backend: JobQueueBackend) -> str:
    return f"reminded {job.data['user']}"


async def flaky_report(job: JobRow, backend: JobQueueBackend) -> dict[str, int]:
    if job.attempts_made == 0:  # fails on its first attempt, succeeds on the retry
        raise RuntimeError("report service busy")
    return {"rows": 42}


async def heartbeat(job: JobRow, backend: JobQueueBackend) -> str:
    return "beat"


async def count_region(job: JobRow, backend: JobQueueBackend) -> int:
    return {"north": 17, "south": 25}[job.data["region"]]


async def sales_total(job: JobRow, backend: JobQueueBackend) -> int:
    # A flow parent runs after its children; their results are kept under it.
    values = await backend.get_flow_children_values(job.queue, job.id)
    return sum(int(value) for value in values.values())


HANDLERS: dict[str, Callable[[JobRow, JobQueueBackend], Awaitable[object]]] = {
    "send_email": send_email,
    "send_reminder": send_reminder,
    "flaky_report": flaky_report,
    "heartbeat": heartbeat,
    "count_region": count_region,
    "sales_total": sales_total,
}


# --------------------------------------------------------------------------- the facade
FACADE_QUEUE = "demo-mail"


@dataclass
class SendWelcomeEmail(Job):
    """A typed job: its fields are the stored data, ``handle`` does the work."""

    job_name = "SendWelcomeEmail"
    queue = FACADE_QUEUE
    max_tries = 5
    user_id: int

    async def handle(self) -> dict[str, int]:
        return {"welcomed": self.user_id}


@dataclass
class SendDigest(Job):
    """A unique job: one live push per account (``unique_for``, 5 minutes by default)."""

    job_name = "SendDigest"
    queue = FACADE_QUEUE
    account: str

    def unique_id(self) -> str:
        return self.account

    async def handle(self) -> dict[str, str]:
        return {"digest": self.account}


REPORTS: list[str] = []
"""What the batch callbacks and the chain's links report, in the order they ran."""


@dataclass
class ImportUser(Job):
    """A batch member; its middleware keeps two imports of one user from overlapping."""

    job_name = "ImportUser"
    queue = FACADE_QUEUE
    user_id: int

    def middleware(self) -> list[object]:
        return [WithoutOverlapping(f"import-user:{self.user_id}").expire_after(60)]

    async def handle(self) -> dict[str, int]:
        return {"imported": self.user_id}


class ImportDone:
    """The batch's ``then``: enqueued as a job when the last import succeeded."""

    name = "demo-import-done"

    async def handle(self, batch: Batch, error: str | None) -> None:
        REPORTS.append(f"then       batch {batch.name!r}: {batch.processed_jobs()} imported")


class ImportCleanup:
    """The batch's ``finally``: runs once the batch settled, whatever happened."""

    name = "demo-import-cleanup"

    async def handle(self, batch: Batch, error: str | None) -> None:
        REPORTS.append(f"finally    batch {batch.name!r}: {batch.progress()}% done, error={error}")


@dataclass
class Step(Job):
    """A chain link: the next one is added in the transaction that completes this one."""

    job_name = "DemoStep"
    queue = FACADE_QUEUE
    step: str

    async def handle(self) -> str:
        tenant = lane_pg.context.get("tenant_id")  # pushed with the chain, restored per run
        REPORTS.append(f"chain      {self.step} for tenant {tenant}")
        return self.step


register_job(SendWelcomeEmail)
register_job(SendDigest)
register_job(ImportUser)
register_job(Step)
register_callback(ImportDone())
register_callback(ImportCleanup())


async def facade_demo(dsn: str) -> bool:
    """Push typed jobs through ``Q`` and run them, with a processor function, on a worker."""
    app = App(dsn)

    @app.processor("audit")
    def audit(job: JobRow, ctx: SyncJobContext) -> str:
        # A plain def runs in the worker's thread pool, never on its event loop.
        ctx.update_progress({"step": "auditing"})  # a blocking call from the thread
        return f"audited {job.data['what']} in {threading.current_thread().name}"

    await app.bind(Q)  # Q writes where this app's workers claim
    try:
        ids = [
            await Q.push(SendWelcomeEmail(user_id=42)),
            await Q.later(timedelta(milliseconds=300), SendWelcomeEmail(user_id=7)),
            *await Q.bulk([SendWelcomeEmail(user_id=n) for n in (100, 101, 102)]),
        ]
        backend = await app.backend()
        ids.append((await backend.add_job(FACADE_QUEUE, "audit", {"what": "signups"})).id)
        # A fresh account per run: the lock outlives the job for unique_for.
        account = f"acct-{datetime.now(UTC):%H%M%S%f}"
        pushed = [await Q.push_unique(SendDigest(account)) for _ in range(2)]
        digest = await backend.get_deduplication_job_id(FACADE_QUEUE, f"SendDigest:{account}")
        if digest is not None:
            ids.append(digest)
        print(f"pushed     {len(ids)} jobs to {FACADE_QUEUE} (one delayed 300 ms)")
        print(f"unique     SendDigest({account}): push_unique {pushed[0]}, again {pushed[1]}")
        batch_id = await (
            Q.batch([ImportUser(user_id) for user_id in (1, 2, 3)])
            .name("import")
            .then("demo-import-done")
            .finally_("demo-import-cleanup")
            .dispatch()
        )
        print(f"batch      {batch_id} 'import': 3 jobs, then + finally callbacks")
        with lane_pg.context.scope(tenant_id="acme"):
            await Q.chain([Step("fetch"), Step("transform"), Step("upload")]).dispatch()
        print("chain      fetch -> transform -> upload, pushed in context tenant_id=acme")
        worker = await app.create_worker(lanes=(Lane(FACADE_QUEUE),), poll_interval=0.5)
        running = asyncio.create_task(worker.run())
        loop = asyncio.get_running_loop()
        deadline = loop.time() + DEADLINE_SECONDS
        rows: list[JobRow | None] = []
        expected_reports = 5  # then, finally and three chain links
        while loop.time() < deadline:
            rows = [await backend.get_job(FACADE_QUEUE, job_id) for job_id in ids]
            if len(REPORTS) >= expected_reports and all(
                row is not None and row.state == "completed" for row in rows
            ):
                break
            await asyncio.sleep(0.05)
        worker.stop()
        await running
        if worker.notifier is not None:
            await worker.notifier.close()
        for row in rows:
            if row is not None:
                show("worker", row, f"result={row.return_value!r}")
        for report in REPORTS:
            print(report)
        batch = await Q.find_batch(batch_id)
        if batch is not None:
            print(f"batch      'import' finished: {batch.finished}, {batch.failed_jobs} failed")
        ok = len(REPORTS) >= expected_reports and all(
            row is not None and row.state == "completed" for row in rows
        )
        print(
            f"worker ran {len(ids)} facade jobs: {'all completed' if ok else 'NOT all completed'}"
        )
        return ok
    finally:
        await app.close()


def show(what: str, job: JobRow, detail: str = "") -> None:
    label = f"{job.name}#{job.id}"
    print(f"{what:<10} {label:<22} -> {job.state:<9} {detail}".rstrip())


# --------------------------------------------------------------------------- main
async def main() -> int:
    dsn = resolve_dsn(None)  # $LANE_PG_DSN (postgresql:// or redis://), else embedded
    if backend_kind(dsn) == "postgres":
        await migrate(dsn)  # idempotent: installs or upgrades schema "lane"
    backend = await lane_pg.connect(dsn)
    print(f"backend    {backend.kind}")
    try:
        jobs = [
            await backend.add_job(QUEUE, "send_email", {"to": "ada@example.com"}),
            await backend.add_job(QUEUE, "send_reminder", {"user": "ada"}, JobOptions(delay=1.0)),
            await backend.add_job(
                QUEUE,
                "flaky_report",
                {"month": "2025-11"},
                JobOptions(attempts=2, backoff=Backoff.fixed(0.5)),
            ),
        ]
        for job in jobs:
            show("added", job)
        # Deduplication: while the first job owns "invoice:7", a second add returns it.
        unique = JobOptions(deduplication=DeduplicationOptions("invoice:7"))
        first = await backend.add_job(QUEUE, "send_email", {"to": "bob@example.com"}, unique)
        again = await backend.add_job(QUEUE, "send_email", {"to": "eve@example.com"}, unique)
        show("added", first, "(owns deduplication id invoice:7)")
        show("deduped", again, f"(same job: {again.id == first.id})")
        jobs.append(first)
        # A repeat series: every 300 ms, three runs in all.
        series = JobOptions(repeat=RepeatOptions.every(0.3, limit=SERIES_RUNS, key=SERIES))
        beat = await backend.add_job(QUEUE, "heartbeat", None, series)
        show("added", beat, "(series, 3 runs)")
        # A flow: the parent waits in waiting-children until both children completed.
        flow = await backend.add_flow(
            FlowJob(
                "sales_total",
                queue=QUEUE,
                children=[
                    FlowJob("count_region", {"region": "north"}),
                    FlowJob("count_region", {"region": "south"}),
                ],
            )
        )
        show("added", flow.job, "(flow parent of 2 children)")
        jobs += [flow.job, *(child.job for child in flow.children)]
        ours = {job.id for job in jobs}
        if not await process(backend, ours, int(beat.id)):
            return 1
    finally:
        await backend.close()
    if not await facade_demo(dsn):
        return 1
    print(
        "see these queues in the browser: python -m lane_pg dashboard"
        " (pip install 'lane_pg[web]'), then open http://127.0.0.1:8080/"
    )
    return 0


async def process(backend: JobQueueBackend, ours: set[str], first_beat: int) -> bool:
    """Claim and run jobs until every job in ``ours`` is completed and the series that
    started with job ``first_beat`` ran its course, or the deadline passes."""
    worker_id = f"demo-{os.getpid()}"
    loop = asyncio.get_running_loop()
    deadline = loop.time() + DEADLINE_SECONDS
    while loop.time() < deadline:
        claimed = await backend.claim_jobs(worker_id, [QueueDemand(QUEUE, limit=10)], lease=30)
        for job in claimed:
            show("claimed", job)
            handler = HANDLERS.get(job.name)
            try:
                if handler is None:
                    raise LookupError(f"no handler for job name {job.name!r}")
                result = await handler(job, backend)
            except Exception as exc:
                failed = await backend.fail_job(QUEUE, job.id, job.lock_token, str(exc))
                show("failed", failed, f"({exc}; attempt {failed.attempts_made})")
            else:
                done = await backend.complete_job(QUEUE, job.id, job.lock_token, result)
                show("completed", done, f"result={result!r}")

        states = {job_id: await backend.get_job(QUEUE, job_id) for job_id in ours}
        done = await backend.list_jobs(QUEUE, ["completed"], descending=True, limit=20)
        ran = sum(j.repeat_key == SERIES and int(j.id) >= first_beat for j in done.items)
        series_over = ran == SERIES_RUNS and await backend.get_repeat(QUEUE, SERIES) is None
        if series_over and all(j is not None and j.state == "completed" for j in states.values()):
            print(f"all {len(ours)} jobs completed; the series ran {ran} times and ended")
            return True
        if any(job is None or job.state == "failed" for job in states.values()):
            print("a demo job failed for good", file=sys.stderr)
            return False
        if not claimed:
            # Nothing ready: sleep until the next delayed job is due (at most 1 s).
            series = await backend.get_repeat(QUEUE, SERIES)
            due = [j.available_at for j in states.values() if j and j.state == "delayed"]
            due += [] if series is None else [series.next_at]
            wait = min((d - datetime.now(UTC)).total_seconds() for d in due) if due else 0.1
            await asyncio.sleep(min(max(wait, 0.02), 1.0, max(deadline - loop.time(), 0)))
    print(f"gave up after {DEADLINE_SECONDS:.0f}s", file=sys.stderr)
    return False


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
