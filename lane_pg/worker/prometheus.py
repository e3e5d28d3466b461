"""Prometheus metrics of a worker and of the queues it serves (``pip install
'lane_pg[prometheus]'``; ``python -m lane_pg worker --metrics-port 9464``).

Two sources, one registry:

* ``MetricsHooks``: the worker's written outcomes, counted as they are written (the
  worker's settlement tells its hooks): ``lane_pg_jobs_completed_total``,
  ``lane_pg_jobs_failed_total`` (failed for good), ``lane_pg_jobs_retried_total`` (a failed
  attempt that runs again), and the histograms ``lane_pg_job_wait_seconds`` (ready to
  claimed) and ``lane_pg_job_run_seconds`` (claimed to written), each by ``queue``;
  ``lane_pg_settlement_failures_total`` by ``operation`` (ack, nack), ``job`` (its name) and
  ``outcome`` for the writes that raised. Never a job id label: a series per job would
  grow without end.
* ``QueueCollector``: read from the backend at each scrape, so they are true whatever
  worker ran the jobs: ``lane_pg_queue_jobs`` by ``queue`` and ``state`` (the six states,
  zeros included, so an autoscaler sees an empty queue as 0, not as a missing series),
  ``lane_pg_queue_paused`` and ``lane_pg_queue_workers`` (live workers serving the queue).

The scrape runs in the HTTP server's thread; the reads run on the worker's event loop,
which the scrape waits for (at most ``SCRAPE_TIMEOUT`` seconds).

Several worker processes on one host: with ``$PROMETHEUS_MULTIPROC_DIR`` set,
prometheus_client keeps each process's counters and histograms in files there, and
``add_multiprocess`` puts their sums on the standalone exporter's registry (``python -m
lane_pg metrics``). There are no gauges among them: the queue gauges are
``QueueCollector``'s, read at the scrape by the process that serves them.
"""

from __future__ import annotations

import asyncio
import importlib
import os
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

from lane_pg.backend import JobQueueBackend
from lane_pg.types import ALL_STATES, JobRow, JobState, StalledOutcome
from lane_pg.types.workers import LIVE_AFTER, workers_per_queue
from lane_pg.worker.pausing import WorkerHooks

INSTALL_HINT = "Prometheus metrics need prometheus_client: pip install 'lane_pg[prometheus]'"
SCRAPE_TIMEOUT = 10.0
MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"
BUCKETS = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 1800)


def _client() -> Any:
    try:
        import prometheus_client
        import prometheus_client.core  # GaugeMetricFamily, for the scrape-time collector
    except ImportError as exc:
        raise ImportError(INSTALL_HINT) from exc
    return prometheus_client


class WorkerMetrics:
    """The counters and histograms of written outcomes, on ``registry``."""

    def __init__(self, registry: Any) -> None:
        client = _client()
        labels = ["queue"]
        self.completed = client.Counter(
            "lane_pg_jobs_completed", "Jobs completed", labels, registry=registry
        )
        self.failed = client.Counter(
            "lane_pg_jobs_failed", "Jobs failed for good", labels, registry=registry
        )
        self.retried = client.Counter(
            "lane_pg_jobs_retried", "Failed attempts that run again", labels, registry=registry
        )
        self.wait = client.Histogram(
            "lane_pg_job_wait_seconds",
            "From ready (available) to claimed",
            labels,
            buckets=BUCKETS,
            registry=registry,
        )
        self.stalled = client.Counter(
            "lane_pg_jobs_stalled",
            "Jobs whose lease expired, taken back by stalled recovery (outcome: requeued or"
            " failed); counted by the worker that holds the maintenance role",
            ["queue", "outcome"],
            registry=registry,
        )
        self.settlement_failures = client.Counter(
            "lane_pg_settlement_failures",
            "Outcomes whose write raised (the jobs come back after their leases)",
            ["operation", "job", "outcome"],
            registry=registry,
        )
        self.run = client.Histogram(
            "lane_pg_job_run_seconds",
            "From claimed to its outcome written",
            labels,
            buckets=BUCKETS,
            registry=registry,
        )

    def attempted(self, job: JobRow, state: JobState | None, error: BaseException | None) -> None:
        queue = job.queue
        if state == "completed":
            self.completed.labels(queue).inc()
        elif state == "failed":
            self.failed.labels(queue).inc()
        elif error is not None:
            self.retried.labels(queue).inc()
        claimed = job.processed_at
        if claimed is not None:
            # Both stamps are the database's clock; the end is this host's, clamped at 0.
            self.wait.labels(queue).observe(max((claimed - job.available_at).total_seconds(), 0))
            run = (datetime.now(UTC) - claimed).total_seconds()
            self.run.labels(queue).observe(max(run, 0.0))


