"""The typed cause of a job's end (RETRY-9), which the terminal ``JobFailed`` event carries
so that a listener can test it with ``isinstance``.

A failure that already names its cause keeps it: ``MaxAttemptsExceeded`` (a budget spent
by crashes, STALL-7), ``TimeoutExceeded`` (a terminal timeout, RETRY-4) and
``ManuallyFailed`` (``Job.fail()``, found along ``__cause__`` because the typed runner
raises it as an ``UnrecoverableJobError``). Another error that was the last attempt's
becomes ``MaxAttemptsExceeded`` with that error as its ``__cause__``. A failure that ended
the job without spending its attempts (an unknown job name, a child that failed its
parent, data the class no longer accepts) is its own cause.
"""

from __future__ import annotations

from lane_pg.errors import ManuallyFailed, MaxAttemptsExceeded, TimeoutExceeded
from lane_pg.types import JobRow

_TYPED = (MaxAttemptsExceeded, TimeoutExceeded, ManuallyFailed)


def failure_cause(job: JobRow, error: BaseException, *, discarded: bool) -> BaseException:
    """The cause of ``job``'s end by ``error``; ``discarded``: its retries were skipped
    (the attempt that raised did not need to be the last)."""
    seen: set[int] = set()
    link: BaseException | None = error
    while link is not None and id(link) not in seen:
        if isinstance(link, _TYPED):
            return link
        seen.add(id(link))
        link = link.__cause__
    if discarded:
        return error
    attempts = job.attempts_made + 1
    cause = MaxAttemptsExceeded(job.name, attempts, str(error) or type(error).__name__)
    cause.__cause__ = error
    return cause
