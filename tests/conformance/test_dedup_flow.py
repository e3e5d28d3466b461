"""Keep-last deduplication inside flows on every backend (DEDUP-18, the keep-last half of
DEDUP-19, FLOW-15's placeholder): a flow child kept as a running owner's next job makes
its parent wait for it (a placeholder dependency ``0:<dedup id>``) until it is stored under
the parent, and every way the kept job can be dropped releases the parent instead."""

from __future__ import annotations

from typing import Any

from lane_pg.backend import JobQueueBackend
from lane_pg.types import ALL_STATES, JobRow, QueueDemand
from lane_pg.types.flows import ChildRef, FlowJob
from tests.helpers import Clock

KEEP = {"deduplication": {"id": "report", "keep_last_if_active": True}}
PLACEHOLDER = "0:report"


def keep_last(**more: Any) -> dict[str, Any]:
    return {**KEEP, **more}


def token(job: JobRow) -> str:
    assert job.lock_token is not None
    return job.lock_token


async def running_owner(
    backend: JobQueueBackend, queue: str, clock: Clock, *, attempts: int = 1, **dedup: Any
) -> JobRow:
    """A keep-last owner of ``report``, claimed (active) at t=1."""
    options: dict[str, Any] = {
        "deduplication": {"id": "report", "keep_last_if_active": True, **dedup},
        "attempts": attempts,
    }
    await backend.add_job(queue, "report", "v1", options, now=clock.at(0))
    [job] = await backend.claim_jobs("w", [QueueDemand(queue, 1)], 30, now=clock.at(1))
    return job


async def flow_with_kept_child(
    backend: JobQueueBackend, queue: str, clock: Clock, parent_id: str, data: Any, at: float = 2
) -> None:
    flow = await backend.add_flow(
        FlowJob(
            "parent",
            queue=queue,
            options={"job_id": parent_id},
            children=[FlowJob("report", data, KEEP)],
        ),
        now=clock.at(at),
    )
    assert flow.children == []  # kept for later, not stored (DEDUP-17)


async def claim_one(backend: JobQueueBackend, queue: str, clock: Clock, at: float) -> JobRow:
    [job] = await backend.claim_jobs("w", [QueueDemand(queue, 1)], 30, now=clock.at(at))
    return job


async def complete(backend: JobQueueBackend, job: JobRow, clock: Clock, at: float) -> None:
    await backend.complete_job(job.queue, job.id, token(job), "done", now=clock.at(at))


async def jobs_named(backend: JobQueueBackend, queue: str, name: str) -> list[JobRow]:
    page = await backend.list_jobs(queue, ALL_STATES, limit=100)
    return sorted((job for job in page.items if job.name == name), key=lambda j: int(j.id))


async def state(backend: JobQueueBackend, queue: str, job_id: str) -> str | None:
    return await backend.get_job_state(queue, job_id)


