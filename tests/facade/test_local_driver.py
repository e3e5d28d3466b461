"""The ``local`` driver (DRV-2): a memory store persisted as a JSON snapshot, restored
whole by the next ``open``."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from lane_pg.backend import CAPABILITIES, HANDLES
from lane_pg.errors import ConfigurationError
from lane_pg.facade import BackendDriver, Job, JobRegistry, QueueFacade, bootstrap_from_env
from lane_pg.memory import MemoryBackend
from lane_pg.memory._store import _Store
from lane_pg.memory.local import LocalBackend, snapshot_of
from lane_pg.types import DeduplicationOptions, JobOptions, QueueDemand
from lane_pg.types.flows import ChildRef, FlowJob
from lane_pg.types.schedule import RepeatOptions

Q = "local"


@dataclass
class Note(Job):
    job_name = "Note"
    queue = Q
    n: int = 0


async def _busy_store(path: Path) -> tuple[LocalBackend, dict[str, str]]:
    """A store with something of every kind in it."""
    store = await LocalBackend.open(path)
    ids: dict[str, str] = {}
    ids["waiting"] = (await store.add_job(Q, "w", {"n": 1}, {"priority": 3})).id
    ids["delayed"] = (await store.add_job(Q, "d", None, {"delay_ms": 60_000})).id
    ids["active"] = (await store.add_job(Q, "a")).id
    ids["done"] = (await store.add_job(Q, "c")).id
    ids["failed"] = (await store.add_job(Q, "f")).id
    claimed = await store.claim_jobs(
        "w1", [QueueDemand(Q, 3)], timedelta(minutes=5)
    )  # a, c, f after w (priority 3 sorts last)
    tokens = {job.id: job.lock_token for job in claimed}
    await store.add_job_log(Q, ids["active"], "half way", token=tokens[ids["active"]])
    await store.update_job_progress(Q, ids["active"], 50, token=tokens[ids["active"]])
    await store.complete_job(Q, ids["done"], tokens[ids["done"]], {"ok": 1})
    await store.fail_job(Q, ids["failed"], tokens[ids["failed"]], "boom", discard_retry=True)
    # A dedup owner that runs, with a kept next job (DEDUP-9).
    keep = JobOptions(deduplication=DeduplicationOptions("k", keep_last_if_active=True))
    ids["owner"] = (await store.add_job("dedup", "o", {"v": 1}, keep)).id
    owner = (await store.claim_jobs("w1", [QueueDemand("dedup", 1)], 60))[0]
    await store.add_job("dedup", "o", {"v": 2}, keep)
    ids["owner_token"] = owner.lock_token
    # A repeat scheduler.
    await store.upsert_repeat(
        "rep", "tick", None, JobOptions(repeat=RepeatOptions.every(timedelta(hours=1), key="t"))
    )
    # A flow whose child completed and whose child row is then removed.
    flow = await store.add_flow(
        FlowJob("parent", None, queue="flow", children=[FlowJob("child", {"c": 1})])
    )
    child = flow.children[0].job
    ran = (await store.claim_jobs("w1", [QueueDemand("flow", 1)], 60))[0]
    assert ran.id == child.id
    await store.complete_job("flow", child.id, ran.lock_token, {"child": "value"})
    assert await store.remove_job("flow", child.id)
    ids["parent"], ids["child"] = flow.job.id, child.id
    await store.pause_queue("paused")
    await store.set_max_active_jobs(Q, 10)
    assert await store.leader().acquire_leadership("maintenance", "w1", 30)
    return store, ids


async def test_reopening_restores_the_whole_store_DRV_2(tmp_path: Path) -> None:
    path = tmp_path / "store.json"
    store, ids = await _busy_store(path)
    before = snapshot_of(store)
    events = await store.read_events(Q)
    await store.close()

    again = await LocalBackend.open(path)
    try:
        assert snapshot_of(again) == before  # every record, sequence and index
        assert await again.read_events(Q) == events
        states = {name: (await again.get_job(Q, job_id)) for name, job_id in ids.items()}
        assert states["waiting"] is not None and states["waiting"].state == "waiting"
        assert states["delayed"] is not None and states["delayed"].state == "delayed"
        active = states["active"]
        assert active is not None and (active.state, active.progress) == ("active", 50)
        assert (await again.get_job_logs(Q, ids["active"])).count == 1
        assert states["done"] is not None and states["done"].return_value == {"ok": 1}
        assert states["failed"] is not None and states["failed"].failed_reason == "boom"
        # The processed value of a removed child is still the parent's (DRV-2's check).
        values = await again.get_flow_children_values("flow", ids["parent"])
        assert values == {ChildRef("flow", ids["child"]): {"child": "value"}}
        assert [series.key for series in await again.list_repeats("rep")] == ["t"]
        assert await again.is_queue_paused("paused")
        assert await again.get_max_active_jobs(Q) == 10
        assert not await again.leader().acquire_leadership("maintenance", "w2", 30)
        # The kept next job is added when the restored owner finishes (DEDUP-9).
        await again.complete_job("dedup", ids["owner"], ids["owner_token"])
        waiting = (await again.list_jobs("dedup", ["waiting"])).items
        assert [job.data for job in waiting] == [{"v": 2}]
        # Sequences continue: a new job never reuses an id.
        fresh = await again.add_job(Q, "new")
        assert int(fresh.id) > max(int(job_id) for job_id in ids.values() if job_id.isdigit())
    finally:
        await again.close()


async def test_every_change_is_on_disk_before_close_DRV_2(tmp_path: Path) -> None:
    path = tmp_path / "store.json"
    store = await LocalBackend.open(path)
    job = await store.add_job(Q, "x", {"a": 1})
    document = json.loads(path.read_text())
    assert document["format"] == "lane_pg.local"
    assert str(job.id) in path.read_text()
    # A second process (or a second open here) cannot write the same file.
    with pytest.raises(ConfigurationError, match="open in another process"):
        await LocalBackend.open(path)
    await store.close()
    reopened = await LocalBackend.open(path)
    assert (await reopened.get_job(Q, job.id)) is not None
    await reopened.close()


async def test_a_snapshot_from_before_a_field_was_added_opens_DRV_2(tmp_path: Path) -> None:
    """A record field added since (a dedup owner's ``kind`` and ``created_at``, migration
    0018's twin) takes its default; a field without one is still refused."""
    path = tmp_path / "store.json"
    store = await LocalBackend.open(path)
    owner = await store.add_job(Q, "n", 1, {"deduplication": {"id": "k", "ttl_ms": 60_000}})
    await store.close()
    text = path.read_text()
    document = json.loads(text)

    def drop(value: object, names: tuple[str, ...]) -> None:
        if isinstance(value, dict):
            if str(value.get("$c", "")).endswith(":_Owner"):
                for name in names:
                    del value["f"][name]
            for item in value.values():
                drop(item, names)
        elif isinstance(value, list):
            for item in value:
                drop(item, names)

    drop(document, ("kind", "created_at"))
    assert json.dumps(document) != text
    path.write_text(json.dumps(document))
    again = await LocalBackend.open(path)
    assert await again.get_deduplication_job_id(Q, "k") == owner.id
    await again.close()
    drop(document, ("job_key",))
    path.write_text(json.dumps(document))
    with pytest.raises(ValueError, match="job_key"):
        await LocalBackend.open(path)


async def test_a_snapshot_from_before_the_types_package_opens_DRV_2(tmp_path: Path) -> None:
    """Snapshots written before ``lane_pg.types`` was split by concern name their value
    classes ``lane_pg.types:<class>``: they still open, to the same store."""
    path = tmp_path / "store.json"
    store = await LocalBackend.open(path)
    added = await store.jobs.add_job(Q, "n", {"a": 1}, JobOptions(attempts=3, priority=4))
    await store.close()
    text = path.read_text()
    old = re.sub(r'"lane_pg\.types\.\w+:', '"lane_pg.types:', text)
    assert old != text and '"lane_pg.types:' in old
    path.write_text(old)
    again = await LocalBackend.open(path)
    assert await again.jobs.get_job(Q, added.id) == added
    await again.close()


async def test_a_file_that_is_not_a_snapshot_is_refused_DRV_2(tmp_path: Path) -> None:
    path = tmp_path / "store.json"
    path.write_text('{"hello": 1}')
    with pytest.raises(ConfigurationError, match="not a lane_pg local snapshot"):
        await LocalBackend.open(path)
    path.write_text("{not json")
    with pytest.raises(ConfigurationError, match="cannot read snapshot"):
        await LocalBackend.open(path)
    path.write_text('{"format": "lane_pg.local", "version": 99, "store": {}}')
    with pytest.raises(ConfigurationError, match="version 99"):
        await LocalBackend.open(path)
    # The lock was released by each refusal: a good file opens.
    path.unlink()
    fresh = await LocalBackend.open(path)
    assert fresh.path.exists()  # a new store is written at once
    await fresh.close()


async def test_the_local_driver_from_the_environment_CONN_1_CONN_2(tmp_path: Path) -> None:
    path = tmp_path / "app" / "queue.json"
    facade = bootstrap_from_env(
        QueueFacade(registry=JobRegistry()),
        {"LANE_PG_DRIVER": "local", "LANE_PG_LOCAL_PATH": str(path)},
    )
    assert facade.driver_name() == "local"
    assert not path.exists()  # booting does no I/O
    job_id = await facade.push(Note(n=1))
    await facade.close()
    again = bootstrap_from_env(
        QueueFacade(registry=JobRegistry()),
        {"LANE_PG_DRIVER": "local", "LANE_PG_LOCAL_PATH": str(path)},
    )
    assert [job.id for job in await again.pending_jobs(Q)] == [job_id]
    driver = again.driver()
    assert isinstance(driver, BackendDriver)
    reservation = await driver.pop_from([Q])
    assert reservation is not None and await driver.ack(reservation) == "settled"
    await again.close()


def test_the_snapshot_refuses_what_it_cannot_hold_DRV_2() -> None:
    from lane_pg.memory.local import encode

    with pytest.raises(TypeError, match="cannot snapshot"):
        encode(object())
    with pytest.raises(TypeError, match="cannot snapshot"):
        encode(float("nan"))
    assert encode(datetime(2026, 1, 1, tzinfo=UTC)) == {"$dt": "2026-01-01T00:00:00+00:00"}


def test_the_snapshot_format_is_the_declared_state_of_the_store_DRV_2() -> None:
    """The snapshot saves ``_Store.STATE``, not whatever the object holds: every attribute
    of a store is its declared state or this process's, so no new state misses the file."""
    process = {"_clock", "_rng", "_event_waiters", "hooks"}
    process |= {handle.name for handle in (*HANDLES, *CAPABILITIES)}
    assert set(vars(MemoryBackend())) - process == set(_Store.STATE)
