"""lane_pg quickstart: an app with two processors, a producer, and the worker command.

    python examples/quickstart.py                                   # enqueue three jobs
    python -m lane_pg worker --app examples.quickstart:app --burst  # run them, then exit

With ``LANE_PG_DSN`` unset both use an embedded PostgreSQL whose data lives in
``./.lane_pg`` (``pip install 'lane_pg[embedded]'``). Importing this module has no side
effects: the worker imports it to find ``app`` and its processors.
"""

from __future__ import annotations

import asyncio
import sys

from lane_pg import App, Backoff, JobContext, JobOptions, JobRow, Lane
from lane_pg.postgres.schema import migrate

QUEUE = "quickstart"

# No DSN here: App resolves $LANE_PG_DSN, else the embedded server, on first use (the same
# rule as lane_pg.postgres.embedded.resolve_dsn(None)). The lane makes a worker started
# without --queue serve this queue only.
app = App(lanes=[Lane(QUEUE)])


@app.processor("send_welcome")
async def send_welcome(job: JobRow, ctx: JobContext) -> dict[str, str]:
    # Delivery is at-least-once: a real sender would pass job.id as its idempotency key.
    to = job.payload["to"]
    print(
        f"  [{job.name}#{job.id}] welcome mail to {to} (attempt {job.attempts_made + 1})",
        flush=True,
    )
    return {"sent_to": to, "idempotency_key": f"welcome:{job.id}"}


@app.processor("build_report")
async def build_report(job: JobRow, ctx: JobContext) -> dict[str, int]:
    rows = 0
    for step, month in enumerate(job.payload["months"], start=1):
        rows += 10 * step  # stand-in for real work
        await ctx.update_progress({"done": step, "of": len(job.payload["months"])})
        await ctx.log(f"month {month}: {rows} rows so far")
    print(f"  [{job.name}#{job.id}] report with {rows} rows", flush=True)
    return {"rows": rows}


async def enqueue() -> None:
    await migrate(app.resolve_dsn())  # idempotent: installs or upgrades schema "lane"
    try:
        jobs = [
            await app.add_job(QUEUE, "send_welcome", {"to": "ada@example.com"}),
            await app.add_job(
                QUEUE,
                "send_welcome",
                {"to": "grace@example.com"},
                JobOptions(attempts=3, backoff=Backoff.exponential(1.0, cap=30)),
            ),
            await app.add_job(QUEUE, "build_report", {"months": ["2025-09", "2025-10", "2025-11"]}),
        ]
    finally:
        await app.close()
    for job in jobs:
        print(f"added    {job.name}#{job.id} to queue {job.queue!r} ({job.state})")
    print()
    print("Now run a worker for them (it exits when the queue is empty):")
    print("    python -m lane_pg worker --app examples.quickstart:app --burst")
    print("and look at the counts:")
    print(f"    python -m lane_pg stats --queue {QUEUE}")


if __name__ == "__main__":
    asyncio.run(enqueue())
    sys.exit(0)
