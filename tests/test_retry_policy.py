"""``RetryPolicy`` (RETRY-2) and the typed failure errors (RETRY-9), without a database.

The stored side (a policy's options equal the spelled-out ones on every backend) is in
tests/conformance/test_worker_modes.py.
"""

from __future__ import annotations

from datetime import timedelta

import pytest

import lane_pg
from lane_pg.errors import (
    JobTimedOut,
    LaneError,
    ManuallyFailed,
    MaxAttemptsExceeded,
    TimeoutExceeded,
)
from lane_pg.types import Backoff, JobOptions, RetryPolicy


def test_shorthands_RETRY_2() -> None:
    exponential = RetryPolicy.exponential(3)
    assert exponential.max_attempts == 4
    assert exponential.backoff == Backoff("exponential", base_ms=100, cap_ms=30_000, jitter=0.0)
    assert [exponential.backoff.delay_for(n) for n in (1, 2, 3, 10)] == [100, 200, 400, 30_000]
    fixed = RetryPolicy.fixed(3, timedelta(seconds=1))
    assert (fixed.max_attempts, fixed.backoff) == (4, Backoff.fixed(1))
    none = RetryPolicy.none()
    assert (none.retries, none.max_attempts, none.backoff) == (0, 1, None)


def test_a_policy_is_the_attempts_and_backoff_options_RETRY_2() -> None:
    assert JobOptions(retry=RetryPolicy.fixed(3, 1)).to_json() == {
        "attempts": 4,
        "backoff": {"type": "fixed", "delay_ms": 1000},
    }
    assert (
        JobOptions(retry=RetryPolicy.exponential(2)).to_json()
        == JobOptions(attempts=3, backoff=Backoff.exponential(0.1, cap=30)).to_json()
    )
    assert JobOptions(retry=RetryPolicy.none()).to_json() == {}  # the default: one try


@pytest.mark.parametrize(
    "options",
    [
        JobOptions(retry=RetryPolicy.none(), attempts=2),
        JobOptions(retry=RetryPolicy.fixed(1, 1), backoff=Backoff.fixed(2)),
    ],
)
def test_a_policy_and_attempts_or_backoff_are_refused_together_RETRY_2(
    options: JobOptions,
) -> None:
    with pytest.raises(lane_pg.InvalidOptions, match="not both"):
        options.to_json()


@pytest.mark.parametrize("retries", [-1, True, 1.5, 2**31 - 1])
def test_retries_must_be_a_count_RETRY_2(retries: object) -> None:
    with pytest.raises(lane_pg.InvalidOptions, match="retries"):
        RetryPolicy(retries)  # type: ignore[arg-type]


def test_typed_failure_errors_RETRY_9() -> None:
    exhausted = MaxAttemptsExceeded("send", 3, "boom")
    assert (exhausted.job_name, exhausted.attempts, exhausted.reason) == ("send", 3, "boom")
    assert str(exhausted).startswith("MaxAttemptsExceeded: job send")
    assert exhausted.sqlstate == "LN019"

    timed_out = TimeoutExceeded("send", 0.5)
    assert (timed_out.job_name, timed_out.timeout) == ("send", 0.5)
    assert isinstance(timed_out, JobTimedOut)  # a kind of timeout: same code, LN017
    assert timed_out.sqlstate == "LN017"
    assert str(timed_out).startswith("TimeoutExceeded: job send")

    manual = ManuallyFailed("send", "operator said so")
    assert (manual.job_name, manual.reason) == ("send", "operator said so")
    assert manual.sqlstate == "LN020"
    for error in (exhausted, timed_out, manual):
        assert isinstance(error, LaneError)
    assert lane_pg.MaxAttemptsExceeded is MaxAttemptsExceeded
    assert lane_pg.TimeoutExceeded is TimeoutExceeded
    assert lane_pg.ManuallyFailed is ManuallyFailed
    assert lane_pg.RetryPolicy is RetryPolicy
