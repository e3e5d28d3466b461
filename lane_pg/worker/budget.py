"""``ClaimBudget``: ``max_jobs`` (CLI-5) for one worker or for several that share it (the
workers of a failover connection, one per store, under one ``--max-jobs``).

A claim reserves its room before it goes out and settles what it got, so two claims in
flight at once never take more than the limit together. Once the limit is claimed, every
``on_spent`` callback runs (each sharing worker's ``stop``): the claimed jobs finish and
their outcomes are written, nothing more is claimed.
"""

from __future__ import annotations

from collections.abc import Callable

from lane_pg.errors import InvalidOptions


class ClaimBudget:
    """At most ``limit`` claimed jobs over every worker that shares this budget."""

    def __init__(self, limit: int) -> None:
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise InvalidOptions(f"max_jobs must be None or a count >= 1, got {limit!r}")
        self.limit = limit
        self.claimed = 0
        self._reserved = 0
        self._on_spent: list[Callable[[], None]] = []

    @property
    def spent(self) -> bool:
        return self.claimed >= self.limit

    def on_spent(self, callback: Callable[[], None]) -> None:
        """Call ``callback`` once the limit is claimed."""
        self._on_spent.append(callback)

    def reserve(self, wanted: int) -> int:
        """Room for a claim of up to ``wanted`` jobs: what the limit leaves after the jobs
        claimed and the room other claims in flight hold (0: claim nothing now)."""
        room = max(0, min(wanted, self.limit - self.claimed - self._reserved))
        self._reserved += room
        return room

    def settle(self, reserved: int, claimed: int) -> None:
        """A claim that reserved ``reserved`` took ``claimed`` jobs (or raised: 0)."""
        self._reserved -= reserved
        spent_before = self.spent
        self.claimed += claimed
        if self.spent and not spent_before:
            for callback in list(self._on_spent):
                callback()
