"""Context propagation through pushes and workers (CTX-1..7), on memory and PostgreSQL:
the snapshot a push stores in ``options.meta``, restored in a fresh scope for each attempt,
and hidden values kept out of every log line."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, ClassVar

import asyncpg
import pytest

from lane_pg import context
from lane_pg.backend import JobQueueBackend
from lane_pg.backend.failed import FailedJobFilter, MemoryFailedJobStore
from lane_pg.context import ContextData
from lane_pg.facade import (
    BackendDriver,
    Job,
    JobProcessed,
    JobRegistry,
    QueueFacade,
    SyncDriver,
    transaction,
    typed_processors,
)
from lane_pg.facade.envelope import META_CONTEXT
from lane_pg.memory import MemoryBackend
from lane_pg.types import Lane
from lane_pg.worker import Worker, WorkerConfig
from tests.facade.conftest import Drain

SECRET = "ctx-hidden-s3cr3t"
SEEN: list[dict[str, Any]] = []


@pytest.fixture(autouse=True)
def _fresh() -> Iterator[None]:
    SEEN.clear()
    Flaky.tries = 0
    yield
    context.clear_hooks()


@dataclass
class Report(Job):
    """Records the context it runs in, then adds to it."""

    job_name = "CtxReport"
    n: int = 0

    async def handle(self) -> None:
        SEEN.append({"visible": context.all(), "hidden": context.all_hidden()})
        context.add("added_by_job", self.n)


@dataclass
class SyncReport(Job):
    job_name = "CtxSyncReport"
    n: int = 0

    def handle(self) -> None:  # runs in a pool thread: the scope is shared with the task
        SEEN.append({"visible": context.all()})
        context.add("added_by_job", self.n)


@dataclass
class Flaky(Job):
    job_name = "CtxFlaky"
    max_tries = 2
    backoff = None
    tries: ClassVar[int] = 0

    async def handle(self) -> None:
        Flaky.tries += 1
        SEEN.append(context.all())
        context.add("x", Flaky.tries)
        if Flaky.tries == 1:
            raise RuntimeError("first try fails")


@dataclass
class Doomed(Job):
    job_name = "CtxDoomed"
    max_tries = 1
    backoff = None

    async def handle(self) -> None:
        raise ValueError("always")


@dataclass
class Deferred(Job):
    job_name = "CtxDeferred"
    after_commit = True


def _register(facade: QueueFacade, queue: str, *classes: type[Job]) -> None:
    for cls in classes:
        facade.registry.register(cls)
        facade.route(cls, queue=queue)


def _meta(row: Any) -> dict[str, Any]:
    meta = row.options.get("meta")
    assert isinstance(meta, dict)
    return meta


async def test_a_push_stores_the_snapshot_and_none_when_empty_CTX_1(
    facade: QueueFacade, backend: JobQueueBackend, queue_name: str
) -> None:
    _register(facade, queue_name, Report)
    with context.scope(tenant_id="acme"):
        context.add_hidden("token", SECRET)
        with_context = await facade.push(Report())
        context.forget("tenant_id")
        context.forget("token")
        without = await facade.push(Report())
    row = await backend.get_job(queue_name, with_context)
    assert row is not None
    assert _meta(row)[META_CONTEXT] == {
        "visible": {"tenant_id": "acme"},
        "hidden": {"token": SECRET},  # hidden values reach the job store (CTX-6)
    }
    empty = await backend.get_job(queue_name, without)
    assert empty is not None
    assert META_CONTEXT not in _meta(empty)


async def test_the_job_and_its_listeners_share_the_restored_scope_CTX_2(
    facade: QueueFacade, drain: Drain, queue_name: str
) -> None:
    _register(facade, queue_name, Report, SyncReport)
    heard: list[tuple[str, Any, Any]] = []
    facade.events.listen(
        JobProcessed,
        lambda event: heard.append(
            (event.job_name, context.get("tenant_id"), context.get("added_by_job"))
        ),
    )
    with context.scope(tenant_id="acme"):
        await facade.push(Report(n=1))
        await facade.push(SyncReport(n=2))
    await drain(queue_name)
    assert sorted(heard) == [("CtxReport", "acme", 1), ("CtxSyncReport", "acme", 2)]
    assert context.get("added_by_job") is None  # the pusher never sees the job's values


async def test_each_attempt_and_job_starts_from_the_snapshot_CTX_3(
    facade: QueueFacade, drain: Drain, queue_name: str
) -> None:
    _register(facade, queue_name, Flaky, Report)
    with context.scope(tenant_id="acme"):
        await facade.push(Flaky())
    await drain(queue_name)
    # The first try added x and failed; the retry starts again from the push's snapshot.
    assert SEEN == [{"tenant_id": "acme"}, {"tenant_id": "acme"}]
    SEEN.clear()
    await facade.push(Report(n=1))
    await facade.push(Report(n=2))
    await drain(queue_name)
    assert [seen["visible"] for seen in SEEN] == [{}, {}]  # nothing leaked between jobs


async def test_a_deferred_push_carries_the_push_time_snapshot_CTX_4(
    pg_dsn: str, queue_name: str
) -> None:
    """The transaction is a real PostgreSQL one; the queue a memory store, so the push is
    written at the commit, after the context changed."""
    memory = MemoryBackend()
    facade = QueueFacade(registry=JobRegistry())
    facade.set_driver(BackendDriver(memory, "memory"))
    _register(facade, queue_name, Deferred)
    conn = await asyncpg.connect(pg_dsn)
    try:
        with context.scope(tenant_id="at-push"):
            async with transaction(conn):
                await facade.push(Deferred())
                context.add("tenant_id", "at-commit")
                assert await facade.size(queue_name) == 0  # not written yet
        [row] = (await memory.list_jobs(queue_name, ["waiting"])).items
        assert _meta(row)[META_CONTEXT]["visible"] == {"tenant_id": "at-push"}
    finally:
        await conn.close()
        await memory.close()


async def test_a_request_id_travels_and_the_sync_driver_leaks_nothing_back_CTX_5(
    queue_name: str,
) -> None:
    """The only request data that travels is what the app put in the context, such as
    ``_request_id``; under the sync driver the job runs in a restored copy too."""
    facade = QueueFacade(registry=JobRegistry())
    facade.set_driver(SyncDriver())
    _register(facade, queue_name, Report)
    with context.scope(_request_id="req-42"):
        await facade.push(Report(n=5))
        assert context.get("added_by_job") is None
    assert SEEN == [{"visible": {"_request_id": "req-42"}, "hidden": {}}]


async def test_hidden_values_reach_the_failed_store_never_a_log_line_CTX_6(
    facade: QueueFacade, backend: JobQueueBackend, queue_name: str, caplog: pytest.LogCaptureFixture
) -> None:
    _register(facade, queue_name, Doomed)
    caplog.set_level(logging.DEBUG)  # -v and debug lines included
    store = MemoryFailedJobStore()
    label = facade.connection_name()
    processors = typed_processors(facade.registry, facade.events, label)
    config = WorkerConfig(lanes=(Lane(queue_name),), poll_interval=0.05, burst=True)
    with context.scope(tenant_id="acme"):
        context.add_hidden("api_token", SECRET)
        await facade.push(Doomed())
        # A worker with a failed store, then one without (it logs the failed job).
        await Worker(backend, processors, config, failed_store=store, connection=label).run()
        await facade.push(Doomed())
        await Worker(backend, processors, config, connection=label).run()
    [record] = await store.page(FailedJobFilter(queue=queue_name))
    options = record.envelope["options"]
    assert isinstance(options, dict) and isinstance(options["meta"], dict)
    assert options["meta"][META_CONTEXT]["hidden"] == {"api_token": SECRET}
    assert (await backend.list_jobs(queue_name, ["failed"])).total == 2
    assert caplog.text.count("ValueError: always") >= 2  # both failures were logged
    assert SECRET not in caplog.text


async def test_hooks_run_once_per_push_and_once_per_attempt_CTX_7(
    facade: QueueFacade, drain: Drain, queue_name: str
) -> None:
    _register(facade, queue_name, Flaky)
    calls: list[str] = []

    def dehydrating(data: ContextData) -> None:
        calls.append("dehydrating")
        data.visible["stamped_at_push"] = True

    def hydrated(data: ContextData) -> None:
        calls.append("hydrated")

    context.dehydrating(dehydrating)
    context.hydrated(hydrated)
    await facade.push(Flaky())
    await drain(queue_name)
    assert calls == ["dehydrating", "hydrated", "hydrated"]  # two attempts
    assert SEEN == [{"stamped_at_push": True}, {"stamped_at_push": True}]
