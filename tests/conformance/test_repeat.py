"""Repeatable jobs (REP-1..15, ADD-13), on every backend. Times come from ``clock``; the
schedule's own rules (cron forms, zones, DST) are tests/test_schedule.py's."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from lane_pg.backend import JobQueueBackend
from lane_pg.errors import InvalidOptions, JobLocked, JobStateConflict, RepeatConflict
from lane_pg.memory import MemoryBackend
from lane_pg.postgres.backend import PostgresBackend
from lane_pg.redis.backend import RedisBackend
from lane_pg.types import ALL_STATES, JobOptions, JobRow, JobSpec, QueueDemand
from lane_pg.types.schedule import RepeatOptions
from tests.helpers import Clock, events, job_event_list


def every(ms: int = 60_000, **more: Any) -> dict[str, Any]:
    return {"repeat": {"every_ms": ms, **more}}


async def claim(backend: JobQueueBackend, queue: str, clock: Clock, at: float) -> JobRow:
    [job] = await backend.claim_jobs("w", [QueueDemand(queue, 1)], 30, now=clock.at(at))
    return job


async def complete(backend: JobQueueBackend, job: JobRow, clock: Clock, at: float) -> JobRow:
    assert job.lock_token is not None
    return await backend.complete_job(job.queue, job.id, job.lock_token, "ok", now=clock.at(at))


async def jobs_of(backend: JobQueueBackend, queue: str) -> list[JobRow]:
    page = await backend.list_jobs(queue, ALL_STATES, limit=100)
    return sorted(page.items, key=lambda job: int(job.id))


async def unfinished(backend: JobQueueBackend, queue: str) -> list[JobRow]:
    return [j for j in await jobs_of(backend, queue) if j.state not in ("completed", "failed")]


async def test_repeat_options_and_the_snapshot_key_REP_1(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    job = await backend.add_job(
        queue_name,
        "heartbeat",
        {"v": 1},
        JobOptions(repeat=RepeatOptions.every(timedelta(minutes=1), key="crm-heartbeat")),
        now=clock.at(),
    )
    assert job.repeat_key == "crm-heartbeat"
    assert (job.state, job.available_at) == ("waiting", clock.at())  # an interval runs at once
    derived = await backend.add_job(queue_name, "sync", None, every(5000), now=clock.at())
    assert derived.repeat_key == "sync:every:5000"
    cron = await backend.add_job(
        queue_name, "nightly", None, {"repeat": {"pattern": "0 0 2 * * * *"}}, now=clock.at()
    )
    assert cron.repeat_key == "nightly:cron:0 0 2 * * * *"
    assert cron.state == "delayed"
    assert (cron.available_at.hour, cron.available_at.minute, cron.available_at.second) == (2, 0, 0)
    assert clock.at() < cron.available_at <= clock.at() + timedelta(days=1)


async def test_completion_stores_the_successor_in_the_same_call_REP_2(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    first = await backend.add_job(queue_name, "tick", {"n": 1}, every(60_000), now=clock.at())
    await complete(backend, await claim(backend, queue_name, clock, 1), clock, 2)
    [successor] = await unfinished(backend, queue_name)
    assert successor.id != first.id
    assert (successor.state, successor.available_at) == ("delayed", clock.at(60))
    assert (successor.name, successor.data, successor.options) == ("tick", {"n": 1}, first.options)
    assert successor.repeat_key == first.repeat_key
    names = [name for name, _ in await job_event_list(backend, queue_name, successor.id)]
    assert names == ["added", "delayed"]
    info = await backend.get_repeat(queue_name, "tick:every:60000")
    assert info is not None
    assert (info.job_id, info.next_at, info.count) == (successor.id, clock.at(60), 2)


async def test_interval_is_anchored_to_the_schedule_and_skips_passed_slots_REP_2(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    """A11: the next tick is the first tick + k * every after now, whenever the run ends;
    an occurrence that waited through downtime runs once, and the missed ticks are not
    run in a burst (the catch-up policy README documents)."""
    await backend.add_job(queue_name, "tick", None, every(60_000), now=clock.at())
    await complete(backend, await claim(backend, queue_name, clock, 5), clock, 7)
    [second] = await unfinished(backend, queue_name)
    assert second.available_at == clock.at(60)
    # Downtime: nothing runs until +10 min. The waiting tick runs once, late.
    late = await claim(backend, queue_name, clock, 600)
    assert late.id == second.id
    await complete(backend, late, clock, 601)
    [third] = await unfinished(backend, queue_name)
    assert third.available_at == clock.at(660)


async def test_limit_counts_every_run_the_first_included_REP_3(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    await backend.add_job(queue_name, "n", None, every(1000, limit=3), now=clock.at())
    for run in range(3):
        job = await claim(backend, queue_name, clock, run + 0.5)
        await complete(backend, job, clock, run + 0.6)
    assert await unfinished(backend, queue_name) == []
    assert [j.state for j in await jobs_of(backend, queue_name)] == ["completed"] * 3
    assert await backend.list_repeats(queue_name) == []
    assert await backend.count_repeats(queue_name) == 0


async def test_no_occurrence_after_end_at_REP_4(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    end = clock.at(90)
    await backend.add_job(
        queue_name, "n", None, JobOptions(repeat=RepeatOptions.every(60, end_at=end)),
        now=clock.at(),
    )  # fmt: skip
    runs = 0
    for at in (0, 60, 120):
        claimed = await backend.claim_jobs("w", [QueueDemand(queue_name, 1)], 30, now=clock.at(at))
        for job in claimed:
            await complete(backend, job, clock, at + 1)
            runs += 1
    assert runs == 2
    assert await backend.get_repeat(queue_name, "n:every:60000") is None


async def test_end_at_in_the_past_is_refused_and_writes_nothing_ADD_13(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    past = every(1000, end_at=int(clock.at(-10).timestamp() * 1000))
    with pytest.raises(InvalidOptions, match="no occurrence left"):
        await backend.add_jobs(
            queue_name, [JobSpec("ok", 1, every(1000)), JobSpec("late", 2, past)], now=clock.at()
        )
    assert await jobs_of(backend, queue_name) == []
    assert await events(backend, queue_name) == []
    assert await backend.count_repeats(queue_name) == 0


async def test_invalid_schedules_are_refused_at_add_REP_5(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    for repeat in (
        {"pattern": "* * * *"},
        {"pattern": "0 0 2 * * * 2030"},
        {"pattern": "* * * * *", "tz": "Mars/Olympus"},
        {"every_ms": 0},
    ):
        with pytest.raises(InvalidOptions):
            await backend.add_job(queue_name, "n", None, {"repeat": repeat}, now=clock.at())
    with pytest.raises(InvalidOptions):
        await backend.add_job(queue_name, "n", None, {**every(), "delay_ms": 10}, now=clock.at())
    assert await jobs_of(backend, queue_name) == []


async def test_series_owner_returns_itself_to_duplicate_adds_REP_6(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    job = await backend.add_job(queue_name, "n", {"v": 1}, every(key="k"), now=clock.at())
    duplicate = await backend.add_job(queue_name, "n", {"v": 2}, every(key="k"), now=clock.at(1))
    assert duplicate.id == job.id and duplicate.data == {"v": 1}
    names = [name for name, _ in await job_event_list(backend, queue_name, job.id)]
    assert names == ["added", "waiting", "duplicated"]
    # In one bulk add too: the second spec of a series is the first's.
    jobs = await backend.add_jobs(
        queue_name, [JobSpec("b", 1, every(key="k2")), JobSpec("b", 2, every(key="k2"))],
        now=clock.at(2),
    )  # fmt: skip
    assert jobs[0].id == jobs[1].id and jobs[1].data == 1
    assert len(await unfinished(backend, queue_name)) == 2


async def test_terminal_failure_ends_the_series_REP_7(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    first = await backend.add_job(queue_name, "n", 1, every(key="k"), now=clock.at())
    running = await claim(backend, queue_name, clock, 1)
    assert running.lock_token is not None
    await backend.fail_job(queue_name, first.id, running.lock_token, "boom", now=clock.at(2))
    assert await backend.get_repeat(queue_name, "k") is None
    fresh = await backend.add_job(queue_name, "n", 2, every(key="k"), now=clock.at(3))
    assert fresh.id != first.id
    info = await backend.get_repeat(queue_name, "k")
    assert info is not None and (info.job_id, info.count) == (fresh.id, 1)


async def test_removing_the_owner_ends_the_series_REP_7(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    job = await backend.add_job(queue_name, "n", 1, every(key="k"), now=clock.at())
    assert await backend.remove_job(queue_name, job.id, now=clock.at(1))
    assert await backend.count_repeats(queue_name) == 0


async def test_upsert_replaces_the_owner_REP_8(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    job = await backend.add_job(queue_name, "n", {"v": 1}, every(key="k"), now=clock.at())
    replacement = await backend.upsert_repeat(
        queue_name, "n", {"v": 2}, every(30_000, key="k"), now=clock.at(1)
    )
    assert replacement.id != job.id and replacement.data == {"v": 2}
    assert await backend.get_job(queue_name, job.id) is None
    [info] = await backend.list_repeats(queue_name)
    assert (info.job_id, info.every_ms, info.count) == (replacement.id, 30_000, 1)
    removed = [(e.event, e.job_id, e.data) for e in await events(backend, queue_name)]
    assert ("removed", job.id, {"prev": "waiting"}) in removed
    # Upserting a series that does not exist yet creates it.
    created = await backend.upsert_repeat(queue_name, "m", None, every(key="m"), now=clock.at(2))
    assert (await backend.get_repeat(queue_name, "m")) is not None
    assert created.repeat_key == "m"


async def test_upsert_refuses_a_running_owner_and_changes_nothing_REP_9(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    job = await backend.add_job(queue_name, "n", 1, every(key="k"), now=clock.at())
    await claim(backend, queue_name, clock, 1)
    before = await events(backend, queue_name)
    with pytest.raises(JobStateConflict):
        await backend.upsert_repeat(queue_name, "n", 2, every(key="k"), now=clock.at(2))
    assert await events(backend, queue_name) == before
    info = await backend.get_repeat(queue_name, "k")
    assert info is not None and info.job_id == job.id
    with pytest.raises(InvalidOptions):
        await backend.upsert_repeat(queue_name, "n", 2, {}, now=clock.at(2))


async def test_remove_repeat_REP_10(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    await backend.add_job(queue_name, "n", 1, every(key="k"), now=clock.at())
    replacement = await backend.upsert_repeat(queue_name, "n", 2, every(key="k"), now=clock.at(1))
    assert await backend.remove_repeat(queue_name, "k", now=clock.at(2)) == replacement.id
    assert await backend.get_repeat(queue_name, "k") is None
    assert await jobs_of(backend, queue_name) == []
    assert await backend.remove_repeat(queue_name, "k", now=clock.at(3)) is None
    # A running owner under a valid lease is refused.
    await backend.add_job(queue_name, "n", 3, every(key="r"), now=clock.at(4))
    await claim(backend, queue_name, clock, 5)
    with pytest.raises(JobLocked):
        await backend.remove_repeat(queue_name, "r", now=clock.at(6))
    assert await backend.get_repeat(queue_name, "r") is not None


async def delete_behind_the_backends_back(
    backend: JobQueueBackend, queue: str, job_id: str
) -> None:
    """The job row goes as a raw ``DELETE FROM lane.jobs`` (an operator's, or a path that
    forgot the removal rules) would take it: its series row still names it."""
    if isinstance(backend, MemoryBackend):
        q, job = backend._require(queue, job_id)
        backend._delete(q, job)
    elif isinstance(backend, RedisBackend):
        keys = backend.keys(queue)
        fields = await backend.client.hgetall(keys.job(job_id))
        state = fields[b"state"].decode()
        member = fields[b"wm"] if state == "waiting" else f"{int(fields[b'key']):016d}:{job_id}"
        await backend.client.zrem(keys.key(state), member)
        await backend.client.delete(keys.job(job_id))
    else:
        assert isinstance(backend, PostgresBackend)
        await backend.database.fetch(
            "DELETE FROM lane.jobs WHERE queue = $1 AND id = $2", queue, job_id
        )
    assert await backend.get_job(queue, job_id) is None


async def stored_series(backend: JobQueueBackend, queue: str) -> list[str]:
    """The keys of the queue's series rows as stored, stale ones included."""
    if isinstance(backend, MemoryBackend):
        q = backend._queues.get(queue)
        return sorted(() if q is None else q.series)
    if isinstance(backend, RedisBackend):
        members = await backend.client.smembers(backend.keys(queue).key("repeats"))
        return sorted(member.decode() for member in members)
    assert isinstance(backend, PostgresBackend)
    rows = await backend.database.fetch(
        "SELECT key FROM lane.repeat_schedulers WHERE queue = $1 ORDER BY key", queue
    )
    return [row["key"] for row in rows]


