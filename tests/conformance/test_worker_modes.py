"""The worker's ways of running and its job-runtime options, on every backend (WORK-1/2/4/5/
6/13/14, STALL-7, RETRY-2/3/4, PAUSE-10/11, CLAIM-7/11/12/13).

``run_until_idle``, ``run_once`` and ``run_once_blocking`` are driven in-process, like a
test or a script would; ``claim_next_blocking`` is called with just a backend. Waits have
deadlines; timings are only checked against generous bounds.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import pytest

from lane_pg.backend import HasWakeups, JobQueueBackend
from lane_pg.errors import InvalidOptions
from lane_pg.facade import BackendDriver, Job, JobRegistry, QueueFacade
from lane_pg.types import (
    JSON,
    Backoff,
    JobOptions,
    JobRateLimit,
    JobRow,
    Lane,
    QueueDemand,
    RepeatOptions,
    RetryPolicy,
)
from lane_pg.worker import JobContext, ProcessorLike, Worker, WorkerConfig, claim_next_blocking
from tests.helpers import eventually

BOUND = 30.0  # seconds: no run here may take longer


def _worker(
    backend: JobQueueBackend,
    processors: dict[str, ProcessorLike] | ProcessorLike,
    queue: str,
    **settings: object,
) -> Worker:
    settings.setdefault("poll_interval", 0.05)
    config = WorkerConfig(lanes=(Lane(queue),), **settings)  # type: ignore[arg-type]
    return Worker(backend, processors, config)


async def _job(backend: JobQueueBackend, queue: str, job_id: str) -> JobRow:
    job = await backend.get_job(queue, job_id)
    assert job is not None
    return job


async def echo(job: JobRow, ctx: JobContext) -> JSON:
    return {"echo": job.payload}


async def broken(job: JobRow, ctx: JobContext) -> JSON:
    raise RuntimeError(f"broken on attempt {job.attempts_started}")


async def slow(job: JobRow, ctx: JobContext) -> JSON:
    await asyncio.sleep(BOUND)
    return None


class Doubler:
    """A processor object (WORK-2): ``process`` is what the worker calls."""

    def __init__(self) -> None:
        self.calls = 0

    async def process(self, job: JobRow, ctx: JobContext) -> JSON:
        self.calls += 1
        return job.payload * 2


# ------------------------------------------------------------------ WORK-1, WORK-2
async def test_functions_and_process_objects_are_processors_WORK_1_WORK_2(
    backend: JobQueueBackend, queue_name: str
) -> None:
    doubler = Doubler()
    by_function = await backend.add_job(queue_name, "echo", {"n": 1})
    by_object = await backend.add_job(queue_name, "double", 21)
    worker = _worker(backend, {"echo": echo, "double": doubler}, queue_name)
    assert await asyncio.wait_for(worker.run_until_idle(), BOUND) == 2
    assert (await _job(backend, queue_name, by_function.id)).return_value == {"echo": {"n": 1}}
    assert (await _job(backend, queue_name, by_object.id)).return_value == 42
    assert doubler.calls == 1


async def test_one_processor_serves_every_job_name_WORK_2(
    backend: JobQueueBackend, queue_name: str
) -> None:
    doubler = Doubler()
    added = [await backend.add_job(queue_name, name, 5) for name in ("a", "b")]
    worker = _worker(backend, doubler, queue_name)
    assert await asyncio.wait_for(worker.run_until_idle(), BOUND) == 2
    for job in added:
        done = await _job(backend, queue_name, job.id)
        assert (done.state, done.return_value) == ("completed", 10)


def test_a_processor_must_be_callable_or_have_process_WORK_2() -> None:
    from lane_pg.errors import ConfigurationError
    from lane_pg.memory import MemoryBackend

    with pytest.raises(ConfigurationError, match="process"):
        Worker(MemoryBackend(), {"x": 42})  # type: ignore[dict-item]


# ------------------------------------------------------------------ WORK-4
async def test_run_until_idle_processes_everything_then_returns_WORK_4(
    backend: JobQueueBackend, queue_name: str
) -> None:
    added = [await backend.add_job(queue_name, "echo", n) for n in range(3)]
    later = await backend.add_job(queue_name, "echo", "later", JobOptions(delay=3600))
    worker = _worker(backend, {"echo": echo}, queue_name, concurrency=2)
    assert await asyncio.wait_for(worker.run_until_idle(100), BOUND) == 3
    for job in added:
        assert (await _job(backend, queue_name, job.id)).state == "completed"
    assert (await _job(backend, queue_name, later.id)).state == "delayed"  # not ready: left
    assert await asyncio.wait_for(worker.run_until_idle(), BOUND) == 0  # idle: returns


async def test_run_until_idle_stops_after_max_jobs_WORK_4(
    backend: JobQueueBackend, queue_name: str
) -> None:
    for n in range(5):
        await backend.add_job(queue_name, "echo", n)
    worker = _worker(backend, {"echo": echo}, queue_name, concurrency=4)
    assert await asyncio.wait_for(worker.run_until_idle(max_jobs=2), BOUND) == 2
    counts = await backend.get_job_counts(queue_name, ["completed", "waiting", "active"])
    assert counts == {"completed": 2, "waiting": 3, "active": 0}
    with pytest.raises(InvalidOptions):
        await worker.run_until_idle(-1)


async def test_run_until_idle_runs_retries_that_become_ready_WORK_4(
    backend: JobQueueBackend, queue_name: str
) -> None:
    # A zero-backoff retry goes straight back to waiting: claimable again, so not idle.
    failing = await backend.add_job(queue_name, "broken", None, JobOptions(attempts=3))
    worker = _worker(backend, {"broken": broken}, queue_name)
    assert await asyncio.wait_for(worker.run_until_idle(), BOUND) == 3
    job = await _job(backend, queue_name, failing.id)
    assert (job.state, job.attempts_made) == ("failed", 3)


# ------------------------------------------------------------------ WORK-5
async def test_run_once_claims_runs_and_settles_one_job_WORK_5(
    backend: JobQueueBackend, queue_name: str
) -> None:
    worker = _worker(backend, {"echo": echo}, queue_name)
    began = time.monotonic()
    assert await asyncio.wait_for(worker.run_once(), BOUND) is None  # empty: at once
    assert time.monotonic() - began < 5
    first = await backend.add_job(queue_name, "echo", 1)
    second = await backend.add_job(queue_name, "echo", 2)
    ran = await asyncio.wait_for(worker.run_once(), BOUND)
    assert ran is not None and ran.id == first.id
    assert (await _job(backend, queue_name, first.id)).state == "completed"  # written
    assert (await _job(backend, queue_name, second.id)).state == "waiting"  # one only


async def test_run_once_blocking_waits_for_a_job_added_later_WORK_5_CLAIM_13(
    backend: JobQueueBackend, queue_name: str
) -> None:
    worker = _worker(
        backend, {"echo": echo}, queue_name, blocking_claim_timeout=10.0, poll_interval=30.0
    )
    if not isinstance(backend, HasWakeups):
        # CLAIM-13: without a native wait the blocking call is one immediate claim.
        began = time.monotonic()
        assert await asyncio.wait_for(worker.run_once_blocking(), BOUND) is None
        assert time.monotonic() - began < 5
        return

    async def add_later() -> JobRow:
        await asyncio.sleep(0.1)
        return await backend.add_job(queue_name, "echo", "late")

    adding = asyncio.create_task(add_later())
    began = time.monotonic()
    ran = await asyncio.wait_for(worker.run_once_blocking(), BOUND)
    added = await adding
    # Woken by the add's NOTIFY, long before the 30 s poll or the 10 s timeout.
    assert time.monotonic() - began < 5
    assert ran is not None and ran.id == added.id
    assert (await _job(backend, queue_name, added.id)).return_value == {"echo": "late"}
    began = time.monotonic()
    assert await asyncio.wait_for(worker.run_once_blocking(timeout=0.2), BOUND) is None
    assert 0.15 < time.monotonic() - began < 5


async def test_run_once_blocking_wakes_for_a_delayed_job_when_due_WORK_5(
    backend: JobQueueBackend, queue_name: str
) -> None:
    if not isinstance(backend, HasWakeups):
        pytest.skip("CLAIM-13: a backend without a native wait does not block")
    added = await backend.add_job(queue_name, "echo", "due", JobOptions(delay=0.5))
    worker = _worker(
        backend, {"echo": echo}, queue_name, blocking_claim_timeout=10.0, poll_interval=30.0
    )
    began = time.monotonic()
    ran = await asyncio.wait_for(worker.run_once_blocking(), BOUND)
    assert ran is not None and ran.id == added.id
    assert 0.3 < time.monotonic() - began < 3  # its due time, not the 30 s poll


# ------------------------------------------------------------------ WORK-6
async def test_start_runs_the_loop_in_a_task_until_stop_WORK_6(
    backend: JobQueueBackend, queue_name: str
) -> None:
    worker = _worker(backend, {"echo": echo}, queue_name)
    task = worker.start()
    assert worker.start() is task  # one loop per worker
    added = await backend.add_job(queue_name, "echo", 7)

    async def completed() -> bool:
        return (await _job(backend, queue_name, added.id)).state == "completed"

    await eventually(completed, timeout=BOUND)
    worker.stop()
    await asyncio.wait_for(task, BOUND)
    assert worker.counts["completed"] == 1


# ------------------------------------------------------------------ WORK-13, STALL-7
@pytest.mark.parametrize("mode", ["run", "run_until_idle", "run_once"])
async def test_the_attempts_guard_runs_in_every_mode_WORK_13_STALL_7(
    backend: JobQueueBackend, queue_name: str, mode: str
) -> None:
    calls = 0

    async def never(job: JobRow, ctx: JobContext) -> JSON:
        nonlocal calls
        calls += 1
        return None

    added = await backend.add_job(queue_name, "never")
    await backend.claim_jobs("crashed", [QueueDemand(queue_name, 1)], 1)
    # The first worker died: its lease lapses and recovery puts the job back.
    await backend.recover_stalled([queue_name], now=datetime.now(UTC) + timedelta(seconds=5))
    worker = _worker(backend, {"never": never}, queue_name, burst=True)
    if mode == "run":
        await asyncio.wait_for(worker.run(), BOUND)
    elif mode == "run_until_idle":
        assert await asyncio.wait_for(worker.run_until_idle(), BOUND) == 1
    else:
        assert await asyncio.wait_for(worker.run_once(), BOUND) is not None
    job = await _job(backend, queue_name, added.id)
    assert calls == 0
    assert (job.state, job.attempts_started) == ("failed", 2)
    assert (job.failed_reason or "").startswith("MaxAttemptsExceeded: job never")


async def test_a_repeat_owner_whose_delivery_was_lost_runs_and_keeps_its_series(
    backend: JobQueueBackend, queue_name: str
) -> None:
    """One attempt, a worker that froze with the owner: the guard does not end the series
    (stalled recovery keeps a series too); the occurrence runs and its successor exists."""
    calls = 0

    async def beat(job: JobRow, ctx: JobContext) -> JSON:
        nonlocal calls
        calls += 1
        return None

    options = JobOptions(repeat=RepeatOptions.every(3600, key="beat"))
    owner = await backend.add_job(queue_name, "beat", None, options)
    await backend.claim_jobs("frozen", [QueueDemand(queue_name, 1)], 1)
    await backend.recover_stalled([queue_name], now=datetime.now(UTC) + timedelta(seconds=5))
    worker = _worker(backend, {"beat": beat}, queue_name, burst=True)
    await asyncio.wait_for(worker.run_until_idle(), BOUND)
    job = await _job(backend, queue_name, owner.id)
    assert calls == 1
    assert (job.state, job.attempts_started) == ("completed", 2)
    series = await backend.get_repeat(queue_name, "beat")
    assert series is not None and series.job_id != owner.id  # the successor owns it


# ------------------------------------------------------------------ WORK-14
async def test_failures_store_their_stacktraces_WORK_14(
    backend: JobQueueBackend, queue_name: str
) -> None:
    kept = await backend.add_job(queue_name, "broken", None, JobOptions(attempts=2))
    worker = _worker(backend, {"broken": broken}, queue_name)
    await asyncio.wait_for(worker.run_until_idle(), BOUND)
    job = await _job(backend, queue_name, kept.id)
    assert job.failed_reason == "broken on attempt 2"
    assert len(job.stacktrace) == 2
    assert "RuntimeError: broken on attempt 1" in job.stacktrace[0]
    assert "RuntimeError: broken on attempt 2" in job.stacktrace[1]  # newest last


async def test_stacktrace_limit_zero_stores_none_WORK_14(
    backend: JobQueueBackend, queue_name: str
) -> None:
    added = await backend.add_job(queue_name, "broken")
    worker = _worker(backend, {"broken": broken}, queue_name, stacktrace_limit=0)
    await asyncio.wait_for(worker.run_until_idle(), BOUND)
    job = await _job(backend, queue_name, added.id)
    assert (job.state, job.failed_reason, job.stacktrace) == ("failed", "broken on attempt 1", [])


async def test_the_stored_list_keeps_the_newest_stacktrace_limit_WORK_14(
    backend: JobQueueBackend, queue_name: str
) -> None:
    added = await backend.add_job(queue_name, "broken", None, JobOptions(attempts=4))
    worker = _worker(backend, {"broken": broken}, queue_name, stacktrace_limit=2)
    await asyncio.wait_for(worker.run_until_idle(), BOUND)
    job = await _job(backend, queue_name, added.id)
    assert len(job.stacktrace) == 2
    assert "broken on attempt 3" in job.stacktrace[0]
    assert "broken on attempt 4" in job.stacktrace[1]


# ------------------------------------------------------------------ RETRY-2
async def test_a_retry_policy_stores_the_spelled_out_options_RETRY_2(
    backend: JobQueueBackend, queue_name: str
) -> None:
    cases = [
        (RetryPolicy.fixed(3, timedelta(seconds=1)), 4, Backoff.fixed(1)),
        (RetryPolicy.exponential(5), 6, Backoff.exponential(0.1, cap=30)),
        (RetryPolicy.none(), 1, None),
    ]
    for policy, attempts, backoff in cases:
        by_policy = await backend.add_job(queue_name, "x", None, JobOptions(retry=policy))
        spelled = await backend.add_job(
            queue_name, "x", None, JobOptions(attempts=attempts, backoff=backoff)
        )
        assert by_policy.max_attempts == policy.max_attempts == attempts
        assert by_policy.options == spelled.options
        assert by_policy.backoff == spelled.backoff == backoff


async def test_fixed_retries_give_n_plus_one_attempts_RETRY_2(
    backend: JobQueueBackend, queue_name: str
) -> None:
    added = await backend.add_job(
        queue_name, "broken", None, JobOptions(retry=RetryPolicy.fixed(3, 0))
    )
    worker = _worker(backend, {"broken": broken}, queue_name)
    assert await asyncio.wait_for(worker.run_until_idle(), BOUND) == 4
    job = await _job(backend, queue_name, added.id)
    assert (job.state, job.attempts_started, job.attempts_made) == ("failed", 4, 4)


async def test_a_plain_add_makes_one_attempt_RETRY_3(
    backend: JobQueueBackend, queue_name: str
) -> None:
    added = await backend.add_job(queue_name, "x")
    assert (added.max_attempts, added.backoff, added.options) == (1, None, {})


@dataclass
class DefaultsOnly(Job):
    """A typed job that declares no retry settings of its own."""

    job_name = "DefaultsOnly"

    async def handle(self) -> None:
        return None


async def test_a_job_class_defaults_to_three_tries_2s_to_300s_backoff_RETRY_3(
    backend: JobQueueBackend, backend_kind: str, queue_name: str
) -> None:
    """The documented numbers themselves (A3: three tries, exponential from 2 s capped at
    300 s, 25 % jitter), not the constant they are defined by, as stored by each backend."""
    facade = QueueFacade(registry=JobRegistry())
    facade.set_driver(BackendDriver(backend, backend_kind))
    facade.registry.register(DefaultsOnly)
    facade.route(DefaultsOnly, queue=queue_name)
    try:
        row = await _job(backend, queue_name, await facade.push(DefaultsOnly()))
    finally:
        facade.reset()
    assert row.max_attempts == 3
    assert row.backoff == Backoff("exponential", base_ms=2_000, cap_ms=300_000, jitter=0.25)
    assert row.options["attempts"] == 3
    assert row.options["backoff"] == {
        "type": "exponential",
        "base_ms": 2_000,
        "cap_ms": 300_000,
        "jitter": 0.25,
    }


# ------------------------------------------------------------------ RETRY-4
async def test_a_timeout_is_retried_by_default_RETRY_4(
    backend: JobQueueBackend, queue_name: str
) -> None:
    added = await backend.add_job(queue_name, "slow", None, JobOptions(timeout=0.1, attempts=2))
    worker = _worker(backend, {"slow": slow}, queue_name)
    assert await asyncio.wait_for(worker.run_until_idle(), BOUND) == 2
    job = await _job(backend, queue_name, added.id)
    assert (job.state, job.attempts_made) == ("failed", 2)
    assert (job.failed_reason or "").startswith("JobTimedOut")


async def test_fail_on_timeout_fails_for_good_RETRY_4(
    backend: JobQueueBackend, queue_name: str
) -> None:
    added = await backend.add_job(queue_name, "slow", None, JobOptions(timeout=0.1, attempts=5))
    worker = _worker(backend, {"slow": slow}, queue_name, fail_on_timeout=True)
    assert await asyncio.wait_for(worker.run_until_idle(), BOUND) == 1
    job = await _job(backend, queue_name, added.id)
    assert (job.state, job.attempts_made, job.attempts_started) == ("failed", 1, 1)
    assert (job.failed_reason or "").startswith("TimeoutExceeded: job slow")


# ------------------------------------------------------------------ PAUSE-10, PAUSE-11
async def test_a_worker_that_is_not_pausable_claims_from_a_paused_queue_PAUSE_10(
    backend: JobQueueBackend, queue_name: str
) -> None:
    added = await backend.add_job(queue_name, "echo", 1)
    await backend.pause_queue(queue_name)
    pausable = _worker(backend, {"echo": echo}, queue_name)
    assert await asyncio.wait_for(pausable.run_until_idle(), BOUND) == 0
    ignoring = _worker(backend, {"echo": echo}, queue_name, pausable=False)
    assert await asyncio.wait_for(ignoring.run_until_idle(), BOUND) == 1
    assert (await _job(backend, queue_name, added.id)).state == "completed"
    assert await backend.is_queue_paused(queue_name)  # the flag is left as it was


class SettingsPauses:
    """A pause store outside the claim (seed 003's pause keys), as a driver would have."""

    def __init__(self, paused: Collection[str] = (), *, broken: bool = False) -> None:
        self.paused = set(paused)
        self.broken = broken
        self.reads = 0

    async def paused_queues(self, queues: Sequence[str]) -> Collection[str]:
        self.reads += 1
        if self.broken:
            raise ConnectionError("settings store unreachable")
        return self.paused.intersection(queues)


async def test_pauses_kept_outside_the_claim_are_honoured_PAUSE_11(
    backend: JobQueueBackend, queue_name: str
) -> None:
    await backend.add_job(queue_name, "echo", 1)
    store = SettingsPauses([queue_name])
    config = WorkerConfig(lanes=(Lane(queue_name),), poll_interval=0.05)
    worker = Worker(backend, {"echo": echo}, config, pause_state=store)
    assert await asyncio.wait_for(worker.run_until_idle(), BOUND) == 0
    assert store.reads >= 1
    store.paused.clear()
    assert await asyncio.wait_for(worker.run_until_idle(), BOUND) == 1


async def test_an_unreadable_pause_store_fails_open_and_warns_PAUSE_11(
    backend: JobQueueBackend, queue_name: str, caplog: pytest.LogCaptureFixture
) -> None:
    for n in range(3):
        await backend.add_job(queue_name, "echo", n)
    store = SettingsPauses([queue_name], broken=True)
    config = WorkerConfig(lanes=(Lane(queue_name),), poll_interval=0.05)
    worker = Worker(backend, {"echo": echo}, config, pause_state=store)
    with caplog.at_level(logging.WARNING, logger="lane_pg.worker"):
        assert await asyncio.wait_for(worker.run_until_idle(), BOUND) == 3
    warnings = [r.message for r in caplog.records if "pause state unreadable" in r.message]
    assert len(warnings) == 1, caplog.records  # once per outage, not per claim
    assert "settings store unreachable" in warnings[0]
    assert store.reads >= 2


async def test_a_worker_that_is_not_pausable_reads_no_pause_state_PAUSE_10(
    backend: JobQueueBackend, queue_name: str
) -> None:
    await backend.add_job(queue_name, "echo", 1)
    store = SettingsPauses([queue_name])
    config = WorkerConfig(lanes=(Lane(queue_name),), poll_interval=0.05, pausable=False)
    worker = Worker(backend, {"echo": echo}, config, pause_state=store)
    assert await asyncio.wait_for(worker.run_until_idle(), BOUND) == 1
    assert store.reads == 0


def test_pausable_follows_the_environment_PAUSE_10(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("LANE_PG_PAUSABLE", raising=False)
    assert WorkerConfig().pausable is True
    for value, expected in (("false", False), ("0", False), ("OFF", False), ("true", True)):
        monkeypatch.setenv("LANE_PG_PAUSABLE", value)
        assert WorkerConfig().pausable is expected, value
    monkeypatch.setenv("LANE_PG_PAUSABLE", "maybe")
    with pytest.raises(InvalidOptions, match="LANE_PG_PAUSABLE"):
        WorkerConfig()


# ------------------------------------------------------------------ CLAIM-7, -11, -13
async def test_claim_next_blocking_returns_a_ready_job_at_once_CLAIM_7(
    backend: JobQueueBackend, queue_name: str
) -> None:
    added = await backend.add_job(queue_name, "x")
    claimed = await asyncio.wait_for(
        claim_next_blocking(backend, "script", 30, 10, queues=[queue_name]), BOUND
    )
    assert claimed is not None and claimed.id == added.id and claimed.state == "active"
    await backend.complete_job(queue_name, claimed.id, claimed.lock_token)


async def test_claim_next_blocking_without_work_CLAIM_7_CLAIM_13(
    backend: JobQueueBackend, queue_name: str
) -> None:
    await backend.add_job(queue_name, "x", None, JobOptions(delay=3600))  # the queue exists
    began = time.monotonic()
    found = await asyncio.wait_for(
        claim_next_blocking(backend, "script", 30, 0.3, queues=[queue_name]), BOUND
    )
    elapsed = time.monotonic() - began
    assert found is None
    if isinstance(backend, HasWakeups):
        assert 0.25 < elapsed < 5  # None once block_timeout passed
    else:
        assert elapsed < 5  # CLAIM-13: one immediate claim


async def test_claim_next_blocking_wakes_for_a_delayed_job_when_due_CLAIM_7(
    backend: JobQueueBackend, queue_name: str
) -> None:
    if not isinstance(backend, HasWakeups):
        pytest.skip("CLAIM-13: a backend without a native wait does not block")
    added = await backend.add_job(queue_name, "x", None, JobOptions(delay=0.5))
    began = time.monotonic()
    claimed = await asyncio.wait_for(
        claim_next_blocking(backend, "script", 30, 10, queues=[queue_name], poll_interval=30),
        BOUND,
    )
    elapsed = time.monotonic() - began
    assert claimed is not None and claimed.id == added.id
    assert 0.3 < elapsed < 3  # its due time, long before the 30 s poll, with no add


async def test_claim_next_blocking_wakes_for_a_job_added_while_blocked_CLAIM_7(
    backend: JobQueueBackend, queue_name: str
) -> None:
    if not isinstance(backend, HasWakeups):
        pytest.skip("CLAIM-13: a backend without a native wait does not block")
    await backend.add_job(queue_name, "x", None, JobOptions(delay=3600))
    blocked = asyncio.create_task(
        claim_next_blocking(backend, "script", 30, 20, queues=[queue_name], poll_interval=30)
    )
    await asyncio.sleep(0.2)  # let it block (a job added before is claimed at once anyway)
    added = await backend.add_job(queue_name, "x", "now")
    began = time.monotonic()
    claimed = await asyncio.wait_for(blocked, BOUND)
    assert claimed is not None and claimed.id == added.id
    assert time.monotonic() - began < 5  # the NOTIFY, not the poll


class DeafWakeups:
    """A wake-up source that never hears anything (a lost NOTIFY, a LISTEN reconnect)."""

    def __init__(self) -> None:
        self.waits: list[float | None] = []

    async def start(self) -> None:
        return None

    async def close(self) -> None:
        return None

    def wake(self) -> None:
        return None

    async def wait(self, timeout: float | None) -> bool:  # noqa: ASYNC109 (the protocol's)
        self.waits.append(timeout)
        await asyncio.sleep(timeout or 0)
        return False


async def test_claim_next_blocking_rechecks_every_poll_interval_CLAIM_12(
    backend: JobQueueBackend, queue_name: str
) -> None:
    await backend.add_job(queue_name, "x", None, JobOptions(delay=3600))
    deaf = DeafWakeups()
    blocked = asyncio.create_task(
        claim_next_blocking(
            backend, "script", 30, 20, queues=[queue_name], poll_interval=0.1, wakeups=deaf
        )
    )
    await asyncio.sleep(0.2)  # blocked, and deaf to the add's wake-up
    added = await backend.add_job(queue_name, "x", "unheard")
    claimed = await asyncio.wait_for(blocked, BOUND)
    assert claimed is not None and claimed.id == added.id
    assert deaf.waits and all(t is not None and t <= 0.1 for t in deaf.waits)


async def test_claim_next_blocking_sleeps_out_a_rate_limit_CLAIM_11(
    backend: JobQueueBackend, queue_name: str
) -> None:
    for n in range(2):
        await backend.add_job(queue_name, "x", n)
    limit = JobRateLimit(1, 0.5)
    first = await claim_next_blocking(
        backend, "script", 30, 10, queues=[queue_name], rate_limit=limit
    )
    first_at = time.monotonic()
    assert first is not None
    second = await asyncio.wait_for(
        claim_next_blocking(
            backend, "script", 30, 10, queues=[queue_name], rate_limit=limit, poll_interval=30
        ),
        BOUND,
    )
    if not isinstance(backend, HasWakeups):
        assert second is None  # CLAIM-13: throttled, and no waiting
        return
    waited = time.monotonic() - first_at
    assert second is not None and second.id != first.id
    assert 0.35 < waited < 3  # the window, not the 30 s poll
