"""``search_jobs``: one queue's jobs in one state that match a name and a value in their
data, in the order of the state's index, paged without a total (``has_more``)."""

from __future__ import annotations

from typing import Any

import pytest

from lane_pg.backend import JobQueueBackend
from lane_pg.backend.reads import MAX_SEARCH_LIMIT, MAX_SEARCH_OFFSET
from lane_pg.errors import InvalidOptions
from lane_pg.types import JSON, JobRow, JobSearchPage, JobSpec, JobState, QueueDemand
from lane_pg.types.flows import FlowJob
from tests.helpers import Clock


def ids(page: JobSearchPage) -> list[str]:
    return [job.id for job in page.items]


def token(job: JobRow) -> str:
    assert job.lock_token is not None
    return job.lock_token


async def search(
    backend: JobQueueBackend, queue: str, state: JobState = "waiting", **filters: Any
) -> list[str]:
    """The ids of every match (one page of the most jobs a page holds)."""
    page = await backend.reads.search_jobs(queue, state, limit=MAX_SEARCH_LIMIT, **filters)
    assert not page.has_more
    return ids(page)


async def add(
    backend: JobQueueBackend, queue: str, clock: Clock, job_id: str, data: JSON, name: str = "n"
) -> str:
    added = await backend.jobs.add_job(queue, name, data, {"job_id": job_id}, now=clock.at(0))
    return added.id


async def test_each_state_in_the_order_of_its_index(
    backend: JobQueueBackend, queue_name: str, queue_b: str, clock: Clock
) -> None:
    q = queue_name
    # waiting in claim order: priority first, LIFO before FIFO within one (ORD-1..4)
    for job_id, options in (
        ("low", {"priority": 5}),
        ("fifo", {"priority": 1}),
        ("lifo", {"priority": 1, "lifo": True}),
        ("fifo2", {"priority": 1}),
    ):
        await backend.jobs.add_job(q, "n", None, {"job_id": job_id, **options}, now=clock.at(0))
    # delayed by due time, then insertion order
    for job_id, delay in (("late", 60_000), ("soon", 30_000), ("soon2", 30_000)):
        await backend.jobs.add_job(
            q, "n", None, {"job_id": job_id, "delay_ms": delay}, now=clock.at(0)
        )
    # waiting-children newest first
    for parent in ("p1", "p2", "p3"):
        flow = FlowJob("parent", None, {"job_id": parent}, q, [FlowJob("c", None, None, queue_b)])
        await backend.flows.add_flow(flow, now=clock.at(0))

    # active oldest first; completed and failed newest finished first, then newest added
    b = queue_b + "_run"
    names = ["x1", "x2", "x3", "x4", "y1", "y2", "y3", "a1", "a2", "a3"]
    await backend.jobs.add_jobs(
        b, [JobSpec("n", None, {"job_id": n}) for n in names], now=clock.at(1)
    )
    claimed = {
        job.id: job
        for job in await backend.runs.claim_jobs("w", [QueueDemand(b, 10)], 30, now=clock.at(2))
    }
    for job_id, at in (("x1", 5), ("x2", 7), ("x3", 7), ("x4", 6)):
        await backend.runs.complete_job(b, job_id, token(claimed[job_id]), now=clock.at(at))
    for job_id, at in (("y1", 9), ("y2", 8), ("y3", 9)):
        await backend.runs.fail_job(b, job_id, token(claimed[job_id]), "no", now=clock.at(at))

    assert await search(backend, q, "waiting") == ["lifo", "fifo", "fifo2", "low"]
    assert await search(backend, q, "delayed") == ["soon", "soon2", "late"]
    assert await search(backend, q, "waiting-children") == ["p3", "p2", "p1"]
    assert await search(backend, q, "active") == []
    assert await search(backend, b, "active") == ["a1", "a2", "a3"]
    assert await search(backend, b, "completed") == ["x3", "x2", "x4", "x1"]
    assert await search(backend, b, "failed") == ["y3", "y1", "y2"]
    # the rows are the jobs' snapshots
    [first] = (await backend.reads.search_jobs(b, "failed", limit=1)).items
    assert first == await backend.jobs.get_job(b, "y3")


