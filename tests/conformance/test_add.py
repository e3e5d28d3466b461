"""ADD: adding jobs, one at a time and in bulk (ADD-1..5, ADD-7..9, ADD-11, ADD-14, SCH-10)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from lane_pg.backend import JobQueueBackend
from lane_pg.errors import (
    InvalidJobId,
    InvalidOptions,
    InvalidPayload,
    InvalidPriority,
    InvalidQueueName,
    ValidationError,
)
from lane_pg.types import MAX_PRIORITY, Backoff, JobOptions, JobRetention, JobSpec, QueueDemand
from tests.helpers import Clock, epoch_ms, events, job_event_list, queue_snapshot

NOTHING: dict[str, int] = {
    "waiting": 0,
    "delayed": 0,
    "active": 0,
    "waiting-children": 0,
    "completed": 0,
    "failed": 0,
}


async def assert_queue_empty(backend: JobQueueBackend, queue: str) -> None:
    assert await backend.get_job_counts(queue) == NOTHING
    assert await events(backend, queue) == []


# ----------------------------------------------------------------------------- add


async def test_add_returns_waiting_snapshot_ADD_1(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    job = await backend.add_job(queue_name, "send", {"to": "a"}, now=clock.at())

    assert job.queue == queue_name
    assert job.name == "send"
    assert job.data == {"to": "a"}
    assert job.payload == {"to": "a"}
    assert job.state == "waiting"
    assert job.priority == 0
    assert job.lifo is False
    assert job.created_at == clock.at()
    assert job.available_at == clock.at()
    assert job.processed_at is None
    assert job.finished_at is None
    assert job.attempts_started == 0
    assert job.attempts_made == 0
    assert job.max_attempts == 1
    assert job.backoff is None
    assert job.timeout_ms is None
    assert job.lock_token is None
    assert job.worker_id is None
    assert job.lease_expires_at is None
    assert job.stalled_count == 0
    assert job.return_value is None
    assert job.failed_reason is None
    assert job.stacktrace == []
    assert job.enqueued_seq is not None
    assert await backend.get_job(queue_name, job.id) == job
    assert await backend.get_job_state(queue_name, job.id) == "waiting"


async def test_add_without_data_stores_null_ADD_1(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    job = await backend.add_job(queue_name, "ping", now=clock.at())
    assert job.data is None
    fetched = await backend.get_job(queue_name, job.id)
    assert fetched is not None
    assert fetched.data is None


async def test_generated_ids_are_increasing_decimal_strings_ADD_2(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    first = await backend.add_job(queue_name, "a", now=clock.at())
    second = await backend.add_job(queue_name, "b", now=clock.at())
    third = await backend.add_job(f"{queue_name}_other", "c", now=clock.at())

    for job in (first, second, third):
        assert job.id.isascii(), job.id
        assert job.id.isdigit(), job.id
        assert str(int(job.id)) == job.id
    # one global sequence: increasing across queues too
    assert int(first.id) < int(second.id) < int(third.id)


async def test_add_idempotent_custom_id_ADD_3(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    first = await backend.add_job(
        queue_name, "welcome", {"v": 1}, {"job_id": "email:ops:welcome"}, now=clock.at()
    )
    before = await queue_snapshot(backend, queue_name)

    again = await backend.add_job(
        queue_name,
        "other-name",
        {"v": 2},
        JobOptions(job_id="email:ops:welcome", priority=7),
        now=clock.at(5),
    )

    assert again == first  # unchanged: data, name, priority, created_at, enqueued_seq
    assert again.data == {"v": 1}
    assert await backend.get_job(queue_name, first.id) == first
    counts, seen = await queue_snapshot(backend, queue_name)
    assert counts == before[0]  # no row
    # No added / waiting again: only `duplicated` (EVS-4) says an add met the id.
    assert [(event, job) for _, event, job in seen[len(before[1]) :]] == [("duplicated", first.id)]
    names = [name for name, _ in await job_event_list(backend, queue_name, first.id)]
    assert names == ["added", "waiting", "duplicated"]


async def test_add_duplicate_custom_id_keeps_waiting_position_ADD_3(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    """The duplicate takes no new enqueue sequence: x stays ahead of y."""
    x = await backend.add_job(queue_name, "x", options={"job_id": "x"}, now=clock.at())
    y = await backend.add_job(queue_name, "y", options={"job_id": "y"}, now=clock.at(1))
    await backend.add_job(queue_name, "x", options={"job_id": "x"}, now=clock.at(2))

    claimed = await backend.claim_jobs("w", [QueueDemand(queue_name, 2)], 30, now=clock.at(3))
    assert [job.id for job in claimed] == [x.id, y.id]


async def test_same_custom_id_in_two_queues_is_two_jobs_ADD_3(
    backend: JobQueueBackend, queue_name: str, queue_b: str, clock: Clock
) -> None:
    a = await backend.add_job(queue_name, "n", {"q": "a"}, {"job_id": "shared"}, now=clock.at())
    b = await backend.add_job(queue_b, "n", {"q": "b"}, {"job_id": "shared"}, now=clock.at())
    assert (a.queue, a.id, a.data) == (queue_name, "shared", {"q": "a"})
    assert (b.queue, b.id, b.data) == (queue_b, "shared", {"q": "b"})


@pytest.mark.parametrize("bad_id", ["0", "0:x", "42"])
@pytest.mark.parametrize("form", ["dict", "JobOptions"])
async def test_custom_id_rejected_ADD_4(
    backend: JobQueueBackend, queue_name: str, clock: Clock, bad_id: str, form: str
) -> None:
    options: Any = {"job_id": bad_id} if form == "dict" else JobOptions(job_id=bad_id)
    with pytest.raises(InvalidJobId):
        await backend.add_job(queue_name, "n", {"a": 1}, options, now=clock.at())
    await assert_queue_empty(backend, queue_name)


async def test_empty_custom_id_rejected_ADD_4(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    with pytest.raises(InvalidJobId):
        await backend.add_job(queue_name, "n", None, {"job_id": ""}, now=clock.at())
    await assert_queue_empty(backend, queue_name)


@pytest.mark.parametrize("good_id", ["a42", "42a", "0x", "email:ops:welcome"])
async def test_custom_id_accepted_ADD_4(
    backend: JobQueueBackend, queue_name: str, clock: Clock, good_id: str
) -> None:
    job = await backend.add_job(queue_name, "n", None, {"job_id": good_id}, now=clock.at())
    assert job.id == good_id
    assert await backend.get_job_state(queue_name, good_id) == "waiting"


async def test_priority_upper_bound_accepted_ADD_5(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    job = await backend.add_job(queue_name, "n", None, {"priority": MAX_PRIORITY}, now=clock.at())
    assert job.priority == 2**21
    zero = await backend.add_job(queue_name, "n", None, {"priority": 0}, now=clock.at())
    assert zero.priority == 0


@pytest.mark.parametrize("priority", [2**21 + 1, -1])
@pytest.mark.parametrize("form", ["dict", "JobOptions"])
async def test_priority_out_of_range_rejected_ADD_5(
    backend: JobQueueBackend, queue_name: str, clock: Clock, priority: int, form: str
) -> None:
    options: Any = {"priority": priority} if form == "dict" else JobOptions(priority=priority)
    with pytest.raises(InvalidPriority):
        await backend.add_job(queue_name, "n", None, options, now=clock.at())
    await assert_queue_empty(backend, queue_name)


async def test_lower_priority_value_claimed_first_ADD_5(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    ten = await backend.add_job(queue_name, "n", None, {"priority": 10}, now=clock.at())
    one = await backend.add_job(queue_name, "n", None, {"priority": 1}, now=clock.at())
    claimed = await backend.claim_jobs("w", [QueueDemand(queue_name, 1)], 30, now=clock.at(1))
    assert [job.id for job in claimed] == [one.id]
    assert await backend.get_job_state(queue_name, ten.id) == "waiting"


async def test_add_with_delay_is_delayed_until_due_ADD_7(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    job = await backend.add_job(queue_name, "later", None, JobOptions(delay=5), now=clock.at())

    assert job.state == "delayed"
    assert job.available_at == clock.at(5)
    assert await job_event_list(backend, queue_name, job.id) == [
        ("added", {"name": "later"}),
        ("delayed", {"delay": epoch_ms(clock.at(5))}),
    ]
    demand = [QueueDemand(queue_name, 1)]
    assert await backend.claim_jobs("w", demand, 30, now=clock.at()) == []
    assert await backend.claim_jobs("w", demand, 30, now=clock.at(4.999)) == []
    claimed = await backend.claim_jobs("w", demand, 30, now=clock.at(5))
    assert [c.id for c in claimed] == [job.id]


async def test_add_with_delay_ms_dict_and_timedelta_ADD_7(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    a = await backend.add_job(queue_name, "a", None, {"delay_ms": 1500}, now=clock.at())
    b = await backend.add_job(
        queue_name, "b", None, JobOptions(delay=timedelta(minutes=2)), now=clock.at()
    )
    assert (a.state, a.available_at) == ("delayed", clock.at(1.5))
    assert (b.state, b.available_at) == ("delayed", clock.at(120))


async def test_zero_delay_is_waiting_ADD_7(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    job = await backend.add_job(queue_name, "now", None, {"delay_ms": 0}, now=clock.at())
    assert job.state == "waiting"
    assert job.available_at == clock.at()


async def test_options_round_trip_ADD_8(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    options = JobOptions(
        job_id="opts-1",
        priority=3,
        lifo=True,
        attempts=4,
        backoff=Backoff.exponential(timedelta(seconds=2), cap=timedelta(seconds=30)),
        timeout=timedelta(seconds=45),
        remove_on_complete=5,
        remove_on_fail=JobRetention(age_ms=60_000, count=10),
    )
    job = await backend.add_job(queue_name, "opts", {"k": "v"}, options, now=clock.at())

    assert job.id == "opts-1"
    assert job.priority == 3
    assert job.lifo is True
    assert job.max_attempts == 4
    assert job.backoff == Backoff("exponential", base_ms=2000, cap_ms=30_000, jitter=0.0)
    assert job.timeout_ms == 45_000
    assert job.timeout == timedelta(seconds=45)
    fetched = await backend.get_job(queue_name, job.id)
    assert fetched == job
    submitted = options.to_json()
    for key, value in submitted.items():
        assert job.options.get(key) == value, key


async def test_options_round_trip_dict_with_sequence_backoff_ADD_8(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    doc = {
        "attempts": 3,
        "backoff": {"type": "sequence", "delays_ms": [5000, 15000]},
        "timeout_ms": 1000,
        "remove_on_complete": True,
        "remove_on_fail": False,
    }
    job = await backend.add_job(queue_name, "seq", None, doc, now=clock.at())
    assert job.max_attempts == 3
    assert job.backoff == Backoff.sequence([5, 15])
    assert job.timeout_ms == 1000
    for key, value in doc.items():
        assert job.options.get(key) == value, key


async def test_fixed_backoff_round_trip_ADD_8(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    job = await backend.add_job(
        queue_name, "n", None, JobOptions(attempts=2, backoff=Backoff.fixed(1.5)), now=clock.at()
    )
    assert job.backoff == Backoff("fixed", delay_ms=1500)
    assert job.max_attempts == 2


async def test_non_json_data_rejected_SCH_10(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    with pytest.raises(InvalidPayload):
        await backend.add_job(queue_name, "n", {"x": object()}, now=clock.at())
    await assert_queue_empty(backend, queue_name)


@pytest.mark.parametrize("bad_queue", ["", "has space", "-leading", "tab\tname", "x" * 129])
async def test_bad_queue_name_rejected_ADD_1(
    backend: JobQueueBackend, clock: Clock, bad_queue: str
) -> None:
    with pytest.raises(InvalidQueueName):
        await backend.add_job(bad_queue, "n", None, now=clock.at())


async def test_unknown_option_key_rejected_ADD_8(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    with pytest.raises(InvalidOptions):
        await backend.add_job(queue_name, "n", None, {"bogus": 1}, now=clock.at())
    await assert_queue_empty(backend, queue_name)


@pytest.mark.parametrize(
    "options",
    [
        {"attempts": 0},
        {"attempts": "3"},
        {"delay_ms": -1},
        {"backoff": {"type": "linear", "delay_ms": 10}},
        {"lifo": "yes"},
    ],
    ids=["attempts-0", "attempts-str", "negative-delay", "unknown-backoff", "lifo-str"],
)
async def test_invalid_option_values_rejected_ADD_8(
    backend: JobQueueBackend, queue_name: str, clock: Clock, options: dict[str, Any]
) -> None:
    with pytest.raises(ValidationError):
        await backend.add_job(queue_name, "n", None, options, now=clock.at())
    await assert_queue_empty(backend, queue_name)


async def test_empty_job_name_rejected_ADD_1(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    with pytest.raises(ValidationError):
        await backend.add_job(queue_name, "", None, now=clock.at())
    await assert_queue_empty(backend, queue_name)


async def test_add_writes_added_then_waiting_ADD_9(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    job = await backend.add_job(queue_name, "send", {"to": "a"}, now=clock.at())
    found = await backend.read_events(queue_name, "-", "+", 10)
    assert [event.event for event in found] == ["added", "waiting"]
    assert [event.job_id for event in found] == [job.id, job.id]
    assert found[0].data == {"name": "send"}
    assert found[1].data.get("prev") is None
    assert all(event.queue == queue_name for event in found)


# ----------------------------------------------------------------------------- add_bulk


async def test_add_bulk_input_order_with_existing_id_ADD_11(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    existing = await backend.add_job(
        queue_name, "old", {"v": "old"}, {"job_id": "k"}, now=clock.at()
    )

    jobs = await backend.add_jobs(
        queue_name,
        [
            JobSpec("first", {"i": 1}),
            JobSpec("second", {"i": 2}, {"job_id": "k"}),
            JobSpec("third", {"i": 3}, JobOptions(priority=4)),
        ],
        now=clock.at(1),
    )

    assert len(jobs) == 3
    assert [job.name for job in jobs] == ["first", "old", "third"]
    assert jobs[1] == existing
    assert jobs[0].data == {"i": 1}
    assert jobs[2].data == {"i": 3}
    assert jobs[2].priority == 4
    assert int(jobs[0].id) < int(jobs[2].id)
    assert all(job.state == "waiting" for job in jobs)
    assert all(job.created_at == clock.at(1) for job in (jobs[0], jobs[2]))
    assert (await backend.get_job_counts(queue_name, ["waiting"]))["waiting"] == 3
    added = [e.job_id for e in await events(backend, queue_name) if e.event == "added"]
    assert added == [existing.id, jobs[0].id, jobs[2].id]


async def test_add_bulk_delayed_and_waiting_events_ADD_11(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    jobs = await backend.add_jobs(
        queue_name,
        [JobSpec("a"), JobSpec("b", None, {"delay_ms": 2000})],
        now=clock.at(),
    )
    assert [job.state for job in jobs] == ["waiting", "delayed"]
    assert jobs[1].available_at == clock.at(2)
    assert [name for name, _ in await job_event_list(backend, queue_name, jobs[0].id)] == [
        "added",
        "waiting",
    ]
    assert await job_event_list(backend, queue_name, jobs[1].id) == [
        ("added", {"name": "b"}),
        ("delayed", {"delay": epoch_ms(clock.at(2))}),
    ]


@pytest.mark.parametrize(
    "bad_spec",
    [
        JobSpec("bad", None, {"job_id": "7"}),
        JobSpec("bad", {"x": object()}),
        JobSpec("bad", None, {"priority": 2**21 + 1}),
        JobSpec("bad", None, {"bogus": True}),
    ],
    ids=["pure-integer-id", "non-json-data", "priority", "unknown-option"],
)
async def test_add_bulk_bad_spec_rejects_whole_call_ADD_11(
    backend: JobQueueBackend, queue_name: str, clock: Clock, bad_spec: JobSpec
) -> None:
    await backend.add_job(queue_name, "before", now=clock.at())
    before = await queue_snapshot(backend, queue_name)

    with pytest.raises(ValidationError):
        await backend.add_jobs(
            queue_name, [JobSpec("good", {"a": 1}), bad_spec, JobSpec("good2")], now=clock.at(1)
        )

    assert await queue_snapshot(backend, queue_name) == before


async def test_add_bulk_repeated_custom_id_in_call_ADD_11(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    jobs = await backend.add_jobs(
        queue_name,
        [JobSpec("a", 1, {"job_id": "dup"}), JobSpec("mid"), JobSpec("b", 2, {"job_id": "dup"})],
        now=clock.at(),
    )
    assert [job.id for job in jobs][0::2] == ["dup", "dup"]
    assert jobs[0] == jobs[2]
    assert (jobs[2].name, jobs[2].data) == ("a", 1)
    assert (await backend.get_job_counts(queue_name, ["waiting"]))["waiting"] == 2
    names = [name for name, _ in await job_event_list(backend, queue_name, "dup")]
    assert names == ["added", "waiting", "duplicated"]  # EVS-4, after the job's own


async def test_add_bulk_empty_returns_empty_ADD_11(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    assert await backend.add_jobs(queue_name, [], now=clock.at()) == []


async def test_list_after_add_counts_total_ADD_14(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    await backend.add_job(queue_name, "d", None, {"delay_ms": 10_000}, now=clock.at())
    await backend.add_jobs(queue_name, [JobSpec("a"), JobSpec("b")], now=clock.at())
    page = await backend.list_jobs(queue_name, ["waiting", "delayed"], descending=True, limit=20)
    assert page.total == 3
    assert len(page.items) == 3


async def test_duplicate_custom_id_of_finished_job_returns_it_unchanged_ADD_3(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    await backend.add_job(queue_name, "n", {"v": 1}, {"job_id": "once"}, now=clock.at(0))
    [active] = await backend.claim_jobs("w", [QueueDemand(queue_name, 1)], 30, now=clock.at(1))
    assert active.lock_token is not None
    done = await backend.complete_job(queue_name, "once", active.lock_token, "r", now=clock.at(2))
    before = await queue_snapshot(backend, queue_name)

    again = await backend.add_job(queue_name, "n", {"v": 2}, {"job_id": "once"}, now=clock.at(3))

    assert again == done
    assert again.state == "completed"
    counts, seen = await queue_snapshot(backend, queue_name)
    assert counts == before[0]
    assert [(event, job) for _, event, job in seen[len(before[1]) :]] == [("duplicated", "once")]


async def test_custom_id_length_limit_ADD_4(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    longest = "k" * 255
    job = await backend.add_job(queue_name, "n", None, {"job_id": longest}, now=clock.at(0))
    assert job.id == longest
    before = await queue_snapshot(backend, queue_name)
    with pytest.raises(InvalidJobId):
        await backend.add_job(queue_name, "n", None, {"job_id": "k" * 256}, now=clock.at(0))
    assert await queue_snapshot(backend, queue_name) == before


async def test_longest_queue_name_accepted_ADD_1(backend: JobQueueBackend, clock: Clock) -> None:
    name = "Q" + "a_.:-9" * 21 + "z"  # 128 characters
    assert len(name) == 128
    job = await backend.add_job(name, "n", now=clock.at(0))
    assert job.queue == name


@pytest.mark.parametrize(
    "data",
    [
        {"s": '\u00e9\u2713 "quoted" \\ back', "n": 1.5, "b": True, "l": [None, 1, "x"]},
        {"big": 2**53, "neg": -7, "nested": {"a": {"b": [{"c": []}]}}},
        "plain string",
        17,
        [1, 2, 3],
        False,
    ],
    ids=["mixed", "nested", "string", "int", "list", "bool"],
)
async def test_data_round_trips_exactly_ADD_1_SCH_10(
    backend: JobQueueBackend, queue_name: str, clock: Clock, data: Any
) -> None:
    job = await backend.add_job(queue_name, "n", data, now=clock.at(0))
    assert job.data == data
    fetched = await backend.get_job(queue_name, job.id)
    assert fetched is not None
    assert fetched.data == data
    assert type(fetched.data) is type(data)


@pytest.mark.parametrize(
    "data",
    [{"x": object()}, {"nan": float("nan")}, {"inf": float("inf")}, {1j: 1}],
    ids=["object", "nan", "infinity", "complex-key"],
)
async def test_non_json_data_variants_rejected_SCH_10(
    backend: JobQueueBackend, queue_name: str, clock: Clock, data: Any
) -> None:
    with pytest.raises(InvalidPayload):
        await backend.add_job(queue_name, "n", data, now=clock.at())
    await assert_queue_empty(backend, queue_name)
