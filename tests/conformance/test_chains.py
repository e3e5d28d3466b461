"""CHAIN: a chain's next link is added in the operation that completes the one before it,
fenced by the lock token; a link that fails for good ends the chain and enqueues its catch
once (CHAIN-1, -2, -4, -7)."""

from __future__ import annotations

import uuid

import pytest

from lane_pg.backend import JobQueueBackend
from lane_pg.errors import LockMismatch, ValidationError
from lane_pg.types import (
    CHAIN_CALLBACK_JOB,
    CHAIN_CATCH_RETRY,
    Completion,
    JobRow,
    QueueDemand,
    QueuedSpec,
)
from tests.helpers import Clock


def links(queue: str, *names: str, **options: object) -> list[QueuedSpec]:
    return [QueuedSpec(queue, name, {"step": name}, dict(options) or None) for name in names]


async def claim(backend: JobQueueBackend, queue: str, clock: Clock, at: float) -> JobRow:
    [job] = await backend.runs.claim_jobs("w", [QueueDemand(queue, 1)], 30, now=clock.at(at))
    return job


async def test_links_run_one_after_another_CHAIN_1(
    backend: JobQueueBackend, queue_name: str, queue_b: str, clock: Clock
) -> None:
    chain_id = uuid.uuid4().hex
    steps = [QueuedSpec(queue_name, "fetch", 1), QueuedSpec(queue_b, "transform", 2),
             QueuedSpec(queue_name, "upload", 3, {"attempts": 4})]  # fmt: skip
    head = await backend.jobs.add_chain(chain_id, steps, now=clock.at(0))
    assert (head.id, head.name, head.state) == (f"{chain_id}-0", "fetch", "waiting")
    assert head.options["chain"]["index"] == 0  # type: ignore[index]
    assert await backend.jobs.get_job(queue_b, f"{chain_id}-1") is None

    fetch = await claim(backend, queue_name, clock, 1)
    await backend.runs.complete_job(
        queue_name, fetch.id, fetch.lock_token or "", "x", now=clock.at(2)
    )
    transform = await backend.jobs.get_job(queue_b, f"{chain_id}-1")
    assert transform is not None
    assert (transform.name, transform.data, transform.state) == ("transform", 2, "waiting")
    assert transform.attempts_started == 0 and transform.created_at == clock.at(2)

    transform = await claim(backend, queue_b, clock, 3)
    await backend.runs.complete_jobs(
        [Completion(queue_b, transform.id, transform.lock_token or "", None)], now=clock.at(4)
    )
    upload = await backend.jobs.get_job(queue_name, f"{chain_id}-2")
    assert upload is not None and upload.max_attempts == 4
    assert upload.options["chain"]["links"] == []  # type: ignore[index]

    upload = await claim(backend, queue_name, clock, 5)
    await backend.runs.complete_job(
        queue_name, upload.id, upload.lock_token or "", None, now=clock.at(6)
    )
    assert await backend.reads.get_job_count(queue_name, ["waiting", "delayed"]) == 0
    assert await backend.reads.get_job_count(queue_b, ["waiting", "delayed"]) == 0


