"""``python -m lane_pg worker --metrics-port``: a real worker process serving Prometheus
metrics, scraped over HTTP and read by prometheus_client's own parser."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
import urllib.request
from pathlib import Path

import asyncpg
from prometheus_client.parser import text_string_to_metric_families

from lane_pg.postgres.backend import PostgresBackend
from lane_pg.types import ALL_STATES
from tests.helpers import eventually
from tests.worker.conftest import Workers, queue_args, wait_for_state


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def _scrape(port: int) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
        text = response.read().decode()
    samples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return samples


async def test_the_endpoint_counts_outcomes_and_reads_every_queue(
    workers: Workers, backend: PostgresBackend, db: asyncpg.Connection, queue_name: str
) -> None:
    idle = f"{queue_name}_idle"
    placeholder = await backend.add_job(idle, "noop")  # a known queue that ends up empty
    await backend.remove_job(idle, placeholder.id)
    done = [await backend.add_job(queue_name, "noop") for _ in range(3)]
    failing = await backend.add_job(queue_name, "fail", None, {"attempts": 2})
    port = _free_port()

    worker = await workers.start(*queue_args(queue_name), "--metrics-port", str(port))
    for job in done:
        await wait_for_state(db, queue_name, job.id, "completed")
    await wait_for_state(db, queue_name, failing.id, "failed")

    def value(name: str, **labels: str) -> float | None:
        return samples.get((name, tuple(sorted(labels.items()))))

    samples = await asyncio.to_thread(_scrape, port)
    for _ in range(50):  # the last outcome is counted once its write returned
        if value("lane_pg_jobs_failed_total", queue=queue_name) == 1:
            break
        await asyncio.sleep(0.1)
        samples = await asyncio.to_thread(_scrape, port)
    assert value("lane_pg_jobs_completed_total", queue=queue_name) == 3
    assert value("lane_pg_jobs_failed_total", queue=queue_name) == 1
    assert value("lane_pg_jobs_retried_total", queue=queue_name) == 1
    assert value("lane_pg_job_wait_seconds_count", queue=queue_name) == 5  # every attempt
    assert value("lane_pg_job_run_seconds_count", queue=queue_name) == 5
    assert value("lane_pg_queue_jobs", queue=queue_name, state="completed") == 3
    assert value("lane_pg_queue_jobs", queue=queue_name, state="failed") == 1
    for state in ALL_STATES:  # an empty queue is a series of zeros, not a missing one
        assert value("lane_pg_queue_jobs", queue=idle, state=state) == 0
    assert value("lane_pg_queue_paused", queue=queue_name) == 0
    assert value("lane_pg_queue_workers", queue=queue_name) == 1
    assert value("lane_pg_queue_workers", queue=idle) == 0
    assert not any("job_id" in dict(labels) for _, labels in samples)

    worker.send(signal.SIGTERM)
    await worker.wait_exit(30)
    assert f"metrics at http://127.0.0.1:{port}/metrics" in worker.stdout()


async def test_the_standalone_exporter_serves_every_queue(
    backend: PostgresBackend, effects_dsn: str, queue_name: str, tmp_path: Path
) -> None:
    await backend.add_job(queue_name, "noop")
    await backend.pause_queue(queue_name)
    env = {**os.environ, "LANE_PG_DSN": effects_dsn}
    env.pop("LANE_PG_SCHEMA", None)
    out = tmp_path / "metrics.out"
    exporter = _start_exporter(env, out)
    try:
        line = await eventually(lambda: _announced(out), timeout=30)
        port = int(line.rsplit(":", 1)[1].split("/")[0])
        text = await asyncio.to_thread(_scrape, port)
        assert text[("lane_pg_queue_jobs", (("queue", queue_name), ("state", "waiting")))] == 1
        assert text[("lane_pg_queue_paused", (("queue", queue_name),))] == 1
    finally:
        exporter.send_signal(signal.SIGTERM)
        assert await asyncio.to_thread(exporter.wait, 30) == 0


def _start_exporter(env: dict[str, str], out: Path) -> subprocess.Popen[bytes]:
    with out.open("wb") as stdout:
        return subprocess.Popen(
            [sys.executable, "-m", "lane_pg", "metrics", "--port", "0"],
            stdout=stdout,
            stderr=subprocess.STDOUT,
            env=env,
        )


def _announced(out: Path) -> str | None:
    for line in out.read_text().splitlines():
        if line.startswith("lane_pg: metrics at http://"):
            return line
    return None


def _samples(port: int) -> list[tuple[str, dict[str, str], float]]:
    """Every sample of the endpoint, as prometheus_client's parser reads it."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
        text = response.read().decode()
    return [
        (sample.name, dict(sample.labels), sample.value)
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    ]


