"""The app the worker tests run: ``python -m lane_pg worker --app tests.worker.apps:app``.

Every processor that has a visible side effect writes it to ``public.worker_effects``
through a connection of its own (not the worker's), committed before the processor goes
on, so the tests can count how many times each job really ran, in which process and at
which attempt. The DSN is the worker's own: ``$LANE_PG_DSN``.

``lanes_app`` declares two lanes, ``<prefix>control`` (priority 1, one slot) and
``<prefix>prompt`` (priority 5, one slot), where the prefix comes from
``$LANE_PG_TEST_LANE_PREFIX`` so concurrent test runs never share a queue.
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

import asyncpg

from lane_pg import App, UnrecoverableJobError
from lane_pg.batch import register_callback
from lane_pg.types import JSON, JobRow, Lane

EFFECTS_TABLE = "public.worker_effects"
LANE_PREFIX_ENV = "LANE_PG_TEST_LANE_PREFIX"


class Context(Protocol):
    """The part of the worker's job context these processors use."""

    async def update_progress(self, progress: JSON) -> Any: ...
    async def log(self, message: str) -> Any: ...
    async def update_data(self, data: JSON) -> Any: ...
    def has_lost_lease(self) -> bool: ...
    def ensure_lease(self) -> None: ...
    def discard_retry(self) -> None: ...
    async def children_values(self) -> dict[Any, JSON]: ...


Processor = Callable[[JobRow, Context], Awaitable[JSON]]

_Row = tuple[str, str, int, int, str]


class _EffectWriter:
    """Inserts effect rows in batches on one connection of its own.

    ``record`` returns once its row is committed; rows recorded concurrently share one
    ``INSERT ... unnest`` (one round trip), so recording stays cheap next to the worker's
    own work during a 10,000-job drain.
    """

    def __init__(self) -> None:
        self._pending: list[tuple[_Row, asyncio.Future[None]]] = []
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    async def write(self, row: _Row) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run())
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._pending.append((row, done))
        self._wake.set()
        await done

    async def _run(self) -> None:
        # Not waiting for the WAL flush: the row is committed (visible to every session)
        # when the insert returns, which is all the tests rely on.
        try:
            conn = await asyncpg.connect(_dsn(), server_settings={"synchronous_commit": "off"})
        except Exception as exc:
            self._task = None
            for _, done in self._pending:
                if not done.done():
                    done.set_exception(exc)
            self._pending = []
            raise
        while True:
            await self._wake.wait()
            self._wake.clear()
            batch, self._pending = self._pending, []
            if not batch:
                continue
            try:
                await conn.execute(
                    f"INSERT INTO {EFFECTS_TABLE} (job_id, queue, pid, attempt, note)"
                    " SELECT * FROM unnest($1::text[], $2::text[], $3::int[], $4::int[],"
                    " $5::text[])",
                    *(list(column) for column in zip(*(row for row, _ in batch), strict=True)),
                )
            except Exception as exc:
                for _, done in batch:
                    if not done.done():  # a cancelled writer cancelled its future
                        done.set_exception(exc)
            else:
                for _, done in batch:
                    if not done.done():
                        done.set_result(None)


_writer = _EffectWriter()


def _dsn() -> str:
    # The effects table is PostgreSQL's, also for a worker whose queue is on Redis.
    return os.environ.get("LANE_PG_TEST_EFFECTS_DSN") or os.environ["LANE_PG_DSN"]


async def record(job: JobRow, note: str = "done") -> None:
    """One committed row saying this process ran ``job`` (attempt and a note)."""
    await _writer.write((job.id, job.queue, os.getpid(), job.attempts_started, note))


def _die() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


# ------------------------------------------------------------------ processors


async def noop(job: JobRow, ctx: Context) -> JSON:
    return None


async def record_job(job: JobRow, ctx: Context) -> JSON:
    await record(job)
    return {"pid": os.getpid()}


async def sleep_job(job: JobRow, ctx: Context) -> JSON:
    await asyncio.sleep(float(job.payload["seconds"]))
    await record(job)
    return {"slept": job.payload["seconds"], "pid": os.getpid()}


