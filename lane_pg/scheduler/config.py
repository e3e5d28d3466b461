"""Lane configuration (LCFG): concurrency, timeout, retry, pressure, rate limit, boost.

Every config is a frozen dataclass. Durations are given as a ``timedelta`` or a number of
seconds and are stored as float seconds, so ``LaneConfig(timeout=timedelta(seconds=30))``
equals ``LaneConfig().with_timeout(30)`` (LCFG-8).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from datetime import timedelta

from lane_pg.scheduler.errors import InvalidLaneConfig
from lane_pg.types import Duration, RetryPolicy


def to_seconds(value: Duration, what: str) -> float:
    """A duration as float seconds; negative, NaN and infinite durations are refused."""
    if isinstance(value, timedelta):
        result = value.total_seconds()
    elif isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidLaneConfig(f"{what} must be a timedelta or a number of seconds: {value!r}")
    else:
        result = float(value)
    if not math.isfinite(result) or result < 0:
        raise InvalidLaneConfig(f"{what} must be a finite, non-negative duration: {value!r}")
    return result


def _check_int(value: object, what: str, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidLaneConfig(f"{what} must be an integer, got {value!r}")
    if value < minimum:
        raise InvalidLaneConfig(f"{what} must be at least {minimum}, got {value}")
    return value


@dataclass(frozen=True, slots=True)
class RateLimitConfig:
    """At most ``max_starts`` command starts in any sliding ``window`` (LCFG-6).

    Enforced when the scheduler dequeues, never at submit; every attempt (retries too)
    counts as a start. ``max_starts=None`` is unlimited.
    """

    max_starts: int | None = None
    window: Duration = 1.0

    def __post_init__(self) -> None:
        if self.max_starts is not None:
            _check_int(self.max_starts, "rate limit", 1)
        window = to_seconds(self.window, "rate limit window")
        if window <= 0:
            raise InvalidLaneConfig("rate limit window must be positive")
        object.__setattr__(self, "window", window)

    @classmethod
    def per_second(cls, n: int) -> RateLimitConfig:
        return cls(n, 1.0)

    @classmethod
    def per_minute(cls, n: int) -> RateLimitConfig:
        return cls(n, 60.0)

    @classmethod
    def per_hour(cls, n: int) -> RateLimitConfig:
        return cls(n, 3600.0)

    @classmethod
    def unlimited(cls) -> RateLimitConfig:
        return cls(None, 1.0)

    @property
    def window_seconds(self) -> float:
        return to_seconds(self.window, "rate limit window")


# LCFG-7: (fraction of the deadline still remaining, boost in priority levels).
_STANDARD_STEPS: tuple[tuple[float, int], ...] = ((0.75, 1), (0.5, 2), (0.25, 3))
# A15: "aggressive" starts earlier and climbs two levels per step.
_AGGRESSIVE_STEPS: tuple[tuple[float, int], ...] = ((0.9, 2), (0.75, 4), (0.5, 6), (0.25, 8))


@dataclass(frozen=True, slots=True)
class PriorityBoostConfig:
    """Raises a waiting command's effective priority as its deadline nears (LCFG-7).

    A command that has waited ``w`` has ``(deadline - w) / deadline`` of its deadline
    remaining; each step whose fraction is reached subtracts its boost from the lane's
    priority number (lower is served first; the result may go below 0).
    """

    deadline: Duration | None = None
    steps: tuple[tuple[float, int], ...] = ()

    def __post_init__(self) -> None:
        if self.deadline is None:
            return
        deadline = to_seconds(self.deadline, "boost deadline")
        if deadline <= 0:
            raise InvalidLaneConfig("boost deadline must be positive")
        object.__setattr__(self, "deadline", deadline)
        for fraction, boost in self.steps:
            if not 0.0 <= fraction <= 1.0:
                raise InvalidLaneConfig(f"boost step fraction must be within 0..1: {fraction}")
            _check_int(boost, "boost step", 0)

    @classmethod
    def standard(cls, deadline: Duration) -> PriorityBoostConfig:
        """One level at 75%, two at 50%, three at 25% of the deadline remaining."""
        return cls(deadline, _STANDARD_STEPS)

    @classmethod
    def aggressive(cls, deadline: Duration) -> PriorityBoostConfig:
        """Two levels at 90%, four at 75%, six at 50%, eight at 25% remaining (A15)."""
        return cls(deadline, _AGGRESSIVE_STEPS)

    @classmethod
    def disabled(cls) -> PriorityBoostConfig:
        return cls(None, ())

    @property
    def enabled(self) -> bool:
        return self.deadline is not None and bool(self.steps)

    def boost_for(self, waited: float) -> int:
        """The boost, in priority levels, of a command that has waited ``waited`` seconds."""
        if self.deadline is None or not self.steps:
            return 0
        deadline = to_seconds(self.deadline, "boost deadline")
        remaining = max(deadline - waited, 0.0) / deadline
        boost = 0
        for fraction, level in self.steps:
            if remaining <= fraction:
                boost = max(boost, level)
        return boost


@dataclass(frozen=True, slots=True)
class LaneConfig:
    """One lane's configuration (LANE-2, LCFG).

    ``min_concurrency`` is validated and reported but reserves nothing: an asyncio task is
    created per dispatched command, so there are no worker slots to keep warm (A15).
    """

    min_concurrency: int = 1
    max_concurrency: int = 1
    timeout: Duration | None = None
    retry_policy: RetryPolicy = RetryPolicy()  # noqa: RUF009 - frozen: one shared value is safe
    pressure_threshold: int | None = None
    rate_limit: RateLimitConfig = RateLimitConfig()
    priority_boost: PriorityBoostConfig = PriorityBoostConfig()

    def __post_init__(self) -> None:
        _check_int(self.max_concurrency, "max_concurrency", 1)
        _check_int(self.min_concurrency, "min_concurrency", 0)
        if self.min_concurrency > self.max_concurrency:
            raise InvalidLaneConfig(
                f"min_concurrency ({self.min_concurrency}) must not exceed"
                f" max_concurrency ({self.max_concurrency})"
            )
        if self.timeout is not None:
            timeout = to_seconds(self.timeout, "timeout")
            if timeout <= 0:
                raise InvalidLaneConfig("timeout must be positive")
            object.__setattr__(self, "timeout", timeout)
        if self.pressure_threshold is not None:
            _check_int(self.pressure_threshold, "pressure_threshold", 1)
        for name, kind in (
            ("retry_policy", RetryPolicy),
            ("rate_limit", RateLimitConfig),
            ("priority_boost", PriorityBoostConfig),
        ):
            if not isinstance(getattr(self, name), kind):
                raise InvalidLaneConfig(f"{name} must be a {kind.__name__}")

    @property
    def timeout_seconds(self) -> float | None:
        return None if self.timeout is None else to_seconds(self.timeout, "timeout")

    def with_concurrency(self, min_concurrency: int, max_concurrency: int) -> LaneConfig:
        return replace(self, min_concurrency=min_concurrency, max_concurrency=max_concurrency)

    def with_timeout(self, timeout: Duration | None) -> LaneConfig:
        return replace(self, timeout=timeout)

    def with_retry_policy(self, retry_policy: RetryPolicy) -> LaneConfig:
        return replace(self, retry_policy=retry_policy)

    def with_pressure_threshold(self, threshold: int | None) -> LaneConfig:
        return replace(self, pressure_threshold=threshold)

    def with_rate_limit(self, rate_limit: RateLimitConfig) -> LaneConfig:
        return replace(self, rate_limit=rate_limit)

    def with_priority_boost(self, priority_boost: PriorityBoostConfig) -> LaneConfig:
        return replace(self, priority_boost=priority_boost)