async def test_list_get_count_skip_stale_series_REP_11(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    owners = {
        key: await backend.add_job(queue_name, key, None, every(key=key), now=clock.at())
        for key in ("a", "b", "x", "y", "z")
    }
    assert await backend.count_repeats(queue_name) == 5
    info = await backend.get_repeat(queue_name, "a")
    assert info is not None
    assert (info.key, info.job_id, info.name, info.every_ms, info.pattern, info.limit) == (
        "a", owners["a"].id, "a", 60_000, None, None,
    )  # fmt: skip
    assert info.options == {"repeat": {"every_ms": 60_000, "key": "a"}}
    assert await backend.get_repeat(queue_name, "nope") is None

    # One stale row per read: each read skips it and deletes it.
    await delete_behind_the_backends_back(backend, queue_name, owners["x"].id)
    assert await backend.get_repeat(queue_name, "x") is None
    assert await stored_series(backend, queue_name) == ["a", "b", "y", "z"]
    await delete_behind_the_backends_back(backend, queue_name, owners["y"].id)
    listed = await backend.list_repeats(queue_name, ascending=True)
    assert sorted(i.key for i in listed) == ["a", "b", "z"]
    assert await stored_series(backend, queue_name) == ["a", "b", "z"]
    await delete_behind_the_backends_back(backend, queue_name, owners["z"].id)
    assert await backend.count_repeats(queue_name) == 2
    assert await stored_series(backend, queue_name) == ["a", "b"]


async def test_list_repeats_page_order_REP_12(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    for key, second in (("one", 1), ("two", 2), ("three", 3)):
        await backend.add_job(
            queue_name, key, None, {"repeat": {"pattern": f"{second} * * * * *", "key": key}},
            now=clock.at().replace(second=0) + timedelta(minutes=1),
        )  # fmt: skip
    assert [i.key for i in await backend.list_repeats(queue_name)] == ["three", "two", "one"]
    ascending = await backend.list_repeats(queue_name, ascending=True)
    assert [i.key for i in ascending] == ["one", "two", "three"]
    assert [i.key for i in await backend.list_repeats(queue_name, 0, 0)] == ["three"]
    assert [i.key for i in await backend.list_repeats(queue_name, 1, 2)] == ["two", "one"]
    assert ascending[0].next_at < ascending[1].next_at < ascending[2].next_at


async def test_overwrite_rebuilds_the_schedule_REP_13(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    await backend.add_job(queue_name, "n", None, every(key="k", limit=5), now=clock.at())
    await backend.upsert_repeat(
        queue_name, "n", None, {"repeat": {"pattern": "0 * * * *", "key": "k"}}, now=clock.at(1)
    )
    info = await backend.get_repeat(queue_name, "k")
    assert info is not None
    assert (info.every_ms, info.pattern, info.limit) == (None, "0 * * * *", None)


async def test_moving_the_owner_moves_next_at_REP_14(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    job = await backend.add_job(queue_name, "n", None, every(key="k"), now=clock.at())
    await complete(backend, await claim(backend, queue_name, clock, 1), clock, 2)
    info = await backend.get_repeat(queue_name, "k")
    assert info is not None and info.job_id != job.id
    await backend.reschedule_job(queue_name, info.job_id, 300, now=clock.at(3))
    moved = await backend.get_repeat(queue_name, "k")
    assert moved is not None and moved.next_at == clock.at(303)
    # The next tick keeps the schedule's anchor (+60 s steps), not the moved time.
    await complete(backend, await claim(backend, queue_name, clock, 303), clock, 304)
    after = await backend.get_repeat(queue_name, "k")
    assert after is not None and after.next_at == clock.at(360)


async def test_retry_of_an_occurrence_REP_15(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    first = await backend.add_job(queue_name, "n", None, every(key="k"), now=clock.at())
    running = await claim(backend, queue_name, clock, 1)
    assert running.lock_token is not None
    await backend.fail_job(queue_name, first.id, running.lock_token, "x", now=clock.at(2))
    retried = await backend.retry_job(queue_name, first.id, now=clock.at(3))
    assert retried.state == "waiting"
    info = await backend.get_repeat(queue_name, "k")
    assert info is not None and info.job_id == first.id
    # Another occurrence owns the series: the retry is refused and changes nothing.
    running = await claim(backend, queue_name, clock, 4)
    assert running.lock_token is not None
    await backend.fail_job(queue_name, first.id, running.lock_token, "x", now=clock.at(5))
    other = await backend.add_job(queue_name, "n", None, every(key="k"), now=clock.at(6))
    before = await events(backend, queue_name)
    with pytest.raises(RepeatConflict, match=other.id):
        await backend.retry_job(queue_name, first.id, now=clock.at(7))
    assert await events(backend, queue_name) == before
    stored = await backend.get_job(queue_name, first.id)
    assert stored is not None and stored.state == "failed"


async def test_cron_successor_is_the_next_match_REP_2_REP_5(
    backend: JobQueueBackend, queue_name: str
) -> None:
    start = datetime(2026, 3, 28, 23, 0, tzinfo=UTC)
    repeat = {"repeat": {"pattern": "30 2 * * *", "tz": "Europe/Berlin", "key": "k"}}
    first = await backend.add_job(queue_name, "n", None, repeat, now=start)
    # 2026-03-29 02:30 does not exist in Berlin (spring forward): the first run is the 30th.
    assert first.available_at == datetime(2026, 3, 30, 0, 30, tzinfo=UTC)
    [job] = await backend.claim_jobs("w", [QueueDemand(queue_name, 1)], 30, now=first.available_at)
    assert job.lock_token is not None
    await backend.complete_job(
        queue_name, job.id, job.lock_token, None, now=first.available_at + timedelta(seconds=5)
    )
    [successor] = await unfinished(backend, queue_name)
    assert successor.available_at == datetime(2026, 3, 31, 0, 30, tzinfo=UTC)


async def test_keep_last_duplicate_becomes_the_next_occurrence_DEDUP_11_REP_17(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    """A repeat owner that also deduplicates with keep-last: the latest duplicate kept
    while it ran is the series' next occurrence (counted), and the regular successor of
    that turn is not written."""
    options = {**every(60_000, key="k"), "deduplication": {"id": "d", "keep_last_if_active": True}}
    await backend.add_job(queue_name, "n", {"v": 1}, options, now=clock.at())
    running = await claim(backend, queue_name, clock, 1)
    await backend.add_job(queue_name, "n", {"v": 2}, options, now=clock.at(2))
    await complete(backend, running, clock, 3)
    [successor] = await unfinished(backend, queue_name)
    assert successor.data == {"v": 2}
    assert successor.available_at == clock.at(60)  # the series' next tick
    info = await backend.get_repeat(queue_name, "k")
    assert info is not None and (info.job_id, info.count) == (successor.id, 2)
    assert await backend.get_deduplication_job_id(queue_name, "d") == successor.id


async def test_a_stalled_occurrence_is_requeued_not_duplicated_REP_2(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    """A crash loop: the worker dies holding the occurrence; recovery puts the same job
    back, and only its eventual completion writes the next one."""
    first = await backend.add_job(queue_name, "n", None, every(60_000, key="k"), now=clock.at())
    await claim(backend, queue_name, clock, 1)
    await backend.recover_stalled([queue_name], max_stalled_count=5, now=clock.at(40))
    again = await claim(backend, queue_name, clock, 41)
    assert again.id == first.id
    await backend.recover_stalled([queue_name], max_stalled_count=5, now=clock.at(80))
    assert [job.id for job in await unfinished(backend, queue_name)] == [first.id]
    await complete(backend, await claim(backend, queue_name, clock, 81), clock, 82)
    [successor] = await unfinished(backend, queue_name)
    assert successor.available_at == clock.at(120)
