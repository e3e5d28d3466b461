"""``python -m lane_pg top``: one frame of the queues as an operator sees it (``--once``),
and the drain bar across refreshes (``TopView.frame`` called twice)."""

from __future__ import annotations

import time
import uuid
from collections.abc import AsyncIterator

import pytest

from lane_pg.backend import JobQueueBackend
from lane_pg.cli.top import HEADINGS, TopView, bar, per_minute
from lane_pg.memory import MemoryBackend
from lane_pg.postgres.backend import PostgresBackend
from lane_pg.types import QueueDemand
from tests.test_cli_queue_commands import cli, unique_queue


@pytest.fixture
async def backend(pg_dsn: str) -> AsyncIterator[PostgresBackend]:
    be = await PostgresBackend.connect(pg_dsn, max_size=2)
    yield be
    await be.close()


def rows_of(frame: str) -> tuple[str, dict[str, list[str]]]:
    """The title and each queue's cells (the progress bar as one cell)."""
    title, header, *lines = frame.splitlines()
    assert header.split() == list(HEADINGS)
    rows = {}
    for line in lines:
        cells = line.split(None, len(HEADINGS) - 2)
        rows[cells[0]] = cells[:-1] + cells[-1].split(None, 1)
    return title, rows


async def finish(backend: JobQueueBackend, queue: str, completed: int, failed: int) -> None:
    """Claim and end ``completed + failed`` of the queue's waiting jobs."""
    claimed = await backend.runs.claim_jobs(
        "top-test", [QueueDemand(queue, completed + failed)], 60
    )
    assert len(claimed) == completed + failed
    for job in claimed[:completed]:
        await backend.runs.complete_job(queue, job.id, job.lock_token)
    for job in claimed[completed:]:
        await backend.runs.fail_job(queue, job.id, job.lock_token, "boom", discard_retry=True)


async def test_top_once_shows_counts_rates_and_workers(
    pg_dsn: str, backend: PostgresBackend
) -> None:
    queue, empty = unique_queue("top"), unique_queue("topnone")
    for _ in range(5):
        await backend.jobs.add_job(queue, "n")
    await backend.jobs.add_job(queue, "later", None, {"delay_ms": 600_000})
    await finish(backend, queue, completed=2, failed=1)  # 2 waiting left
    await backend.runs.claim_jobs("top-test", [QueueDemand(queue, 1)], 60)  # 1 active, 1 waiting
    await backend.queues.pause_queue(queue)
    worker, of_all = f"top-{uuid.uuid4().hex[:8]}", f"top-all-{uuid.uuid4().hex[:8]}"
    await backend.leader.worker_heartbeat(worker, "host", 1, [queue])
    await backend.leader.worker_heartbeat(of_all, "host", 2, [], meta={"all_queues": True})
    try:
        every = sum(w.all_queues for w in await backend.leader.list_workers(15))
        assert every >= 1
        result = await cli("top", "--once", "--queue", queue, "--queue", empty, dsn=pg_dsn)
    finally:
        await backend.leader.forget_worker(worker)
        await backend.leader.forget_worker(of_all)
    assert result.returncode == 0, result.stderr
    assert "\x1b[" not in result.stdout  # not a terminal: no screen clearing
    title, rows = rows_of(result.stdout)
    assert title.startswith("lane_pg top: 2 queue(s) at ")
    _, paused, waiting, delayed, active, failed, done_rate, failed_rate, wait, workers = rows[queue]
    assert wait.endswith("ms")  # the 3 jobs that finished this minute waited a little
    assert (paused, waiting, delayed, active, failed) == ("yes", "1", "1", "1", "1")
    # Per minute over the last 60 s: all of them, unless a minute began in between (then
    # the previous minute's count is weighted by its part still in the window).
    assert 1.8 <= float(done_rate) <= 2.0 and 0.9 <= float(failed_rate) <= 1.0
    assert int(workers) == 1 + every
    assert rows[empty] == [empty, "no", "0", "0", "0", "0", "0.0", "0.0", "-", str(every)]


async def test_a_draining_queue_shows_its_progress_across_refreshes() -> None:
    backend = MemoryBackend()  # the contract only: the memory backend works the same
    queue = "mail"
    for _ in range(10):
        await backend.jobs.add_job(queue, "n")
    view = TopView([queue])
    _, first = rows_of(await view.frame(backend))
    assert len(first[queue]) == len(HEADINGS) - 1  # no bar: nothing seen draining yet

    await finish(backend, queue, completed=4, failed=1)
    _, second = rows_of(await view.frame(backend, now=time.time()))
    assert second[queue][2] == "5"  # waiting
    assert second[queue][-1] == "[#####-----] 50% 5/10"
    assert float(second[queue][6]) == 4.0 and float(second[queue][7]) == 1.0

    await finish(backend, queue, completed=5, failed=0)
    _, third = rows_of(await view.frame(backend))
    assert third[queue][-1] == "[##########] 100% 10/10"
    _, steady = rows_of(await view.frame(backend))
    assert steady[queue][-1] == "[##########] 100% 10/10"  # stays while nothing is added

    await backend.jobs.add_job(queue, "n")
    _, grown = rows_of(await view.frame(backend))
    assert len(grown[queue]) == len(HEADINGS) - 1  # it grew: the drain is over


def test_per_minute_weighs_the_previous_minute_by_its_part_in_the_last_60_seconds() -> None:
    minute = 29_000_000  # minutes since the epoch
    now = minute * 60 + 15  # a quarter into the current minute
    assert per_minute(minute * 60_000, [4, 8], now) == 4 + 8 * 0.75
    assert per_minute((minute - 1) * 60_000, [8, 3], now) == 8 * 0.75
    assert per_minute((minute - 2) * 60_000, [8, 3], now) == 0
    assert per_minute(0, [], now) == 0
    assert bar(0, 4) == "[----------] 0% 0/4" and bar(1, 3) == "[###-------] 33% 1/3"
