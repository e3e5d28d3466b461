"""Maintenance: periodic tasks that one elected worker at a time runs.

``maintenance_tasks`` lists today's upkeep, each with its own name, interval and
coroutine: stalled recovery, promotion of due delayed jobs, event trimming, pruning of
finished jobs, expiry of deduplication owners, metrics compaction and vacuum.
``MaintenanceScheduler`` runs whichever is due while this worker leads; later upkeep
(repeat schedules, flow settlement) is one more ``PeriodicTask`` in the list, not a longer
loop.

Leadership is a lease (``Leader``, a backend capability): ``Leadership`` renews it every
third of ``leader_lease`` while it holds it and asks as often while another worker does,
so a leader that dies or freezes is replaced within about one lease. The scheduler runs a
task only while the local copy of the lease (counted from before the request that won it)
has not run out: a leader resumed from a freeze stops at once, before its next renewal
tells it that it lost the role. A task that was already running when the lease ran out
finishes; every task is safe to run twice.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from lane_pg.backend import (
    IndexSize,
    JobQueueBackend,
    Leader,
    Space,
)
from lane_pg.backend.leader import MAINTENANCE_ROLE
from lane_pg.errors import UpkeepDeferred
from lane_pg.types import DEFAULT_PRUNE_BATCH
from lane_pg.types.workers import backed_off
from lane_pg.worker import joblog
from lane_pg.worker.config import WorkerConfig
from lane_pg.worker.pausing import WorkerHooks

log = logging.getLogger("lane_pg.worker")


PRUNE_CALLS = 10
"""At most this many ``prune_finished`` batches per pass."""

METRICS_COMPACTION_INTERVAL = 60.0
"""Seconds between metrics compactions: a minute closes once a minute, and a pass reads
every ``lane.metrics`` row (one per queue, state and retained minute once compacted)."""


@dataclass(slots=True)
class PeriodicTask:
    """One kind of upkeep: ``run`` does one pass and returns what it did, for the log
    (an empty string when there was nothing to do)."""

    name: str
    interval: float
    run: Callable[[], Awaitable[str]]
    next_at: float = 0.0
    """Monotonic time of the next pass; 0 runs it at once."""
    at_exit: bool = False
    """Run once more when a leading burst worker exits (``MaintenanceScheduler.final_pass``)."""
    exit_run: Callable[[], Awaitable[str]] | None = None
    """What that last pass runs instead of ``run``, when it differs."""


LEADERSHIP_RETRY_CAP = 2.0
"""Seconds between leadership checks at most while they fail (the database is away): the
role is back within about this once it returns."""


class Leadership:
    """This worker's claim on the maintenance role. Without a ``Leader`` (a backend that
    elects nobody serves one worker) it always leads."""

    def __init__(self, leader: Leader | None, holder: str, lease: float) -> None:
        self._leader = leader
        self._holder = holder
        self._lease = lease
        self._until = 0.0
        self._changed = asyncio.Event()

    @property
    def elects(self) -> bool:
        return self._leader is not None

    def leading(self) -> bool:
        return self._leader is None or time.monotonic() < self._until

    async def wait_changed(self, timeout: float) -> None:  # noqa: ASYNC109 (bounded wait)
        """Sleep ``timeout`` seconds, or less when the role was won or lost meanwhile."""
        # asyncio.timeout, not wait_for: on Python 3.11 wait_for swallows a cancellation
        # that arrives as the event is set (the role just changed), and the cancelled
        # scheduler then looped on, so a stopping worker waited for it forever.
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout):
                await self._changed.wait()
        self._changed.clear()

    async def run(self) -> None:
        """Ask for (or renew) the role every third of the lease, until cancelled."""
        leader = self._leader
        if leader is None:
            return
        was_leading = False
        failures = 0
        while True:
            try:
                await self.ask()
            except Exception as exc:
                # Unknown: keep the local lease, which runs out by itself if this persists.
                # Asked three times a lease: say so once per outage, not three times a second.
                (log.debug if failures else log.warning)(
                    "maintenance leadership check failed: %s", exc
                )
                failures += 1
            else:
                failures = 0
            leading = self.leading()
            if leading != was_leading:
                was_leading = leading
                log.info(
                    "worker %s %s maintenance",
                    self._holder,
                    "leads" if leading else "no longer leads",
                )
                self._changed.set()
            await asyncio.sleep(backed_off(self._lease / 3, failures, LEADERSHIP_RETRY_CAP))

    async def ask(self) -> bool:
        """Ask for (or renew) the role once; True when this worker now leads."""
        leader = self._leader
        if leader is None:
            return True
        asked_at = time.monotonic()
        held = await leader.acquire_leadership(MAINTENANCE_ROLE, self._holder, self._lease)
        self._until = asked_at + self._lease if held else 0.0
        return self.leading()

    async def resign(self) -> None:
        """Give the role up (at shutdown), so another worker need not wait for the lease.
        Asked even when the local copy ran out: the database's copy may still run (it
        started after the local one), and resigning a role one does not hold is a no-op."""
        if self._leader is None:
            return
        self._until = 0.0
        try:
            await self._leader.resign_leadership(MAINTENANCE_ROLE, self._holder)
        except Exception as exc:
            log.warning("resigning maintenance leadership failed: %s", exc)


class Presence:
    """This worker's row in its backend's list of live workers: a heartbeat every
    ``interval`` seconds while it runs, deleted when it stops. Without a ``Leader`` (a
    backend that elects nobody) there is no list and this does nothing. A failed heartbeat
    is logged once per outage; the worker goes on."""

    def __init__(
        self,
        leader: Leader | None,
        worker_id: str,
        queues: Sequence[str],
        interval: float,
        meta: dict[str, object] | None = None,
    ) -> None:
        self._leader = leader
        self._worker_id = worker_id
        self._queues = list(queues)
        self._interval = interval
        self._meta = meta or {}

    async def run(self) -> None:
        """Until cancelled."""
        leader = self._leader
        if leader is None:
            return
        failing = False
        hostname, pid = socket.gethostname(), os.getpid()
        while True:
            try:
                await leader.worker_heartbeat(
                    self._worker_id, hostname, pid, self._queues, meta=self._meta
                )
            except Exception as exc:
                (log.debug if failing else log.warning)("worker heartbeat failed: %s", exc)
                failing = True
            else:
                failing = False
            await asyncio.sleep(self._interval)

    async def leave(self) -> None:
        if self._leader is None:
            return
        try:
            await self._leader.forget_worker(self._worker_id)
        except Exception as exc:
            log.warning("removing this worker from the list of workers failed: %s", exc)


class MaintenanceScheduler:
    """Runs each due task while this worker leads."""

    def __init__(self, tasks: Sequence[PeriodicTask], leadership: Leadership) -> None:
        self.tasks = list(tasks)
        self._leadership = leadership

    async def run(self) -> None:
        """Until cancelled."""
        leadership = self._leadership
        was_leading = False
        while True:
            if not leadership.leading():
                was_leading = False
                await leadership.wait_changed(1.0)
                continue
            if not was_leading:
                was_leading = True
                for task in self.tasks:  # a new leader does every kind of upkeep at once
                    task.next_at = 0.0
            for task in self.tasks:
                if task.next_at > time.monotonic() or not leadership.leading():
                    continue
                await _run_logged(task, "")
                task.next_at = time.monotonic() + task.interval
            if self.tasks:
                pause = min(task.next_at for task in self.tasks) - time.monotonic()
            else:
                pause = 1.0
            await leadership.wait_changed(max(pause, 0.0))

    async def final_pass(self) -> None:
        """The ``at_exit`` tasks once more, if this worker leads: a burst worker that
        drained its queues prunes, trims and vacuums what it finished before it leaves
        (unless another worker leads: its own passes do it).
        Without it each W6 round left what the last second of draining finished (up to
        85,200 rows beyond the 10,000 kept) for the next round's workers, and the table
        grew round after round."""
        leadership = self._leadership
        if not leadership.leading():
            # A short burst may end before the first election settled: ask once more.
            try:
                if not await leadership.ask():
                    return  # another worker leads: its own passes take care of it
            except Exception as exc:
                log.warning("maintenance leadership check at exit failed: %s", exc)
                return
        for task in self.tasks:
            if task.at_exit:
                await _run_logged(task, " at exit", task.exit_run or task.run)


async def _run_logged(
    task: PeriodicTask, when: str, run: Callable[[], Awaitable[str]] | None = None
) -> None:
    """One pass of ``task`` (or ``run``); what it did is logged, and a failure too (never
    raised: the next pass tries again)."""
    try:
        done = await (run or task.run)()
    except Exception as exc:
        log.warning("maintenance %s failed%s: %s", task.name, when, exc)
    else:
        if done:
            log.info("maintenance %s%s: %s", task.name, when, done)


def maintenance_tasks(
    backend: JobQueueBackend, config: WorkerConfig, hooks: WorkerHooks | None = None
) -> list[PeriodicTask]:
    """Today's upkeep, for every queue of the backend; ``hooks`` hear the stalled jobs."""

    async def recover() -> str:
        recovered = await backend.maintenance.recover_stalled(
            None, max_stalled_count=config.max_stalled_count
        )
        for outcome in recovered:  # a crash or a freeze is a failure too: never silent
            joblog.stalled(outcome.queue, outcome.id, outcome.state, config.worker_id)
        if recovered and hooks is not None:
            try:
                hooks.jobs_stalled(recovered)
            except Exception as exc:  # a broken listener never stops the upkeep
                log.warning("a jobs_stalled hook failed: %s", exc)
        return f"{len(recovered)} stalled jobs recovered" if recovered else ""

    async def promote() -> str:
        promoted = await backend.maintenance.promote_due_jobs(None)
        return f"{promoted} delayed jobs promoted" if promoted else ""

    async def trim() -> str:
        trimmed = await backend.maintenance.trim_events(None)
        return f"{trimmed} events trimmed" if trimmed else ""

    async def prune() -> str:
        pruned = 0
        for _ in range(PRUNE_CALLS):
            deleted = await backend.maintenance.prune_finished(None, batch=DEFAULT_PRUNE_BATCH)
            pruned += deleted
            if deleted < DEFAULT_PRUNE_BATCH:  # no queue can have a full batch left
                break
        return f"{pruned} finished jobs pruned" if pruned else ""

    async def expire_owners() -> str:
        # Rows whose TTL ran out block nothing; without this sweep every TTL add (a unique
        # push) would leave its row for good. One probe of dedup_owners_expiry_idx when
        # none is due.
        expired = await backend.dedup.expire_dedup_owners(limit=DEFAULT_PRUNE_BATCH)
        return f"{expired} expired deduplication owners deleted" if expired else ""

    async def compact_metrics() -> str:
        # Each connection that finishes jobs writes a row of its own per minute (OBS-6,
        # sql/functions/75_metrics.sql): fold the closed minutes, so reads stay one row
        # a minute, and the minutes beyond the retained data points.
        folded = await backend.metrics.compact_metrics()
        return f"{folded} metrics rows folded" if folded else ""

    tasks = [
        PeriodicTask("stalled recovery", config.recovery_interval, recover),
        PeriodicTask("promotion", config.promote_interval, promote),
        PeriodicTask("event trimming", config.trim_interval, trim, at_exit=True),
        PeriodicTask("pruning", config.prune_interval, prune, at_exit=True),
        PeriodicTask("deduplication expiry", config.prune_interval, expire_owners),
        PeriodicTask("metrics compaction", METRICS_COMPACTION_INTERVAL, compact_metrics),
    ]
    keys = backend.idempotency
    if keys is not None:

        async def expire_keys() -> str:
            # An expired key already counts as absent; this only gives the space back.
            pruned = await keys.prune_idempotency_keys(limit=DEFAULT_PRUNE_BATCH)
            return f"{pruned} expired idempotency keys deleted" if pruned else ""

        tasks.append(PeriodicTask("idempotency key expiry", config.prune_interval, expire_keys))
    threshold = config.vacuum_min_dead
    reclaimer = backend.space
    if threshold is not None and reclaimer is not None:
        floors: dict[str, int] = {}

        async def vacuum() -> str:
            return ", ".join(await vacuum_pass(reclaimer, threshold, floors))

        async def vacuum_at_exit() -> str:
            # Whatever died, and lane.jobs and lane.events whatever the statistics say:
            # the counts of the processes that just finished may not be flushed yet, and
            # a wave of jobs added next into a table full of dead rows extends the heap
            # (W6: rounds that started with 60,000 dead rows ended 1.5-2x bigger).
            return ", ".join(await vacuum_pass(reclaimer, 1, {}, always=("jobs", "events")))

        tasks.append(
            PeriodicTask(
                "vacuum", config.recovery_interval, vacuum, at_exit=True, exit_run=vacuum_at_exit
            )
        )
    floor = config.reindex_min_bytes
    rebuilder = backend.space
    if floor is not None and rebuilder is not None:

        async def reindex() -> str:
            return ", ".join(await reindex_pass(rebuilder, floor))

        tasks.append(PeriodicTask("reindex", config.reindex_interval, reindex, at_exit=True))
    return tasks


