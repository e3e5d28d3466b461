"""FLOW: parent/child flows on every backend (FLOW-1..29, FIN-8, STALL-4, DEDUP-17, -19,
MGMT-29), each policy through every path a child can end by."""

from __future__ import annotations

import pytest

from lane_pg.backend import JobQueueBackend
from lane_pg.errors import (
    FailedChildren,
    InvalidJobId,
    InvalidOptions,
    InvalidQueueName,
    ParentConflict,
    PendingDependencies,
)
from lane_pg.types import (
    Completion,
    DeduplicationOptions,
    JobOptions,
    JobRow,
    QueueDemand,
)
from lane_pg.types.flows import ChildRef, Flow, FlowJob
from tests.helpers import Clock, epoch_ms, job_event_list


def token(job: JobRow) -> str:
    assert job.lock_token is not None
    return job.lock_token


async def claim(
    backend: JobQueueBackend, queue: str, clock: Clock, at: float, n: int = 10
) -> dict[str, JobRow]:
    """Every job the queue hands out at ``at``, by id."""
    claimed = await backend.claim_jobs("w", [QueueDemand(queue, n)], 30, now=clock.at(at))
    return {job.id: job for job in claimed}


async def state(backend: JobQueueBackend, queue: str, job_id: str) -> str | None:
    return await backend.get_job_state(queue, job_id)


def two_children(queue: str, **child_b: object) -> FlowJob:
    return FlowJob(
        "parent",
        {"p": 1},
        queue=queue,
        children=[
            FlowJob("child", "a", {"job_id": "a"}),
            FlowJob("child", "b", {"job_id": "b", **child_b}),
        ],
    )


async def failed_b(
    backend: JobQueueBackend, queue: str, clock: Clock, reason: str, **policy: object
) -> str:
    """``two_children`` with ``policy`` on b, added at 0 and b failed for good at 1 with
    ``reason``; the parent's id."""
    flow = await backend.add_flow(two_children(queue, **policy), now=clock.at(0))
    await run_child(backend, queue, clock, 1, "b", fail=reason)
    return flow.job.id


async def run_child(
    backend: JobQueueBackend,
    queue: str,
    clock: Clock,
    at: float,
    child_id: str,
    *,
    fail: str | None = None,
    result: object = None,
) -> None:
    """Claim the queue's ready jobs, settle ``child_id`` (complete, or fail with ``fail``)
    and put the others back."""
    claimed = await claim(backend, queue, clock, at)
    job = claimed.pop(child_id)
    for other in claimed.values():
        await backend.release_job(queue, other.id, token(other), now=clock.at(at))
    if fail is None:
        await backend.complete_job(queue, child_id, token(job), result, now=clock.at(at))
    else:
        await backend.fail_job(queue, child_id, token(job), fail, now=clock.at(at))


# --------------------------------------------------------------------------- add_flow


async def test_add_flow_stores_parent_waiting_for_children_FLOW_1(
    backend: JobQueueBackend, queue_name: str, queue_b: str, clock: Clock
) -> None:
    flow = await backend.add_flow(
        FlowJob(
            "report",
            {"month": 11},
            queue=queue_name,
            children=[FlowJob("fetch", 1), FlowJob("fetch", 2, queue=queue_b)],
        ),
        now=clock.at(0),
    )

    assert flow.job.state == "waiting-children"
    assert flow.job.data == {"month": 11}
    assert [child.job.state for child in flow.children] == ["waiting", "waiting"]
    assert [child.job.queue for child in flow.children] == [queue_name, queue_b]
    assert all(child.job.parent_id == flow.job.id for child in flow.children)
    assert all(child.job.parent_queue == queue_name for child in flow.children)
    assert await job_event_list(backend, queue_name, flow.job.id) == [
        ("added", {"name": "report"}),
        ("waiting-children", {}),
    ]
    # Only the children are claimable.
    claimed = await claim(backend, queue_name, clock, 1)
    assert list(claimed) == [flow.children[0].job.id]


async def test_a_bad_child_rejects_the_whole_flow_FLOW_1(
    backend: JobQueueBackend, queue_name: str, queue_b: str, clock: Clock
) -> None:
    bad = FlowJob(
        "p",
        queue=queue_name,
        children=[FlowJob("c", queue=queue_b), FlowJob("c", options={"priority": -1})],
    )
    with pytest.raises(Exception) as refused:
        await backend.add_flow(bad, now=clock.at(0))
    assert refused.type.__name__ == "InvalidPriority"
    assert sum((await backend.get_job_counts(queue_name)).values()) == 0
    assert sum((await backend.get_job_counts(queue_b)).values()) == 0


