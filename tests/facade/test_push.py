"""The dispatch facade on every backend-backed driver: typed job classes, the push
variants, envelope overrides, bulk, and the run of a pushed job (PUSH-1..8)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, ClassVar

import pytest
from pydantic import BaseModel

from lane_pg.backend import JobQueueBackend, OperationCall
from lane_pg.backend.jobs import AddJobs
from lane_pg.errors import ConfigurationError, InvalidOptions
from lane_pg.facade import (
    EnvelopeOverrides,
    Job,
    JobExceptionOccurred,
    JobProcessed,
    JobProcessing,
    JobQueued,
    JobQueueing,
    JobRegistry,
    QueueFacade,
    current_context,
)
from lane_pg.types import JSON, Backoff, JobOptions, JobRow
from tests.facade.conftest import Drain
from tests.helpers import eventually

RUNS: list[tuple[str, Any]] = []


@pytest.fixture(autouse=True)
def _fresh_runs() -> None:
    RUNS.clear()


@dataclass
class SendWelcomeEmail(Job):
    job_name = "SendWelcomeEmail"
    queue = "mail"
    max_tries = 5
    user_id: int
    tags: list[str] = field(default_factory=list)

    async def handle(self) -> JSON:
        RUNS.append(("welcome", (self.user_id, self.tags)))
        await current_context().log(f"welcomed {self.user_id}")
        return {"sent": self.user_id}


@dataclass
class Delayed(Job):
    job_name = "Delayed"
    delay = timedelta(seconds=60)
    n: int

    async def handle(self) -> None:
        RUNS.append(("delayed", self.n))


@dataclass
class Configured(Job):
    job_name = "Configured"
    queue = "cfg"
    max_tries = 4
    backoff = Backoff.fixed(timedelta(seconds=7))
    timeout = timedelta(seconds=9)
    fail_on_timeout = True
    n: int = 0

    async def handle(self) -> None:
        RUNS.append(("configured", self.n))


@dataclass
class Plain(Job):
    job_name = "Plain"
    n: int = 0

    async def handle(self) -> None:
        RUNS.append(("plain", self.n))


@dataclass
class Broken(Job):
    job_name = "Broken"
    max_tries = 2
    backoff = None

    async def handle(self) -> None:
        raise RuntimeError("handler broke")


class Invoice(BaseModel, Job):
    job_name: ClassVar[str] = "Invoice"
    number: int
    lines: list[str]

    async def handle(self) -> JSON:
        RUNS.append(("invoice", (self.number, self.lines)))
        return len(self.lines)


def _register(facade: QueueFacade, queue: str, *classes: type[Job]) -> None:
    for cls in classes:
        facade.registry.register(cls)
        facade.route(cls, queue=queue)


async def _row(backend: JobQueueBackend, queue: str, job_id: str) -> JobRow:
    row = await backend.get_job(queue, job_id)
    assert row is not None
    return row


async def test_a_registered_class_is_pushed_and_run_PUSH_1_PUSH_3(
    facade: QueueFacade, backend: JobQueueBackend, queue_name: str, drain: Drain
) -> None:
    _register(facade, queue_name, SendWelcomeEmail)
    job_id = await facade.push(SendWelcomeEmail(user_id=42, tags=["new"]))
    row = await _row(backend, queue_name, job_id)
    # Committed when push returns, not yet run (PUSH-3); the fields are the data.
    assert (row.state, row.name, row.data, RUNS) == (
        "waiting",
        "SendWelcomeEmail",
        {"user_id": 42, "tags": ["new"]},
        [],
    )
    await drain(queue_name)
    assert RUNS == [("welcome", (42, ["new"]))]
    done = await _row(backend, queue_name, job_id)
    assert (done.state, done.return_value) == ("completed", {"sent": 42})
    assert (await backend.get_job_logs(queue_name, job_id)).count == 1


async def test_a_pydantic_model_is_a_job_class_PUSH_1(
    facade: QueueFacade, backend: JobQueueBackend, queue_name: str, drain: Drain
) -> None:
    _register(facade, queue_name, Invoice)
    job_id = await facade.push(Invoice(number=7, lines=["a", "b"]))
    assert (await _row(backend, queue_name, job_id)).data == {"number": 7, "lines": ["a", "b"]}
    await drain(queue_name)
    assert RUNS == [("invoice", (7, ["a", "b"]))]
    assert (await _row(backend, queue_name, job_id)).return_value == 2


async def test_class_settings_map_onto_job_options_PUSH_2_PUSH_7(
    facade: QueueFacade, backend: JobQueueBackend, queue_name: str
) -> None:
    """A pushed job and an ``add_job`` with the equivalent options store the same option
    columns (PUSH-7); only the facade's meta differs."""
    job_id = await facade.push(Configured(n=1))
    pushed = await _row(backend, "cfg", job_id)
    equivalent = await backend.add_job(
        "cfg",
        "Configured",
        {"n": 1},
        JobOptions(
            attempts=4,
            backoff=Backoff.fixed(timedelta(seconds=7)),
            timeout=timedelta(seconds=9),
            fail_on_timeout=True,
        ),
    )
    columns = ("queue", "max_attempts", "backoff", "timeout_ms", "priority", "lifo")
    assert [getattr(pushed, c) for c in columns] == [getattr(equivalent, c) for c in columns]
    assert pushed.options.get("fail_on_timeout") is True
    assert pushed.options["meta"] == {"connection": facade.connection_name()}
    assert {k: v for k, v in pushed.options.items() if k != "meta"} == equivalent.options
    await backend.remove_job("cfg", job_id)
    await backend.remove_job("cfg", equivalent.id)


