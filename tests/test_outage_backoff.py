"""Things a worker checks on a fixed cadence back off while the database is away (the
storm scenario counted 249 refused leadership checks from 20 workers in a 4 s outage):
each failure doubles the wait up to a cap, jittered, and a success restores the cadence."""

from __future__ import annotations

import time

from lane_pg.postgres.backend import PostgresBackend
from lane_pg.types.workers import backed_off
from lane_pg.worker.pausing import SIGNAL_INTERVAL, SIGNAL_RETRY_CAP, SignalWatch, WorkerHooks


def test_the_wait_doubles_per_failure_up_to_the_cap_jittered() -> None:
    assert backed_off(0.33, 0, 2.0) == 0.33
    for failures, ceiling in ((1, 0.66), (2, 1.32), (3, 2.0), (10, 2.0)):
        waits = [backed_off(0.33, failures, 2.0) for _ in range(200)]
        assert all(ceiling / 2 <= wait <= ceiling for wait in waits), (failures, waits)
        assert len(set(waits)) > 100  # spread, not one moment for every worker


async def test_the_signal_watch_backs_off_while_reads_fail_and_recovers(pg_dsn: str) -> None:
    gone = await PostgresBackend.connect(pg_dsn)
    await gone.close()  # every read on it now fails, as while the database is away
    watch = SignalWatch(gone, ["q"], WorkerHooks(), pausable=True)
    gaps = []
    for _ in range(5):
        watch.next_at = 0.0  # due now: as if the wait had passed
        before = time.monotonic()
        assert await watch.check() is False
        gaps.append(watch.next_at - before)
    assert watch.reads == 0
    assert gaps[-1] > SIGNAL_INTERVAL * 2  # backed off
    assert all(gap <= SIGNAL_RETRY_CAP + 0.01 for gap in gaps)
    back = await PostgresBackend.connect(pg_dsn)
    watch._backend = back  # the database is back
    watch.next_at = 0.0
    before = time.monotonic()
    assert await watch.check() is False
    await back.close()
    assert watch.reads == 1
    assert watch.next_at - before <= SIGNAL_INTERVAL + 0.01  # the cadence again