async def test_a_kept_child_holds_its_parent_until_it_is_stored_under_it_DEDUP_18(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    owner = await running_owner(backend, queue_name, clock)
    flow = await backend.add_flow(
        FlowJob(
            "parent",
            queue=queue_name,
            children=[FlowJob("plain", "a"), FlowJob("report", "v2", KEEP)],
        ),
        now=clock.at(2),
    )
    parent = flow.job.id
    assert [child.job.name for child in flow.children] == ["plain"]
    counts = await backend.get_flow_dependency_counts(queue_name, parent)
    assert counts is not None and (counts.unprocessed, counts.missing) == (2, 0)
    deps = await backend.get_flow_dependencies(queue_name, parent)
    assert deps is not None
    assert ChildRef(queue_name, PLACEHOLDER) in deps.pending_child_ids
    assert deps.missing_child_ids == [] and len(deps.children) == 1

    plain = flow.children[0].job
    claimed = await backend.claim_jobs("w", [QueueDemand(queue_name, 5)], 30, now=clock.at(3))
    [running_plain] = [job for job in claimed if job.id == plain.id]
    await complete(backend, running_plain, clock, 3)
    assert await state(backend, queue_name, parent) == "waiting-children"  # still held

    await complete(backend, owner, clock, 4)
    [_, kept] = await jobs_named(backend, queue_name, "report")
    assert (kept.data, kept.state, kept.parent_id) == ("v2", "waiting", parent)
    assert await backend.get_deduplication_job_id(queue_name, "report") == kept.id
    deps = await backend.get_flow_dependencies(queue_name, parent)
    assert deps is not None and deps.pending_child_ids == [ChildRef(queue_name, kept.id)]
    assert await state(backend, queue_name, parent) == "waiting-children"

    await complete(backend, await claim_one(backend, queue_name, clock, 5), clock, 5)
    assert await state(backend, queue_name, parent) == "waiting"
    values = await backend.get_flow_children_values(queue_name, parent)
    assert values == {ChildRef(queue_name, plain.id): "done", ChildRef(queue_name, kept.id): "done"}


async def test_a_kept_child_is_stored_when_the_owner_fails_for_good_DEDUP_18(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    owner = await running_owner(backend, queue_name, clock)
    await flow_with_kept_child(backend, queue_name, clock, "P", "v2")
    await backend.fail_job(queue_name, owner.id, token(owner), "boom", now=clock.at(3))
    [_, kept] = await jobs_named(backend, queue_name, "report")
    assert (kept.data, kept.parent_id) == ("v2", "P")
    assert await state(backend, queue_name, "P") == "waiting-children"


async def test_a_later_duplicate_takes_the_place_and_the_earlier_parent_goes_on_DEDUP_18(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    """Only the latest is kept: a parent whose kept child a later duplicate replaces no
    longer waits for it (released when nothing else is pending); the later one's parent
    gets the child."""
    owner = await running_owner(backend, queue_name, clock)
    await flow_with_kept_child(backend, queue_name, clock, "P1", "v2")
    await flow_with_kept_child(backend, queue_name, clock, "P2", "v3", at=3)
    assert await state(backend, queue_name, "P1") == "waiting"
    counts = await backend.get_flow_dependency_counts(queue_name, "P1")
    assert counts is not None and counts.unprocessed == 0
    assert await state(backend, queue_name, "P2") == "waiting-children"

    await complete(backend, owner, clock, 4)
    [_, kept] = await jobs_named(backend, queue_name, "report")
    assert (kept.data, kept.parent_id) == ("v3", "P2")


async def test_a_plain_duplicate_replacing_the_kept_child_releases_its_parent_DEDUP_18(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    owner = await running_owner(backend, queue_name, clock)
    await flow_with_kept_child(backend, queue_name, clock, "P", "v2")
    await backend.add_job(queue_name, "report", "v3", KEEP, now=clock.at(3))
    assert await state(backend, queue_name, "P") == "waiting"
    await complete(backend, owner, clock, 4)
    [_, kept] = await jobs_named(backend, queue_name, "report")
    assert (kept.data, kept.parent_id) == ("v3", None)


async def test_the_same_parent_waits_once_for_its_replaced_kept_child_DEDUP_18(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    """Two children with one keep-last id in one flow, then the flow submitted again
    (FLOW-11): one placeholder, one stored child, the last one's data."""
    owner = await running_owner(backend, queue_name, clock)
    for at, versions in ((2, ["v2", "v3"]), (3, ["v4"])):
        await backend.add_flow(
            FlowJob(
                "parent",
                queue=queue_name,
                options={"job_id": "P"},
                children=[FlowJob("report", v, KEEP) for v in versions],
            ),
            now=clock.at(at),
        )
    counts = await backend.get_flow_dependency_counts(queue_name, "P")
    assert counts is not None and counts.unprocessed == 1
    await complete(backend, owner, clock, 4)
    [_, kept] = await jobs_named(backend, queue_name, "report")
    assert (kept.data, kept.parent_id) == ("v4", "P")
    await complete(backend, await claim_one(backend, queue_name, clock, 5), clock, 5)
    assert await state(backend, queue_name, "P") == "waiting"


async def test_removing_the_dedup_key_releases_the_parent_DEDUP_18(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    owner = await running_owner(backend, queue_name, clock)
    await flow_with_kept_child(backend, queue_name, clock, "P", "v2")
    assert await backend.remove_deduplication_key(queue_name, "report")
    # Released at the wall clock (the call takes no now=), before the parent's t=2: a
    # parent without a delay of its own is due whatever the releasing clock says.
    assert await state(backend, queue_name, "P") == "waiting"
    await complete(backend, owner, clock, 4)
    assert len(await jobs_named(backend, queue_name, "report")) == 1  # nothing was kept


async def test_removing_the_owner_releases_the_parent_DEDUP_18(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    owner = await running_owner(backend, queue_name, clock)
    await flow_with_kept_child(backend, queue_name, clock, "P", "v2")
    assert await backend.remove_job(queue_name, owner.id, now=clock.at(100))  # lease over
    assert await state(backend, queue_name, "P") == "waiting"
    assert await jobs_named(backend, queue_name, "report") == []


async def test_draining_the_owner_releases_the_parent_in_another_queue_DEDUP_18(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    parents = queue_name + "_p"
    owner = await running_owner(backend, queue_name, clock, attempts=2)
    await backend.add_flow(
        FlowJob(
            "parent",
            queue=parents,
            options={"job_id": "P"},
            children=[FlowJob("report", "v2", KEEP, queue=queue_name)],
        ),
        now=clock.at(2),
    )
    await backend.fail_job(queue_name, owner.id, token(owner), "again", now=clock.at(3))
    assert await state(backend, queue_name, owner.id) == "waiting"  # a retry: still kept
    assert await state(backend, parents, "P") == "waiting-children"
    assert await backend.drain_jobs(queue_name, now=clock.at(4)) == 1
    assert await state(backend, parents, "P") == "waiting"


async def test_obliterating_the_owners_queue_releases_the_parent_DEDUP_18(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    parents = queue_name + "_p"
    await running_owner(backend, queue_name, clock)
    await backend.add_flow(
        FlowJob(
            "parent",
            queue=parents,
            options={"job_id": "P"},
            children=[FlowJob("report", "v2", KEEP, queue=queue_name)],
        ),
        now=clock.at(2),
    )
    await backend.obliterate_queue(queue_name, force=True, now=clock.at(3))
    assert await state(backend, parents, "P") == "waiting"


async def test_an_expired_owner_row_releases_the_parent_DEDUP_18(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    """The owner retries (no longer running), a TTL duplicate gives its row an expiry
    (extend_ttl), and the row expires with the kept child's record."""
    owner = await running_owner(backend, queue_name, clock, attempts=2, ttl_ms=5_000)
    await flow_with_kept_child(backend, queue_name, clock, "P", "v2")
    await backend.fail_job(queue_name, owner.id, token(owner), "again", now=clock.at(3))
    ttl = {"deduplication": {"id": "report", "ttl_ms": 5_000, "extend_ttl": True}}
    duplicate = await backend.add_job(queue_name, "report", "v9", ttl, now=clock.at(4))
    assert duplicate.id == owner.id
    assert await backend.expire_dedup_owners(now=clock.at(10)) >= 1  # others' rows too
    assert await backend.get_deduplication_job_id(queue_name, "report") is None
    assert await state(backend, queue_name, "P") == "waiting"


async def test_a_removed_parent_leaves_the_kept_child_on_its_own_DEDUP_18(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    owner = await running_owner(backend, queue_name, clock)
    await flow_with_kept_child(backend, queue_name, clock, "P", "v2")
    assert await backend.remove_job(queue_name, "P", now=clock.at(3))
    await complete(backend, owner, clock, 4)
    [_, kept] = await jobs_named(backend, queue_name, "report")
    assert (kept.data, kept.parent_id, kept.state) == ("v2", None, "waiting")


async def test_a_kept_child_keeps_its_failure_policy_DEDUP_18(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    owner = await running_owner(backend, queue_name, clock)
    await backend.add_flow(
        FlowJob(
            "parent",
            queue=queue_name,
            options={"job_id": "P"},
            children=[FlowJob("report", "v2", keep_last(ignore_dependency_on_failure=True))],
        ),
        now=clock.at(2),
    )
    await complete(backend, owner, clock, 3)
    kept = await claim_one(backend, queue_name, clock, 4)
    await backend.fail_job(queue_name, kept.id, token(kept), "broke", now=clock.at(4))
    assert await state(backend, queue_name, "P") == "waiting"
    failures = await backend.get_flow_ignored_children_failures(queue_name, "P")
    assert failures == {ChildRef(queue_name, kept.id): "broke"}


async def test_a_kept_child_with_children_of_its_own_DEDUP_18(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    owner = await running_owner(backend, queue_name, clock)
    await backend.add_flow(
        FlowJob(
            "parent",
            queue=queue_name,
            options={"job_id": "P"},
            children=[FlowJob("report", "v2", KEEP, children=[FlowJob("leaf", "x")])],
        ),
        now=clock.at(2),
    )
    assert await jobs_named(backend, queue_name, "leaf") == []
    await complete(backend, owner, clock, 3)
    [_, kept] = await jobs_named(backend, queue_name, "report")
    [leaf] = await jobs_named(backend, queue_name, "leaf")
    assert (kept.state, kept.parent_id) == ("waiting-children", "P")
    assert (leaf.state, leaf.parent_id) == ("waiting", kept.id)
    await complete(backend, await claim_one(backend, queue_name, clock, 4), clock, 4)
    await complete(backend, await claim_one(backend, queue_name, clock, 5), clock, 5)
    assert await state(backend, queue_name, "P") == "waiting"


async def test_add_flow_children_keeps_the_parent_blocked_by_a_placeholder_FLOW_15(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    owner = await running_owner(backend, queue_name, clock)
    await backend.add_job(queue_name, "dynamic", None, {"job_id": "P"}, now=clock.at(2))
    parent = await claim_one(backend, queue_name, clock, 2)
    stored = await backend.add_flow_children(
        queue_name, "P", token(parent), [FlowJob("report", "v2", KEEP)], now=clock.at(3)
    )
    assert stored == []
    assert await state(backend, queue_name, "P") == "waiting-children"
    await complete(backend, owner, clock, 4)
    [_, kept] = await jobs_named(backend, queue_name, "report")
    assert kept.parent_id == "P"
    assert await state(backend, queue_name, "P") == "waiting-children"
    await complete(backend, await claim_one(backend, queue_name, clock, 5), clock, 5)
    assert await state(backend, queue_name, "P") == "waiting"


async def test_the_latest_duplicate_flow_of_a_running_parent_runs_after_it_DEDUP_19(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    def nightly(data: str, *children: str) -> FlowJob:
        return FlowJob(
            "nightly",
            data,
            {"deduplication": {"id": "nightly", "keep_last_if_active": True}},
            queue=queue_name,
            children=[FlowJob("step", c) for c in children],
        )

    first = await backend.add_flow(nightly("v1", "a"), now=clock.at(0))
    await complete(backend, await claim_one(backend, queue_name, clock, 1), clock, 1)
    running = await claim_one(backend, queue_name, clock, 2)
    assert running.id == first.job.id
    for at, flow in ((3, nightly("v2", "b")), (4, nightly("v3", "c", "d"))):
        duplicate = await backend.add_flow(flow, now=clock.at(at))
        assert duplicate.job.id == first.job.id and duplicate.children == []
    assert len(await jobs_named(backend, queue_name, "step")) == 1

    await complete(backend, running, clock, 5)
    [_, latest] = await jobs_named(backend, queue_name, "nightly")
    assert (latest.data, latest.state) == ("v3", "waiting-children")
    assert await backend.get_deduplication_job_id(queue_name, "nightly") == latest.id
    steps = await jobs_named(backend, queue_name, "step")
    assert [(s.data, s.parent_id) for s in steps[1:]] == [("c", latest.id), ("d", latest.id)]
    counts = await backend.get_flow_dependency_counts(queue_name, latest.id)
    assert counts is not None and counts.unprocessed == 2


async def test_a_kept_flow_is_stored_when_its_parent_fails_after_stalling_DEDUP_19(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    keep = {"deduplication": {"id": "nightly", "keep_last_if_active": True}}
    await backend.add_job(queue_name, "nightly", "v1", keep, now=clock.at(0))
    await claim_one(backend, queue_name, clock, 1)
    await backend.add_flow(
        FlowJob("nightly", "v2", keep, queue=queue_name, children=[FlowJob("step", "x")]),
        now=clock.at(2),
    )
    outcome = await backend.recover_stalled([queue_name], max_stalled_count=0, now=clock.at(40))
    assert [o.state for o in outcome] == ["failed"]
    [_, latest] = await jobs_named(backend, queue_name, "nightly")
    [step] = await jobs_named(backend, queue_name, "step")
    assert (latest.data, latest.state, step.parent_id) == ("v2", "waiting-children", latest.id)


async def test_removing_unprocessed_children_drops_a_kept_child_FLOW_24_DEDUP_18(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    owner = await running_owner(backend, queue_name, clock)
    await backend.add_flow(
        FlowJob(
            "parent",
            queue=queue_name,
            options={"job_id": "P"},
            children=[FlowJob("plain", "a"), FlowJob("report", "v2", KEEP)],
        ),
        now=clock.at(2),
    )
    removed = await backend.remove_unprocessed_children(queue_name, "P", now=clock.at(3))
    assert [job.name for job in removed] == ["plain"]
    assert await state(backend, queue_name, "P") == "waiting"
    await complete(backend, owner, clock, 4)
    assert len(await jobs_named(backend, queue_name, "report")) == 1  # nothing was kept


async def test_replacing_a_delayed_owner_releases_the_kept_childs_parent_DEDUP_18(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    """The owner retries with a backoff (delayed, its kept child still kept); a
    replace_delayed add removes it and owns the id: the kept child is gone with it."""
    options = {
        "deduplication": {"id": "report", "keep_last_if_active": True},
        "attempts": 2,
        "backoff": {"type": "fixed", "delay_ms": 60_000},
    }
    await backend.add_job(queue_name, "report", "v1", options, now=clock.at(0))
    owner = await claim_one(backend, queue_name, clock, 1)
    await flow_with_kept_child(backend, queue_name, clock, "P", "v2")
    await backend.fail_job(queue_name, owner.id, token(owner), "again", now=clock.at(3))
    assert await state(backend, queue_name, owner.id) == "delayed"
    replace = {"deduplication": {"id": "report", "replace_delayed": True}}
    replacement = await backend.add_job(queue_name, "report", "v3", replace, now=clock.at(4))
    assert replacement.id != owner.id
    assert await state(backend, queue_name, "P") == "waiting"


async def test_a_kept_child_whose_id_another_parent_holds_is_a_duplicate_DEDUP_18(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    """The owner's completion never fails because of its kept node: a node whose custom id
    is another retained parent's child is a duplicate of that job (ADD-3), and the parent
    that waited for it goes on."""
    owner = await running_owner(backend, queue_name, clock)
    waiting = await backend.add_flow(
        FlowJob(
            "parent",
            queue=queue_name,
            options={"job_id": "waiting"},
            children=[FlowJob("report", "v2", keep_last(job_id="c1"))],
        ),
        now=clock.at(2),
    )
    assert waiting.children == []  # kept as the owner's next job
    # Meanwhile another flow takes the kept node's custom id for a child of its own.
    other = await backend.add_flow(
        FlowJob(
            "other-parent",
            queue=queue_name,
            options={"job_id": "other"},
            children=[FlowJob("taken", "x", {"job_id": "c1"})],
        ),
        now=clock.at(3),
    )
    assert await state(backend, queue_name, "waiting") == "waiting-children"
    await complete(backend, owner, clock, 4)  # must not raise ParentConflict
    assert await state(backend, queue_name, owner.id) == "completed"
    assert await state(backend, queue_name, "waiting") == "waiting"
    taken = await backend.get_job(queue_name, "c1")
    assert taken is not None and (taken.name, taken.parent_id) == ("taken", other.job.id)
    events = await backend.read_events(queue_name)
    assert [e.event for e in events if e.job_id == "c1"][-1] == "duplicated"
