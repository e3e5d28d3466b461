"""The soak's producer and the watcher of what it added.

``Traffic`` adds a steady mix of every kind of job through the public API, recording each
acknowledged add; an add that raised (the server restarting) is counted and not tracked,
since its commit may or may not have happened. ``Traffic.confirm`` reads the state of every
tracked job not yet seen finished, every few seconds during the run: finished jobs are
pruned by the shipped retention (the newest 10,000 completed are kept), so a job must be
seen finished before retention may remove it, and one that vanishes unseen is reported.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
from collections import Counter
from dataclasses import dataclass, field

from lane_pg import Backoff, DeduplicationOptions, JobOptions, Q, RepeatOptions
from lane_pg.backend import JobQueueBackend
from lane_pg.types.flows import FlowJob
from soak.app import FACADE_QUEUE, QUEUE, BatchItem, ChainStep

log = logging.getLogger("soak")

KINDS: dict[str, int] = {
    # kind: weight in the mix of adds
    "plain": 40,
    "slow": 4,
    "delayed": 10,
    "retried": 8,
    "doomed": 2,
    "dedup": 10,
    "flow": 8,
    "batch": 4,
    "chain": 4,
}
EXPECTED_RUNS = {"retried": 3, "doomed": 2}
"""Runs a job of the kind makes without faults (1 for the others)."""
ATTEMPTS = {"retried": 5, "doomed": 2}
"""Deliveries each kind may use (3 for the others, as a production job would set): a
delivery lost to a fault counts (attempts count deliveries), so a job given one attempt
would fail for good after its worker crashed."""
RETRYING = JobOptions(attempts=3, backoff=Backoff.fixed(0.2))
FLOW_CHILDREN = 3
BATCH_SIZE = 3
CHAIN_LENGTH = 3
SERIES = 3
SERIES_EVERY = 2.0
DEDUP_SHARED = 3
"""Consecutive deduplicated adds share one id, so most find an owner."""
FINISHED = ("completed", "failed")


@dataclass
class Added:
    kind: str
    queue: str
    id: str
    at: float
    """time.time() before the add call: the job cannot run before ``at + delay``."""
    delay: float = 0.0
    parent: str | None = None


@dataclass
class Outcome:
    state: str
    attempts_made: int
    failed_reason: str | None


@dataclass
class Traffic:
    backend: JobQueueBackend
    rate: float
    rng: random.Random
    added: dict[tuple[str, str], Added] = field(default_factory=dict)
    outcomes: dict[tuple[str, str], Outcome] = field(default_factory=dict)
    vanished: set[tuple[str, str]] = field(default_factory=set)
    batches: dict[str, str] = field(default_factory=dict)
    """batch id -> its tag."""
    finished_batches: set[str] = field(default_factory=set)
    chains: dict[str, float] = field(default_factory=dict)
    """chain tag -> time.time() before the dispatch."""
    flows: dict[str, list[str]] = field(default_factory=dict)
    """parent id -> children ids."""
    adds: Counter[str] = field(default_factory=Counter)
    add_errors: Counter[str] = field(default_factory=Counter)
    read_errors: int = 0
    _sequence: int = 0

    def series_keys(self) -> list[str]:
        return [f"soak-series-{n}" for n in range(SERIES)]

    async def start_series(self) -> None:
        # One attempt, the default: a series must outlive a worker lost with its owner.
        for key in self.series_keys():
            options = JobOptions(repeat=RepeatOptions.every(SERIES_EVERY, key=key))
            await self.backend.jobs.add_job(QUEUE, "repeat", None, options)

    async def stop_series(self) -> None:
        """Ends every series; an owner that is running refuses (JobLocked): try again."""
        for key in self.series_keys():
            for _ in range(100):
                try:
                    await self.backend.repeats.remove_repeat(QUEUE, key)
                    break
                except Exception as error:
                    log.debug("removing series %s: %s", key, error)
                    await asyncio.sleep(0.2)

    async def run(self, stop: asyncio.Event) -> None:
        kinds, weights = list(KINDS), list(KINDS.values())
        interval = 1.0 / self.rate
        due = time.monotonic()
        while not stop.is_set():
            kind = self.rng.choices(kinds, weights)[0]
            try:
                await self._add(kind)
                self.adds[kind] += 1
            except Exception as error:
                self.add_errors[type(error).__name__] += 1
                await asyncio.sleep(self.rng.uniform(0.1, 0.5))
            due += interval
            wait = due - time.monotonic()
            if wait > 0:
                await asyncio.sleep(wait)
            elif wait < -1.0:
                due = time.monotonic()  # behind after an outage: no burst to catch up

    def _track(self, kind: str, queue: str, job_id: str, at: float, **extra: object) -> None:
        self.added.setdefault((queue, job_id), Added(kind, queue, job_id, at, **extra))  # type: ignore[arg-type]

    async def _add(self, kind: str) -> None:
        self._sequence += 1
        n = self._sequence
        at = time.time()
        backend = self.backend
        if kind in ("plain", "doomed", "retried", "slow"):
            options = JobOptions(attempts=ATTEMPTS.get(kind, 3), backoff=Backoff.fixed(0.2))
            data = {"seconds": round(self.rng.uniform(1.0, 3.0), 2)} if kind == "slow" else {}
            job = await backend.jobs.add_job(QUEUE, kind, data, options)
            self._track(kind, QUEUE, job.id, at)
        elif kind == "delayed":
            delay = round(self.rng.uniform(0.5, 5.0), 3)
            options = JobOptions(attempts=3, backoff=Backoff.fixed(0.2), delay=delay)
            job = await backend.jobs.add_job(QUEUE, "plain", {}, options)
            self._track(kind, QUEUE, job.id, at, delay=delay)
        elif kind == "dedup":
            shared = DeduplicationOptions(f"soak-dedup-{n // DEDUP_SHARED}")
            options = JobOptions(attempts=3, backoff=Backoff.fixed(0.2), deduplication=shared)
            job = await backend.jobs.add_job(QUEUE, "plain", {}, options)
            self._track(kind, QUEUE, job.id, at)
        elif kind == "flow":
            children = [FlowJob("child", {"n": i}, RETRYING) for i in range(FLOW_CHILDREN)]
            node = await backend.flows.add_flow(
                FlowJob("parent", {}, RETRYING, queue=QUEUE, children=children)
            )
            self._track("parent", QUEUE, node.job.id, at)
            self.flows[node.job.id] = [c.job.id for c in node.children]
            for c in node.children:
                self._track("child", c.job.queue, c.job.id, at, parent=node.job.id)
        elif kind == "batch":
            tag = f"b{n}"
            items = [BatchItem(tag, i) for i in range(BATCH_SIZE)]
            batch_id = await Q.batch(items).then("soak-batch-then").dispatch()
            self.batches[batch_id] = tag
        elif kind == "chain":
            tag = f"c{n}"
            await Q.chain([ChainStep(tag, i) for i in range(CHAIN_LENGTH)]).dispatch()
            self.chains[tag] = at
        else:
            raise ValueError(kind)

    def pending(self) -> list[tuple[str, str]]:
        return [key for key in self.added if key not in self.outcomes and key not in self.vanished]

    async def confirm(self) -> int:
        """Reads every tracked job not yet seen finished; the number still pending."""
        pending = self.pending()
        for start in range(0, len(pending), 100):
            chunk = pending[start : start + 100]
            try:
                rows = await asyncio.gather(
                    *(self.backend.jobs.get_job(queue, job_id) for queue, job_id in chunk)
                )
            except Exception:
                self.read_errors += 1
                return len(pending)
            for key, row in zip(chunk, rows, strict=True):
                if row is None:
                    self.vanished.add(key)
                elif row.state in FINISHED:
                    self.outcomes[key] = Outcome(row.state, row.attempts_made, row.failed_reason)
        for batch_id in [b for b in self.batches if b not in self.finished_batches]:
            try:
                batch = await Q.find_batch(batch_id)
            except Exception:
                self.read_errors += 1
                break
            if batch is not None and batch.finished:
                self.finished_batches.add(batch_id)
        return len(self.pending()) + len(self.batches) - len(self.finished_batches)

    async def watch(self, stop: asyncio.Event, every: float = 3.0) -> None:
        while not stop.is_set():
            await self.confirm()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), every)


__all__ = ["FACADE_QUEUE", "QUEUE", "Added", "Outcome", "Traffic"]
