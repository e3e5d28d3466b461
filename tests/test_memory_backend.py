"""Unit tests of what only the memory backend has: the injected clock and RNG, exact order
keys and counters, and the all-or-nothing validation of its in-process writes. The shared
behaviour of every backend is covered by ``tests/conformance``."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from lane_pg.backend import JobQueueBackend
from lane_pg.errors import (
    InvalidJobId,
    InvalidOptions,
    InvalidPayload,
    InvalidPriority,
    JobLocked,
    JobNotFound,
    JobStateConflict,
    LockMismatch,
)
from lane_pg.memory import MemoryBackend
from lane_pg.types import (
    Backoff,
    Completion,
    Failure,
    FinalizeOutcome,
    JobOptions,
    JobRetention,
    JobRow,
    JobSpec,
    LeaseRef,
    LogPage,
    QueueDemand,
)

T0 = datetime(2024, 1, 1, 12, 0, tzinfo=UTC)
Q = "q"
MS = timedelta(milliseconds=1)


class Clock:
    """A settable clock so tests move time explicitly."""

    def __init__(self, start: datetime = T0) -> None:
        self.now = start

    def __call__(self) -> datetime:
        return self.now

    def advance(self, **kwargs: float) -> None:
        self.now += timedelta(**kwargs)


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def backend(clock: Clock) -> MemoryBackend:
    return MemoryBackend(clock=clock, rng=random.Random(1))


async def claim_one(backend: MemoryBackend, queue: str = Q, lease: float = 30) -> JobRow | None:
    jobs = await backend.claim_jobs("w1", [QueueDemand(queue, 1)], lease)
    return jobs[0] if jobs else None


def messages(page: LogPage) -> list[str]:
    return [entry.message for entry in page.logs]


async def events(
    backend: MemoryBackend, queue: str = Q
) -> list[tuple[str, str | None, dict[str, Any]]]:
    return [(e.event, e.job_id, e.data) for e in await backend.read_events(queue, limit=1000)]


def test_satisfies_protocol() -> None:
    assert isinstance(MemoryBackend(), JobQueueBackend)


# ----------------------------------------------------------------- clock and ids


@pytest.mark.asyncio
async def test_injected_clock_and_now_override(backend: MemoryBackend, clock: Clock) -> None:
    job = await backend.add_job(Q, "a")
    assert job.created_at == T0 == job.available_at
    assert job.created_at.tzinfo is not None
    later = T0 + timedelta(hours=1)
    other = await backend.add_job(Q, "b", options=JobOptions(delay=5), now=later)
    assert other.created_at == later
    assert other.available_at == later + timedelta(seconds=5)
    assert other.state == "delayed"
    assert other.enqueued_seq is None
    assert other.order_key == 2**40


@pytest.mark.asyncio
async def test_default_clock_is_aware_utc() -> None:
    job = await MemoryBackend().add_job(Q, "a")
    assert job.created_at.utcoffset() == timedelta(0)


@pytest.mark.asyncio
async def test_generated_ids_are_global_keys_ADD_2(backend: MemoryBackend) -> None:
    """A generated id is the text of the job's key, one sequence for every queue, as in
    lane._store_jobs (migration 0008): a custom-id job takes a key too."""
    a = await backend.add_job("q1", "a")
    custom = await backend.add_job("q1", "c", options={"job_id": "x1"})
    b = await backend.add_job("q2", "b")
    assert [a.id, custom.id, b.id] == ["1", "x1", "3"]


@pytest.mark.asyncio
async def test_duplicate_custom_id_is_a_no_op(backend: MemoryBackend) -> None:
    first = await backend.add_job(Q, "a", {"v": 1}, {"job_id": "x"})
    again = await backend.add_job(Q, "a", {"v": 2}, {"job_id": "x"})
    assert again == first
    assert [e[0] for e in await events(backend)] == ["added", "waiting", "duplicated"]
    assert (await backend.add_job(Q, "b")).enqueued_seq == 2


# ----------------------------------------------------------------- validation


@pytest.mark.asyncio
async def test_bulk_add_validation_writes_nothing(backend: MemoryBackend) -> None:
    specs = [JobSpec("ok"), JobSpec("bad", options={"job_id": "7"})]
    with pytest.raises(InvalidJobId):
        await backend.add_jobs(Q, specs)
    assert await backend.read_events(Q) == []
    assert sum((await backend.get_job_counts(Q)).values()) == 0
    # Neither the id nor the enqueue sequence advanced.
    job = await backend.add_job(Q, "next")
    assert (job.id, job.enqueued_seq) == ("1", 1)


@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("options", "error"),
    [
        ({"priority": 2**21 + 1}, InvalidPriority),
        ({"priority": True}, InvalidPriority),
        ({"attempts": 0}, InvalidOptions),
        ({"attempts": 1.5}, InvalidOptions),
        ({"lifo": "yes"}, InvalidOptions),
        ({"delay_ms": -1}, InvalidOptions),
        ({"timeout_ms": "5"}, InvalidOptions),
        ({"backoff": {"type": "linear"}}, InvalidOptions),
        ({"backoff": {"type": "fixed", "delay_ms": -5}}, InvalidOptions),
        ({"remove_on_complete": -1}, InvalidOptions),
        ({"remove_on_fail": {"age": 5}}, InvalidOptions),
        ({"unknown": 1}, InvalidOptions),
        ({"job_id": "0:x"}, InvalidJobId),
    ],
)
async def test_invalid_options_write_nothing(
    backend: MemoryBackend, options: dict[str, Any], error: type[Exception]
) -> None:
    with pytest.raises(error):
        await backend.add_job(Q, "a", options=options)
    assert await backend.read_events(Q) == []


@pytest.mark.asyncio
async def test_non_json_payloads_are_refused(backend: MemoryBackend) -> None:
    with pytest.raises(InvalidPayload):
        await backend.add_job(Q, "a", {"x": object()})
    job = await backend.add_job(Q, "a")
    claimed = await claim_one(backend)
    assert claimed is not None
    with pytest.raises(InvalidPayload):
        await backend.complete_job(Q, job.id, claimed.lock_token or "", float("nan"))
    assert await backend.get_job_state(Q, job.id) == "active"


@pytest.mark.asyncio
async def test_options_document_is_stored_as_given(backend: MemoryBackend) -> None:
    opts = JobOptions(attempts=3, backoff=Backoff.fixed(1), timeout=2.5, lifo=True)
    job = await backend.add_job(Q, "a", options=opts)
    assert job.options == opts.to_json()
    assert (job.max_attempts, job.backoff, job.timeout_ms, job.lifo) == (
        3,
        Backoff.fixed(1),
        2500,
        True,
    )


@pytest.mark.asyncio
async def test_snapshots_are_independent_copies(backend: MemoryBackend) -> None:
    data = {"items": [1]}
    job = await backend.add_job(Q, "a", data)
    data["items"].append(2)
    job.data["items"].append(3)
    stored = await backend.get_job(Q, job.id)
    assert stored is not None
    assert stored.data == {"items": [1]}


# ----------------------------------------------------------------- order keys


@pytest.mark.asyncio
async def test_order_keys_and_claim_order(backend: MemoryBackend) -> None:
    f1 = await backend.add_job(Q, "f1", options={"priority": 1})
    l1 = await backend.add_job(Q, "l1", options={"priority": 1, "lifo": True})
    l2 = await backend.add_job(Q, "l2", options={"priority": 1, "lifo": True})
    f2 = await backend.add_job(Q, "f2", options={"priority": 1})
    urgent = await backend.add_job(Q, "u", options={"priority": 0})
    assert f1.order_key == 2**41 + 2**40 + 1
    assert l1.order_key == 2**41 + 2**40 - 2
    claimed = await backend.claim_jobs("w", [QueueDemand(Q, 10)], 30)
    assert [j.name for j in claimed] == ["u", "l2", "l1", "f1", "f2"]
    assert [j.id for j in claimed][1:] == [l2.id, l1.id, f1.id, f2.id]
    assert urgent.enqueued_seq == 5


@pytest.mark.asyncio
async def test_release_goes_to_front_with_fresh_seq(backend: MemoryBackend) -> None:
    await backend.add_job(Q, "x", options={"priority": 5})
    r = await backend.add_job(Q, "r", options={"priority": 5, "job_id": "r"})
    await backend.update_job_priority(Q, "r", 4)  # claim r first, then bring it back to 5
    claimed = await claim_one(backend)
    assert claimed is not None
    assert claimed.id == r.id
    await backend.update_job_priority(Q, r.id, 5)
    await backend.add_job(Q, "y", options={"priority": 5, "lifo": True})
    released = await backend.release_job(Q, r.id, claimed.lock_token or "")
    assert released.order_key == 5 * 2**41
    assert released.enqueued_seq == 5
    assert (released.lock_token, released.lease_expires_at, released.processed_at) == (
        None,
        None,
        None,
    )
    assert released.attempts_started == 1
    again = await claim_one(backend)
    assert again is not None
    assert again.id == "r"


@pytest.mark.asyncio
async def test_update_priority_requeues_only_waiting_jobs(backend: MemoryBackend) -> None:
    a = await backend.add_job(Q, "a")
    d = await backend.add_job(Q, "d", options={"delay_ms": 1000})
    moved = await backend.update_job_priority(Q, a.id, 3, lifo=True)
    assert (moved.priority, moved.lifo, moved.enqueued_seq) == (3, True, 2)
    assert moved.order_key == 3 * 2**41 + 2**40 - 2
    stored = await backend.update_job_priority(Q, d.id, 3)
    assert (stored.priority, stored.order_key, stored.enqueued_seq) == (3, 2**40, None)
    with pytest.raises(InvalidPriority):
        await backend.update_job_priority(Q, a.id, 2**21 + 1)
    assert [e[0] for e in await events(backend)] == ["added", "waiting", "added", "delayed"]


# ----------------------------------------------------------------- claim


@pytest.mark.asyncio
async def test_claim_promotes_in_due_order_and_respects_pause(
    backend: MemoryBackend, clock: Clock
) -> None:
    late = await backend.add_job(Q, "late", options={"delay_ms": 2000})
    early = await backend.add_job(Q, "early", options={"delay_ms": 1000})
    await backend.pause_queue(Q)
    clock.advance(seconds=5)
    assert await backend.claim_jobs("w", [QueueDemand(Q, 5)], 30) == []
    assert await backend.get_job_state(Q, late.id) == "waiting"
    promoted = [e.job_id for e in await backend.read_events(Q) if e.event == "waiting"]
    assert promoted == [early.id, late.id]
    await backend.resume_queue(Q)
    claimed = await backend.claim_jobs("w", [QueueDemand(Q, 5)], timedelta(seconds=10))
    assert [j.id for j in claimed] == [early.id, late.id]
    assert claimed[0].lease_expires_at == clock.now + timedelta(seconds=10)
    assert claimed[0].processed_at == clock.now
    assert claimed[0].lock_token != claimed[1].lock_token


@pytest.mark.asyncio
async def test_claim_total_and_queue_order(backend: MemoryBackend) -> None:
    for queue in ("a", "b"):
        for _ in range(3):
            await backend.add_job(queue, "j")
    demands = [QueueDemand("a", 2), QueueDemand("missing", 5), QueueDemand("b", 5)]
    claimed = await backend.claim_jobs("w", demands, 30, total=3)
    assert [(j.queue, j.id) for j in claimed] == [("a", "1"), ("a", "2"), ("b", "4")]
    assert await backend.claim_jobs("w", [QueueDemand("a", 0)], 30) == []


# ----------------------------------------------------------------- fail and backoff


@pytest.mark.asyncio
async def test_jitter_uses_the_seeded_rng(clock: Clock) -> None:
    backend = MemoryBackend(clock=clock, rng=random.Random(42))
    backoff = Backoff.exponential(base=1, jitter=0.5)
    job = await backend.add_job(Q, "a", options=JobOptions(attempts=3, backoff=backoff))
    claimed = await claim_one(backend)
    assert claimed is not None
    failed = await backend.fail_job(Q, job.id, claimed.lock_token or "", "boom")
    expected = backoff.delay_for(1, random.Random(42).random())
    assert failed.state == "delayed"
    assert failed.available_at == clock.now + timedelta(milliseconds=expected)
    last = (await backend.read_events(Q))[-1]
    assert last.event == "delayed"
    assert last.data == {
        "delay": (failed.available_at - datetime(1970, 1, 1, tzinfo=UTC)) // MS,
        "prev": "active",
        "failedReason": "boom",
    }


@pytest.mark.asyncio
async def test_no_randomness_is_consumed_without_jitter(clock: Clock) -> None:
    rng = random.Random(3)
    before = rng.getstate()
    backend = MemoryBackend(clock=clock, rng=rng)
    job = await backend.add_job(Q, "a", options=JobOptions(attempts=3, backoff=Backoff.fixed(1)))
    claimed = await claim_one(backend)
    assert claimed is not None
    failed = await backend.fail_job(Q, job.id, claimed.lock_token or "", "boom")
    assert failed.available_at == clock.now + timedelta(seconds=1)
    assert rng.getstate() == before


@pytest.mark.asyncio
async def test_fail_paths_and_events(backend: MemoryBackend) -> None:
    job = await backend.add_job(Q, "a", options={"attempts": 2})
    first = await claim_one(backend)
    assert first is not None
    retried = await backend.fail_job(Q, job.id, first.lock_token or "", "r1", stacktrace="x\ny")
    assert (retried.state, retried.attempts_made, retried.enqueued_seq) == ("waiting", 1, 2)
    assert retried.stacktrace == ["x\ny"]
    assert retried.worker_id == "w1"
    assert retried.lock_token is None
    second = await claim_one(backend)
    assert second is not None
    final = await backend.fail_job(Q, job.id, second.lock_token or "", "r2")
    assert (final.state, final.attempts_made, final.failed_reason) == ("failed", 2, "r2")
    assert final.finished_at is not None
    assert await events(backend) == [
        ("added", "1", {"name": "a"}),
        ("waiting", "1", {}),
        ("active", "1", {"prev": "waiting"}),
        ("waiting", "1", {"prev": "active"}),
        ("active", "1", {"prev": "waiting"}),
        ("failed", "1", {"prev": "active", "failedReason": "r2"}),
        ("retries-exhausted", "1", {"attemptsMade": 2}),
        ("drained", None, {}),
    ]


@pytest.mark.asyncio
async def test_discard_retry_skips_retries_exhausted(backend: MemoryBackend) -> None:
    job = await backend.add_job(Q, "a", options={"attempts": 3})
    claimed = await claim_one(backend)
    assert claimed is not None
    failed = await backend.fail_job(Q, job.id, claimed.lock_token or "", "no", discard_retry=True)
    assert failed.state == "failed"
    assert [e[0] for e in await events(backend)][-2:] == ["failed", "drained"]


# ----------------------------------------------------------------- tokens and batches


@pytest.mark.asyncio
async def test_token_checks_and_batch_outcomes(backend: MemoryBackend) -> None:
    a = await backend.add_job(Q, "a")
    b = await backend.add_job(Q, "b", options={"attempts": 2})
    claimed = await backend.claim_jobs("w", [QueueDemand(Q, 2)], 30)
    token_a, token_b = (j.lock_token or "" for j in claimed)
    with pytest.raises(LockMismatch):
        await backend.complete_job(Q, a.id, token_b)
    with pytest.raises(LockMismatch):
        await backend.complete_job(Q, a.id, "not-a-uuid")
    with pytest.raises(JobNotFound):
        await backend.complete_job(Q, "nope", token_a)
    outcomes = await backend.complete_jobs(
        [Completion(Q, a.id, token_a, 1), Completion(Q, a.id, token_a), Completion(Q, "z", "t")]
    )
    assert outcomes == [
        FinalizeOutcome(Q, a.id, "ok", "completed"),
        FinalizeOutcome(Q, a.id, "lock_mismatch", None),
        FinalizeOutcome(Q, "z", "not_found", None),
    ]
    assert await backend.fail_jobs([Failure(Q, b.id, token_b, "x")]) == [
        FinalizeOutcome(Q, b.id, "ok", "waiting")
    ]


@pytest.mark.asyncio
async def test_complete_with_retention_true_reports_completed(backend: MemoryBackend) -> None:
    job = await backend.add_job(Q, "a", options={"remove_on_complete": True})
    claimed = await claim_one(backend)
    assert claimed is not None
    done = await backend.complete_job(Q, job.id, claimed.lock_token or "", {"r": 1})
    assert (done.state, done.return_value) == ("completed", {"r": 1})
    assert await backend.get_job(Q, job.id) is None
    assert [e[0] for e in await events(backend)][-2:] == ["completed", "drained"]


@pytest.mark.asyncio
async def test_renew_leases_reports_failures(backend: MemoryBackend, clock: Clock) -> None:
    job = await backend.add_job(Q, "a")
    claimed = await claim_one(backend, lease=1)
    assert claimed is not None
    good = LeaseRef(Q, job.id, claimed.lock_token or "")
    bad = LeaseRef(Q, job.id, "00000000-0000-0000-0000-000000000000")
    clock.advance(seconds=5)  # an expired lease with the current token still renews
    assert await backend.renew_leases([good, bad, LeaseRef(Q, "x", "t")], 10) == [
        bad,
        LeaseRef(Q, "x", "t"),
    ]
    stored = await backend.get_job(Q, job.id)
    assert stored is not None
    assert stored.lease_expires_at == clock.now + timedelta(seconds=10)


# ----------------------------------------------------------------- stalled


@pytest.mark.asyncio
async def test_stalled_requeue_then_terminal(backend: MemoryBackend, clock: Clock) -> None:
    job = await backend.add_job(Q, "a", options={"attempts": 5})
    await claim_one(backend, lease=1)
    clock.advance(seconds=1)
    assert await backend.recover_stalled() == []  # lease_expires_at == now is not expired
    clock.advance(seconds=1)
    [outcome] = await backend.recover_stalled([Q])
    assert outcome.state == "waiting"
    await claim_one(backend, lease=1)
    clock.advance(seconds=2)
    [outcome] = await backend.recover_stalled()
    assert outcome.state == "failed"
    stored = await backend.get_job(Q, job.id)
    assert stored is not None
    assert (stored.stalled_count, stored.attempts_started, stored.attempts_made) == (2, 2, 0)
    assert stored.failed_reason == "job stalled more than allowable limit"
    assert [e[0] for e in await events(backend)][-4:] == [
        "active",
        "stalled",
        "failed",
        "drained",
    ]


# ----------------------------------------------------------------- retention


async def finish(backend: MemoryBackend, clock: Clock, options: dict[str, Any]) -> str:
    job = await backend.add_job(Q, "a", options=options)
    claimed = await claim_one(backend)
    assert claimed is not None
    await backend.complete_job(Q, job.id, claimed.lock_token or "")
    clock.advance(seconds=1)
    return job.id


@pytest.mark.asyncio
async def test_retention_count_keeps_newest(backend: MemoryBackend, clock: Clock) -> None:
    ids = [await finish(backend, clock, {}) for _ in range(3)]
    ids.append(await finish(backend, clock, {"remove_on_complete": 2}))
    page = await backend.list_jobs(Q, ["completed"])
    assert [j.id for j in page.items] == ids[-2:]


@pytest.mark.asyncio
async def test_retention_age_with_limit(backend: MemoryBackend, clock: Clock) -> None:
    ids = [await finish(backend, clock, {}) for _ in range(3)]
    policy = JobOptions(remove_on_complete=JobRetention(age_ms=1500, limit=1)).to_json()
    ids.append(await finish(backend, clock, policy))
    page = await backend.list_jobs(Q, ["completed"])
    assert [j.id for j in page.items] == ids[1:]  # only the oldest one went


# ----------------------------------------------------------------- management


@pytest.mark.asyncio
async def test_remove_respects_valid_lease(backend: MemoryBackend, clock: Clock) -> None:
    job = await backend.add_job(Q, "a")
    await claim_one(backend, lease=1)
    with pytest.raises(JobLocked):
        await backend.remove_job(Q, job.id)
    clock.advance(seconds=2)
    assert await backend.remove_job(Q, job.id) is True
    assert await backend.remove_job(Q, job.id) is False
    assert (await events(backend))[-1] == ("removed", job.id, {"prev": "active"})


@pytest.mark.asyncio
async def test_state_conflicts(backend: MemoryBackend) -> None:
    job = await backend.add_job(Q, "a")
    with pytest.raises(JobStateConflict):
        await backend.promote_job(Q, job.id)
    with pytest.raises(JobStateConflict):
        await backend.reschedule_job(Q, job.id, 5)
    with pytest.raises(JobStateConflict):
        await backend.retry_job(Q, job.id)
    with pytest.raises(JobNotFound):
        await backend.promote_job(Q, "missing")


@pytest.mark.asyncio
async def test_retry_resets_and_requeues(backend: MemoryBackend) -> None:
    job = await backend.add_job(Q, "a")
    claimed = await claim_one(backend)
    assert claimed is not None
    await backend.fail_job(Q, job.id, claimed.lock_token or "", "bad", stacktrace="t")
    retried = await backend.retry_job(Q, job.id)
    assert (retried.state, retried.failed_reason, retried.stacktrace) == ("waiting", None, [])
    assert (retried.attempts_made, retried.attempts_started, retried.finished_at) == (0, 0, None)
    assert retried.worker_id == "w1"
    assert (await events(backend))[-1] == ("waiting", job.id, {"prev": "failed"})


@pytest.mark.asyncio
async def test_logs_follow_lrange(backend: MemoryBackend) -> None:
    job = await backend.add_job(Q, "a")
    for i in range(5):
        await backend.add_job_log(Q, job.id, f"m{i}")
    assert messages(await backend.get_job_logs(Q, job.id, 0, 1)) == ["m0", "m1"]
    assert messages(await backend.get_job_logs(Q, job.id, 0, 1, asc=False)) == ["m4", "m3"]
    assert messages(await backend.get_job_logs(Q, job.id, -2, -1)) == ["m3", "m4"]
    assert messages(await backend.get_job_logs(Q, job.id, 3, 100)) == ["m3", "m4"]
    assert (await backend.get_job_logs(Q, job.id, 4, 2)).count == 5
    assert await backend.add_job_log(Q, job.id, "m5", keep=3) == 3
    await backend.clear_job_logs(Q, job.id, keep=2)
    assert messages(await backend.get_job_logs(Q, job.id)) == ["m4", "m5"]
    assert (await backend.get_job_logs(Q, "missing")).count == 0
    assert [e[0] for e in await events(backend)] == ["added", "waiting"]


@pytest.mark.asyncio
async def test_read_events_bounds(backend: MemoryBackend) -> None:
    await backend.add_job(Q, "a")
    await backend.add_job(Q, "b")
    all_events = await backend.read_events(Q)
    ids = [e.id for e in all_events]
    assert ids == sorted(ids)
    assert len(ids) == 4
    assert [e.id for e in await backend.read_events(Q, ids[1], str(ids[2]))] == ids[1:3]
    assert len(await backend.read_events(Q, "-", "+", limit=3)) == 3
    assert await backend.read_events("unknown") == []
    with pytest.raises(InvalidOptions):
        await backend.read_events(Q, "x")


@pytest.mark.asyncio
async def test_counts_and_listing(backend: MemoryBackend) -> None:
    await backend.add_job(Q, "d", options={"delay_ms": 10_000})
    for _ in range(3):
        await backend.add_job(Q, "w")
    assert await backend.get_job_counts(Q, ["waiting", "waiting", "delayed"]) == {
        "waiting": 3,
        "delayed": 1,
    }
    page = await backend.list_jobs(Q, ["delayed", "waiting"], descending=True, offset=1, limit=2)
    assert (page.total, [j.id for j in page.items]) == (4, ["4", "3"])
    assert await backend.get_job_counts("unknown") == dict.fromkeys(
        ("waiting", "delayed", "active", "waiting-children", "completed", "failed"), 0
    )
    assert await backend.is_queue_paused("unknown") is False
