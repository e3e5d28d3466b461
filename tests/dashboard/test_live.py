"""Live updates: one shared reader while pages listen, none while nobody looks; the
counts it sends follow the queue, and /metrics serves the queue gauges."""

from __future__ import annotations

import asyncio
import json
import signal
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
from prometheus_client.parser import text_string_to_metric_families

from lane_pg.backend import JobQueueBackend
from lane_pg.dashboard.live import LiveHub
from lane_pg.dashboard.reads import overview_snapshot
from lane_pg.types import JobSpec, QueueDemand
from tests.dashboard.conftest import Browser
from tests.dashboard.processes import dashboard_url, spawn, stop


async def next_snapshot(inbox: asyncio.Queue[str]) -> dict[str, object]:
    return dict(json.loads(await asyncio.wait_for(inbox.get(), timeout=10)))


async def test_the_hub_reads_only_while_someone_listens_and_sends_changes(
    backend: JobQueueBackend, queue_name: str
) -> None:
    async def connected() -> JobQueueBackend:
        return backend

    async def this_queue(backend: JobQueueBackend) -> dict[str, object]:
        # The overview of this queue alone: other tests' queues of the same database (a
        # worker of theirs going quiet, a count moving) change the whole overview.
        snapshot = await overview_snapshot(backend)
        return {"queues": {queue_name: snapshot["queues"].get(queue_name)}}

    hub = LiveHub(connected, this_queue, poll_interval=0.05)
    await asyncio.sleep(0.2)
    assert hub.reads == 0 and not hub.running  # nobody looks: nothing is read
    await backend.add_jobs(queue_name, [JobSpec("a")])
    async with hub.listen() as first, hub.listen() as second:
        assert hub.listeners == 2 and hub.running
        snapshot = await next_snapshot(first)
        assert snapshot["queues"][queue_name]["counts"]["waiting"] == 1  # type: ignore[index]
        assert await next_snapshot(second) == snapshot  # one reader, the same snapshot
        reads = hub.reads
        while hub.reads < reads + 3:  # noqa: ASYNC110 (the reader polls on ...)
            await asyncio.sleep(0.02)
        assert first.empty()  # ... and sends nothing while nothing changed
        await backend.add_jobs(queue_name, [JobSpec("b")])
        changed = await next_snapshot(first)
        assert changed["queues"][queue_name]["counts"]["waiting"] == 2  # type: ignore[index]
    assert not hub.running and hub.listeners == 0
    reads = hub.reads
    await asyncio.sleep(0.2)
    assert hub.reads == reads  # stopped with the last listener
    await hub.close()


async def test_metrics_endpoint_serves_the_queue_gauges(
    backend: JobQueueBackend, browser: Browser, queue_name: str
) -> None:
    await backend.add_jobs(queue_name, [JobSpec("a"), JobSpec("b"), JobSpec("c")])
    await backend.pause_queue(queue_name)
    response = await browser.client.get("/metrics")
    assert response.status_code == 200
    families = {f.name: f for f in text_string_to_metric_families(response.text)}
    jobs = {
        (s.labels["queue"], s.labels["state"]): s.value
        for s in families["lane_pg_queue_jobs"].samples
    }
    assert jobs[(queue_name, "waiting")] == 3
    assert jobs[(queue_name, "failed")] == 0  # zeros are emitted too
    paused = {s.labels["queue"]: s.value for s in families["lane_pg_queue_paused"].samples}
    assert paused[queue_name] == 1


async def test_metrics_endpoint_gives_the_age_of_the_job_next_in_line(
    backend: JobQueueBackend, browser: Browser, queue_name: str
) -> None:
    an_hour_ago = datetime.now(UTC) - timedelta(hours=1)
    await backend.add_jobs(queue_name, [JobSpec("old")], now=an_hour_ago)
    await backend.add_jobs(queue_name, [JobSpec("new")])
    empty = f"{queue_name}_empty"
    await backend.pause_queue(empty)  # a queue with nothing waiting
    response = await browser.client.get("/metrics")
    families = {f.name: f for f in text_string_to_metric_families(response.text)}
    ages = {
        s.labels["queue"]: s.value for s in families["lane_pg_queue_oldest_job_age_seconds"].samples
    }
    assert 3590 < ages[queue_name] < 3700
    assert ages[empty] == 0