async def test_a_link_delay_counts_from_the_completion_CHAIN_2(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    chain_id = uuid.uuid4().hex
    steps = [QueuedSpec(queue_name, "a"), QueuedSpec(queue_name, "b", None, {"delay_ms": 2000})]
    await backend.jobs.add_chain(chain_id, steps, now=clock.at(0))
    a = await claim(backend, queue_name, clock, 10)
    await backend.runs.complete_job(queue_name, a.id, a.lock_token or "", None, now=clock.at(20))

    b = await backend.jobs.get_job(queue_name, f"{chain_id}-1")
    assert b is not None and b.state == "delayed" and b.available_at == clock.at(22)


async def test_a_stale_completion_adds_no_link_CHAIN_4(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    chain_id = uuid.uuid4().hex
    await backend.jobs.add_chain(chain_id, links(queue_name, "a", "b"), now=clock.at(0))
    a = await claim(backend, queue_name, clock, 1)
    with pytest.raises(LockMismatch):
        await backend.runs.complete_job(queue_name, a.id, str(uuid.uuid4()), None, now=clock.at(2))
    [outcome] = await backend.runs.complete_jobs(
        [Completion(queue_name, a.id, str(uuid.uuid4()), None)], now=clock.at(2)
    )
    assert outcome.status == "lock_mismatch"
    assert await backend.jobs.get_job(queue_name, f"{chain_id}-1") is None


async def test_a_failed_link_ends_the_chain_and_catches_once(
    backend: JobQueueBackend, queue_name: str, queue_b: str, clock: Clock
) -> None:
    chain_id = uuid.uuid4().hex
    await backend.jobs.add_chain(
        chain_id, links(queue_name, "a", "b", "c", attempts=2), catch="alert", catch_queue=queue_b,
        now=clock.at(0),
    )  # fmt: skip
    a = await claim(backend, queue_name, clock, 1)
    await backend.runs.complete_job(queue_name, a.id, a.lock_token or "", None, now=clock.at(2))
    b = await claim(backend, queue_name, clock, 3)
    await backend.runs.fail_job(queue_name, b.id, b.lock_token or "", "first", now=clock.at(4))
    assert await backend.jobs.get_job(queue_b, f"chain-{chain_id}-catch") is None  # a retry
    b = await claim(backend, queue_name, clock, 10)
    assert b.id == f"{chain_id}-1" and b.attempts_started == 2
    await backend.runs.fail_job(queue_name, b.id, b.lock_token or "", "second", now=clock.at(11))

    catch = await backend.jobs.get_job(queue_b, f"chain-{chain_id}-catch")
    assert catch is not None and catch.name == CHAIN_CALLBACK_JOB
    # Retried like a job class: a worker dying while it runs must not lose the callback.
    assert catch.max_attempts == CHAIN_CATCH_RETRY["attempts"]
    assert catch.backoff is not None and catch.backoff.to_json() == CHAIN_CATCH_RETRY["backoff"]
    assert catch.data == {
        "chain_id": chain_id, "kind": "catch", "callback": "alert", "error": "second",
        "queue": queue_name, "job_id": b.id, "name": "b",
    }  # fmt: skip
    assert await backend.jobs.get_job(queue_name, f"{chain_id}-2") is None
    assert await backend.reads.get_job_count(queue_b) == 1


async def test_a_removed_link_ends_the_chain_quietly(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    chain_id = uuid.uuid4().hex
    head = await backend.jobs.add_chain(
        chain_id, links(queue_name, "a", "b"), catch="alert", now=clock.at(0)
    )
    assert await backend.jobs.remove_job(queue_name, head.id, now=clock.at(1))
    assert await backend.reads.get_job_count(queue_name) == 0


async def test_a_chain_link_that_stalls_out_catches_once(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    chain_id = uuid.uuid4().hex
    links = [QueuedSpec(queue_name, "a"), QueuedSpec(queue_name, "b")]
    await backend.jobs.add_chain(chain_id, links, catch="alert", now=clock.at(0))
    head = await claim(backend, queue_name, clock, 1)
    await backend.maintenance.recover_stalled([queue_name], max_stalled_count=0, now=clock.at(40))
    catch = await backend.jobs.get_job(queue_name, f"chain-{chain_id}-catch")
    assert catch is not None and catch.data["job_id"] == head.id  # type: ignore[index]
    assert await backend.jobs.get_job(queue_name, f"{chain_id}-1") is None


@pytest.mark.parametrize(
    ("chain_id", "options", "catch"),
    [
        ("123", {}, None),
        ("has space", {}, None),
        ("ok", {"job_id": "mine"}, None),
        ("ok", {"repeat": {"every": 1000}}, None),
        ("ok", {"attempts": 0}, None),
        ("ok", {}, ""),
    ],
)
async def test_a_refused_chain_stores_nothing_CHAIN_7(
    backend: JobQueueBackend,
    queue_name: str,
    clock: Clock,
    chain_id: str,
    options: dict[str, object],
    catch: str | None,
) -> None:
    steps = [QueuedSpec(queue_name, "a"), QueuedSpec(queue_name, "b", None, options or None)]
    with pytest.raises(ValidationError):
        await backend.jobs.add_chain(chain_id, steps, catch=catch, now=clock.at(0))
    with pytest.raises(ValidationError):
        await backend.jobs.add_chain(uuid.uuid4().hex, [], now=clock.at(0))
    assert await backend.reads.get_job_count(queue_name) == 0