class MetricsHooks(WorkerHooks):
    """``inner``'s hooks (the CLI's, the facade's events), plus the outcomes counted into
    ``metrics``. The worker then hears of every written outcome: that costs one call per
    job, paid only when metrics are on."""

    def __init__(self, inner: WorkerHooks, metrics: WorkerMetrics) -> None:
        self.inner = inner
        self.metrics = metrics

    async def queue_paused(self, queue: str | None) -> None:
        await self.inner.queue_paused(queue)

    async def queue_resumed(self, queue: str | None) -> None:
        await self.inner.queue_resumed(queue)

    async def interrupted(self, processed: int) -> None:
        await self.inner.interrupted(processed)

    async def job_failed(self, job: JobRow, cause: BaseException) -> None:
        await self.inner.job_failed(job, cause)

    async def starting(self) -> None:
        await self.inner.starting()

    async def stopping(self, processed: int) -> None:
        await self.inner.stopping(processed)

    async def looping(self) -> None:
        await self.inner.looping()

    def hears_settlements(self) -> bool:
        return True

    async def job_timed_out(self, job: JobRow, limit: float) -> None:
        if self.inner.hears_settlements():
            await self.inner.job_timed_out(job, limit)

    async def job_retrying(self, job: JobRow, error: BaseException, delay: float) -> None:
        if self.inner.hears_settlements():
            await self.inner.job_retrying(job, error, delay)

    def jobs_stalled(self, outcomes: list[StalledOutcome]) -> None:
        for outcome in outcomes:
            kind = "requeued" if outcome.state == "waiting" else "failed"
            self.metrics.stalled.labels(outcome.queue, kind).inc()
        self.inner.jobs_stalled(outcomes)

    def settlement_failed(self, operation: str, outcomes: list[tuple[str, str]]) -> None:
        for job_name, outcome in outcomes:
            self.metrics.settlement_failures.labels(operation, job_name, outcome).inc()
        self.inner.settlement_failed(operation, outcomes)

    async def job_attempted(
        self, job: JobRow, state: JobState | None, error: BaseException | None
    ) -> None:
        self.metrics.attempted(job, state, error)
        if self.inner.hears_settlements():
            await self.inner.job_attempted(job, state, error)


class QueueCollector:
    """Scrape-time gauges of every queue of ``backend``, read on ``loop``."""

    def __init__(self, backend: JobQueueBackend, loop: asyncio.AbstractEventLoop) -> None:
        self.backend = backend
        self.loop = loop

    def collect(self) -> Iterator[Any]:
        client = _client()
        future = asyncio.run_coroutine_threadsafe(self._read(), self.loop)
        stats, workers, ages = future.result(SCRAPE_TIMEOUT)
        jobs = client.core.GaugeMetricFamily(
            "lane_pg_queue_jobs", "Jobs in the queue by state", labels=["queue", "state"]
        )
        paused = client.core.GaugeMetricFamily(
            "lane_pg_queue_paused", "1 when the queue is paused", labels=["queue"]
        )
        live = client.core.GaugeMetricFamily(
            "lane_pg_queue_workers", "Live workers serving the queue", labels=["queue"]
        )
        oldest = client.core.GaugeMetricFamily(
            "lane_pg_queue_oldest_job_age_seconds",
            "How long the job next in line has been ready to run (0: none waiting)",
            labels=["queue"],
        )
        for queue, (is_paused, counts) in stats.items():
            for state in ALL_STATES:
                jobs.add_metric([queue, state], counts.get(state, 0))
            paused.add_metric([queue], 1 if is_paused else 0)
            live.add_metric([queue], workers.get(queue, 0))
            oldest.add_metric([queue], ages.get(queue, 0.0))
        yield jobs
        yield paused
        yield live
        yield oldest

    async def _read(
        self,
    ) -> tuple[dict[str, tuple[bool, dict[str, int]]], dict[str, int], dict[str, float]]:
        backend = self.backend
        stats: dict[str, tuple[bool, dict[str, int]]] = {}
        ages: dict[str, float] = {}
        now = datetime.now(UTC)
        for queue in await backend.queues.list_queues():
            queue_stats = await backend.reads.get_queue_stats(queue)
            stats[queue] = (queue_stats.paused, {str(k): v for k, v in queue_stats.counts.items()})
            if queue_stats.waiting:
                # The head of the line in claim order: one probe of the waiting index.
                head = await backend.reads.search_jobs(queue, "waiting", limit=1)
                if head.items:
                    ages[queue] = max(0.0, (now - head.items[0].available_at).total_seconds())
        live = await backend.leader.list_workers(LIVE_AFTER)
        return stats, workers_per_queue(live, list(stats)), ages


def serve_metrics(
    host: str, port: int, backend: JobQueueBackend, metrics_registry: Any
) -> tuple[Any, Any]:
    """Start the HTTP endpoint (``/metrics``) in a thread: the outcomes on
    ``metrics_registry`` and the queues of ``backend`` read on the running loop. Returns the
    server and its thread (``server.shutdown()`` stops it)."""
    client = _client()
    metrics_registry.register(QueueCollector(backend, asyncio.get_running_loop()))
    server, thread = client.start_http_server(port, addr=host, registry=metrics_registry)
    return server, thread


def new_registry() -> Any:
    return _client().CollectorRegistry()


def multiprocess_directory() -> str | None:
    """``$PROMETHEUS_MULTIPROC_DIR``: set, prometheus_client keeps every process's counters
    and histograms in files there (it reads the variable when it is first imported)."""
    return os.environ.get(MULTIPROC_ENV) or None


def add_multiprocess(registry: Any) -> str | None:
    """The counters and histograms of every worker process that wrote to
    ``$PROMETHEUS_MULTIPROC_DIR``, summed per label set, on ``registry`` (the standalone
    exporter's); the directory, or None when the variable is not set. Only counters and
    histograms are kept there: the queue gauges are read at the scrape by the one process
    that serves them (``QueueCollector``), never summed over processes."""
    directory = multiprocess_directory()
    if directory is None:
        return None
    multiprocess: Any = importlib.import_module("prometheus_client.multiprocess")
    try:
        multiprocess.MultiProcessCollector(registry, path=directory)
    except ValueError as exc:  # not a directory
        raise ValueError(f"${MULTIPROC_ENV}={directory}: {exc}") from None
    return directory


__all__ = [
    "INSTALL_HINT",
    "MetricsHooks",
    "QueueCollector",
    "WorkerMetrics",
    "add_multiprocess",
    "new_registry",
    "serve_metrics",
]
