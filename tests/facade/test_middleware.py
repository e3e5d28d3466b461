"""Job middleware as a user meets it (MW-1..8, MW-10, RETRY-6): job classes listing
middleware, run by real in-process workers on every backend-backed driver."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, ClassVar

import pytest

from lane_pg.backend import JobQueueBackend, OperationCall
from lane_pg.backend.failed import FailedJobFilter, MemoryFailedJobStore
from lane_pg.facade import (
    Completed,
    Deleted,
    EnvelopeOverrides,
    Failed,
    FailOnException,
    Job,
    JobOutcome,
    JobReleased,
    QueueFacade,
    RateLimited,
    Released,
    Skip,
    ThrottlesExceptions,
    WithoutOverlapping,
    current_context,
    typed_processors,
)
from lane_pg.types import JSON, Lane
from lane_pg.worker import Worker, WorkerConfig
from tests.facade.conftest import Drain
from tests.helpers import Clock, eventually

Layers = Callable[["Guarded"], list[object]]


@dataclass
class Guarded(Job):
    """A job whose middleware each test sets (``Guarded.layers``)."""

    job_name = "Guarded"
    max_tries = 3
    backoff = None
    layers: ClassVar[Layers] = staticmethod(lambda job: [])
    runs: ClassVar[list[int]] = []
    fail_with: ClassVar[BaseException | None] = None
    gate: ClassVar[asyncio.Event | None] = None
    n: int = 0
    key: str = ""

    def middleware(self) -> list[object]:
        return Guarded.layers(self)

    async def handle(self) -> JSON:
        Guarded.runs.append(self.n)
        if Guarded.gate is not None:
            await Guarded.gate.wait()
        if Guarded.fail_with is not None:
            raise Guarded.fail_with
        return {"n": self.n, "attempt": current_context().job.attempts_started}


@pytest.fixture(autouse=True)
def _fresh() -> None:
    Guarded.layers = staticmethod(lambda job: [])  # type: ignore[assignment]
    Guarded.runs = []
    Guarded.fail_with = None
    Guarded.gate = None


def use(layers: Layers) -> None:
    Guarded.layers = staticmethod(layers)  # type: ignore[assignment]


async def push(facade: QueueFacade, queue: str, *numbers: int, key: str = "") -> list[str]:
    facade.registry.register(Guarded)
    facade.route(Guarded, queue=queue)
    return [await facade.push(Guarded(n=n, key=key)) for n in numbers]


class Recording:
    def __init__(self, name: str, log: list[str]) -> None:
        self.name, self.log = name, log

    async def handle(
        self, job: Guarded, next: Callable[[Any], Awaitable[JobOutcome]]
    ) -> JobOutcome:
        self.log.append(f"{self.name}:before")
        outcome = await next(job)
        self.log.append(f"{self.name}:after:{type(outcome).__name__}")
        return outcome


class Answer:
    """Ends the run with ``outcome`` without calling the handler."""

    def __init__(self, outcome: JobOutcome) -> None:
        self.outcome = outcome

    async def handle(
        self, job: Guarded, next: Callable[[Any], Awaitable[JobOutcome]]
    ) -> JobOutcome:
        return self.outcome


class ReleaseTimes:
    """Releases the job (delay 0) the first ``times`` runs, then lets it through."""

    def __init__(self, times: int, attempts_seen: list[int]) -> None:
        self.times, self.seen = times, attempts_seen

    async def handle(
        self, job: Guarded, next: Callable[[Any], Awaitable[JobOutcome]]
    ) -> JobOutcome:
        self.seen.append(current_context().job.attempts_started)
        if len(self.seen) <= self.times:
            return Released(0, "not yet")
        return await next(job)


async def test_middleware_runs_in_declared_order_around_the_handler_MW_1(
    facade: QueueFacade, backend: JobQueueBackend, queue_name: str, drain: Drain
) -> None:
    log: list[str] = []
    use(lambda job: [Recording("outer", log), Recording("inner", log)])
    [job_id] = await push(facade, queue_name, 7)

    await drain(queue_name)

    assert log == ["outer:before", "inner:before", "inner:after:Completed", "outer:after:Completed"]
    stored = await backend.get_job(queue_name, job_id)
    assert stored is not None and stored.return_value == {"n": 7, "attempt": 1}


@pytest.mark.parametrize(
    ("outcome", "expected"),
    [
        (Completed({"by": "middleware"}), ("completed", {"by": "middleware"}, 1, None)),
        (Released(60, "later"), ("delayed", None, 0, None)),
        (Failed("refused"), ("failed", None, 1, "refused")),
        (Deleted(), None),
    ],
    ids=["completed", "released", "failed", "deleted"],
)
async def test_each_outcome_leaves_its_state_MW_2(
    facade: QueueFacade,
    backend: JobQueueBackend,
    queue_name: str,
    outcome: JobOutcome,
    expected: tuple[str, JSON, int, str | None] | None,
) -> None:
    use(lambda job: [Answer(outcome)])
    [job_id] = await push(facade, queue_name, 1)
    released: list[JobReleased] = []
    facade.events.listen(JobReleased, released.append)
    store = MemoryFailedJobStore()

    await _work(backend, facade, queue_name, failed_store=store)

    assert Guarded.runs == []  # the handler never ran
    stored = await backend.get_job(queue_name, job_id)
    records = await store.page(FailedJobFilter(queue=queue_name))
    if expected is None:  # Deleted: gone, no failed record
        assert stored is None and records == []
        return
    state, result, attempts_started, reason = expected
    assert stored is not None
    assert (stored.state, stored.return_value, stored.attempts_started) == (
        state,
        result,
        attempts_started,
    )
    assert stored.attempts_made == (1 if state == "failed" else 0)
    assert stored.failed_reason == reason
    assert [r.job_id for r in records] == ([job_id] if state == "failed" else [])
    assert [(e.job_id, e.delay, e.reason) for e in released] == (
        [(job_id, 60.0, "later")] if state == "delayed" else []
    )


async def test_released_jobs_keep_their_attempt_RETRY_6(
    facade: QueueFacade, backend: JobQueueBackend, queue_name: str, drain: Drain
) -> None:
    seen: list[int] = []
    use(lambda job: [ReleaseTimes(5, seen)])
    [job_id] = await push(facade, queue_name, 1)

    await drain(queue_name)

    # Every claim counts the attempt it starts (1), and each release gives it back: the
    # sixth delivery, the first that runs, is still the first attempt.
    assert seen == [1] * 6
    stored = await backend.get_job(queue_name, job_id)
    assert stored is not None
    assert (stored.state, stored.attempts_started, stored.attempts_made) == ("completed", 1, 0)
    assert stored.return_value == {"n": 1, "attempt": 1}


# ---------------------------------------------------------------------- WithoutOverlapping


async def lock_holder(backend: JobQueueBackend, key: str) -> str | None:
    """The job id holding ``key`` as stored (``lane.locks`` / the memory store)."""
    pool = getattr(backend, "pool", None)
    if pool is None:
        lock = backend._locks.get(key)  # type: ignore[attr-defined]
        return None if lock is None else str(lock.holder_id)
    holder: str | None = await pool.fetchval("SELECT holder_id FROM lane.locks WHERE key = $1", key)
    return holder


async def test_a_second_job_of_a_key_is_released_and_runs_after_the_first_MW_3_MW_10(
    facade: QueueFacade, backend: JobQueueBackend, queue_name: str, drain: Drain
) -> None:
    """Both jobs are claimed at once; whichever takes the lock first blocks until the
    other was released, then finishes, and the other runs after it."""
    use(lambda job: [WithoutOverlapping(job.key).release_after(0)])
    Guarded.gate = asyncio.Event()
    ids = dict(zip((1, 2), await push(facade, queue_name, 1, 2, key=queue_name), strict=True))
    key = f"overlap:Guarded:{queue_name}"
    released: list[JobReleased] = []
    holders: list[str | None] = []

    async def on_release(event: JobReleased) -> None:
        released.append(event)
        if Guarded.gate is not None and not Guarded.gate.is_set():
            holders.append(await lock_holder(backend, key))  # MW-10: the row, mid-job
            Guarded.gate.set()

    facade.events.listen(JobReleased, on_release)

    await drain(queue_name, concurrency=2)

    first, second = Guarded.runs
    assert {first, second} == {1, 2}
    assert holders == [ids[first]]
    assert released and {e.job_id for e in released} == {ids[second]}
    assert released[0].reason == f"WithoutOverlapping: {key} is held by another job"
    for job_id in ids.values():
        stored = await backend.get_job(queue_name, job_id)
        assert stored is not None and (stored.state, stored.attempts_started) == ("completed", 1)
    assert await lock_holder(backend, key) is None  # released after the handler


async def test_dont_release_deletes_the_second_job_MW_3(
    facade: QueueFacade, backend: JobQueueBackend, queue_name: str, drain: Drain
) -> None:
    use(lambda job: [WithoutOverlapping(job.key).shared().dont_release()])
    Guarded.gate = asyncio.Event()
    ids = await push(facade, queue_name, 1, 2, key=queue_name)

    async def open_gate() -> None:
        await eventually(lambda: _any_gone(backend, queue_name, ids))
        assert Guarded.gate is not None
        Guarded.gate.set()

    opener = asyncio.create_task(open_gate())
    await drain(queue_name, concurrency=2)
    await opener

    [ran] = Guarded.runs
    [deleted] = [job_id for n, job_id in zip((1, 2), ids, strict=True) if n != ran]
    assert await backend.get_job(queue_name, deleted) is None


async def _any_gone(backend: JobQueueBackend, queue: str, ids: list[str]) -> bool:
    return any([await backend.get_job(queue, job_id) is None for job_id in ids])


async def test_two_workers_never_run_two_jobs_of_a_key_at_once_MW_3(
    pg_dsn: str, queue_name: str
) -> None:
    """Two workers, each on its own pool of connections to one database."""
    from lane_pg.facade import BackendDriver
    from lane_pg.postgres.backend import PostgresBackend

    running, most = 0, 0

    @dataclass
    class Exclusive(Job):
        job_name = "Exclusive"
        n: int = 0

        def middleware(self) -> list[object]:
            return [WithoutOverlapping(queue_name).release_after(0)]

        async def handle(self) -> None:
            nonlocal running, most
            running += 1
            most = max(most, running)
            await asyncio.sleep(0.01)  # work that gives the other worker a chance to overlap
            running -= 1

    backends = [await PostgresBackend.connect(pg_dsn, min_size=1, max_size=4) for _ in range(2)]
    try:
        facade = QueueFacade()
        facade.set_driver(BackendDriver(backends[0], "postgresql"))
        facade.registry.register(Exclusive)
        facade.route(Exclusive, queue=queue_name)
        ids = [await facade.push(Exclusive(n=n)) for n in range(6)]
        workers = [
            _worker(backend, facade, queue_name, concurrency=3, burst=False) for backend in backends
        ]
        tasks = [asyncio.create_task(worker.run()) for worker in workers]
        await eventually(lambda: _all_completed(backends[0], queue_name, ids), timeout=30)
        for worker in workers:
            worker.stop()
        await asyncio.wait_for(asyncio.gather(*tasks), 30)
    finally:
        for backend in backends:
            await backend.close()
    assert most == 1


async def _all_completed(backend: JobQueueBackend, queue: str, ids: list[str]) -> bool:
    for job_id in ids:
        stored = await backend.get_job(queue, job_id)
        if stored is None or stored.state != "completed":
            return False
    return True


async def test_a_dead_workers_lock_frees_the_key_after_stalled_recovery_MW_3(
    facade: QueueFacade,
    backend: JobQueueBackend,
    queue_name: str,
    clock: Clock,
    drain: Drain,
) -> None:
    """The worker holding the lock dies (every call of its fails, then its task is
    cancelled): its lease lapses, stalled recovery takes the job back, and the key is free
    again at once, though no expiry was set."""
    use(lambda job: [WithoutOverlapping(job.key).release_after(0)])
    Guarded.gate = asyncio.Event()  # the first job blocks until its worker is gone
    [first] = await push(facade, queue_name, 1, key=queue_name)
    key = f"overlap:Guarded:{queue_name}"
    dead = False

    async def dead_backend(call: OperationCall, proceed: Callable[[], Awaitable[Any]]) -> Any:
        if dead and call.operation.handle != "jobs":
            raise ConnectionError("the worker's host is gone")
        return await proceed()

    worker = _worker(backend, facade, queue_name, concurrency=1, burst=False, lease=2)
    task = asyncio.create_task(worker.run())
    await eventually(lambda: _holder_is(backend, key, first))
    backend.hooks.add(dead_backend)
    try:
        dead = True
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    finally:
        backend.hooks.remove(dead_backend)
    assert await lock_holder(backend, key) == first  # the lock row outlived its worker
    Guarded.gate = None

    await backend.recover_stalled([queue_name], now=clock.at(3600))
    [second] = await push(facade, queue_name, 2, key=queue_name)
    await drain(queue_name)

    assert sorted(Guarded.runs) == [1, 1, 2]
    for job_id in (first, second):
        stored = await backend.get_job(queue_name, job_id)
        assert stored is not None and stored.state == "completed"


async def _holder_is(backend: JobQueueBackend, key: str, job_id: str) -> bool:
    return await lock_holder(backend, key) == job_id


async def test_a_release_that_raises_keeps_the_outcome_MW_4(
    facade: QueueFacade,
    backend: JobQueueBackend,
    queue_name: str,
    drain: Drain,
    caplog: pytest.LogCaptureFixture,
) -> None:
    use(lambda job: [WithoutOverlapping(job.key).expire_after(300)])
    [job_id] = await push(facade, queue_name, 1, key=queue_name)
    key = f"overlap:Guarded:{queue_name}"

    async def failing_release(call: OperationCall, proceed: Callable[[], Awaitable[Any]]) -> Any:
        if call.operation.name == "release_lock":
            raise ConnectionError("the database blipped")
        return await proceed()

    backend.hooks.add(failing_release)
    try:
        with caplog.at_level(logging.WARNING, logger="lane_pg.facade"):
            await drain(queue_name)
    finally:
        backend.hooks.remove(failing_release)

    stored = await backend.get_job(queue_name, job_id)
    assert stored is not None and stored.state == "completed"
    assert f"releasing lock {key} failed (the database blipped)" in caplog.text
    assert await lock_holder(backend, key) == job_id  # left to lapse (its run is over)
    # ... and another job of the key runs: the holder's run is over.
    [again] = await push(facade, queue_name, 2, key=queue_name)
    await drain(queue_name)
    stored = await backend.get_job(queue_name, again)
    assert stored is not None and stored.state == "completed"


# --------------------------------------------------------------- rate limits and throttles


async def test_the_eleventh_job_over_a_budget_of_ten_is_released_MW_5_RETRY_6(
    facade: QueueFacade, backend: JobQueueBackend, queue_name: str, drain: Drain
) -> None:
    use(lambda job: [RateLimited(10, 60).by(f"crm-{queue_name}")])
    ids = await push(facade, queue_name, *range(11))

    await drain(queue_name)

    assert len(Guarded.runs) == 10
    states = [await backend.get_job(queue_name, job_id) for job_id in ids]
    completed = [s for s in states if s is not None and s.state == "completed"]
    [released] = [s for s in states if s is not None and s.state == "delayed"]
    assert len(completed) == 10
    assert (released.attempts_started, released.attempts_made) == (0, 0)
    assert released.available_at is not None


async def test_three_failures_in_a_row_throttle_the_fourth_job_MW_6(
    facade: QueueFacade, backend: JobQueueBackend, queue_name: str, drain: Drain
) -> None:
    use(lambda job: [ThrottlesExceptions(3, 600).by(f"api-{queue_name}")])
    Guarded.fail_with = RuntimeError("the API is down")
    facade.registry.register(Guarded)
    facade.route(Guarded, queue=queue_name)
    once = EnvelopeOverrides(max_tries=1)
    ids = [await facade.push_with(Guarded(n=n), once) for n in range(4)]

    await drain(queue_name, concurrency=1)

    assert Guarded.runs == [0, 1, 2]  # the fourth never ran
    states = [await backend.get_job(queue_name, job_id) for job_id in ids]
    assert [s.state if s else None for s in states] == ["failed", "failed", "failed", "delayed"]
    fourth = states[3]
    assert fourth is not None and (fourth.attempts_started, fourth.attempts_made) == (0, 0)


# ------------------------------------------------------------------ Skip, FailOnException


@pytest.mark.parametrize(
    ("skip", "runs"),
    [(Skip.when(True), []), (Skip.when(lambda: False), [1]), (Skip.unless(True), [1])],
    ids=["when-true", "when-false", "unless-true"],
)
async def test_skip_deletes_the_job_without_running_it_MW_7(
    facade: QueueFacade,
    backend: JobQueueBackend,
    queue_name: str,
    skip: Skip,
    runs: list[int],
) -> None:
    use(lambda job: [skip])
    [job_id] = await push(facade, queue_name, 1)
    store = MemoryFailedJobStore()

    await _work(backend, facade, queue_name, failed_store=store)

    assert Guarded.runs == runs
    stored = await backend.get_job(queue_name, job_id)
    assert (stored.state if stored else None) == ("completed" if runs else None)
    assert await store.page(FailedJobFilter(queue=queue_name)) == []


@pytest.mark.parametrize(
    ("middleware", "error", "fails_for_good"),
    [
        (FailOnException([ValueError]), ValueError("bad input"), True),
        (FailOnException().on_substring("quota"), RuntimeError("quota exceeded"), True),
        (FailOnException([ValueError]), RuntimeError("flaky"), False),
    ],
    ids=["type", "substring", "no-match"],
)
async def test_matching_errors_fail_for_good_after_one_attempt_MW_8(
    facade: QueueFacade,
    backend: JobQueueBackend,
    queue_name: str,
    middleware: FailOnException,
    error: Exception,
    fails_for_good: bool,
) -> None:
    use(lambda job: [middleware])
    Guarded.fail_with = error
    [job_id] = await push(facade, queue_name, 1)
    store = MemoryFailedJobStore()

    await _work(backend, facade, queue_name, failed_store=store, max_jobs=1)

    stored = await backend.get_job(queue_name, job_id)
    assert stored is not None
    assert stored.attempts_made == 1 and stored.max_attempts == 3
    if fails_for_good:
        assert stored.state == "failed"
        assert stored.failed_reason == f"{type(error).__name__}: {error}"
        [record] = await store.page(FailedJobFilter(queue=queue_name))
        assert str(error) in record.exception
    else:
        assert stored.state == "waiting"  # retried under its own settings


# ---------------------------------------------------------------------------- helpers


def _worker(
    backend: JobQueueBackend,
    facade: QueueFacade,
    queue: str,
    *,
    lease: float = 30,
    failed_store: Any = None,
    **settings: Any,
) -> Worker:
    processors = typed_processors(facade.registry, facade.events, facade.connection_name())
    settings.setdefault("burst", True)
    config = WorkerConfig(lanes=(Lane(queue),), poll_interval=0.05, lease=lease, **settings)
    return Worker(
        backend, processors, config, failed_store=failed_store, connection=facade.connection_name()
    )


async def _work(
    backend: JobQueueBackend, facade: QueueFacade, queue: str, **settings: Any
) -> Worker:
    worker = _worker(backend, facade, queue, **settings)
    await asyncio.wait_for(worker.run(), 30)
    return worker
