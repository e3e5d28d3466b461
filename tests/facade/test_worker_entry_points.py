"""One way to run a worker from code, ``App.run_worker``, and one place that makes every
worker (``lane_pg.facade.workers.open_worker``), which the other entry points kept for
earlier code (``lane_pg.run_worker``, ``run_worker_on``, a failover list) reach too.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any, ClassVar

import pytest

from lane_pg import App
from lane_pg.facade import BackendDriver, FailoverDriver, Job, JobRegistry, QueueFacade
from lane_pg.facade import workers as entry
from lane_pg.facade.workers import run_worker, run_worker_on
from lane_pg.memory import MemoryBackend
from lane_pg.types import JobRow, Lane
from lane_pg.worker import Worker, WorkerConfig
from tests.helpers import eventually

DONE: list[str] = []


@dataclass
class Ping(Job):
    job_name: ClassVar[str] = "entry.ping"
    queue: ClassVar[str] = "entry-typed"
    n: int = 0

    async def handle(self) -> int:
        DONE.append(f"typed {self.n}")
        return self.n


@pytest.fixture(autouse=True)
def _fresh() -> None:
    DONE.clear()


@pytest.fixture
def made(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The labels of the workers ``open_worker`` made, in order."""
    labels: list[str] = []
    original = entry.open_worker

    async def counting(*args: Any, **kwargs: Any) -> Worker:
        labels.append(args[3])
        return await original(*args, **kwargs)

    monkeypatch.setattr(entry, "open_worker", counting)
    return labels


def _facade() -> QueueFacade:
    facade = QueueFacade(registry=JobRegistry())
    facade.registry.register(Ping)
    return facade


def _app(jobs: JobRegistry | None = None) -> App:
    """An app of one processor function (and the job classes of ``jobs``) on memory."""
    app = App("memory://", lanes=[Lane("entry-fn")], jobs=jobs or JobRegistry())

    @app.processor("entry.fn")
    async def fn(job: JobRow, ctx: object) -> None:
        DONE.append(f"fn {job.payload}")

    return app


async def test_app_run_worker_drains_in_burst_mode_and_stops_on_the_event(
    made: list[str],
) -> None:
    app = _app()
    try:
        await app.add_job("entry-fn", "entry.fn", 1)
        worker = await app.run_worker(burst=True, poll_interval=0.05, facade=_facade())
        assert (DONE, worker.counts["completed"]) == (["fn 1"], 1)
        stop = asyncio.Event()
        running = asyncio.create_task(
            app.run_worker(shutdown=stop, poll_interval=0.05, facade=_facade())
        )
        await app.add_job("entry-fn", "entry.fn", 2)
        await eventually(lambda: DONE == ["fn 1", "fn 2"], timeout=20)
        stop.set()
        stopped = await asyncio.wait_for(running, 20)
        assert isinstance(stopped, Worker) and stopped.counts["completed"] == 1
    finally:
        await app.close()
    assert made == ["memory", "memory"]


async def test_app_run_worker_on_a_connection_of_the_facade(made: list[str]) -> None:
    facade = _facade()
    reports = BackendDriver(MemoryBackend(), "memory")
    facade.register_connection("reports", reports)
    await (await reports.backend()).add_job("entry-fn", "entry.fn", 3)
    await (await reports.backend()).add_job("entry-typed", Ping.job_name, {"n": 4})
    app = _app(facade.registry)
    config = WorkerConfig(
        lanes=(Lane("entry-fn"), Lane("entry-typed")), burst=True, poll_interval=0.05
    )
    worker = await app.run_worker(config, connection="reports", facade=facade)
    assert sorted(DONE) == ["fn 3", "typed 4"]
    assert worker.counts["completed"] == 2
    assert made == ["reports"]


async def test_the_kept_entry_points_make_their_workers_in_the_same_place(
    made: list[str],
) -> None:
    facade = _facade()
    facade.set_driver(BackendDriver(MemoryBackend(), "memory"))
    reports = BackendDriver(MemoryBackend(), "memory")
    facade.register_connection("reports", reports)
    config = WorkerConfig(burst=True, poll_interval=0.05)  # lanes: the job class's queue
    await facade.push(Ping(n=5))
    await (await reports.backend()).add_job("entry-typed", Ping.job_name, {"n": 6})
    await run_worker(config=config, facade=facade)
    await run_worker_on("reports", config, facade=facade)
    failover = FailoverDriver(
        [("first", BackendDriver(MemoryBackend(), "memory")), ("second", facade.driver())]
    )
    await facade.push(Ping(n=7))
    await run_worker(failover, config, facade=facade)
    assert sorted(DONE) == ["typed 5", "typed 6", "typed 7"]
    assert made == [facade.connection_name(), "reports", "first", "second"]
