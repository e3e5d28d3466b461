"""Deduplication owners (DEDUP-1..16, -20, ADD-12, EVS-4 `debounced` / `deduplicated`),
on every backend. Times come from ``clock``: TTLs are checked with ``now=``, never by
sleeping (TEST-10)."""

from __future__ import annotations

from typing import Any

import pytest

from lane_pg.backend import JobQueueBackend
from lane_pg.errors import DeduplicationConflict, InvalidOptions
from lane_pg.types import ALL_STATES, DeduplicationOptions, JobOptions, JobRow, JobSpec, QueueDemand
from lane_pg.types.flows import FlowJob
from tests.helpers import Clock, epoch_ms, events, job_event_list


def dedup(dedup_id: str = "account:acct_42", **flags: Any) -> dict[str, Any]:
    return {"deduplication": {"id": dedup_id, **flags}}


async def claim(backend: JobQueueBackend, queue: str, clock: Clock, at: float) -> JobRow:
    [job] = await backend.claim_jobs("w", [QueueDemand(queue, 1)], 30, now=clock.at(at))
    return job


async def complete(backend: JobQueueBackend, job: JobRow, clock: Clock, at: float) -> JobRow:
    assert job.lock_token is not None
    return await backend.complete_job(job.queue, job.id, job.lock_token, "ok", now=clock.at(at))


async def ids_in(backend: JobQueueBackend, queue: str) -> list[str]:
    page = await backend.list_jobs(queue, ALL_STATES, limit=100)
    return sorted((job.id for job in page.items), key=int)


