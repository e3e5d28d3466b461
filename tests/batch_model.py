"""A Hypothesis stateful test of batches, shared by every backend's test: random dispatch /
claim / complete / fail-and-retry / operator retry / remove / cancel sequences run on a real
backend and on the memory backend at once, and after every step both must agree with a
small model of what a batch's user sees: the derived counts (total, pending, failed), the
cancelled and finished flags, and which of the then / catch / finally callback jobs exist
(each at most once). The counts are never stored (BATCH-5), so a drift here would be a
settlement written twice or not at all. ``tests/postgres/test_batch_model.py`` and
``tests/redis/test_batch_model.py`` give it its backend and cleanup.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Coroutine
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, ClassVar, TypeVar

from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
)

from lane_pg.backend import JobQueueBackend
from lane_pg.memory import MemoryBackend
from lane_pg.types import QueueDemand, QueuedSpec
from tests.helpers import precondition_named

T = TypeVar("T")
KINDS = ("then", "catch", "finally")


@dataclass
class ModelJob:
    state: str = "waiting"  # waiting, active, completed, failed, removed
    attempts_made: int = 0


@dataclass
class Model:
    """What a batch's counts and callbacks must be, from the steps alone."""

    total: int
    max_attempts: int
    allow_failures: bool
    jobs: list[ModelJob] = field(default_factory=list)
    settled: dict[int, bool] = field(default_factory=dict)  # index -> failed
    cancelled: bool = False
    finished: bool = False
    callbacks: set[str] = field(default_factory=set)

    def any_in(self, *states: str) -> bool:
        return any(job.state in states for job in self.jobs)

    def settle(self, index: int, failed: bool) -> None:
        if index in self.settled:
            return  # a job settles its batch once, whatever it does later
        self.settled[index] = failed
        failures = sum(self.settled.values())
        if failed and failures == 1:
            if not self.allow_failures:
                self.cancelled = True
            self.callbacks.add("catch")
        if not self.finished and len(self.settled) >= self.total:
            self.finished = True
            if failures == 0 and not self.cancelled:
                self.callbacks.add("then")
            self.callbacks.add("finally")


@dataclass
class Held:
    index: int
    tokens: dict[bool, str]  # is_real -> lock token


