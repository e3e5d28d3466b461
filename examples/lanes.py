"""Lanes: one worker, several queues, served in priority order (0 first).

    python examples/lanes.py                                                  # enqueue
    python -m lane_pg worker --app examples.lanes:app --concurrency 1 --burst  # run

The app declares two lanes: ``control`` (priority 1) and ``prompt`` (priority 5). Jobs are
added interleaved, prompt first; a worker with one slot still runs every control job before
any prompt job, because each claim fills free slots lane by lane in priority order. With
more slots a lane's ``max_concurrency`` caps how many of them it may hold, so a flood of
prompts can never occupy the slots that control work needs.
"""

from __future__ import annotations

import asyncio
import sys

from lane_pg import App, JobContext, JobRow, Lane
from lane_pg.postgres.schema import migrate

# $LANE_PG_DSN, else the embedded server in ./.lane_pg (resolve_dsn(None)), on first use.
app = App(
    lanes=[
        Lane("control", priority=1, max_concurrency=3),
        Lane("prompt", priority=5, max_concurrency=2),
    ]
)


@app.processor("command")
async def command(job: JobRow, ctx: JobContext) -> str:
    print(f"ran {job.queue:<7} {job.name} {job.payload['text']}", flush=True)
    return "ok"


@app.processor("completion")
async def completion(job: JobRow, ctx: JobContext) -> str:
    print(f"ran {job.queue:<7} {job.name} {job.payload['text']}", flush=True)
    return f"answer to {job.payload['text']!r}"


async def enqueue() -> None:
    await migrate(app.resolve_dsn())  # idempotent: installs or upgrades schema "lane"
    try:
        for n in range(1, 4):  # interleaved, and each prompt before its control job
            for queue, name in (("prompt", "completion"), ("control", "command")):
                job = await app.add_job(queue, name, {"text": f"{queue}-{n}"})
                print(f"added {job.queue:<7} {job.name}#{job.id} {job.payload['text']}")
    finally:
        await app.close()
    print()
    print("Run them with one slot; every control job runs before the first prompt job:")
    print("    python -m lane_pg worker --app examples.lanes:app --concurrency 1 --burst")


if __name__ == "__main__":
    asyncio.run(enqueue())
    sys.exit(0)