async def test_simple_duplicate_returns_the_owner_DEDUP_1(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    first = await backend.add_job(
        queue_name, "sync", {"v": 1}, JobOptions(deduplication="account:acct_42"), now=clock.at()
    )
    duplicate = await backend.add_job(
        queue_name,
        "other",
        {"v": 2},
        JobOptions(deduplication=DeduplicationOptions("account:acct_42")),
        now=clock.at(1),
    )
    assert duplicate.id == first.id
    assert (duplicate.name, duplicate.data, duplicate.state) == ("sync", {"v": 1}, "waiting")
    assert duplicate.deduplication_id == "account:acct_42"
    assert await ids_in(backend, queue_name) == [first.id]
    assert await backend.get_deduplication_job_id(queue_name, "account:acct_42") == first.id


async def test_duplicate_writes_debounced_and_deduplicated_DEDUP_2(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    first = await backend.add_job(queue_name, "n", 1, dedup(), now=clock.at())
    await backend.add_job(queue_name, "n", 2, dedup(), now=clock.at(1))
    seen = await events(backend, queue_name)
    names = [event.event for event in seen]
    assert names == ["added", "waiting", "debounced", "deduplicated"]
    skipped = seen[2].data["deduplicatedJobId"]
    assert skipped != first.id
    for event in seen[2:]:
        assert event.job_id == first.id
        assert event.data == {"deduplicationId": "account:acct_42", "deduplicatedJobId": skipped}
    assert await ids_in(backend, queue_name) == [first.id]  # the candidate was never stored


async def test_owner_without_ttl_blocks_until_it_finishes_DEDUP_3(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    first = await backend.add_job(queue_name, "n", 1, dedup(), now=clock.at())
    await complete(backend, await claim(backend, queue_name, clock, 1), clock, 2)
    assert await backend.get_deduplication_job_id(queue_name, "account:acct_42") is None
    second = await backend.add_job(queue_name, "n", 2, dedup(), now=clock.at(3))
    assert second.id != first.id and second.data == 2
    # Terminal failure releases as well.
    failing = await claim(backend, queue_name, clock, 4)
    assert failing.id == second.id and failing.lock_token is not None
    await backend.fail_job(queue_name, failing.id, failing.lock_token, "boom", now=clock.at(5))
    third = await backend.add_job(queue_name, "n", 3, dedup(), now=clock.at(6))
    assert third.id not in (first.id, second.id)


async def test_ttl_owner_blocks_until_the_ttl_runs_out_also_after_finishing_DEDUP_4(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    first = await backend.add_job(queue_name, "n", 1, dedup(ttl_ms=2000), now=clock.at())
    await complete(backend, await claim(backend, queue_name, clock, 0.2), clock, 0.5)
    again = await backend.add_job(queue_name, "n", 2, dedup(ttl_ms=2000), now=clock.at(1))
    assert (again.id, again.state) == (first.id, "completed")
    assert (
        await backend.get_deduplication_job_id(queue_name, "account:acct_42", now=clock.at(1.9))
        == first.id
    )
    later = await backend.add_job(queue_name, "n", 3, dedup(ttl_ms=2000), now=clock.at(2.1))
    assert later.id != first.id and later.state == "waiting"


async def test_ttl_runs_out_while_the_owner_waits_DEDUP_4(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    """An expired TTL frees the id even though the owner still waits; that old job then
    finishing or being removed does not release the new owner (BullMQ #3232)."""
    old = await backend.add_job(queue_name, "n", 1, dedup(ttl_ms=1000), now=clock.at())
    new = await backend.add_job(queue_name, "n", 2, dedup(ttl_ms=60_000), now=clock.at(2))
    assert new.id != old.id
    assert await backend.remove_job(queue_name, old.id, now=clock.at(3))
    assert (
        await backend.get_deduplication_job_id(queue_name, "account:acct_42", now=clock.at(3))
        == new.id
    )
    again = await backend.add_job(queue_name, "n", 3, dedup(ttl_ms=60_000), now=clock.at(4))
    assert again.id == new.id


async def test_retention_deleting_a_ttl_owner_frees_the_id_at_the_next_add_DEDUP_5(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    """A10: the owner row outlives its job (deleted by remove_on_complete); the next add
    finds the job missing, prunes the row and becomes the owner."""
    options = {**dedup(ttl_ms=10_000), "remove_on_complete": True}
    first = await backend.add_job(queue_name, "n", 1, options, now=clock.at())
    await complete(backend, await claim(backend, queue_name, clock, 1), clock, 2)
    assert await backend.get_job(queue_name, first.id) is None
    second = await backend.add_job(queue_name, "n", 2, options, now=clock.at(3))
    assert second.id != first.id and second.state == "waiting"
    assert (
        await backend.get_deduplication_job_id(queue_name, "account:acct_42", now=clock.at(3))
        == second.id
    )


async def test_extend_ttl_restarts_the_window_on_every_duplicate_DEDUP_6(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    options = dedup(ttl_ms=2000, extend_ttl=True)
    first = await backend.add_job(queue_name, "n", 1, options, now=clock.at())
    assert (await backend.add_job(queue_name, "n", 2, options, now=clock.at(1.5))).id == first.id
    assert (await backend.add_job(queue_name, "n", 3, options, now=clock.at(3))).id == first.id
    # The add at +3 extended it again, to +5.
    assert (await backend.add_job(queue_name, "n", 4, options, now=clock.at(4.9))).id == first.id
    fresh = await backend.add_job(queue_name, "n", 5, options, now=clock.at(7))
    assert fresh.id != first.id


async def test_extend_ttl_window_without_more_duplicates_DEDUP_6(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    """The seed's check: ttl 2 s, a duplicate at +1.5 s; +3 s still the owner, +3.6 s new."""
    options = dedup(ttl_ms=2000, extend_ttl=True)
    first = await backend.add_job(queue_name, "n", 1, options, now=clock.at())
    await backend.add_job(queue_name, "n", 2, options, now=clock.at(1.5))
    plain = dedup(ttl_ms=2000)  # checks without extending
    assert (await backend.add_job(queue_name, "n", 3, plain, now=clock.at(3))).id == first.id
    assert (await backend.add_job(queue_name, "n", 4, plain, now=clock.at(3.6))).id != first.id


async def test_replace_delayed_swaps_the_delayed_owner_DEDUP_7(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    options = {**dedup(replace_delayed=True), "delay_ms": 60_000}
    delayed_owner = await backend.add_job(queue_name, "n", {"v": 1}, options, now=clock.at())
    start = len(await events(backend, queue_name))
    replacement = await backend.add_job(queue_name, "n", {"v": 2}, options, now=clock.at(1))
    assert replacement.id != delayed_owner.id
    assert (replacement.state, replacement.data) == ("delayed", {"v": 2})
    assert await backend.get_job(queue_name, delayed_owner.id) is None
    assert await ids_in(backend, queue_name) == [replacement.id]
    seen = [(e.event, e.job_id, e.data) for e in (await events(backend, queue_name))[start:]]
    pair = {"deduplicationId": "account:acct_42", "deduplicatedJobId": delayed_owner.id}
    assert seen == [
        ("removed", delayed_owner.id, {"prev": "delayed"}),
        ("debounced", replacement.id, pair),
        ("deduplicated", replacement.id, pair),
        ("added", replacement.id, {"name": "n"}),
        ("delayed", replacement.id, {"delay": epoch_ms(clock.at(61))}),
    ]
    assert await backend.get_deduplication_job_id(queue_name, "account:acct_42") == replacement.id


async def test_replace_delayed_leaves_an_owner_that_is_no_longer_delayed_DEDUP_7(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    owner = await backend.add_job(queue_name, "n", 1, dedup(replace_delayed=True), now=clock.at())
    again = await backend.add_job(queue_name, "n", 2, dedup(replace_delayed=True), now=clock.at(1))
    assert again.id == owner.id and again.data == 1


async def delayed_flow_parent(
    backend: JobQueueBackend, queue: str, clock: Clock, options: dict[str, Any]
) -> JobRow:
    """A flow parent owning the dedup id of ``options``: its one child completed at +2 s,
    so it waits out its own 60 s delay, holding the child's result."""
    flow = await backend.add_flow(
        FlowJob(
            "parent",
            None,
            {**options, "delay_ms": 60_000},
            queue=queue,
            children=[FlowJob("child", None, queue=queue)],
        ),
        now=clock.at(),
    )
    await complete(backend, await claim(backend, queue, clock, 1), clock, 2)
    parent = await backend.get_job(queue, flow.job.id)
    assert parent is not None and parent.state == "delayed"
    return parent


async def test_replace_delayed_keeps_a_delayed_flow_parent_DEDUP_7(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    """Only a standalone owner is replaced: a delayed flow parent is kept (its dependency
    rows and its child still name it) and the add is deduplicated as usual."""
    options = dedup(replace_delayed=True)
    parent = await delayed_flow_parent(backend, queue_name, clock, options)
    start = len(await events(backend, queue_name))
    again = await backend.add_job(
        queue_name, "n", 2, {**options, "delay_ms": 60_000}, now=clock.at(3)
    )
    assert again.id == parent.id
    assert (await backend.get_job(queue_name, parent.id)) is not None
    counts = await backend.get_flow_dependency_counts(queue_name, parent.id)
    assert counts is not None and (counts.processed, counts.missing) == (1, 0)
    seen = [(e.event, e.job_id) for e in (await events(backend, queue_name))[start:]]
    assert seen == [("debounced", parent.id), ("deduplicated", parent.id)]
    assert await backend.get_deduplication_job_id(queue_name, "account:acct_42") == parent.id


async def test_replace_delayed_keeps_a_repeat_occurrence_DEDUP_7(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    """A series' next occurrence owning the id is kept: replacing it would end the series."""
    options = {"repeat": {"every_ms": 60_000}, **dedup(replace_delayed=True)}
    await backend.add_job(queue_name, "tick", None, options, now=clock.at())
    await complete(backend, await claim(backend, queue_name, clock, 1), clock, 2)
    [series] = await backend.list_repeats(queue_name)
    occurrence = await backend.get_job(queue_name, series.job_id)
    assert occurrence is not None and occurrence.state == "delayed"
    plain = {**dedup(replace_delayed=True), "delay_ms": 60_000}
    again = await backend.add_job(queue_name, "tick", None, plain, now=clock.at(3))
    assert again.id == occurrence.id
    assert [s.job_id for s in await backend.list_repeats(queue_name)] == [occurrence.id]


@pytest.mark.parametrize(("extend", "dedups_at_10_5"), [(False, False), (True, True)])
async def test_replacement_keeps_or_refreshes_the_ttl_DEDUP_8(
    backend: JobQueueBackend, queue_name: str, clock: Clock, extend: bool, dedups_at_10_5: bool
) -> None:
    flags: dict[str, Any] = {"ttl_ms": 10_000, "replace_delayed": True}
    if extend:
        flags["extend_ttl"] = True
    options = {**dedup(**flags), "delay_ms": 60_000}
    await backend.add_job(queue_name, "n", 1, options, now=clock.at())
    replacement = await backend.add_job(queue_name, "n", 2, options, now=clock.at(5))
    # A plain duplicate at +10.5 s: the kept expiry (+10 s) has run out, a refreshed one
    # (+15 s) has not.
    probe = await backend.add_job(queue_name, "n", 3, dedup(ttl_ms=10_000), now=clock.at(10.5))
    assert (probe.id == replacement.id) is dedups_at_10_5


async def test_keep_last_if_active_runs_the_latest_duplicate_after_the_owner_DEDUP_9(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    options = dedup(keep_last_if_active=True)
    owner = await backend.add_job(queue_name, "n", {"v": 1}, options, now=clock.at())
    running = await claim(backend, queue_name, clock, 1)
    for at, version in ((2, 2), (3, 3)):
        kept = await backend.add_job(queue_name, "n", {"v": version}, options, now=clock.at(at))
        assert kept.id == owner.id and kept.state == "active"
    assert await ids_in(backend, queue_name) == [owner.id]
    await complete(backend, running, clock, 4)
    ids = await ids_in(backend, queue_name)
    assert len(ids) == 2
    successor = await backend.get_job(queue_name, ids[1])
    assert successor is not None
    assert (successor.data, successor.state, successor.created_at) == (
        {"v": 3},
        "waiting",
        clock.at(4),
    )
    assert await backend.get_deduplication_job_id(queue_name, "account:acct_42") == successor.id
    names = [name for name, _ in await job_event_list(backend, queue_name, successor.id)]
    assert names == ["added", "waiting"]


async def test_keep_last_duplicate_of_a_waiting_owner_is_plain_DEDUP_9(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    options = dedup(keep_last_if_active=True)
    owner = await backend.add_job(queue_name, "n", 1, options, now=clock.at())
    await backend.add_job(queue_name, "n", 2, options, now=clock.at(1))
    await complete(backend, await claim(backend, queue_name, clock, 2), clock, 3)
    assert await ids_in(backend, queue_name) == [owner.id]  # nothing was kept


async def test_keep_last_after_terminal_failure_and_after_stalling_DEDUP_9(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    options = dedup(keep_last_if_active=True)
    await backend.add_job(queue_name, "n", "a", options, now=clock.at())
    failing = await claim(backend, queue_name, clock, 1)
    await backend.add_job(queue_name, "n", "b", options, now=clock.at(2))
    assert failing.lock_token is not None
    await backend.fail_job(queue_name, failing.id, failing.lock_token, "x", now=clock.at(3))
    stalling = await claim(backend, queue_name, clock, 4)
    assert stalling.data == "b"
    await backend.add_job(queue_name, "n", "c", options, now=clock.at(5))
    outcome = await backend.recover_stalled([queue_name], max_stalled_count=0, now=clock.at(40))
    assert [o.state for o in outcome] == ["failed"]
    successor_id = await backend.get_deduplication_job_id(queue_name, "account:acct_42")
    assert successor_id is not None
    successor = await backend.get_job(queue_name, successor_id)
    assert successor is not None and (successor.data, successor.state) == ("c", "waiting")


async def test_kept_job_delay_counts_from_the_owner_finishing_DEDUP_10(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    await backend.add_job(queue_name, "n", 1, dedup(keep_last_if_active=True), now=clock.at())
    running = await claim(backend, queue_name, clock, 1)
    delayed = {**dedup(keep_last_if_active=True), "delay_ms": 60_000}
    await backend.add_job(queue_name, "n", 2, delayed, now=clock.at(2))
    await complete(backend, running, clock, 10)
    successor_id = await backend.get_deduplication_job_id(queue_name, "account:acct_42")
    assert successor_id is not None
    successor = await backend.get_job(queue_name, successor_id)
    assert successor is not None
    assert (successor.state, successor.available_at) == ("delayed", clock.at(70))


async def test_kept_job_keeps_its_custom_id_DEDUP_9(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    """BullMQ #4030: the materialised duplicate lost the custom id it was added with."""
    options = dedup(keep_last_if_active=True)
    await backend.add_job(queue_name, "n", 1, {**options, "job_id": "first"}, now=clock.at())
    running = await claim(backend, queue_name, clock, 1)
    kept = await backend.add_job(
        queue_name, "n", 2, {**options, "job_id": "second"}, now=clock.at(2)
    )
    assert kept.id == "first"
    await complete(backend, running, clock, 3)
    successor = await backend.get_job(queue_name, "second")
    assert successor is not None and successor.data == 2
    assert await backend.get_deduplication_job_id(queue_name, "account:acct_42") == "second"


async def test_removal_releases_the_owner_and_its_kept_job_DEDUP_12(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    options = dedup(keep_last_if_active=True)
    owner = await backend.add_job(queue_name, "n", 1, options, now=clock.at())
    await claim(backend, queue_name, clock, 1)  # a 30 s lease
    await backend.add_job(queue_name, "n", 2, options, now=clock.at(2))
    assert await backend.remove_job(queue_name, owner.id, now=clock.at(40))
    assert await backend.get_deduplication_job_id(queue_name, "account:acct_42") is None
    assert await ids_in(backend, queue_name) == []  # the kept job is gone with it
    fresh = await backend.add_job(queue_name, "n", 3, options, now=clock.at(41))
    assert fresh.data == 3
    assert await backend.get_deduplication_job_id(queue_name, "account:acct_42") == fresh.id


async def test_retry_reclaims_the_id_DEDUP_13(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    job = await backend.add_job(queue_name, "n", 1, dedup(ttl_ms=5000), now=clock.at())
    running = await claim(backend, queue_name, clock, 1)
    assert running.lock_token is not None
    await backend.fail_job(queue_name, job.id, running.lock_token, "x", now=clock.at(2))
    # The TTL ran out at +5 s; the retry at +10 s takes the id again, for 5 s from then.
    retried = await backend.retry_job(queue_name, job.id, now=clock.at(10))
    assert retried.state == "waiting"
    assert (
        await backend.get_deduplication_job_id(queue_name, "account:acct_42", now=clock.at(14.9))
        == job.id
    )
    again = await backend.add_job(queue_name, "n", 2, dedup(ttl_ms=5000), now=clock.at(14))
    assert again.id == job.id


async def test_retry_refused_while_another_job_holds_the_id_DEDUP_13(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    job = await backend.add_job(queue_name, "n", 1, dedup(), now=clock.at())
    running = await claim(backend, queue_name, clock, 1)
    assert running.lock_token is not None
    await backend.fail_job(queue_name, job.id, running.lock_token, "x", now=clock.at(2))
    holder = await backend.add_job(queue_name, "n", 2, dedup(), now=clock.at(3))
    assert holder.id != job.id
    before = await events(backend, queue_name)
    with pytest.raises(DeduplicationConflict, match=holder.id):
        await backend.retry_job(queue_name, job.id, now=clock.at(4))
    stored = await backend.get_job(queue_name, job.id)
    assert stored is not None and stored.state == "failed"
    assert await events(backend, queue_name) == before
    assert await backend.get_deduplication_job_id(queue_name, "account:acct_42") == holder.id


async def test_retry_refused_by_a_retained_ttl_owner_DEDUP_13(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    first = await backend.add_job(queue_name, "n", 1, dedup(), now=clock.at())
    running = await claim(backend, queue_name, clock, 1)
    assert running.lock_token is not None
    await backend.fail_job(queue_name, first.id, running.lock_token, "x", now=clock.at(2))
    ttl_owner = await backend.add_job(queue_name, "n", 2, dedup(ttl_ms=60_000), now=clock.at(3))
    await complete(backend, await claim(backend, queue_name, clock, 4), clock, 5)
    with pytest.raises(DeduplicationConflict):
        await backend.retry_job(queue_name, first.id, now=clock.at(6))
    assert ttl_owner.id != first.id


async def test_remove_deduplication_key_frees_the_id_DEDUP_14(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    first = await backend.add_job(queue_name, "n", 1, dedup(), now=clock.at())
    assert await backend.remove_deduplication_key(queue_name, "account:acct_42")
    assert not await backend.remove_deduplication_key(queue_name, "account:acct_42")
    second = await backend.add_job(queue_name, "n", 2, dedup(), now=clock.at(1))
    assert second.id != first.id
    assert await ids_in(backend, queue_name) == [first.id, second.id]
    waiting = await backend.get_job(queue_name, first.id)
    assert waiting is not None and waiting.state == "waiting"
    # The first job finishing later does not release the second's id.
    await complete(backend, await claim(backend, queue_name, clock, 2), clock, 3)
    assert await backend.get_deduplication_job_id(queue_name, "account:acct_42") == second.id


async def test_get_deduplication_job_id_of_unknown_ids_DEDUP_15(
    backend: JobQueueBackend, queue_name: str
) -> None:
    assert await backend.get_deduplication_job_id(queue_name, "nobody") is None
    assert not await backend.remove_deduplication_key(queue_name, "nobody")


async def test_keep_last_owner_does_not_expire_while_it_runs_DEDUP_16(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    options = dedup(ttl_ms=1000, keep_last_if_active=True)
    owner = await backend.add_job(queue_name, "n", 1, options, now=clock.at())
    await claim(backend, queue_name, clock, 0.5)
    plain = dedup(ttl_ms=1000)
    assert (await backend.add_job(queue_name, "n", 2, plain, now=clock.at(3.5))).id == owner.id
    await backend.expire_dedup_owners(limit=1_000_000, now=clock.at(4))  # keeps it
    assert (
        await backend.get_deduplication_job_id(queue_name, "account:acct_42", now=clock.at(4))
        == owner.id
    )


async def test_bulk_add_deduplicates_within_the_call_DEDUP_20_ADD_12(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    jobs = await backend.add_jobs(
        queue_name,
        [
            JobSpec("a", 1, dedup("x")),
            JobSpec("b", 2),
            JobSpec("c", 3, dedup("x", replace_delayed=True, keep_last_if_active=True)),
        ],
        now=clock.at(),
    )
    assert jobs[0].id == jobs[2].id and jobs[2].data == 1
    assert jobs[1].id != jobs[0].id
    assert await ids_in(backend, queue_name) == sorted([jobs[0].id, jobs[1].id], key=int)
    seen = [(e.event, e.job_id) for e in await events(backend, queue_name)]
    assert seen == [
        ("added", jobs[0].id),
        ("added", jobs[1].id),
        ("waiting", jobs[0].id),
        ("waiting", jobs[1].id),
        ("debounced", jobs[0].id),
        ("deduplicated", jobs[0].id),
    ]
    pair = (await events(backend, queue_name))[-1].data
    assert pair["deduplicationId"] == "x"
    assert pair["deduplicatedJobId"] not in (jobs[0].id, jobs[1].id)


async def test_bulk_add_deduplicates_against_stored_owners_DEDUP_20(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    owner = await backend.add_job(queue_name, "n", 0, dedup("y"), now=clock.at())
    jobs = await backend.add_jobs(
        queue_name,
        [JobSpec("a", 1, dedup("y")), JobSpec("b", 2, dedup("z")), JobSpec("c", 3, dedup("z"))],
        now=clock.at(1),
    )
    assert jobs[0] == owner
    assert jobs[1].id == jobs[2].id and jobs[1].data == 2
    names = [e.event for e in await events(backend, queue_name)]
    assert names == [
        "added", "waiting",  # the owner
        "debounced", "deduplicated",  # spec a, against the stored owner
        "added", "waiting",  # spec b
        "debounced", "deduplicated",  # spec c, against spec b
    ]  # fmt: skip


async def test_bad_deduplication_options_write_nothing_DEDUP_1(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    await backend.add_job(queue_name, "n", 0, dedup("held"), now=clock.at())
    before = await events(backend, queue_name)
    with pytest.raises(InvalidOptions):
        await backend.add_jobs(
            queue_name,
            [JobSpec("a", 1, dedup("held")), JobSpec("b", 2, dedup("x", extend_ttl=True))],
            now=clock.at(1),
        )
    with pytest.raises(InvalidOptions):
        JobOptions(deduplication=DeduplicationOptions("x", ttl=0)).to_json()
    assert await events(backend, queue_name) == before


async def test_expired_owner_rows_are_swept_DEDUP_4(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    """The periodic sweep deletes rows whose TTL ran out: they block nothing any more."""
    for n in range(3):
        await backend.add_job(queue_name, "n", n, dedup(f"s{n}", ttl_ms=1000), now=clock.at())
    # Other tests' rows on a shared database may expire too: count only this queue's.
    await backend.expire_dedup_owners(limit=1_000_000, now=clock.at(0.5))
    assert await backend.get_deduplication_job_id(queue_name, "s0", now=clock.at(0.5))
    await backend.expire_dedup_owners(limit=1_000_000, now=clock.at(2))
    for n in range(3):
        assert not await backend.remove_deduplication_key(queue_name, f"s{n}")
