"""Lane priority with one slot: a higher-priority lane's jobs start before any further job
of a lower-priority lane, whatever the arrival order (LANE-5, CLAIM-15, WORK-7)."""

from __future__ import annotations

import itertools

import asyncpg
import pytest

from lane_pg.postgres.backend import PostgresBackend
from tests.worker.conftest import EFFECTS_TABLE, LANES_APP, Workers, counts, wait_for_state

ROUNDS = 4


@pytest.mark.parametrize("lanes_from", ["cli", "app"])
async def test_control_lane_starts_before_waiting_prompt_jobs_LANE_5_CLAIM_15(
    workers: Workers,
    backend: PostgresBackend,
    db: asyncpg.Connection,
    queue_name: str,
    lanes_from: str,
) -> None:
    control, prompt, other = (f"{queue_name}.{lane}" for lane in ("control", "prompt", "other"))
    if lanes_from == "cli":
        worker = await workers.start(
            "--concurrency", "1", "--queue", f"{control}:1", "--queue", f"{prompt}:5"
        )
    else:  # no --queue: the app's declared lanes, control:1:1 and prompt:5:1
        worker = await workers.start("--concurrency", "1", app=LANES_APP)
    startup = worker.stdout()
    assert control in startup and prompt in startup and other not in startup, startup

    blocker = await backend.add_job(prompt, "sleep", {"seconds": 1.0})
    await wait_for_state(db, prompt, blocker.id, "active")
    # Arrive interleaved while the only slot is busy; one more job on a queue not served.
    arrived = []
    for n in range(ROUNDS):
        arrived.append(await backend.add_job(prompt, "record", {"n": n}))
        arrived.append(await backend.add_job(control, "record", {"n": n}))
    stray = await backend.add_job(other, "record", {"n": 0})

    for job in arrived:
        await wait_for_state(db, job.queue, job.id, "completed")
    # processed_at: the claim (database clock); the effect row: the processor's last act.
    runs = sorted(
        await db.fetch(
            "SELECT j.processed_at, e.at AS ended, j.queue, j.id FROM lane.jobs j"
            f" JOIN {EFFECTS_TABLE} e ON e.queue = j.queue AND e.job_id = j.id"
            " WHERE j.queue = ANY($1::text[])",
            [control, prompt],
        ),
        key=lambda run: run["processed_at"],
    )
    assert len(runs) == 2 * ROUNDS + 1
    order = [(run["queue"].rsplit(".", 1)[1], run["id"]) for run in runs]
    print(f"\nstart order: {[lane for lane, _ in order]}")
    expected = (
        [("prompt", blocker.id)]
        + [("control", job.id) for job in arrived if job.queue == control]
        + [("prompt", job.id) for job in arrived if job.queue == prompt and job is not blocker]
    )
    # Every control job before any further prompt job; FIFO inside each lane.
    assert order == expected
    # One slot: no job was claimed before the previous processor had ended (WORK-7).
    for previous, following in itertools.pairwise(runs):
        assert following["processed_at"] >= previous["ended"]
    # CLAIM-15: the queue the worker does not serve is untouched.
    untouched = await backend.get_job(other, stray.id)
    assert untouched is not None and (untouched.state, untouched.attempts_started) == (
        "waiting",
        0,
    )
    assert await counts(db, [control, prompt]) == {"completed": 2 * ROUNDS + 1}
