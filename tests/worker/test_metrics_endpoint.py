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
