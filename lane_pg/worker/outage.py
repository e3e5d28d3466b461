"""``Outage``: retrying a store that cannot be reached, with backoff, logged once per
transition (down, then up again), never once per attempt."""

from __future__ import annotations

import logging

from lane_pg.types.workers import jittered


class Outage:
    """The retry schedule and log lines of one thing that keeps failing (a worker's claims,
    a failover connection that cannot be opened).

    ``failed`` returns how long to wait before the next attempt: ``first`` seconds, doubled
    per failure up to ``cap``, each wait jittered down by up to half (``jittered``). The
    first failure of an outage is logged as a warning and the others at debug level;
    ``succeeded`` ends the outage with one info line."""

    def __init__(self, what: str, log: logging.Logger, *, first: float, cap: float) -> None:
        self.what = what
        self._log = log
        self._first = first
        self._cap = max(cap, first)
        self._delay = first
        self.failures = 0
        """Failed attempts of the current outage (0: not failing)."""

    @property
    def down(self) -> bool:
        return self.failures > 0

    def failed(self, exc: BaseException) -> float:
        """Note a failed attempt; the seconds to wait before the next one."""
        self.failures += 1
        wait = jittered(self._delay)
        if self.failures == 1:
            self._log.warning(
                "%s failing (%s: %s); retrying with backoff (from %gs up to %gs)",
                self.what,
                type(exc).__name__,
                exc,
                self._first,
                self._cap,
            )
        else:
            self._log.debug("%s still failing (%s); retrying in %gs", self.what, exc, wait)
        self._delay = min(self._delay * 2, self._cap)
        return wait

    def succeeded(self) -> None:
        """Note a successful attempt: the end of the outage, if there was one."""
        if self.failures:
            self._log.info("%s working again after %d failed attempts", self.what, self.failures)
        self.failures = 0
        self._delay = self._first


def retry_delays(poll_interval: float) -> tuple[float, float]:
    """``Outage``'s first and longest wait for a worker with this poll interval: from
    ``min(poll_interval, 1 s)`` up to ``max(poll_interval, 1 s)``, so a store that comes
    back is seen no later than an idle worker's poll would see a new job."""
    return min(poll_interval, 1.0), max(poll_interval, 1.0)
