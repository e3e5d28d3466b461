"""``add_debounced_job`` on every backend (UNIQ-9..11): one dispatch of a debounce window,
read and written in one step. Times come from ``clock`` (``now=``), never from sleeping."""

from __future__ import annotations

from typing import Any

import pytest

from lane_pg.backend import Dedup, JobQueueBackend
from lane_pg.errors import InvalidOptions
from lane_pg.types import ALL_STATES, JobRow, QueueDemand
from lane_pg.types.flows import FlowJob
from tests.helpers import Clock, events

KEY = "debounce:search:7"
WINDOW_MS = 60_000


def window(token: str, **extra: Any) -> dict[str, Any]:
    return {
        "delay_ms": WINDOW_MS,
        "deduplication": {"id": KEY, "replace_delayed": True, "token": token, **extra},
    }


def debounces(backend: JobQueueBackend) -> Dedup:
    assert isinstance(backend.dedup, Dedup)
    return backend.dedup


async def rows(backend: JobQueueBackend, queue: str) -> dict[str, JobRow]:
    return {job.id: job for job in (await backend.list_jobs(queue, ALL_STATES, limit=100)).items}


async def test_a_delayed_dispatch_is_replaced_UNIQ_9_UNIQ_11(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    add = debounces(backend).add_debounced_job
    first = await add(queue_name, "search", 1, window("a"), now=clock.at())
    assert (first.job.state, first.replaced_id) == ("delayed", None)
    assert first.job.available_at == clock.at(60)
    second = await add(queue_name, "search", 2, window("b"), now=clock.at(1))
    assert second.replaced_id == first.job.id
    assert list(await rows(backend, queue_name)) == [second.job.id]
    assert await backend.get_deduplication_job_id(queue_name, KEY, now=clock.at(2)) == second.job.id
    names = [(e.event, e.job_id) for e in await events(backend, queue_name)]
    assert ("removed", first.job.id) in names
    assert names[-2:] == [("debounced", second.job.id), ("deduplicated", second.job.id)]


async def test_a_dispatch_no_longer_delayed_is_superseded_UNIQ_11(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    add = debounces(backend).add_debounced_job
    first = await add(queue_name, "search", 1, window("a"), now=clock.at())
    await backend.promote_job(queue_name, first.job.id, now=clock.at(1))
    second = await add(queue_name, "search", 2, window("b"), now=clock.at(2))
    assert second.replaced_id is None
    stored = await rows(backend, queue_name)
    assert stored[first.job.id].state == "waiting"  # kept: the worker drops it
    assert await backend.get_deduplication_job_id(queue_name, KEY, now=clock.at(3)) == second.job.id


async def test_a_delayed_flow_parent_is_superseded_not_removed_UNIQ_11_DEDUP_7(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    """A window held by a delayed flow parent: removing it would leave its dependency rows
    and its child naming a job that is gone, so it is kept, as a waiting one is."""
    flow = await backend.add_flow(
        FlowJob(
            "search",
            None,
            window("a"),
            queue=queue_name,
            children=[FlowJob("child", None, queue=queue_name)],
        ),
        now=clock.at(),
    )
    [child] = await backend.claim_jobs("w", [QueueDemand(queue_name, 1)], 30, now=clock.at(1))
    assert child.lock_token is not None
    await backend.complete_job(queue_name, child.id, child.lock_token, "ok", now=clock.at(2))
    assert await backend.get_job_state(queue_name, flow.job.id) == "delayed"
    second = await debounces(backend).add_debounced_job(
        queue_name, "search", 2, window("b"), now=clock.at(3)
    )
    assert second.replaced_id is None
    assert await backend.get_job_state(queue_name, flow.job.id) == "delayed"
    counts = await backend.get_flow_dependency_counts(queue_name, flow.job.id)
    assert counts is not None and (counts.processed, counts.missing) == (1, 0)
    assert await backend.get_deduplication_job_id(queue_name, KEY, now=clock.at(4)) == second.job.id


async def test_max_wait_flushes_from_the_bursts_first_dispatch_UNIQ_10(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    """The burst starts at +0 and goes on through a superseded (promoted) dispatch; the
    dispatch at +10 s is flushed: stored at once, without the window, which is released,
    so the next one starts a burst of its own."""
    add = debounces(backend).add_debounced_job
    first = await add(queue_name, "search", 1, window("a"), max_wait=10, now=clock.at())
    await backend.promote_job(queue_name, first.job.id, now=clock.at(1))
    second = await add(queue_name, "search", 2, window("b"), max_wait=10, now=clock.at(2))
    assert second.job.state == "delayed"
    flushed = await add(queue_name, "search", 3, window("c"), max_wait=10, now=clock.at(10))
    assert flushed.replaced_id == second.job.id  # still delayed: replaced by the flush
    assert flushed.job.state == "waiting" and flushed.job.deduplication_id is None
    assert "deduplication" not in flushed.job.options
    assert await backend.get_deduplication_job_id(queue_name, KEY, now=clock.at(10)) is None
    after = await add(queue_name, "search", 4, window("d"), max_wait=10, now=clock.at(11))
    assert (after.job.state, after.replaced_id) == ("delayed", None)
    again = await add(queue_name, "search", 5, window("e"), max_wait=10, now=clock.at(20))
    assert again.job.state == "delayed"  # 9 s into the new burst: not flushed
    assert again.replaced_id == after.job.id


async def test_a_replacing_add_keeps_the_bursts_start_UNIQ_10_DEDUP_7(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    """A plain add that replaces the window's delayed dispatch takes the id over, not the
    burst: a dispatch 10 s after the burst's first is flushed (lane._dedup_take keeps the
    owner row's created_at; found by the job state machine, where the memory backend
    started a new burst)."""
    add = debounces(backend).add_debounced_job
    first = await add(queue_name, "search", 1, window("a"), max_wait=10, now=clock.at())
    plain = await backend.add_job(
        queue_name,
        "plain",
        2,
        {"delay_ms": WINDOW_MS, "deduplication": {"id": KEY, "replace_delayed": True}},
        now=clock.at(5),
    )
    assert (await rows(backend, queue_name)).keys() == {plain.id} != {first.job.id}
    flushed = await add(queue_name, "search", 3, window("b"), max_wait=10, now=clock.at(10))
    assert flushed.replaced_id == plain.id  # still delayed: replaced by the flush
    assert flushed.job.state == "waiting" and flushed.job.deduplication_id is None
    assert await backend.get_deduplication_job_id(queue_name, KEY, now=clock.at(10)) is None


async def test_a_plain_owner_starts_the_burst_it_is_part_of_UNIQ_10(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    """The burst starts when its id's owner row was written, whoever wrote it: a plain
    deduplicated job added at +0 and still waiting makes a dispatch at +10 s with a 10 s
    max wait flush (lane.add_debounced_job reads the row's created_at)."""
    plain = await backend.add_job(
        queue_name, "plain", 1, {"deduplication": {"id": KEY}}, now=clock.at()
    )
    add = debounces(backend).add_debounced_job
    early = await add(queue_name, "search", 2, window("a"), max_wait=10, now=clock.at(9))
    assert (early.job.state, early.replaced_id) == ("delayed", None)  # supersedes the plain
    assert await backend.get_job_state(queue_name, plain.id) == "waiting"
    flushed = await add(queue_name, "search", 3, window("b"), max_wait=10, now=clock.at(10))
    assert flushed.replaced_id == early.job.id
    assert flushed.job.state == "waiting" and flushed.job.deduplication_id is None


@pytest.mark.parametrize(
    ("options", "max_wait"),
    [
        ({"delay_ms": WINDOW_MS, "deduplication": {"id": KEY}}, None),  # no token
        (window("a", kind="unique", ttl_ms=5, replace_delayed=False), None),
        (window("a", keep_last_if_active=True), None),
        (window("a"), 0),
        ({"delay_ms": WINDOW_MS}, None),
    ],
)
async def test_a_bad_debounced_add_writes_nothing_UNIQ_9(
    backend: JobQueueBackend,
    queue_name: str,
    clock: Clock,
    options: dict[str, Any],
    max_wait: float | None,
) -> None:
    with pytest.raises(InvalidOptions):
        await debounces(backend).add_debounced_job(
            queue_name, "search", 1, options, max_wait=max_wait, now=clock.at()
        )
    assert await rows(backend, queue_name) == {}
    assert await backend.get_deduplication_job_id(queue_name, KEY, now=clock.at()) is None