async def test_name_filter_is_exact(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    for job_id, name in (("m1", "mail"), ("s1", "sms"), ("m2", "mail"), ("M", "Mail")):
        await add(backend, queue_name, clock, job_id, None, name)
    assert await search(backend, queue_name, name="mail") == ["m1", "m2"]
    assert await search(backend, queue_name, name="Mail") == ["M"]
    assert await search(backend, queue_name, name="mai") == []
    assert await search(backend, queue_name) == ["m1", "s1", "m2", "M"]


async def test_data_path_compares_the_json_value_at_nested_keys(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    q = queue_name
    await add(backend, q, clock, "int", {"user": {"id": 42, "tags": ["a", "b"]}})
    await add(backend, q, clock, "float", {"user": {"tags": [], "id": 42.0}})
    await add(backend, q, clock, "text", {"user": {"id": "42"}})
    await add(backend, q, clock, "other", {"user": {"id": 7}})
    await add(backend, q, clock, "true", {"flag": True})
    await add(backend, q, clock, "one", {"flag": 1})
    await add(backend, q, clock, "scalar", 42)
    await add(backend, q, clock, "none", None)
    await add(backend, q, clock, "list", [{"id": 42}, {"id": 43}])

    at_id: dict[str, Any] = {"data_path": ["user", "id"]}
    assert await search(backend, q, **at_id, data_value=42) == ["int", "float"]  # jsonb numbers
    assert await search(backend, q, **at_id, data_value=42.0) == ["int", "float"]
    assert await search(backend, q, **at_id, data_value="42") == ["text"]  # a string is not 42
    assert await search(backend, q, **at_id, data_value=8) == []
    assert await search(backend, q, data_path=("flag",), data_value=True) == ["true"]
    assert await search(backend, q, data_path=["flag"], data_value=1) == ["one"]
    # an object whatever its key order; a path into an array by index, from the end too
    assert await search(
        backend, q, data_path=["user"], data_value={"tags": ["a", "b"], "id": 42}
    ) == ["int"]
    assert await search(backend, q, data_path=["user", "tags", "1"], data_value="b") == ["int"]
    assert await search(backend, q, data_path=["user", "tags", "-2"], data_value="a") == ["int"]
    assert await search(backend, q, data_path=["user", "tags", "2"], data_value="b") == []
    assert await search(backend, q, data_path=["1", "id"], data_value=43) == ["list"]
    assert await search(backend, q, data_path=["x", "id"], data_value=42) == []
    # [] is the whole document
    assert await search(backend, q, data_path=[], data_value=42) == ["scalar"]
    assert await search(backend, q, data_path=[], data_value=None) == ["none"]


async def test_json_null_matches_none_a_missing_key_never_does(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    q = queue_name
    await add(backend, q, clock, "null", {"x": None})
    await add(backend, q, clock, "missing", {"y": 1})
    await add(backend, q, clock, "deep", {"x": {"z": None}})
    await add(backend, q, clock, "nodata", None)
    await add(backend, q, clock, "scalar", "x")
    assert await search(backend, q, data_path=["x"], data_value=None) == ["null"]
    assert await search(backend, q, data_path=["x"]) == ["null"]  # data_value defaults to null
    assert await search(backend, q, data_path=["x", "z"], data_value=None) == ["deep"]
    assert await search(backend, q, data_path=["y", "z"], data_value=None) == []


async def test_name_and_data_together_and_paging_with_has_more(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    q = queue_name
    matching: list[str] = []
    for n in range(14):
        # every other job matches both; the others miss one filter each
        name = "mail" if n % 4 != 1 else "sms"
        tenant = "t1" if n % 4 != 3 else "t2"
        job_id = await add(backend, q, clock, f"j{n:02}", {"tenant": tenant}, name)
        if name == "mail" and tenant == "t1":
            matching.append(job_id)
    assert len(matching) == 7
    wanted: dict[str, Any] = {"name": "mail", "data_path": ["tenant"], "data_value": "t1"}
    assert await search(backend, q, **wanted) == matching

    pages = [
        await backend.reads.search_jobs(q, "waiting", offset=o, limit=3, **wanted)
        for o in (0, 3, 6)
    ]
    assert [ids(page) for page in pages] == [matching[0:3], matching[3:6], matching[6:]]
    assert [page.has_more for page in pages] == [True, True, False]
    assert [(page.offset, page.limit) for page in pages] == [(0, 3), (3, 3), (6, 3)]
    exact = await backend.reads.search_jobs(q, "waiting", offset=4, limit=3, **wanted)
    assert (ids(exact), exact.has_more) == (matching[4:], False)  # the page ends the matches
    past = await backend.reads.search_jobs(q, "waiting", offset=7, limit=3, **wanted)
    assert (past.items, past.has_more, past.offset) == ([], False, 7)


@pytest.mark.parametrize(
    ("offset", "limit"),
    [(0, 0), (0, -1), (0, MAX_SEARCH_LIMIT + 1), (-1, 20), (MAX_SEARCH_OFFSET + 1, 20)],
)
async def test_a_bad_offset_or_limit_is_refused(
    backend: JobQueueBackend, queue_name: str, clock: Clock, offset: int, limit: int
) -> None:
    await add(backend, queue_name, clock, "a", None)
    with pytest.raises(InvalidOptions):
        await backend.reads.search_jobs(queue_name, "waiting", offset=offset, limit=limit)
    edge = await backend.reads.search_jobs(
        queue_name, "waiting", offset=MAX_SEARCH_OFFSET, limit=MAX_SEARCH_LIMIT
    )
    assert (edge.items, edge.has_more) == ([], False)
    assert await backend.reads.get_job_counts(queue_name, ["waiting"]) == {"waiting": 1}


@pytest.mark.parametrize(
    "filters",
    [
        {"data_value": 1},  # a value with nothing to compare it at
        {"data_path": "user"},  # a string is not a path of its characters
        {"data_path": ["user", 1]},
    ],
)
async def test_a_value_without_a_path_or_a_path_of_non_strings_is_refused(
    backend: JobQueueBackend, queue_name: str, filters: dict[str, Any]
) -> None:
    with pytest.raises(InvalidOptions):
        await backend.reads.search_jobs(queue_name, "waiting", **filters)


async def test_an_unknown_state_is_refused(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    await add(backend, queue_name, clock, "a", None)
    for state in ("done", "Waiting", ""):
        with pytest.raises(InvalidOptions):
            await backend.reads.search_jobs(queue_name, state)  # type: ignore[arg-type]


async def test_other_queues_jobs_never_match_and_an_unknown_queue_is_empty(
    backend: JobQueueBackend, queue_name: str, queue_b: str, clock: Clock
) -> None:
    await add(backend, queue_name, clock, "mine", {"k": 1}, "mail")
    await add(backend, queue_b, clock, "theirs", {"k": 1}, "mail")
    for queue in (queue_name, queue_b):
        await add(backend, queue, clock, "same", {"k": 2}, "sms")  # one id in both queues
    assert await search(backend, queue_name, name="mail") == ["mine"]
    assert await search(backend, queue_name, data_path=["k"], data_value=1) == ["mine"]
    assert await search(backend, queue_b, name="mail") == ["theirs"]
    page = await backend.reads.search_jobs(queue_name, "waiting", name="sms")
    assert [(job.queue, job.id) for job in page.items] == [(queue_name, "same")]
    empty = await backend.reads.search_jobs(f"{queue_name}_none", "waiting", name="mail")
    assert (empty.items, empty.has_more, empty.offset, empty.limit) == ([], False, 0, 20)