async def announced_sleep(job: JobRow, ctx: Context) -> JSON:
    """``sleep`` that first records a ``started`` effect: a test waiting for it knows the
    worker counts the job as running (a job's ``active`` row commits before the worker
    has read the claim's answer)."""
    await record(job, "started")
    return await sleep_job(job, ctx)


async def die(job: JobRow, ctx: Context) -> JSON:
    """Kills every worker that takes it (after recording that it ran)."""
    await record(job, "die")
    _die()
    return None  # pragma: no cover - the process is gone


async def die_first(job: JobRow, ctx: Context) -> JSON:
    """Kills the first worker that takes it; any later delivery completes normally."""
    if job.attempts_started == 1:
        await record(job, "die")
        _die()
    await record(job)
    return {"pid": os.getpid()}


async def fail(job: JobRow, ctx: Context) -> JSON:
    raise RuntimeError(f"fail job {job.id} attempt {job.attempts_started}")


async def combine(job: JobRow, ctx: Context) -> JSON:
    """A flow parent: records that it ran and returns its children's values by id."""
    await record(job)
    values = await ctx.children_values()
    return {str(child): value for child, value in sorted(values.items())}


async def unrecoverable(job: JobRow, ctx: Context) -> JSON:
    raise UnrecoverableJobError(f"job {job.id} cannot succeed")


async def context_writes(job: JobRow, ctx: Context) -> JSON:
    """Progress, a log line and new data, all through the job context (WORK-9)."""
    await ctx.update_progress({"step": 1})
    await ctx.log(f"hello from {os.getpid()}")
    await ctx.update_data({"rewritten": True, **job.payload})
    await record(job)
    return {"ok": True}


def _wait_for_takeover(job: JobRow, deadline: float) -> bool:
    """Block the whole event loop (no lease renewal can run) until somebody else has
    claimed this job again, as a stop-the-world pause would; True when that happened."""
    import psycopg  # here: only these two processors need it (0.15 s per worker)

    with psycopg.connect(_dsn(), autocommit=True) as conn:
        while time.monotonic() < deadline:
            row = conn.execute(
                "SELECT attempts_started FROM lane.jobs WHERE queue = %s AND id = %s",
                (job.queue, job.id),
            ).fetchone()
            if row is not None and row[0] > job.attempts_started:
                return True
            time.sleep(0.02)
    return False


async def _record_lease_loss(job: JobRow, ctx: Context) -> None:
    """Wait (15 s at most) for the worker to flag the lease as lost, then record what
    ``has_lost_lease()`` and ``ensure_lease()`` say."""
    deadline = time.monotonic() + 15.0
    while not ctx.has_lost_lease() and time.monotonic() < deadline:  # noqa: ASYNC110
        await asyncio.sleep(0.02)
    await record(job, "lost" if ctx.has_lost_lease() else "not_lost")
    try:
        ctx.ensure_lease()
    except Exception as exc:
        await record(job, f"ensure_lease:{type(exc).__name__}")
    else:
        await record(job, "ensure_lease:ok")


async def stale_owner(job: JobRow, ctx: Context) -> JSON:
    """Freezes until the job was taken over by another claimer, then waits (with a
    deadline) for the worker to notice the lost lease and tries to settle anyway:
    ``payload["outcome"]`` is ``"return"`` (complete) or ``"raise"`` (fail). A run the
    worker cancels records ``cancelled``."""
    taken_over = _wait_for_takeover(job, time.monotonic() + 30.0)
    try:
        await record(job, "taken_over" if taken_over else "not_taken_over")
        await _record_lease_loss(job, ctx)
    except asyncio.CancelledError:
        await asyncio.shield(record(job, "cancelled"))
        raise
    if job.payload["outcome"] == "raise":
        raise RuntimeError("stale owner fails")
    return {"by": "stale owner"}