async def test_job_class_defaults_are_three_tries_with_seed_backoff_A3(
    facade: QueueFacade, backend: JobQueueBackend, queue_name: str
) -> None:
    _register(facade, queue_name, Plain)
    row = await _row(backend, queue_name, await facade.push(Plain()))
    assert (row.queue, row.max_attempts, row.backoff, row.timeout_ms) == (
        queue_name,
        3,
        Backoff("exponential", base_ms=2_000, cap_ms=300_000, jitter=0.25),
        None,
    )


async def test_an_unrouted_job_belongs_to_default_ROUTE_1() -> None:
    facade = QueueFacade(registry=JobRegistry())
    assert facade.envelope(Plain()).queue == "default"


async def test_declared_delay_and_call_site_delays_PUSH_4(
    facade: QueueFacade, backend: JobQueueBackend, queue_name: str
) -> None:
    _register(facade, queue_name, Delayed)
    declared = await _row(backend, queue_name, await facade.push(Delayed(n=1)))
    assert declared.state == "delayed"
    assert declared.available_at - declared.created_at == pytest.approx(
        timedelta(seconds=60), abs=timedelta(seconds=1)
    )
    explicit = await _row(
        backend, queue_name, await facade.later(timedelta(seconds=5), Delayed(n=2))
    )
    assert explicit.available_at - explicit.created_at == pytest.approx(
        timedelta(seconds=5), abs=timedelta(seconds=1)
    )
    at = declared.created_at + timedelta(hours=1)
    exact = await _row(backend, queue_name, await facade.push_later(Delayed(n=3), at))
    assert abs(exact.available_at - at) < timedelta(seconds=1)
    with_overrides = await _row(
        backend,
        queue_name,
        await facade.later_with(timedelta(0), Delayed(n=4), EnvelopeOverrides(max_tries=2)),
    )
    assert (with_overrides.state, with_overrides.max_attempts) == ("waiting", 2)
    with pytest.raises(ConfigurationError, match="aware"):
        await facade.push_later(Delayed(n=5), at.replace(tzinfo=None))


async def test_overrides_outrank_routes_and_declarations_for_one_push_PUSH_5(
    facade: QueueFacade, backend: JobQueueBackend, queue_name: str, queue_b: str
) -> None:
    _register(facade, queue_name, Configured)
    job_id = await facade.push_with(Configured(n=2), EnvelopeOverrides(queue=queue_b, max_tries=1))
    row = await _row(backend, queue_b, job_id)
    assert (row.queue, row.max_attempts, row.timeout_ms) == (queue_b, 1, 9000)
    # The next push without overrides follows the route again.
    again = await _row(backend, queue_name, await facade.push(Configured(n=3)))
    assert (again.queue, again.max_attempts) == (queue_name, 4)