async def test_multiprocess_mode_the_exporter_sums_the_workers_of_a_host(
    workers: Workers, backend: PostgresBackend, queue_name: str, tmp_path: Path
) -> None:
    """Two worker processes write their counters and histograms to one
    PROMETHEUS_MULTIPROC_DIR; ``python -m lane_pg metrics`` serves them summed per label
    set, with the queue gauges read once."""
    other = f"{queue_name}_b"
    shared = tmp_path / "prometheus"
    shared.mkdir()
    env = {"PROMETHEUS_MULTIPROC_DIR": str(shared)}
    # Real interpreters, not the fork server: prometheus_client reads the variable when
    # it is first imported.
    for _ in range(3):
        await backend.add_job(queue_name, "noop")
    await backend.add_job(queue_name, "fail", None, {"attempts": 1})
    first = await workers.run(
        *queue_args(queue_name), "--burst", "--metrics-port", "0", env=env, unbuffered=False
    )
    for _ in range(2):
        await backend.add_job(queue_name, "noop")
    await backend.add_job(other, "noop")
    second = await workers.run(
        *queue_args(queue_name, other), "--burst", "--metrics-port", "0", env=env,
        unbuffered=False,
    )  # fmt: skip
    assert first.returncode == second.returncode == 0, first.describe() + second.describe()
    assert "metrics at http://127.0.0.1:" in first.stdout()  # port 0: the one it got, said
    assert sorted(path.name for path in shared.glob("counter_*.db")) == sorted(
        f"counter_{worker.pid}.db" for worker in (first, second)
    )

    out = tmp_path / "metrics.out"
    environment = {**os.environ, "LANE_PG_DSN": workers.dsn, **env}
    environment.pop("LANE_PG_SCHEMA", None)
    exporter = _start_exporter(environment, out)
    try:
        line = await eventually(lambda: _announced(out), timeout=30)
        port = int(line.rsplit(":", 1)[1].split("/")[0])
        samples = await asyncio.to_thread(_samples, port)
    finally:
        exporter.send_signal(signal.SIGTERM)
        assert await asyncio.to_thread(exporter.wait, 30) == 0
    assert f"with the worker counters and histograms of {shared}" in out.read_text()

    def values(name: str, **labels: str) -> list[float]:
        return [v for n, got, v in samples if n == name and got == labels]

    assert values("lane_pg_jobs_completed_total", queue=queue_name) == [5]  # 3 + 2
    assert values("lane_pg_jobs_failed_total", queue=queue_name) == [1]
    assert values("lane_pg_jobs_completed_total", queue=other) == [1]
    assert values("lane_pg_job_wait_seconds_count", queue=queue_name) == [6]
    assert values("lane_pg_job_run_seconds_count", queue=other) == [1]
    # The gauges come from the database, once: never summed over the processes.
    assert values("lane_pg_queue_jobs", queue=queue_name, state="completed") == [5]
    assert values("lane_pg_queue_jobs", queue=queue_name, state="failed") == [1]
    assert not any("pid" in labels for _, labels, _ in samples)