async def lease_watch(job: JobRow, ctx: Context) -> JSON:
    """Runs until the worker flags the lease as lost (deadline 15 s), then records what the
    context says and whether a context write is refused (WORK-8, WORK-9)."""
    try:
        await record(job, "watching")
        await _record_lease_loss(job, ctx)
        try:
            await ctx.update_progress({"written": "after the loss"})
        except Exception as exc:
            await record(job, f"update_progress:{type(exc).__name__}")
        else:
            await record(job, "update_progress:ok")
    except asyncio.CancelledError:
        await asyncio.shield(record(job, "cancelled"))
        raise
    return {"by": "watcher"}


def _wait_for_thief_writes(job: JobRow, deadline: float) -> bool:
    """Block the whole event loop (no renewal can run, so the worker is not told) until the
    job's new owner has written its progress (``{"by": "thief"}``, its last write); True
    when that happened."""
    import psycopg  # here: only these two processors need it (0.15 s per worker)

    with psycopg.connect(_dsn(), autocommit=True) as conn:
        while time.monotonic() < deadline:
            row = conn.execute(
                "SELECT progress ->> 'by' FROM lane.jobs WHERE queue = %s AND id = %s",
                (job.queue, job.id),
            ).fetchone()
            if row is not None and row[0] == "thief":
                return True
            time.sleep(0.02)
    return False


async def stale_writer(job: JobRow, ctx: Context) -> JSON:
    """Freezes until its job was taken over and the new owner wrote data, a log line and
    progress; then, before any renewal told it, writes through its context. Records how
    each write ended (``<write>:<error>:<cause>``) and whether the context counts as lost."""
    taken_over = _wait_for_thief_writes(job, time.monotonic() + 30.0)
    # The first write goes out before this coroutine yields to anything (a renewal could
    # otherwise flag the loss first): the database itself must refuse it.
    writes: list[tuple[str, Callable[[], Awaitable[Any]]]] = [
        ("update_progress", lambda: ctx.update_progress({"by": "stale"})),
        ("log", lambda: ctx.log("stale line")),
        ("update_data", lambda: ctx.update_data({"by": "stale"})),
    ]
    notes = ["taken_over" if taken_over else "not_taken_over"]
    for name, write in writes:
        try:
            await write()
        except Exception as exc:
            cause = type(exc.__cause__).__name__ if exc.__cause__ is not None else "-"
            notes.append(f"{name}:{type(exc).__name__}:{cause}")
        else:
            notes.append(f"{name}:ok")
    notes.append(f"lost:{ctx.has_lost_lease()}")
    for note in notes:
        await record(job, note)
    return {"by": "stale writer"}


PROCESSORS: dict[str, Processor] = {
    "noop": noop,
    "record": record_job,
    "sleep": sleep_job,
    "announced_sleep": announced_sleep,
    "die": die,
    "die_first": die_first,
    "fail": fail,
    "unrecoverable": unrecoverable,
    "context_writes": context_writes,
    "stale_owner": stale_owner,
    "lease_watch": lease_watch,
    "stale_writer": stale_writer,
    "combine": combine,
}


class RecordCallback:
    """A batch or chain callback that records one effect row per run: job id
    ``callback:<kind>``, on the batch's callback queue (or the chain link's queue)."""

    def __init__(self, kind: str) -> None:
        self.name = f"record-{kind}"
        self.kind = kind

    async def handle(self, subject: object, error: str | None) -> None:
        options = getattr(subject, "options", None)
        queue = options["callback_queue"] if isinstance(options, dict) else subject.queue  # type: ignore[attr-defined]
        await _writer.write((f"callback:{self.kind}", str(queue), os.getpid(), 0, error or "ok"))


for _kind in ("then", "catch", "finally"):
    register_callback(RecordCallback(_kind))


def _register(target: App) -> App:
    for name, processor in PROCESSORS.items():
        target.processor(name)(processor)
    return target


app = _register(App())

_prefix = os.environ.get(LANE_PREFIX_ENV, "worker_tests.")
lanes_app = _register(App(lanes=[Lane(f"{_prefix}control", 1, 1), Lane(f"{_prefix}prompt", 5, 1)]))
