"""The queues a worker serves (``Lane``): a queue with its priority and concurrency bounds."""

from __future__ import annotations

from dataclasses import dataclass

from lane_pg.errors import (
    InvalidOptions,
)
from lane_pg.types.base import validate_queue_name


@dataclass(frozen=True, slots=True)
class Lane:
    """A queue a worker serves, with its priority (0 first) and concurrency bounds.

    ``max_concurrency=None`` lets the lane use every free slot of the worker.
    ``min_concurrency`` is advisory (slots kept warm, never preemption).
    """

    name: str
    priority: int = 0
    max_concurrency: int | None = None
    min_concurrency: int = 0
    pause_as: str | None = None
    """For a lane served because a queue the worker was started on is forwarded here
    (ROUTE-5): that queue, whose pause decides for this lane (PAUSE-8); None: its own."""

    def __post_init__(self) -> None:
        validate_queue_name(self.name)
        if self.pause_as is not None:
            validate_queue_name(self.pause_as)
        if self.priority < 0:
            raise InvalidOptions(f"lane {self.name!r}: priority must be >= 0")
        if self.max_concurrency is not None and self.max_concurrency < 1:
            raise InvalidOptions(f"lane {self.name!r}: max_concurrency must be >= 1")
        if self.min_concurrency < 0 or (
            self.max_concurrency is not None and self.min_concurrency > self.max_concurrency
        ):
            raise InvalidOptions(f"lane {self.name!r}: need 0 <= min_concurrency <= max")


# LANE-1: the default lanes (priority 0 is served first).
DEFAULT_LANES: tuple[Lane, ...] = (
    Lane("system", 0, 5, 1),
    Lane("control", 1, 3, 1),
    Lane("query", 2, 10, 1),
    Lane("session", 3, 5, 1),
    Lane("skill", 4, 3, 1),
    Lane("prompt", 5, 2, 1),
)