@pytest.mark.parametrize(
    ("flow", "error"),
    [
        (FlowJob("p", children=[FlowJob("c")]), InvalidQueueName),  # the root names a queue
        (
            FlowJob("p", queue="q", options={"ignore_dependency_on_failure": True}),
            InvalidOptions,
        ),  # a policy belongs on a child
        (
            FlowJob(
                "p",
                queue="q",
                children=[
                    FlowJob(
                        "c",
                        options={
                            "ignore_dependency_on_failure": True,
                            "continue_parent_on_failure": True,
                        },
                    )
                ],
            ),
            InvalidOptions,
        ),  # at most one policy
        (
            FlowJob("p", queue="q", children=[FlowJob("c", options={"repeat": {"every_ms": 5}})]),
            InvalidOptions,
        ),
        (FlowJob("p", queue="q", children=[FlowJob("")]), InvalidOptions),
        (FlowJob("p", queue="q", children=[FlowJob("c", options={"job_id": "7"})]), InvalidJobId),
    ],
)
async def test_invalid_flows_are_refused_with_nothing_written_FLOW_1(
    backend: JobQueueBackend, flow: FlowJob, error: type[Exception], clock: Clock
) -> None:
    with pytest.raises(error):
        await backend.add_flow(flow, now=clock.at(0))