class BatchMachine(RuleBasedStateMachine):
    """The rules and the invariant; a backend's test subclasses it with ``real`` and a
    ``teardown`` that deletes what an example wrote (``self.ids`` empty: nothing was)."""

    loop: ClassVar[asyncio.AbstractEventLoop]
    real: JobQueueBackend

    def __init__(self) -> None:
        super().__init__()
        suffix = uuid.uuid4().hex[:10]
        self.queue, self.callback_queue = f"bm_{suffix}", f"bmc_{suffix}"
        self.now = datetime.now(UTC).replace(microsecond=0)
        self.memory = MemoryBackend(clock=lambda: self.now)
        self.batch_id = str(uuid.uuid4())
        self.ids: dict[bool, list[str]] = {}
        self.held: list[Held] = []
        self.model = Model(0, 1, False)

    def run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        return self.loop.run_until_complete(coroutine)

    def backends(self) -> list[tuple[JobQueueBackend, bool]]:
        return [(self.memory, False), (self.real, True)]

    def tick(self) -> datetime:
        self.now += timedelta(seconds=1)
        return self.now

    def index_of(self, is_real: bool, job_id: str) -> int:
        return self.ids[is_real].index(job_id)

    @initialize(
        total=st.integers(1, 4),
        max_attempts=st.integers(1, 2),
        allow_failures=st.booleans(),
    )
    def dispatch(self, total: int, max_attempts: int, allow_failures: bool) -> None:
        self.model = Model(total, max_attempts, allow_failures)
        self.model.jobs = [ModelJob() for _ in range(total)]
        options: dict[str, Any] = {
            "then": "on-then",
            "catch": "on-catch",
            "finally": "on-finally",
            "callback_queue": self.callback_queue,
            "allow_failures": allow_failures,
        }
        specs = [
            QueuedSpec(
                self.queue,
                "part",
                {"n": n},
                {"attempts": max_attempts, "backoff": {"type": "fixed", "delay_ms": 0}},
            )
            for n in range(total)
        ]
        now = self.tick()
        for backend, is_real in self.backends():
            self.ids[is_real] = self.run(
                backend.batches.add_batch(self.batch_id, "model", specs, options, now=now)
            )

    @precondition(precondition_named(lambda self: self.model.any_in("waiting")))
    @rule()
    def claim(self) -> None:
        now = self.tick()
        claimed: dict[bool, tuple[int, str]] = {}
        for backend, is_real in self.backends():
            [job] = self.run(
                backend.runs.claim_jobs("w", [QueueDemand(self.queue, 1)], 60, now=now)
            )
            claimed[is_real] = (self.index_of(is_real, job.id), job.lock_token or "")
        assert claimed[False][0] == claimed[True][0], "both claim the same job (FIFO)"
        index = claimed[False][0]
        assert self.model.jobs[index].state == "waiting"
        self.model.jobs[index].state = "active"
        self.held.append(Held(index, {k: token for k, (_, token) in claimed.items()}))

    @precondition(precondition_named(lambda self: self.held))
    @rule(pick=st.integers(0, 7))
    def complete(self, pick: int) -> None:
        held = self.held.pop(pick % len(self.held))
        now = self.tick()
        for backend, is_real in self.backends():
            job_id = self.ids[is_real][held.index]
            self.run(
                backend.runs.complete_job(self.queue, job_id, held.tokens[is_real], None, now=now)
            )
        self.model.jobs[held.index].state = "completed"
        self.model.settle(held.index, failed=False)

    @precondition(precondition_named(lambda self: self.held))
    @rule(pick=st.integers(0, 7))
    def fail(self, pick: int) -> None:
        held = self.held.pop(pick % len(self.held))
        now = self.tick()
        for backend, is_real in self.backends():
            job_id = self.ids[is_real][held.index]
            self.run(
                backend.runs.fail_job(self.queue, job_id, held.tokens[is_real], "boom", now=now)
            )
        job = self.model.jobs[held.index]
        job.attempts_made += 1
        if job.attempts_made < self.model.max_attempts:
            job.state = "waiting"  # retried at once: backoff 0
        else:
            job.state = "failed"
            self.model.settle(held.index, failed=True)

    @precondition(precondition_named(lambda self: self.model.any_in("completed", "failed")))
    @rule(pick=st.integers(0, 7))
    def operator_retry(self, pick: int) -> None:
        done = [i for i, j in enumerate(self.model.jobs) if j.state in ("completed", "failed")]
        index = done[pick % len(done)]
        now = self.tick()
        for backend, is_real in self.backends():
            self.run(backend.jobs.retry_job(self.queue, self.ids[is_real][index], now=now))
        self.model.jobs[index] = ModelJob()  # runs again; its settlement stays as it was

    @precondition(precondition_named(lambda self: self.model.any_in("waiting")))
    @rule(pick=st.integers(0, 7))
    def remove_waiting_job(self, pick: int) -> None:
        waiting = [i for i, job in enumerate(self.model.jobs) if job.state == "waiting"]
        index = waiting[pick % len(waiting)]
        now = self.tick()
        for backend, is_real in self.backends():
            removed = self.run(
                backend.jobs.remove_job(self.queue, self.ids[is_real][index], now=now)
            )
            assert removed is True
        self.model.jobs[index].state = "removed"
        self.model.settle(index, failed=False)

    @rule(remove_waiting=st.booleans())
    def cancel(self, remove_waiting: bool) -> None:
        now = self.tick()
        answers = set()
        for backend, _ in self.backends():
            answers.add(
                self.run(
                    backend.batches.cancel_batch(
                        self.batch_id, remove_waiting=remove_waiting, now=now
                    )
                )
            )
        assert answers == {not self.model.cancelled}
        self.model.cancelled = True
        if remove_waiting:
            for index, job in enumerate(self.model.jobs):
                if job.state == "waiting":
                    job.state = "removed"
                    self.model.settle(index, failed=False)

    @invariant()
    def counts_and_callbacks_agree_with_the_model(self) -> None:
        if not self.ids:
            return
        model = self.model
        failures = sum(model.settled.values())
        for backend, is_real in self.backends():
            batch = self.run(backend.batches.find_batch(self.batch_id))
            assert batch is not None
            seen = (
                batch.total_jobs,
                batch.pending_jobs,
                batch.failed_jobs,
                batch.cancelled,
                batch.finished,
            )
            expected = (
                model.total,
                model.total - len(model.settled),
                failures,
                model.cancelled,
                model.finished,
            )
            assert seen == expected, ("postgres" if is_real else "memory", seen, expected)
            callbacks = set()
            for kind in KINDS:
                job = self.run(
                    backend.jobs.get_job(self.callback_queue, f"batch-{self.batch_id}-{kind}")
                )
                if job is not None:
                    callbacks.add(kind)
            assert callbacks == model.callbacks, ("postgres" if is_real else "memory", callbacks)
