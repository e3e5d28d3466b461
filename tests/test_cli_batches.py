"""``python -m lane_pg batches`` as an operator runs it: list (text and JSON, by state), show
with its progress, cancel (and again), prune, and the errors of a bad id or count."""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator

import pytest

from lane_pg.postgres.backend import PostgresBackend
from lane_pg.types import QueueDemand, QueuedSpec
from tests.test_cli_queue_commands import cli, unique_queue


@pytest.fixture
async def backend(pg_dsn: str) -> AsyncIterator[PostgresBackend]:
    be = await PostgresBackend.connect(pg_dsn, max_size=2)
    yield be
    await be.close()


async def batch_of_three(backend: PostgresBackend, queue: str) -> str:
    batch_id = str(uuid.uuid4())
    specs = [QueuedSpec(queue, "part", {"n": n}) for n in range(3)]
    await backend.batches.add_batch(batch_id, "import", specs, {"finally": "cleanup"})
    return batch_id


async def complete_one(backend: PostgresBackend, queue: str) -> None:
    [job] = await backend.runs.claim_jobs("cli", [QueueDemand(queue, 1)], 30)
    await backend.runs.complete_job(queue, job.id, job.lock_token or "", None)


async def test_list_and_show_report_a_batchs_progress(
    pg_dsn: str, backend: PostgresBackend
) -> None:
    queue = unique_queue("batch")
    batch_id = await batch_of_three(backend, queue)
    await complete_one(backend, queue)

    listed = await cli("batches", "--limit", "500", dsn=pg_dsn)
    assert listed.returncode == 0, listed.stderr
    header, *lines = listed.stdout.splitlines()
    assert header.split("\t") == [
        "id",
        "name",
        "state",
        "settled",
        "failed",
        "done",
        "created_at",
    ]
    [mine] = [line.split("\t") for line in lines if line.startswith(batch_id)]
    assert mine[1:6] == ["import", "pending", "1/3", "0", "33%"]

    as_json = await cli("batches", "list", "--json", "--limit", "500", dsn=pg_dsn)
    [document] = [d for d in map(json.loads, as_json.stdout.splitlines()) if d["id"] == batch_id]
    assert (document["state"], document["total_jobs"], document["pending_jobs"]) == (
        "pending",
        3,
        2,
    )
    assert document["options"]["finally"] == "cleanup"

    finished = await cli("batches", "--state", "finished", "--limit", "500", dsn=pg_dsn)
    assert batch_id not in finished.stdout

    shown = await cli("batches", "show", batch_id, dsn=pg_dsn)
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.splitlines()[0] == f"batch {batch_id} 'import': pending"
    assert "[#########.....................] 33%" in shown.stdout
    assert "3 total, 2 pending, 1 settled, 0 failed" in shown.stdout
    assert "callbacks finally cleanup" in shown.stdout

    one = json.loads((await cli("batches", "show", batch_id, "--json", dsn=pg_dsn)).stdout)
    assert one["processed_jobs"] == 1 and one["progress"] == 33


async def test_cancel_then_prune(pg_dsn: str, backend: PostgresBackend) -> None:
    queue = unique_queue("batch")
    batch_id = await batch_of_three(backend, queue)
    await complete_one(backend, queue)

    cancelled = await cli("batches", "cancel", batch_id, "--remove-waiting", dsn=pg_dsn)
    assert cancelled.returncode == 0, cancelled.stderr
    assert cancelled.stdout == (
        f"lane_pg: batch {batch_id} cancelled (its waiting jobs removed); 0 of 3 jobs pending\n"
    )
    # What waits now is the finally callback the batch's last settlement enqueued.
    assert (await backend.reads.get_job_counts(queue))["waiting"] == 1
    assert await backend.jobs.get_job(queue, f"batch-{batch_id}-finally") is not None
    batch = await backend.batches.find_batch(batch_id)
    assert batch is not None and batch.cancelled and batch.finished

    again = await cli("batches", "cancel", batch_id, dsn=pg_dsn)
    assert again.stdout.startswith(f"lane_pg: batch {batch_id} was cancelled already")

    pruned = await cli("batches", "prune", "--older-than", "0s", dsn=pg_dsn)
    assert pruned.returncode == 0, pruned.stderr
    assert pruned.stdout.startswith("lane_pg: pruned ")
    assert await backend.batches.find_batch(batch_id) is None


async def test_prune_keeps_unfinished_batches_unless_asked(
    pg_dsn: str, backend: PostgresBackend
) -> None:
    queue = unique_queue("batch")
    batch_id = await batch_of_three(backend, queue)

    await cli("batches", "prune", "--older-than", "0s", dsn=pg_dsn)
    assert await backend.batches.find_batch(batch_id) is not None
    result = await cli(
        "batches", "prune", "--older-than", "0s", "--unfinished-older-than", "0s", dsn=pg_dsn
    )
    assert result.returncode == 0, result.stderr
    assert await backend.batches.find_batch(batch_id) is None


async def test_bad_input_is_refused_with_a_clear_error(pg_dsn: str) -> None:
    missing = str(uuid.uuid4())
    for args in (("show", missing), ("cancel", missing)):
        result = await cli("batches", *args, dsn=pg_dsn)
        assert result.returncode == 1
        assert f"batch {missing!r} not found" in result.stderr
    bad_limit = await cli("batches", "--limit", "0", dsn=pg_dsn)
    assert bad_limit.returncode == 1 and "--limit '0'" in bad_limit.stderr
    bad_duration = await cli("batches", "prune", "--older-than", "soon", dsn=pg_dsn)
    assert bad_duration.returncode == 1 and "--older-than" in bad_duration.stderr