async def test_duplicate_ids_in_one_flow_are_rejected_FLOW_2(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    flow = FlowJob(
        "p",
        queue=queue_name,
        children=[
            FlowJob("c", options={"job_id": "same"}),
            FlowJob("c", options={"job_id": "same"}),
        ],
    )
    with pytest.raises(InvalidJobId):
        await backend.add_flow(flow, now=clock.at(0))
    assert sum((await backend.get_job_counts(queue_name)).values()) == 0


async def test_last_child_completion_releases_the_parent_FLOW_3_FLOW_4_FLOW_19(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    flow = await backend.add_flow(two_children(queue_name), now=clock.at(0))
    parent = flow.job.id

    await run_child(backend, queue_name, clock, 1, "a", result={"rows": 3})
    assert await state(backend, queue_name, parent) == "waiting-children"
    await run_child(backend, queue_name, clock, 2, "b", result=None)

    assert await state(backend, queue_name, parent) == "waiting"
    assert (await job_event_list(backend, queue_name, parent))[-1] == (
        "waiting",
        {"prev": "waiting-children"},
    )
    values = await backend.get_flow_dependency_values(queue_name, parent)
    assert values.processed == {
        ChildRef(queue_name, "a"): {"rows": 3},
        ChildRef(queue_name, "b"): None,
    }
    assert values.unprocessed == []
    # FLOW-22: a null result is a value.
    assert await backend.get_flow_children_values(queue_name, parent) == values.processed
    # The released parent runs and completes.
    claimed = await claim(backend, queue_name, clock, 3)
    done = await backend.complete_job(queue_name, parent, token(claimed[parent]), now=clock.at(3))
    assert done.state == "completed"


async def test_released_parent_with_its_own_delay_goes_to_delayed_FLOW_3(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    flow = await backend.add_flow(
        FlowJob("p", queue=queue_name, options={"delay_ms": 60_000}, children=[FlowJob("c")]),
        now=clock.at(0),
    )
    await run_child(backend, queue_name, clock, 1, flow.children[0].job.id)
    parent = await backend.get_job(queue_name, flow.job.id)
    assert parent is not None and parent.state == "delayed"
    assert parent.available_at == clock.at(60)
    assert (await job_event_list(backend, queue_name, parent.id))[-1] == (
        "delayed",
        {"delay": epoch_ms(clock.at(60)), "prev": "waiting-children"},
    )


async def test_default_policy_fails_the_parent_once_the_child_is_terminal_FLOW_5(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    flow = await backend.add_flow(two_children(queue_name, attempts=2), now=clock.at(0))
    parent = flow.job.id

    await run_child(backend, queue_name, clock, 1, "b", fail="boom 1")
    assert await state(backend, queue_name, parent) == "waiting-children"  # b will retry
    await run_child(backend, queue_name, clock, 2, "b", fail="boom 2")

    failed = await backend.get_job(queue_name, parent)
    assert failed is not None and failed.state == "failed"
    assert failed.failed_reason == f"child b of queue {queue_name} failed: boom 2"
    assert (await job_event_list(backend, queue_name, parent))[-1] == (
        "failed",
        {"prev": "waiting-children", "failedReason": failed.failed_reason},
    )
    counts = await backend.get_flow_dependency_counts(queue_name, parent)
    assert counts is not None
    assert (counts.failed, counts.unprocessed, counts.ignored) == (1, 1, 0)


async def test_ignore_policy_records_the_failure_and_goes_on_FLOW_6_FLOW_23(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    parent = await failed_b(
        backend, queue_name, clock, "bad input", ignore_dependency_on_failure=True
    )
    assert await state(backend, queue_name, parent) == "waiting-children"
    await run_child(backend, queue_name, clock, 2, "a")

    assert await state(backend, queue_name, parent) == "waiting"
    counts = await backend.get_flow_dependency_counts(queue_name, parent)
    assert counts is not None and (counts.ignored, counts.failed) == (1, 0)
    assert await backend.get_flow_ignored_children_failures(queue_name, parent) == {
        ChildRef(queue_name, "b"): "bad input"
    }


async def test_remove_policy_forgets_the_failure_FLOW_7(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    parent = await failed_b(
        backend, queue_name, clock, "bad input", remove_dependency_on_failure=True
    )
    await run_child(backend, queue_name, clock, 2, "a")

    assert await state(backend, queue_name, parent) == "waiting"
    counts = await backend.get_flow_dependency_counts(queue_name, parent)
    assert counts is not None and (counts.ignored, counts.failed, counts.processed) == (0, 0, 1)
    assert await backend.get_flow_ignored_children_failures(queue_name, parent) == {}


async def test_continue_policy_releases_at_once_but_guards_completion_FLOW_8_FIN_8(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    parent = await failed_b(backend, queue_name, clock, "flaky", continue_parent_on_failure=True)
    assert await state(backend, queue_name, parent) == "waiting"

    claimed = await claim(backend, queue_name, clock, 2)
    running = claimed[parent]
    with pytest.raises(PendingDependencies):
        await backend.complete_job(queue_name, parent, token(running), now=clock.at(2))
    assert await state(backend, queue_name, parent) == "active"
    [outcome] = await backend.complete_jobs(
        [Completion(queue_name, parent, token(running))], now=clock.at(2)
    )
    assert outcome.status == "pending_dependencies"
    assert await state(backend, queue_name, parent) == "active"

    # Once the sibling completes, the parent may complete.
    await backend.complete_job(queue_name, "a", token(claimed["a"]), now=clock.at(3))
    done = await backend.complete_job(queue_name, parent, token(running), now=clock.at(4))
    assert done.state == "completed"
    assert await backend.get_flow_ignored_children_failures(queue_name, parent) == {
        ChildRef(queue_name, "b"): "flaky"
    }


async def test_fail_parent_policy_defers_the_failure_FLOW_9(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    parent = await failed_b(backend, queue_name, clock, "no stock", fail_parent_on_failure=True)

    released = await backend.get_job(queue_name, parent)
    assert released is not None and released.state == "waiting"
    assert released.deferred_failure == f"child b of queue {queue_name} failed: no stock"
    counts = await backend.get_flow_dependency_counts(queue_name, parent)
    assert counts is not None and (counts.failed, counts.unprocessed) == (1, 1)
    values = await backend.get_flow_dependency_values(queue_name, parent)
    assert values.failed == [ChildRef(queue_name, "b")]
    # It cannot complete while that failure stands (FIN-8), even once a finishes.
    claimed = await claim(backend, queue_name, clock, 2)
    await backend.complete_job(queue_name, "a", token(claimed["a"]), now=clock.at(2))
    with pytest.raises(PendingDependencies):
        await backend.complete_job(queue_name, parent, token(claimed[parent]), now=clock.at(3))


async def test_failures_after_an_early_release_still_resolve_FLOW_10(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    flow = await backend.add_flow(
        FlowJob(
            "p",
            queue=queue_name,
            children=[
                FlowJob("c", options={"job_id": "a", "continue_parent_on_failure": True}),
                FlowJob("c", options={"job_id": "b", "ignore_dependency_on_failure": True}),
            ],
        ),
        now=clock.at(0),
    )
    await run_child(backend, queue_name, clock, 1, "a", fail="a broke")
    assert await state(backend, queue_name, flow.job.id) == "waiting"
    claimed = await claim(backend, queue_name, clock, 2)
    await backend.fail_job(queue_name, "b", token(claimed["b"]), "b broke", now=clock.at(2))

    values = await backend.get_flow_dependency_values(queue_name, flow.job.id)
    assert values.unprocessed == []
    assert values.ignored == {
        ChildRef(queue_name, "a"): "a broke",
        ChildRef(queue_name, "b"): "b broke",
    }


# ------------------------------------------------------------------ existing ids


async def test_existing_parent_id_keeps_it_and_adds_the_new_children_FLOW_11(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    first = await backend.add_flow(
        FlowJob(
            "p",
            {"v": 1},
            {"job_id": "root"},
            queue=queue_name,
            children=[FlowJob("c", 1), FlowJob("c", 2)],
        ),
        now=clock.at(0),
    )
    again = await backend.add_flow(
        FlowJob("p", {"v": 2}, {"job_id": "root"}, queue=queue_name, children=[FlowJob("c", 3)]),
        now=clock.at(1),
    )

    assert again.job.id == first.job.id == "root"
    assert again.job.data == {"v": 1}
    assert [child.job.data for child in again.children] == [3]
    counts = await backend.get_flow_dependency_counts(queue_name, "root")
    assert counts is not None and counts.unprocessed == 3
    assert ("duplicated", {}) in await job_event_list(backend, queue_name, "root")


async def test_existing_completed_child_satisfies_the_dependency_FLOW_12(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    await backend.add_job(queue_name, "c", "done", {"job_id": "known"}, now=clock.at(0))
    claimed = await claim(backend, queue_name, clock, 1)
    await backend.complete_job(queue_name, "known", token(claimed["known"]), 42, now=clock.at(1))

    flow = await backend.add_flow(
        FlowJob("p", queue=queue_name, children=[FlowJob("c", "new data", {"job_id": "known"})]),
        now=clock.at(2),
    )

    assert flow.job.state == "waiting"
    child = flow.children[0].job
    assert (child.data, child.parent_id) == ("done", flow.job.id)
    assert (await backend.get_flow_dependency_values(queue_name, flow.job.id)).processed == {
        ChildRef(queue_name, "known"): 42
    }
    assert ("duplicated", {}) in await job_event_list(backend, queue_name, "known")


async def test_child_of_another_retained_parent_conflicts_FLOW_13(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    await backend.add_flow(
        FlowJob("p", queue=queue_name, children=[FlowJob("c", options={"job_id": "shared"})]),
        now=clock.at(0),
    )
    before = await backend.get_job_counts(queue_name)
    with pytest.raises(ParentConflict):
        await backend.add_flow(
            FlowJob(
                "other",
                queue=queue_name,
                children=[FlowJob("c"), FlowJob("c", options={"job_id": "shared"})],
            ),
            now=clock.at(1),
        )
    assert await backend.get_job_counts(queue_name) == before


# ----------------------------------------------------------------- dynamic children


async def test_running_parent_adds_children_and_waits_FLOW_14(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    await backend.add_job(queue_name, "p", options={"job_id": "boss"}, now=clock.at(0))
    running = (await claim(backend, queue_name, clock, 1))["boss"]

    children = await backend.add_flow_children(
        queue_name, "boss", token(running), [FlowJob("c", 1), FlowJob("c", 2)], now=clock.at(2)
    )

    waiting = await backend.get_job(queue_name, "boss")
    assert waiting is not None and waiting.state == "waiting-children"
    assert waiting.lock_token is None and waiting.lease_expires_at is None
    assert waiting.attempts_started == 0  # its next run is the same attempt
    assert [child.job.parent_id for child in children] == ["boss", "boss"]
    assert (await job_event_list(backend, queue_name, "boss"))[-1] == (
        "waiting-children",
        {"prev": "active"},
    )
    claimed = await claim(backend, queue_name, clock, 3)
    for child in children:
        await backend.complete_job(
            queue_name, child.job.id, token(claimed[child.job.id]), now=clock.at(3)
        )
    again = (await claim(backend, queue_name, clock, 4))["boss"]
    assert again.attempts_started == 1
    assert (await backend.get_flow_children_values(queue_name, "boss")) == {
        ChildRef(queue_name, children[0].job.id): None,
        ChildRef(queue_name, children[1].job.id): None,
    }


async def test_dynamic_children_refused_while_a_child_failure_fails_the_parent_FLOW_15(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    flow = await backend.add_flow(
        FlowJob(
            "p",
            queue=queue_name,
            children=[FlowJob("c", options={"job_id": "c", "fail_parent_on_failure": True})],
        ),
        now=clock.at(0),
    )
    await run_child(backend, queue_name, clock, 1, "c", fail="broke")
    running = (await claim(backend, queue_name, clock, 2))[flow.job.id]
    before = await backend.get_job_counts(queue_name)

    with pytest.raises(FailedChildren):
        await backend.add_flow_children(
            queue_name, flow.job.id, token(running), [FlowJob("more")], now=clock.at(3)
        )
    assert await backend.get_job_counts(queue_name) == before
    assert await state(backend, queue_name, flow.job.id) == "active"


async def test_dynamic_children_already_completed_release_at_once_FLOW_14(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    await backend.add_job(queue_name, "c", options={"job_id": "done-before"}, now=clock.at(0))
    await backend.add_job(
        queue_name, "p", options={"job_id": "boss", "priority": 5}, now=clock.at(0)
    )
    claimed = await claim(backend, queue_name, clock, 1)
    await backend.complete_job(
        queue_name, "done-before", token(claimed["done-before"]), now=clock.at(1)
    )

    await backend.add_flow_children(
        queue_name,
        "boss",
        token(claimed["boss"]),
        [FlowJob("c", options={"job_id": "done-before"})],
        now=clock.at(2),
    )
    assert await state(backend, queue_name, "boss") == "waiting"


# ------------------------------------------------------------------------- reads


async def test_dependencies_list_pending_and_missing_children_FLOW_16_FLOW_24(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    flow = await backend.add_flow(two_children(queue_name), now=clock.at(0))
    deps = await backend.get_flow_dependencies(queue_name, flow.job.id)
    assert deps is not None
    assert deps.parent.id == flow.job.id
    assert [child.id for child in deps.children] == ["a", "b"]
    assert deps.pending_child_ids == [ChildRef(queue_name, "a"), ChildRef(queue_name, "b")]
    assert deps.missing_child_ids == []
    assert await backend.get_flow_dependencies(queue_name, "nope") is None

    removed = await backend.remove_unprocessed_children(queue_name, flow.job.id, now=clock.at(1))

    assert [job.id for job in removed] == ["a", "b"]
    assert await state(backend, queue_name, flow.job.id) == "waiting"
    assert await state(backend, queue_name, "a") is None
    assert ("removed", {"prev": "waiting"}) in await job_event_list(backend, queue_name, "a")
    deps = await backend.get_flow_dependencies(queue_name, flow.job.id)
    assert deps is not None
    assert deps.children == [] and deps.pending_child_ids == []
    assert deps.missing_child_ids == [ChildRef(queue_name, "a"), ChildRef(queue_name, "b")]
    counts = await backend.get_flow_dependency_counts(queue_name, flow.job.id)
    assert counts is not None and counts.missing == 2


async def test_remove_unprocessed_children_spares_running_ones_FLOW_24(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    flow = await backend.add_flow(two_children(queue_name), now=clock.at(0))
    claimed = await backend.claim_jobs("w", [QueueDemand(queue_name, 1)], 30, now=clock.at(1))
    removed = await backend.remove_unprocessed_children(queue_name, flow.job.id, now=clock.at(2))
    assert [job.id for job in removed] == ["b"]
    assert await state(backend, queue_name, "a") == "active"
    assert await state(backend, queue_name, flow.job.id) == "waiting-children"
    await backend.complete_job(queue_name, "a", token(claimed[0]), now=clock.at(3))
    assert await state(backend, queue_name, flow.job.id) == "waiting"


async def test_dependency_counts_of_a_mixed_flow_FLOW_17_FLOW_18(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    flow = await backend.add_flow(
        FlowJob(
            "p",
            queue=queue_name,
            children=[
                FlowJob("c", options={"job_id": "done"}),
                FlowJob("c", options={"job_id": "pending", "priority": 9}),
                FlowJob("c", options={"job_id": "ignored", "ignore_dependency_on_failure": True}),
                FlowJob("c", options={"job_id": "fails", "fail_parent_on_failure": True}),
                FlowJob("c", options={"job_id": "dropped", "remove_dependency_on_failure": True}),
            ],
        ),
        now=clock.at(0),
    )
    claimed = await backend.claim_jobs("w", [QueueDemand(queue_name, 4)], 30, now=clock.at(1))
    by_id = {job.id: job for job in claimed}
    await backend.complete_job(queue_name, "done", token(by_id["done"]), now=clock.at(2))
    for child in ("ignored", "fails", "dropped"):
        await backend.fail_job(queue_name, child, token(by_id[child]), "x", now=clock.at(2))

    counts = await backend.get_flow_dependency_counts(queue_name, flow.job.id)
    assert counts is not None
    assert (counts.processed, counts.unprocessed, counts.ignored, counts.failed) == (1, 1, 1, 1)
    assert counts.missing == 0
    selected = await backend.get_flow_dependency_selected_counts(
        queue_name, flow.job.id, unprocessed=True
    )
    assert selected is not None
    assert (selected.unprocessed, selected.processed, selected.ignored) == (1, None, None)
    every = await backend.get_flow_dependency_selected_counts(queue_name, flow.job.id)
    assert every is not None and (every.processed, every.failed) == (1, 1)
    assert await backend.get_flow_dependency_counts(queue_name, "nope") is None


async def test_dependency_pages_cover_every_child_once_FLOW_20_FLOW_21(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    flow = await backend.add_flow(
        FlowJob("p", queue=queue_name, children=[FlowJob("c", i) for i in range(50)]),
        now=clock.at(0),
    )
    seen: list[ChildRef] = []
    cursor = 0
    pages = 0
    while True:
        page = await backend.get_flow_dependency_page(
            queue_name, flow.job.id, "unprocessed", cursor, 20
        )
        seen += [item.child for item in page.items]
        pages += 1
        if page.next_cursor == 0:
            break
        cursor = page.next_cursor
    assert pages == 3
    assert seen == [ChildRef(queue_name, child.job.id) for child in flow.children]

    several = await backend.get_flow_dependency_pages(
        queue_name, flow.job.id, processed=0, unprocessed=0
    )
    assert list(several) == ["processed", "unprocessed"]
    assert len(several["unprocessed"].items) == 20 and several["processed"].items == []
    small = await backend.get_flow_dependency_page(queue_name, flow.job.id, "unprocessed", 0, 60)
    assert (len(small.items), small.next_cursor) == (50, 0)
    with pytest.raises(InvalidOptions):
        await backend.get_flow_dependency_page(queue_name, flow.job.id, "bogus", 0, 20)  # type: ignore[arg-type]


# ------------------------------------------------------------------- cuts and cleanup


async def test_remove_child_dependency_detaches_the_child_FLOW_25(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    flow = await backend.add_flow(
        FlowJob("p", queue=queue_name, children=[FlowJob("c", options={"job_id": "a"})]),
        now=clock.at(0),
    )
    assert await backend.remove_child_dependency(queue_name, "a", now=clock.at(1)) is True
    child = await backend.get_job(queue_name, "a")
    assert child is not None and child.parent_id is None and child.state == "waiting"
    assert await state(backend, queue_name, flow.job.id) == "waiting"
    assert await backend.remove_child_dependency(queue_name, "a", now=clock.at(2)) is False
    counts = await backend.get_flow_dependency_counts(queue_name, flow.job.id)
    assert counts is not None and counts.unprocessed == counts.processed == counts.missing == 0


async def test_removing_a_finished_child_keeps_its_result_FLOW_26_FLOW_28(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    flow = await backend.add_flow(
        two_children(queue_name, remove_on_complete=True), now=clock.at(0)
    )
    claimed = await claim(backend, queue_name, clock, 1)
    await backend.complete_job(queue_name, "a", token(claimed["a"]), "A", now=clock.at(1))
    await backend.complete_job(queue_name, "b", token(claimed["b"]), "B", now=clock.at(1))
    assert await backend.get_job(queue_name, "b") is None  # remove_on_complete
    assert await backend.remove_job(queue_name, "a", now=clock.at(2))

    values = await backend.get_flow_dependency_values(queue_name, flow.job.id)
    assert values.processed == {ChildRef(queue_name, "a"): "A", ChildRef(queue_name, "b"): "B"}
    assert await state(backend, queue_name, flow.job.id) == "waiting"


async def test_removing_the_last_pending_child_releases_to_delayed_FLOW_29_MGMT_29(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    flow = await backend.add_flow(
        FlowJob(
            "p",
            queue=queue_name,
            options={"delay_ms": 60_000},
            children=[FlowJob("c", options={"job_id": "a"})],
        ),
        now=clock.at(0),
    )
    assert await backend.remove_job(queue_name, "a", now=clock.at(1))
    parent = await backend.get_job(queue_name, flow.job.id)
    assert parent is not None and parent.state == "delayed"
    assert parent.available_at == clock.at(60)


async def test_retrying_a_failed_child_restores_the_dependency_FLOW_27(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    parent = await failed_b(backend, queue_name, clock, "broke", fail_parent_on_failure=True)
    released = await backend.get_job(queue_name, parent)
    assert released is not None and released.deferred_failure is not None

    await backend.retry_job(queue_name, "b", now=clock.at(2))

    waiting = await backend.get_job(queue_name, parent)
    assert waiting is not None and waiting.state == "waiting-children"
    assert waiting.deferred_failure is None
    counts = await backend.get_flow_dependency_counts(queue_name, parent)
    assert counts is not None and (counts.unprocessed, counts.failed) == (2, 0)
    await run_child(backend, queue_name, clock, 3, "a")
    await run_child(backend, queue_name, clock, 4, "b")
    assert await state(backend, queue_name, parent) == "waiting"


async def test_retrying_a_failed_parent_with_pending_children_waits_for_them_FLOW_27(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    parent = await failed_b(backend, queue_name, clock, "broke")
    assert await state(backend, queue_name, parent) == "failed"
    await backend.retry_job(queue_name, "b", now=clock.at(2))  # b pending again
    retried = await backend.retry_job(queue_name, parent, now=clock.at(3))
    assert retried.state == "waiting-children"


# ---------------------------------------------- every path to a terminal child outcome


async def test_stalled_out_child_applies_the_parents_policy_STALL_4(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    flow = await backend.add_flow(
        FlowJob(
            "p",
            queue=queue_name,
            children=[
                FlowJob("c", options={"job_id": "a"}),
                FlowJob("c", options={"job_id": "b", "fail_parent_on_failure": True}),
            ],
        ),
        now=clock.at(0),
    )
    await run_child(backend, queue_name, clock, 1, "a")
    # b's worker dies: its lease lapses and recovery has no stalls to spare.
    [lost] = await backend.claim_jobs("w", [QueueDemand(queue_name, 1)], 1, now=clock.at(2))
    assert lost.id == "b"
    outcomes = await backend.recover_stalled([queue_name], max_stalled_count=0, now=clock.at(10))
    assert [(o.id, o.state) for o in outcomes] == [("b", "failed")]
    parent = await backend.get_job(queue_name, flow.job.id)
    assert parent is not None and parent.state == "waiting"
    assert parent.deferred_failure == (
        f"child b of queue {queue_name} failed: job stalled more than allowable limit"
    )


async def test_stalled_out_child_fails_a_default_parent_STALL_4(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    flow = await backend.add_flow(
        FlowJob("p", queue=queue_name, children=[FlowJob("c", options={"job_id": "a"})]),
        now=clock.at(0),
    )
    await backend.claim_jobs("w", [QueueDemand(queue_name, 1)], 1, now=clock.at(1))
    await backend.recover_stalled([queue_name], max_stalled_count=0, now=clock.at(10))
    assert await state(backend, queue_name, flow.job.id) == "failed"


@pytest.mark.parametrize(
    ("policy", "parent_state"),
    [({}, "failed"), ({"ignore_dependency_on_failure": True}, "waiting")],
)
async def test_child_removed_by_remove_on_fail_still_tells_its_parent_FIN_6(
    backend: JobQueueBackend,
    queue_name: str,
    clock: Clock,
    policy: dict[str, bool],
    parent_state: str,
) -> None:
    flow = await backend.add_flow(
        FlowJob(
            "p",
            queue=queue_name,
            children=[FlowJob("c", options={"job_id": "a", "remove_on_fail": True, **policy})],
        ),
        now=clock.at(0),
    )
    await run_child(backend, queue_name, clock, 1, "a", fail="gone")
    assert await backend.get_job(queue_name, "a") is None
    assert await state(backend, queue_name, flow.job.id) == parent_state


async def test_children_of_children_release_upwards(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    """Beyond the seed: a tree, each edge with its own policy (FLOW-1 shape)."""
    flow = await backend.add_flow(
        FlowJob(
            "root",
            queue=queue_name,
            children=[
                FlowJob(
                    "mid",
                    options={"job_id": "mid"},
                    children=[
                        FlowJob("leaf", options={"job_id": "leaf1"}),
                        FlowJob(
                            "leaf",
                            options={"job_id": "leaf2", "ignore_dependency_on_failure": True},
                        ),
                    ],
                )
            ],
        ),
        now=clock.at(0),
    )
    [mid] = flow.children
    assert mid.job.state == "waiting-children"
    assert [leaf.job.id for leaf in mid.children] == ["leaf1", "leaf2"]

    await run_child(backend, queue_name, clock, 1, "leaf1", result=1)
    await run_child(backend, queue_name, clock, 2, "leaf2", fail="bad leaf")
    assert await state(backend, queue_name, "mid") == "waiting"
    assert await state(backend, queue_name, flow.job.id) == "waiting-children"
    await run_child(backend, queue_name, clock, 3, "mid", result="mid done")
    assert await state(backend, queue_name, flow.job.id) == "waiting"
    assert await backend.get_flow_children_values(queue_name, flow.job.id) == {
        ChildRef(queue_name, "mid"): "mid done"
    }


async def test_default_failure_deep_in_a_tree_fails_every_waiting_ancestor_FLOW_5(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    flow = await backend.add_flow(
        FlowJob(
            "root",
            queue=queue_name,
            children=[
                FlowJob(
                    "mid",
                    options={"job_id": "mid"},
                    children=[FlowJob("leaf", options={"job_id": "leaf"})],
                )
            ],
        ),
        now=clock.at(0),
    )
    await run_child(backend, queue_name, clock, 1, "leaf", fail="deep")
    assert await state(backend, queue_name, "mid") == "failed"
    assert await state(backend, queue_name, flow.job.id) == "failed"


# ------------------------------------------------------------------ deduplication


async def test_a_child_matching_a_dedup_owner_is_skipped_DEDUP_17(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    owner = await backend.add_job(
        queue_name, "sync", options=JobOptions(deduplication="acct"), now=clock.at(0)
    )
    flow = await backend.add_flow(
        FlowJob(
            "p",
            queue=queue_name,
            children=[
                FlowJob("sync", options=JobOptions(deduplication=DeduplicationOptions("acct"))),
                FlowJob("other"),
            ],
        ),
        now=clock.at(1),
    )
    assert [child.job.name for child in flow.children] == ["other"]
    counts = await backend.get_flow_dependency_counts(queue_name, flow.job.id)
    assert counts is not None and counts.unprocessed == 1
    owner_now = await backend.get_job(queue_name, owner.id)
    assert owner_now is not None and owner_now.parent_id is None
    names = [name for name, _ in await job_event_list(backend, queue_name, owner.id)]
    assert names[-2:] == ["debounced", "deduplicated"]


async def test_a_parent_matching_a_dedup_owner_gives_the_owner_DEDUP_19(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    first = await backend.add_flow(
        FlowJob(
            "p",
            queue=queue_name,
            options={"deduplication": {"id": "nightly"}},
            children=[FlowJob("c")],
        ),
        now=clock.at(0),
    )
    second = await backend.add_flow(
        FlowJob(
            "p",
            queue=queue_name,
            options={"deduplication": {"id": "nightly"}},
            children=[FlowJob("c")],
        ),
        now=clock.at(0),
    )
    assert second.job.id == first.job.id
    assert second.children == []
    counts = await backend.get_job_counts(queue_name)
    assert counts["waiting"] == 1 and counts["waiting-children"] == 1


async def test_a_deduplicated_parent_attaches_nothing_so_no_child_conflicts_DEDUP_19(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    """The owner is given back before any child is looked at: a child that belongs to
    another parent is not attached, so it is no conflict either."""
    owner = await backend.add_job(
        queue_name, "p", options={"deduplication": {"id": "nightly"}}, now=clock.at(0)
    )
    await backend.add_flow(
        FlowJob("q", queue=queue_name, children=[FlowJob("c", options={"job_id": "shared"})]),
        now=clock.at(0),
    )
    before = await backend.get_job_counts(queue_name)
    again = await backend.add_flow(
        FlowJob(
            "p",
            queue=queue_name,
            options={"deduplication": {"id": "nightly"}},
            children=[FlowJob("c", options={"job_id": "shared"})],
        ),
        now=clock.at(1),
    )
    assert (again.job.id, again.children) == (owner.id, [])
    assert await backend.get_job_counts(queue_name) == before


async def test_flow_result_shape(backend: JobQueueBackend, queue_name: str, clock: Clock) -> None:
    flow = await backend.add_flow(FlowJob("alone", queue=queue_name), now=clock.at(0))
    assert isinstance(flow, Flow) and flow.children == []
    assert flow.job.state == "waiting"


async def test_one_completion_applies_every_finalisation_rule_in_order_FIN_2(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    """FIN-2 for a flow child that owns a keep-last deduplication id, under a count
    retention: completed, then the kept duplicate stored (it owns the id), then the parent
    released, then retention; nothing is drained while those wait."""
    keep = DeduplicationOptions("report", keep_last_if_active=True)
    older = await backend.add_job(queue_name, "old", options={"job_id": "old"}, now=clock.at(0))
    claimed = await claim(backend, queue_name, clock, 0)
    await backend.complete_job(queue_name, older.id, token(claimed["old"]), now=clock.at(0))
    flow = await backend.add_flow(
        FlowJob(
            "parent",
            queue=queue_name,
            children=[
                FlowJob(
                    "child",
                    "v1",
                    JobOptions(job_id="child", deduplication=keep, remove_on_complete=1),
                )
            ],
        ),
        now=clock.at(1),
    )
    running = (await claim(backend, queue_name, clock, 2))["child"]
    kept = await backend.add_job(
        queue_name, "child", "v2", JobOptions(deduplication=keep), now=clock.at(3)
    )
    assert kept.id == "child"  # the owner, running: v2 is kept for later

    await backend.complete_job(queue_name, "child", token(running), "r1", now=clock.at(4))

    after = [
        (event.event, event.job_id)
        for event in await backend.read_events(queue_name, "-", "+", 1000)
        if event.created_at == clock.at(4)
    ]
    new_owner = await backend.get_deduplication_job_id(queue_name, "report", now=clock.at(4))
    assert new_owner is not None and new_owner != "child"
    assert after == [
        ("completed", "child"),  # the job itself
        ("added", new_owner),  # keep-last materialised (DEDUP-9)
        ("waiting", new_owner),
        ("waiting", flow.job.id),  # the flow parent released (FLOW-3)
    ]
    # Retention last: of the completed jobs only the newest stays; the result stays under
    # the parent (FLOW-28).
    assert await backend.get_job(queue_name, "old") is None
    assert await backend.get_job_state(queue_name, "child") == "completed"
    assert await backend.get_flow_children_values(queue_name, flow.job.id) == {
        ChildRef(queue_name, "child"): "r1"
    }


async def test_get_job_shows_logs_dedup_expiry_and_children_MGMT_1(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    flow = await backend.add_flow(
        FlowJob(
            "p",
            queue=queue_name,
            options=JobOptions(deduplication=DeduplicationOptions("once", ttl=60)),
            children=[FlowJob("c", options={"job_id": "a"}), FlowJob("c", options={"job_id": "b"})],
        ),
        now=clock.at(0),
    )
    await backend.add_job_log(queue_name, "a", "one", now=clock.at(1))
    await backend.add_job_log(queue_name, "a", "two", now=clock.at(1))

    parent = await backend.get_job(queue_name, flow.job.id)
    assert parent is not None
    assert parent.child_ids == ((queue_name, "a"), (queue_name, "b"))
    assert parent.deduplication_expires_at == clock.at(60)
    assert parent.logs_count == 0
    child = await backend.get_job(queue_name, "a")
    assert child is not None
    assert (child.logs_count, child.child_ids, child.deduplication_expires_at) == (2, (), None)
    assert child.parent_id == flow.job.id
    # Left out of equality: a snapshot from any other call compares equal.
    assert child == flow.children[0].job