async def test_bulk_pushes_one_type_in_one_call_PUSH_6(
    facade: QueueFacade,
    backend: JobQueueBackend,
    queue_name: str,
    drain: Drain,
) -> None:
    _register(facade, queue_name, Plain, Delayed)
    calls: list[tuple[str, int]] = []  # (backend method, jobs it was given)

    async def count(call: OperationCall, proceed: Callable[[], Awaitable[Any]]) -> Any:
        if call.operation.name == "add_job":
            calls.append(("add_job", 1))
        elif isinstance(call.arguments, AddJobs):
            calls.append(("add_jobs", len(call.arguments.specs)))
        return await proceed()

    backend.hooks.add(count)
    try:
        ids = await facade.bulk([Plain(n=1), Plain(n=2), Plain(n=3)])
    finally:
        backend.hooks.remove(count)
    assert calls == [("add_jobs", 3)]  # one backend call for the three, never one per job
    rows = [await _row(backend, queue_name, job_id) for job_id in ids]
    assert [row.data for row in rows] == [{"n": 1}, {"n": 2}, {"n": 3}]
    with pytest.raises(ConfigurationError, match="one type"):
        await facade.bulk([Plain(n=4), Delayed(n=5)])
    assert await backend.get_job_count(queue_name) == 3
    await drain(queue_name)
    assert sorted(RUNS) == [("plain", 1), ("plain", 2), ("plain", 3)]


async def test_a_bad_push_is_refused_and_writes_nothing(
    facade: QueueFacade, backend: JobQueueBackend, queue_name: str
) -> None:
    _register(facade, queue_name, Plain)
    with pytest.raises(InvalidOptions):
        await facade.push_with(Plain(), EnvelopeOverrides(max_tries=0))
    with pytest.raises(TypeError):
        await facade.push({"n": 1})  # type: ignore[arg-type]
    assert await backend.get_job_count(queue_name) == 0


async def test_push_events_and_a_raising_handler_PUSH_8(
    facade: QueueFacade, backend: JobQueueBackend, queue_name: str, drain: Drain
) -> None:
    _register(facade, queue_name, Broken, Plain)
    seen: list[object] = []
    for kind in (JobQueueing, JobQueued, JobProcessing, JobProcessed, JobExceptionOccurred):
        facade.events.listen(kind, seen.append)
    job_id = await facade.push(Broken())
    assert [type(event) for event in seen] == [JobQueueing, JobQueued]
    queued = seen[1]
    assert isinstance(queued, JobQueued)
    assert (queued.queue, queued.job_name, queued.job_id) == (queue_name, "Broken", job_id)
    await drain(queue_name)
    exceptions = [event for event in seen if isinstance(event, JobExceptionOccurred)]
    # Two tries (max_tries = 2, no backoff): each raised, then the job failed for good.
    assert [(e.attempt, str(e.exception)) for e in exceptions] == [
        (1, "handler broke"),
        (2, "handler broke"),
    ]
    row = await _row(backend, queue_name, job_id)
    assert (row.state, row.attempts_made, row.failed_reason) == ("failed", 2, "handler broke")


async def test_data_that_no_longer_fits_the_class_fails_for_good(
    facade: QueueFacade, backend: JobQueueBackend, queue_name: str, drain: Drain
) -> None:
    """A job pushed with a field the class no longer has can never run: one terminal
    failure, not max_tries of them."""
    _register(facade, queue_name, Plain)
    stale = await backend.add_job(
        queue_name, "Plain", {"n": 1, "gone": True}, JobOptions(attempts=3)
    )
    await drain(queue_name)
    row = await _row(backend, queue_name, stale.id)
    assert (row.state, row.attempts_made) == ("failed", 1)
    assert "does not fit" in (row.failed_reason or "")
    assert RUNS == []


def test_registry_rules_PUSH_1() -> None:
    registry = JobRegistry()
    assert registry.register(Plain) is Plain
    registry.register(Plain)  # again: a no-op

    @dataclass
    class Impostor(Job):
        job_name = "Plain"

    with pytest.raises(ConfigurationError, match="already registered"):
        registry.register(Impostor)

    @dataclass
    class Nameless(Job):
        pass

    with pytest.raises(ConfigurationError, match="job_name"):
        registry.register(Nameless)
    with pytest.raises(TypeError):
        registry.register(dict)  # type: ignore[type-var]
    assert registry.names() == ["Plain"]


async def test_pending_size_counts_waiting_and_due_delayed_jobs_A16(
    facade: QueueFacade, backend: JobQueueBackend, queue_name: str
) -> None:
    _register(facade, queue_name, Plain)
    await facade.push(Plain(n=1))
    # Due in one second: long enough that the counts below are read before it is due even
    # on a loaded machine (50 ms was not), short enough to wait for.
    await facade.later(timedelta(seconds=1), Plain(n=2))
    await facade.later(timedelta(hours=1), Plain(n=3))
    assert (await facade.size(queue_name), await facade.delayed_size(queue_name)) == (3, 2)

    async def due() -> bool:
        return await facade.pending_size(queue_name) == 2  # the one-second one came due

    await eventually(due, timeout=10)
    assert await facade.reserved_size(queue_name) == 0
