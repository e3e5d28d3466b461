"""EVS: the retained queue event stream (EVS-2, EVS-4, ADD-9)."""

from __future__ import annotations

import pytest

from lane_pg.backend import JobQueueBackend
from lane_pg.errors import LaneError
from lane_pg.types import JobOptions, JobSpec, QueueDemand
from tests.helpers import Clock, epoch_ms, events


async def test_read_events_seed_example_EVS_2(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    job = await backend.add_job(queue_name, "send", {"to": "a"}, now=clock.at(0))
    found = await backend.read_events(queue_name, "-", "+", 10)
    assert found[0].event == "added"
    assert found[0].job_id == job.id


async def test_read_events_ranges_and_limit_EVS_2(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    for name in ("a", "b", "c"):
        await backend.add_job(queue_name, name, now=clock.at(0))
    everything = await backend.read_events(queue_name)
    assert len(everything) == 6
    ids = [event.id for event in everything]
    assert ids == sorted(ids)
    assert len(set(ids)) == 6

    assert await backend.read_events(queue_name, "-", "+", 2) == everything[:2]
    assert await backend.read_events(queue_name, ids[1], ids[3]) == everything[1:4]
    assert await backend.read_events(queue_name, ids[4], "+") == everything[4:]
    assert await backend.read_events(queue_name, "-", ids[0]) == everything[:1]
    assert await backend.read_events(queue_name, ids[2], ids[5], 2) == everything[2:4]


async def test_every_range_and_limit_reads_its_slice_EVS_2(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    """Single adds (whose added and waiting a backend may store together) and a bulk add:
    any start, end and limit reads exactly the events between them."""
    await backend.add_job(queue_name, "a", now=clock.at(0))
    await backend.add_jobs(queue_name, [JobSpec("b"), JobSpec("c")], now=clock.at(0))
    await backend.add_job(queue_name, "d", now=clock.at(0))
    everything = await backend.read_events(queue_name)
    ids = [event.id for event in everything]
    assert len(ids) == 8 and ids == sorted(set(ids))
    for first in range(len(ids)):
        for last in range(first, len(ids)):
            for limit in (1, 2, 3, 100):
                read = await backend.read_events(queue_name, ids[first], ids[last], limit)
                assert read == everything[first : last + 1][:limit], (first, last, limit)


async def test_bulk_add_events_order_and_ranges_EVS_2_EVS_6(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    """One add_jobs call: every 'added', then every 'waiting', then every 'delayed', each
    in input order (the order of the batch rows lane._store_jobs writes), and ranges that
    start or end inside such a batch."""
    jobs = await backend.add_jobs(
        queue_name,
        [
            JobSpec("a", 1),
            JobSpec("b", 2, JobOptions(delay=5000)),
            JobSpec("c", 3),
            JobSpec("d", 4, JobOptions(delay=9000)),
        ],
        now=clock.at(0),
    )
    a, b, c, d = (job.id for job in jobs)
    everything = await backend.read_events(queue_name)
    assert [(e.event, e.job_id) for e in everything] == [
        ("added", a),
        ("added", b),
        ("added", c),
        ("added", d),
        ("waiting", a),
        ("waiting", c),
        ("delayed", b),
        ("delayed", d),
    ]
    assert [e.data for e in everything[:4]] == [{"name": n} for n in "abcd"]
    assert everything[6].data == {"delay": epoch_ms(clock.at(5000))}
    ids = [event.id for event in everything]
    assert ids == sorted(ids) and len(set(ids)) == 8
    assert await backend.read_events(queue_name, ids[1], ids[5]) == everything[1:6]
    assert await backend.read_events(queue_name, ids[2], "+", 3) == everything[2:5]
    assert await backend.read_events(queue_name, ids[3] + 1, ids[6]) == everything[4:7]


async def test_events_are_per_queue_EVS_2(
    backend: JobQueueBackend, queue_name: str, queue_b: str, clock: Clock
) -> None:
    await backend.add_job(queue_name, "a", now=clock.at(0))
    assert await backend.read_events(queue_b) == []
    assert all(event.queue == queue_name for event in await backend.read_events(queue_name))


async def test_event_catalogue_scenario_EVS_4(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    """One scenario writes every event the protocol produces; names and fields checked."""
    q = queue_name
    demand = [QueueDemand(q, 1)]

    # added, waiting, active, progress, completed, drained
    a = await backend.add_job(q, "alpha", {"n": 1}, now=clock.at(0))
    [act] = await backend.claim_jobs("w", demand, 10, now=clock.at(1))
    assert act.lock_token is not None
    await backend.update_job_progress(q, a.id, {"pct": 50}, now=clock.at(2))
    await backend.complete_job(q, a.id, act.lock_token, [1, 2], now=clock.at(3))

    # delayed (retry with backoff), failed, retries-exhausted
    b = await backend.add_job(
        q,
        "beta",
        None,
        {"attempts": 2, "backoff": {"type": "fixed", "delay_ms": 1000}},
        now=clock.at(4),
    )
    [bct] = await backend.claim_jobs("w", demand, 10, now=clock.at(5))
    assert bct.lock_token is not None
    await backend.fail_job(q, b.id, bct.lock_token, "first", now=clock.at(6))
    [bct2] = await backend.claim_jobs("w", demand, 10, now=clock.at(7))
    assert bct2.lock_token is not None
    await backend.fail_job(q, b.id, bct2.lock_token, "second", now=clock.at(8))

    # stalled, removed, paused, resumed
    c = await backend.add_job(q, "gamma", now=clock.at(9))
    await backend.claim_jobs("w", demand, 10, now=clock.at(10))
    await backend.recover_stalled([q], now=clock.at(21))
    await backend.remove_job(q, c.id, now=clock.at(22))
    await backend.pause_queue(q)
    await backend.resume_queue(q)

    got = [(e.event, e.job_id, e.data) for e in await events(backend, q)]
    stalled_data = next(data for name, _, data in got if name == "stalled")
    waiting_after_add = next(data for name, job_id, data in got if name == "waiting")
    assert isinstance(stalled_data.get("reason"), str)
    assert stalled_data["reason"]
    assert got == [
        ("added", a.id, {"name": "alpha"}),
        ("waiting", a.id, waiting_after_add),
        ("active", a.id, {"prev": "waiting"}),
        ("progress", a.id, {"data": {"pct": 50}}),
        ("completed", a.id, {"prev": "active", "returnvalue": [1, 2]}),
        ("drained", None, {}),
        ("added", b.id, {"name": "beta"}),
        ("waiting", b.id, waiting_after_add),
        ("active", b.id, {"prev": "waiting"}),
        (
            "delayed",
            b.id,
            {"delay": epoch_ms(clock.at(7)), "prev": "active", "failedReason": "first"},
        ),
        ("waiting", b.id, {"prev": "delayed"}),
        ("active", b.id, {"prev": "waiting"}),
        ("failed", b.id, {"prev": "active", "failedReason": "second"}),
        ("retries-exhausted", b.id, {"attemptsMade": 2}),
        ("drained", None, {}),
        ("added", c.id, {"name": "gamma"}),
        ("waiting", c.id, waiting_after_add),
        ("active", c.id, {"prev": "waiting"}),
        ("stalled", c.id, stalled_data),
        ("waiting", c.id, {"prev": "active"}),
        ("removed", c.id, {"prev": "waiting"}),
        ("paused", None, {}),
        ("resumed", None, {}),
    ]


async def test_delay_events_carry_epoch_millis_EVS_4(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    job = await backend.add_job(queue_name, "d", None, JobOptions(delay=0.25), now=clock.at(0))
    delayed = [e for e in await events(backend, queue_name) if e.event == "delayed"]
    assert [(e.job_id, e.data) for e in delayed] == [(job.id, {"delay": epoch_ms(clock.at(0.25))})]
    assert isinstance(delayed[0].data["delay"], int)


async def test_refused_calls_write_no_events_EVS_4(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    await backend.add_job(queue_name, "n", now=clock.at(0))
    before = await events(backend, queue_name)
    with pytest.raises(LaneError):
        await backend.add_job(queue_name, "n", None, {"job_id": "0"}, now=clock.at(1))
    with pytest.raises(LaneError):
        await backend.promote_job(queue_name, "missing", now=clock.at(1))
    assert await events(backend, queue_name) == before
