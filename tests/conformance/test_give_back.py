"""``give_back_job``: a claim handed back without running, its attempt given back (A2, A14;
the worker's ``on_unknown_job="release"`` and a driver's ``Release`` use it)."""

from __future__ import annotations

import pytest

from lane_pg.backend import JobQueueBackend
from lane_pg.errors import LockMismatch, ValidationError
from lane_pg.types import JobOptions, QueueDemand
from tests.conformance.test_finish import claim_all, other_token, token
from tests.helpers import Clock, epoch_ms, job_event_list, queue_snapshot


async def test_give_back_waits_at_the_front_with_its_attempt_restored_A14(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    added = await backend.add_job(queue_name, "n", now=clock.at(0))
    behind = await backend.add_job(queue_name, "n", now=clock.at(0.5))
    [active] = await claim_all(backend, queue_name, clock, 1)
    assert (active.id, active.attempts_started) == (added.id, 1)

    given = await backend.give_back_job(queue_name, added.id, token(active), now=clock.at(2))

    assert (given.state, given.lock_token, given.lease_expires_at) == ("waiting", None, None)
    assert (given.attempts_started, given.attempts_made, given.stalled_count) == (0, 0, 0)
    assert await backend.get_job(queue_name, added.id) == given
    assert (await job_event_list(backend, queue_name, added.id))[-1] == (
        "waiting",
        {"prev": "active"},
    )
    [again] = await claim_all(backend, queue_name, clock, 3)
    assert (again.id, again.attempts_started) == (added.id, 1)  # still before `behind`
    assert behind.id != again.id


async def test_give_back_with_a_delay_is_delayed_A14(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    added = await backend.add_job(queue_name, "n", now=clock.at(0))
    [active] = await claim_all(backend, queue_name, clock, 1)

    given = await backend.give_back_job(queue_name, added.id, token(active), 5, now=clock.at(2))

    assert (given.state, given.available_at, given.attempts_started) == (
        "delayed",
        clock.at(7),
        0,
    )
    assert (await job_event_list(backend, queue_name, added.id))[-1] == (
        "delayed",
        {"delay": epoch_ms(clock.at(7)), "prev": "active"},
    )
    demand = [QueueDemand(queue_name, 1)]
    assert await backend.claim_jobs("w", demand, 30, now=clock.at(6.9)) == []
    [again] = await backend.claim_jobs("w", demand, 30, now=clock.at(7))
    assert (again.id, again.attempts_started) == (added.id, 1)


async def test_bouncing_never_spends_the_budget_A2_STALL_7(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    """A one-attempt job claimed and given back five times is still on its first try."""
    added = await backend.add_job(queue_name, "n", None, JobOptions(attempts=1), now=clock.at(0))
    for round_number in range(5):
        [active] = await claim_all(backend, queue_name, clock, 1 + round_number)
        assert active.attempts_started == 1
        await backend.give_back_job(
            queue_name, added.id, token(active), now=clock.at(1.5 + round_number)
        )
    stored = await backend.get_job(queue_name, added.id)
    assert stored is not None
    assert (stored.state, stored.attempts_started, stored.max_attempts) == ("waiting", 0, 1)


async def test_give_back_refusals_change_nothing_A14_CLAIM_4(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    added = await backend.add_job(queue_name, "n", now=clock.at(0))
    [active] = await claim_all(backend, queue_name, clock, 1)
    before = await queue_snapshot(backend, queue_name)
    with pytest.raises(LockMismatch):
        await backend.give_back_job(queue_name, added.id, other_token(), now=clock.at(2))
    with pytest.raises(ValidationError):
        await backend.give_back_job(queue_name, added.id, token(active), -1, now=clock.at(2))
    assert await backend.get_job(queue_name, added.id) == active
    assert await queue_snapshot(backend, queue_name) == before
