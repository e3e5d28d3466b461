"""What a dashboard reads and writes besides the job rows, on every backend: the last
hour's throughput with wait and run percentiles (``get_throughput``, the rows of the view
``lane.v_throughput``) and an operator's action recorded as an event (``record_action``)."""

from __future__ import annotations

import pytest

from lane_pg.backend import JobQueueBackend
from lane_pg.errors import InvalidOptions
from lane_pg.types import Completion, Failure, JobSpec, QueueDemand
from tests.helpers import Clock


async def test_throughput_counts_each_minute_with_wait_and_run_percentiles(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    # Four jobs due at the base: started 1, 2, 3 and 4 s later, each running 0.5 s more
    # than the one before; one of them fails for good.
    await backend.add_jobs(queue_name, [JobSpec("t", options={"attempts": 1})] * 4, now=clock.at(0))
    for n in range(4):
        [job] = await backend.claim_jobs("w", [QueueDemand(queue_name, 1)], 60, now=clock.at(n + 1))
        assert job.lock_token is not None
        finished = clock.at(n + 1 + 0.5 * (n + 1))
        if n == 3:
            await backend.fail_jobs(
                [Failure(queue_name, job.id, job.lock_token, "boom")], now=finished
            )
        else:
            await backend.complete_jobs(
                [Completion(queue_name, job.id, job.lock_token)], now=finished
            )
    # One job finished two hours ago: outside the window.
    [old] = await backend.add_jobs(queue_name, [JobSpec("old")], now=clock.at(-7300))
    [claimed] = await backend.claim_jobs("w", [QueueDemand(queue_name, 1)], 60, now=clock.at(-7200))
    assert claimed.id == old.id and claimed.lock_token is not None
    await backend.complete_jobs(
        [Completion(queue_name, old.id, claimed.lock_token)], now=clock.at(-7199)
    )

    minutes = await backend.get_throughput(queue_name)
    assert sum(m.completed for m in minutes) == 3
    assert sum(m.failed for m in minutes) == 1
    if len(minutes) == 1:  # the four finished within one minute (else: a minute boundary)
        [m] = minutes
        assert m.minute.second == 0 and m.minute.microsecond == 0
        assert m.wait_p50_ms == pytest.approx(2500.0)  # waits 1000..4000 ms
        assert m.wait_p95_ms == pytest.approx(3850.0)
        assert m.run_p50_ms == pytest.approx(1250.0)  # runs 500..2000 ms
        assert m.run_p99_ms == pytest.approx(1985.0)
    assert [m.minute for m in minutes] == sorted(m.minute for m in minutes)


async def test_throughput_of_a_queue_without_finished_jobs_is_empty(
    backend: JobQueueBackend, queue_name: str
) -> None:
    assert await backend.get_throughput(queue_name) == []
    await backend.add_jobs(queue_name, [JobSpec("t")])
    assert await backend.get_throughput(queue_name) == []


async def test_an_action_is_an_event_of_the_queue_with_its_actor_and_details(
    backend: JobQueueBackend, queue_name: str
) -> None:
    [job] = await backend.add_jobs(queue_name, [JobSpec("t")])
    event_id = await backend.record_action(
        queue_name, "retry", actor="alice", job_id=job.id, details={"from": "dashboard"}
    )
    assert event_id is not None
    [event] = await backend.read_events(queue_name, event_id, event_id)
    assert event.event == "action"
    assert event.job_id == job.id
    assert event.data == {"action": "retry", "actor": "alice", "from": "dashboard"}


async def test_an_action_on_a_missing_or_silent_queue_writes_nothing(
    backend: JobQueueBackend, queue_name: str
) -> None:
    assert await backend.record_action(queue_name, "pause") is None
    assert await backend.list_queues() == [] or queue_name not in await backend.list_queues()
    await backend.set_queue_events(queue_name, record=False)
    assert await backend.record_action(queue_name, "pause", actor="bob") is None
    assert await backend.read_events(queue_name) == []


@pytest.mark.parametrize(
    ("action", "details"),
    [("", None), ("x" * 101, None), ("pause", ["not", "an", "object"]), ("p", {"n": object()})],
)
async def test_a_bad_action_is_refused_and_writes_nothing(
    backend: JobQueueBackend, queue_name: str, action: str, details: object
) -> None:
    await backend.add_jobs(queue_name, [JobSpec("t")])
    before = await backend.read_events(queue_name)
    with pytest.raises(InvalidOptions):
        await backend.record_action(queue_name, action, details=details)  # type: ignore[arg-type]
    assert await backend.read_events(queue_name) == before