BYTES_PER_ROW_BLOATED = 96
"""An index taking more than this per row of its table is rebuilt: about twice what a
freshly built entry of the schema's widest index takes (a ``jobs_finished_idx`` entry,
~48 bytes at B-tree fill; a ``jobs_pkey`` one takes ~22)."""


async def reindex_pass(backend: Space, floor: int) -> list[str]:
    """Rebuild each index bigger than ``floor`` bytes that takes more than
    ``BYTES_PER_ROW_BLOATED`` per row of its table: B-tree pages are not given back by
    VACUUM, so an index sized for a past wave of jobs keeps its size (W6). The rows are
    counted, up to the count that would clear the biggest such index of the table: the
    statistics' estimate was off three times over right after a wave."""
    candidates: dict[str, list[IndexSize]] = {}
    for size in await backend.index_sizes():
        if size.bytes > floor:
            candidates.setdefault(size.table, []).append(size)
    done: list[str] = []
    for table, sizes in sorted(candidates.items()):
        enough = max(size.bytes for size in sizes) // BYTES_PER_ROW_BLOATED + 1
        rows = await backend.count_rows(table, enough)
        for size in sizes:
            if size.bytes > BYTES_PER_ROW_BLOATED * (rows + 1):
                try:
                    after = await backend.reindex(size.index)
                except UpkeepDeferred as exc:
                    return [*done, str(exc)]  # the others would be put off alike
                done.append(f"{size.index} ({size.bytes // 1024} -> {after // 1024} kB)")
    return done


async def vacuum_pass(
    backend: Space,
    threshold: int,
    floors: dict[str, int],
    *,
    always: Sequence[str] = (),
) -> list[str]:
    """VACUUM each table with ``threshold`` more dead row versions than its last vacuum
    left (``floors``): a vacuum that could not remove them (an old snapshot still sees
    them, or we do not own the table) is not repeated every pass. The ``always`` tables
    are vacuumed whatever their count."""
    done = []
    for table, dead in sorted((await backend.dead_tuples()).items()):
        if table in always or dead >= floors.get(table, 0) + threshold:
            floors[table] = await backend.vacuum(table)
            done.append(f"{table} ({dead} -> {floors[table]} dead)")
    return done
