"""A benchmark worker process on Redis: ``python -m benchmarks.redis_worker lane|raw ...``.

``lane``: lane_pg's ``Worker`` over a ``RedisBackend`` (``redis://`` is not yet a URL
scheme of the CLI, so the benchmark builds the backend itself), no-op jobs, ``--burst``
until idle or serving until SIGTERM. ``raw``: the raw-Redis baseline, a plain list queue
with no semantics: ``BLMOVE`` from ``ready`` to ``busy``, a hash write marking the job done
with its start and finish times, ``LREM`` from ``busy``.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from redis.asyncio import Redis

from lane_pg.redis.backend import RedisBackend
from lane_pg.types import JSON, JobRow, Lane
from lane_pg.worker import Worker, WorkerConfig
from lane_pg.worker.start import close_worker, create_worker


async def noop(job: JobRow, ctx: object) -> JSON:
    return None


async def _lane(args: argparse.Namespace) -> None:
    client = Redis.from_url(args.url)
    backend = RedisBackend(client, prefix=args.prefix)
    # --burst as the CLI's: run() in burst mode, so the maintenance leader prunes to the
    # retention as it drains and once more at exit (run_until_idle runs no maintenance,
    # and W6 then measured finished jobs nothing pruned: +35 MB a round of 50,000).
    config = WorkerConfig(
        lanes=(Lane(args.queue),),
        concurrency=args.concurrency,
        poll_interval=args.poll,
        burst=args.burst,
    )
    worker: Worker = await create_worker(backend, {"noop": noop}, config)
    try:
        loop = asyncio.get_running_loop()
        loop.add_signal_handler(signal.SIGTERM, worker.stop)
        await worker.run()
    finally:
        await close_worker(worker)
        await backend.close()


async def _raw_one(client: Redis, ready: str, busy: str, job_id: bytes, prefix: str) -> None:
    started = time.time() * 1000
    async with client.pipeline(transaction=True) as pipe:
        pipe.hset(
            f"{{{prefix}}}:job:{job_id.decode()}",
            mapping={
                "state": "done",
                "s": started,
                "f": time.time() * 1000,
            },
        )
        pipe.lrem(busy, 1, job_id)
        await pipe.execute()


async def _raw(args: argparse.Namespace) -> None:
    client = Redis.from_url(args.url)
    ready, busy = f"{{{args.prefix}}}:ready", f"{{{args.prefix}}}:busy"
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)

    async def loop() -> None:
        while not stop.is_set():
            if args.burst:
                job_id = await client.lmove(ready, busy, "RIGHT", "LEFT")
                if job_id is None:
                    return
            else:
                job_id = await client.blmove(ready, busy, 1.0, "RIGHT", "LEFT")
                if job_id is None:
                    continue
            await _raw_one(client, ready, busy, job_id, args.prefix)

    await asyncio.gather(*(loop() for _ in range(args.concurrency)))
    await client.aclose()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("kind", choices=["lane", "raw"])
    parser.add_argument("--url", required=True)
    parser.add_argument("--prefix", required=True)
    parser.add_argument("--queue", default="bench")
    parser.add_argument("--concurrency", type=int, default=50)
    parser.add_argument("--poll", type=float, default=1.0)
    parser.add_argument("--burst", action="store_true")
    args = parser.parse_args()
    asyncio.run(_lane(args) if args.kind == "lane" else _raw(args))


if __name__ == "__main__":
    main()