async def test_stalled_recovery_counts_into_the_stalled_counter(
    backend: JobQueueBackend, queue_name: str
) -> None:
    from prometheus_client import CollectorRegistry

    from lane_pg.worker.config import WorkerConfig
    from lane_pg.worker.maintenance import maintenance_tasks
    from lane_pg.worker.pausing import WorkerHooks
    from lane_pg.worker.prometheus import MetricsHooks, WorkerMetrics

    registry = CollectorRegistry()
    hooks = MetricsHooks(WorkerHooks(), WorkerMetrics(registry))
    then = datetime.now(UTC) - timedelta(minutes=5)
    await backend.add_jobs(
        queue_name, [JobSpec("a"), JobSpec("b", None, {"attempts": 1})], now=then
    )
    claimed = await backend.claim_jobs("gone", [QueueDemand(queue_name, 2)], 30, now=then)
    assert len(claimed) == 2  # leases that ran out minutes ago: a crashed worker's
    [recover] = [
        task
        for task in maintenance_tasks(backend, WorkerConfig(max_stalled_count=0), hooks)
        if task.name == "stalled recovery"
    ]
    assert "stalled jobs recovered" in await recover.run()  # (other queues: theirs too)

    def count(outcome: str) -> float | None:
        return registry.get_sample_value(
            "lane_pg_jobs_stalled_total", {"queue": queue_name, "outcome": outcome}
        )

    assert count("failed") == 2  # max_stalled_count 0: a first stall fails the job


async def test_a_page_joining_while_the_last_one_leaves_gets_its_snapshot(
    backend: JobQueueBackend, queue_name: str
) -> None:
    """A form's redirect: the next page's stream opens while the last page's closes; the
    reader being stopped must not leave the new page without one."""

    async def connected() -> JobQueueBackend:
        return backend

    hub = LiveHub(connected, overview_snapshot, poll_interval=0.05)
    await backend.add_jobs(queue_name, [JobSpec("a")])
    joined: list[dict[str, object]] = []

    async def join_while_stopping() -> None:
        async with hub.listen() as inbox:
            joined.append(await next_snapshot(inbox))

    async with hub.listen() as first:
        await next_snapshot(first)
        assert hub.running
    # The last page left: its exit cancels the reader and awaits it. Join in that window.
    leaving = hub.listen()
    await leaving.__aenter__()
    exiting = asyncio.create_task(leaving.__aexit__(None, None, None))
    await asyncio.sleep(0)  # the exit has cancelled the reader and awaits it
    await asyncio.wait_for(join_while_stopping(), 10)
    await exiting
    assert joined and joined[0]["queues"][queue_name]["counts"]["waiting"] == 1  # type: ignore[index]
    await hub.close()


async def test_the_dashboard_stops_at_once_on_sigterm_while_a_page_streams(
    pg_dsn: str, tmp_path: Path
) -> None:
    """A page's live stream never ends by itself, and the server waits for open responses
    before it exits: told to stop, the dashboard ends the streams, so it exits by itself
    (uvicorn ends by re-raising the signal it caught) instead of being killed after the
    test's 10 s."""
    dashboard = spawn(["dashboard", "--port", "0"], pg_dsn, tmp_path)
    try:
        url = await dashboard_url(dashboard)
        async with (
            httpx.AsyncClient(timeout=10) as client,
            client.stream("GET", url + "/api/stream") as response,
        ):
            lines = response.aiter_lines()
            async with asyncio.timeout(10):
                async for line in lines:  # the first snapshot: the stream is open
                    if line.startswith("event: overview"):
                        break
            dashboard.popen.terminate()
            async with asyncio.timeout(10):
                rest = [line async for line in lines]  # ends when the server closes it
        assert not any(line.startswith("event:") and "overview" not in line for line in rest)
        status = await asyncio.to_thread(dashboard.popen.wait, 10)
        assert status in (0, -signal.SIGTERM), dashboard.text()
    finally:
        stop(dashboard)
