"""One rule binds the default failed-job store (FAIL-8, ``default_failed_store``): the
facade's boot (``bootstrap_from_env``), ``App`` (``bind`` and its workers), the facade's
workers and the CLI's failed-job commands resolve the same store for the same
configuration: PostgreSQL's database store for a postgres connection, none otherwise.
"""

from __future__ import annotations

import pytest

from lane_pg import App, connect
from lane_pg.backend.failed import FailedJobStore, MemoryFailedJobStore
from lane_pg.cli.common import CommandError
from lane_pg.cli.failed_jobs import open_failed_jobs
from lane_pg.facade import JobRegistry, QueueFacade, bootstrap_from_env
from lane_pg.facade.failed import default_failed_store, failed_store_for
from lane_pg.facade.workers import WorkerSpec, open_worker
from lane_pg.memory import MemoryBackend
from lane_pg.postgres.failed import DatabaseFailedJobStore
from lane_pg.types import Lane
from lane_pg.worker import WorkerConfig


def _facade() -> QueueFacade:
    return QueueFacade(registry=JobRegistry())


def _bootstrapped(env: dict[str, str], opened: list[QueueFacade]) -> FailedJobStore | None:
    facade = _facade()
    opened.append(facade)  # closed at the end: a lazy store opens its driver when used
    bootstrap_from_env(facade, env)
    return facade.failed_store()


async def _bound_by_app(url: str, opened: list[App]) -> FailedJobStore | None:
    app = App(url)
    opened.append(app)
    facade = _facade()
    await app.bind(facade)
    return facade.failed_store()


async def _worker_store(url: str) -> FailedJobStore | None:
    """The store a worker records into, made where every entry point makes one."""
    app = App(url, jobs=None)
    try:
        backend = await app.backend()
        spec = WorkerSpec(_facade(), None, {"n": _noop})
        worker = await open_worker(spec, backend, WorkerConfig(lanes=(Lane("q"),)), "postgres")
        store = worker._settlement._failed_store
        if worker.notifier is not None:
            await worker.notifier.close()
        return store
    finally:
        await app.close()


async def _noop(job: object, ctx: object) -> None:
    return None


async def test_a_postgres_connection_binds_its_database_store_everywhere(
    pg_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("LANE_PG_DRIVER", raising=False)
    monkeypatch.delenv("LANE_PG_CONNECTIONS", raising=False)
    facades: list[QueueFacade] = []
    apps: list[App] = []
    reference = await connect(pg_dsn)
    try:
        stores: dict[str, FailedJobStore | None] = {
            "bootstrap_from_env": _bootstrapped({"LANE_PG_DSN": pg_dsn}, facades),
            "App.bind": await _bound_by_app(pg_dsn, apps),
            "a worker (open_worker: App, CLI, run_worker)": await _worker_store(pg_dsn),
            "the rule": default_failed_store(reference),
        }
        for where, store in stores.items():
            assert isinstance(store, DatabaseFailedJobStore), where
            assert await store.records_in(reference), where  # the same DSN and schema
        async with open_failed_jobs(pg_dsn, "lane", None) as (_, store):
            assert isinstance(store, DatabaseFailedJobStore)
            assert await store.records_in(reference)
    finally:
        for facade in facades:
            await facade.close()
        for app in apps:
            await app.close()
        await reference.close()


async def test_other_connections_bind_none_anywhere(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LANE_PG_DRIVER", "memory")
    monkeypatch.delenv("LANE_PG_CONNECTIONS", raising=False)
    facades: list[QueueFacade] = []
    apps: list[App] = []
    assert _bootstrapped({"LANE_PG_DRIVER": "memory"}, facades) is None
    assert await _bound_by_app("memory://", apps) is None
    assert default_failed_store(MemoryBackend()) is None
    assert failed_store_for(_facade(), MemoryBackend()) is None
    with pytest.raises(CommandError, match="no failed-job store is bound"):
        async with open_failed_jobs(None, "lane", None):
            pass


async def test_a_bound_store_wins_over_the_default() -> None:
    facade = _facade()
    mine = MemoryFailedJobStore()
    facade.set_failed_store(mine)
    assert failed_store_for(facade, MemoryBackend()) is mine
