"""Unique and debounced pushes on every backend-backed driver (UNIQ-1..7, -9..15): the
locks are the backend's deduplication owners; worker-side behaviour runs a real worker."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from lane_pg.backend import Dedup, JobQueueBackend
from lane_pg.errors import ConfigurationError
from lane_pg.facade import (
    BackendDriver,
    DebounceOptions,
    Job,
    JobDebounced,
    JobExceptionOccurred,
    JobQueued,
    JobQueueing,
    QueueFacade,
    UniqueJobSkipped,
)
from lane_pg.facade.envelope import Envelope
from lane_pg.types import ALL_STATES, JobRow
from tests.facade.conftest import Drain

RUNS: list[tuple[str, Any]] = []


@pytest.fixture(autouse=True)
def _fresh_runs() -> None:
    RUNS.clear()


@dataclass
class SendReport(Job):
    job_name = "SendReport"
    account: str
    version: int = 1

    def unique_id(self) -> str | None:
        return uid(self.account)

    async def handle(self) -> None:
        RUNS.append(("report", (self.account, self.version)))


@dataclass
class NoKey(Job):
    job_name = "NoKey"
    n: int = 0

    def unique_id(self) -> str | None:
        return None

    async def handle(self) -> None:
        RUNS.append(("nokey", self.n))


ATTEMPTS: dict[str, int] = {}


@dataclass
class UntilProcessing(Job):
    job_name = "UntilProcessing"
    unique_until_processing = True
    max_tries = 2
    backoff = None
    account: str
    fail_first: bool = False
    version: int = 1

    def unique_id(self) -> str | None:
        return uid(self.account)

    async def handle(self) -> None:
        seen = ATTEMPTS.get(self.account, 0) + 1
        ATTEMPTS[self.account] = seen
        RUNS.append(("until", (self.account, seen)))
        if self.fail_first and seen == 1:
            raise RuntimeError("first attempt fails")


@dataclass
class Search(Job):
    job_name = "Search"
    debounce_for = timedelta(seconds=60)
    term: str
    user: int = 7

    def debounce_id(self) -> str | None:
        return str(self.user)

    async def handle(self) -> None:
        RUNS.append(("search", self.term))


@dataclass
class Both(Job):
    job_name = "Both"
    debounce_for = timedelta(seconds=1)
    n: int = 0

    def unique_id(self) -> str | None:
        return "x"

    async def handle(self) -> None:
        RUNS.append(("both", self.n))


QUEUE = {"name": "default"}


def uid(account: str) -> str:
    """The unique id of ``account`` in this test: a unique lock is one per connection
    (UNIQ-1), and the PostgreSQL backend is shared by every test."""
    return f"{account}@{QUEUE['name']}"


@pytest.fixture(autouse=True)
def _own_queue(facade: QueueFacade, queue_name: str) -> None:
    """Every class of this module goes to the test's own queue (PostgreSQL is shared)."""
    QUEUE["name"] = queue_name
    for cls in (SendReport, NoKey, UntilProcessing, Search, Both):
        facade.route(cls, queue=queue_name)


async def rows(backend: JobQueueBackend) -> list[JobRow]:
    page = await backend.list_jobs(QUEUE["name"], ALL_STATES, limit=100)
    return list(page.items)


def listen(facade: QueueFacade, kind: type[Any]) -> list[Any]:
    seen: list[Any] = []
    facade.events.listen(kind, seen.append)
    return seen


# -- push_unique -------------------------------------------------------------------------


async def test_second_push_is_skipped_with_an_event_UNIQ_1(
    facade: QueueFacade, backend: JobQueueBackend
) -> None:
    skipped = listen(facade, UniqueJobSkipped)
    queued = listen(facade, JobQueued)
    assert await facade.push_unique(SendReport("acct_42")) is True
    assert await facade.push_unique(SendReport("acct_42", version=2)) is False
    assert skipped == [UniqueJobSkipped("SendReport", uid("acct_42"), facade.connection_name())]
    assert len(queued) == 1
    [row] = await rows(backend)
    assert row.data == {"account": "acct_42", "version": 1}
    assert await facade.push_unique(SendReport("acct_43")) is True  # another key


async def test_one_lock_per_connection_across_queues_UNIQ_1(
    facade: QueueFacade, backend: JobQueueBackend, queue_b: str
) -> None:
    """The lock is keyed ``job_name:unique_id`` per connection: the same class and id
    routed to another queue of the connection is suppressed too."""
    skipped = listen(facade, UniqueJobSkipped)
    assert await facade.push_unique(SendReport("acct_42")) is True
    facade.route(SendReport, queue=queue_b)
    assert await facade.push_unique(SendReport("acct_42", version=2)) is False
    assert skipped == [UniqueJobSkipped("SendReport", uid("acct_42"), facade.connection_name())]
    assert (await backend.list_jobs(queue_b, ALL_STATES)).total == 0
    assert [row.data["version"] for row in await rows(backend)] == [1]


async def test_a_suppressed_push_ends_in_unique_job_skipped_UNIQ_1_LIFE_1(
    facade: QueueFacade, backend: JobQueueBackend
) -> None:
    """LIFE-1: JobQueueing before the backend write, JobQueued after; the add of a push
    the lock suppresses writes nothing and answers UniqueJobSkipped instead of JobQueued
    (the lock and the job are one add, UNIQ-5)."""
    seen: list[tuple[str, int]] = []

    async def record(event: object) -> None:
        seen.append((type(event).__name__, len(await rows(backend))))

    for kind in (JobQueueing, JobQueued, UniqueJobSkipped):
        facade.events.listen(kind, record)
    assert await facade.push_unique(SendReport("acct_42")) is True
    assert await facade.push_unique(SendReport("acct_42")) is False
    assert seen == [
        ("JobQueueing", 0),
        ("JobQueued", 1),
        ("JobQueueing", 1),
        ("UniqueJobSkipped", 1),
    ]


class CommittedThenLostDriver(BackendDriver):
    """A driver whose write commits and then reports an error (the answer lost)."""

    async def push_row(self, envelope: Envelope, *, conn: object | None = None) -> JobRow:
        await super().push_row(envelope, conn=conn)
        raise ConnectionError("the answer was lost")


async def test_a_write_that_committed_keeps_its_lock_though_it_raised_UNIQ_3(
    facade: QueueFacade, backend: JobQueueBackend, backend_kind: str
) -> None:
    """Only a reservation no job took over is given back: a re-push after an ambiguous
    failure is suppressed, so the job is not stored twice."""
    facade.set_driver(CommittedThenLostDriver(backend, backend_kind))
    with pytest.raises(ConnectionError):
        await facade.push_unique(SendReport("acct_42"))
    facade.set_driver(BackendDriver(backend, backend_kind))
    assert await facade.push_unique(SendReport("acct_42")) is False
    assert len(await rows(backend)) == 1


async def test_unique_id_none_raises_and_pushes_nothing_UNIQ_2(
    facade: QueueFacade, backend: JobQueueBackend
) -> None:
    with pytest.raises(ConfigurationError, match="unique_id"):
        await facade.push_unique(NoKey())
    with pytest.raises(ConfigurationError, match="unique_id"):
        await facade.push_unique(Search("x"))  # the base class declares no unique id
    assert await rows(backend) == []


async def test_lock_outlives_completion_UNIQ_3(
    facade: QueueFacade, backend: JobQueueBackend, drain: Drain, registry: Any
) -> None:
    registry.register(SendReport)
    assert await facade.push_unique(SendReport("acct_42")) is True
    await drain(QUEUE["name"])
    assert RUNS == [("report", ("acct_42", 1))]
    assert await facade.push_unique(SendReport("acct_42")) is False


class BrokenDriver(BackendDriver):
    """A driver whose write fails before anything is stored (a backend error)."""

    async def push_row(self, envelope: Envelope, *, conn: object | None = None) -> JobRow:
        raise ConnectionError("the backend went away")


async def test_a_failed_push_leaves_no_lock_UNIQ_3(
    facade: QueueFacade, backend: JobQueueBackend, backend_kind: str
) -> None:
    facade.set_driver(BrokenDriver(backend, backend_kind))
    with pytest.raises(ConnectionError):
        await facade.push_unique(SendReport("acct_42"))
    facade.set_driver(BackendDriver(backend, backend_kind))
    assert await facade.push_unique(SendReport("acct_42")) is True


async def test_lock_is_a_ttl_dedup_owner_with_a_token_UNIQ_5_UNIQ_15(
    facade: QueueFacade, backend: JobQueueBackend
) -> None:
    before = datetime.now(UTC)
    assert await facade.push_later(SendReport("acct_1"), before + timedelta(hours=1))
    assert await facade.push_unique(SendReport("acct_42")) is True
    [row] = [r for r in await rows(backend) if r.data["account"] == "acct_42"]
    key = f"SendReport:{uid('acct_42')}"
    assert await backend.get_deduplication_job_id(QUEUE["name"], key) == row.id
    assert row.deduplication_id == key
    dedup = row.options["deduplication"]
    assert (dedup["ttl_ms"], dedup["kind"]) == (300_000, "unique")
    assert isinstance(dedup["token"], str) and len(dedup["token"]) == 32
    job = await backend.get_job(QUEUE["name"], row.id)
    assert job is not None and job.deduplication_expires_at is not None
    expires = job.deduplication_expires_at
    assert before + timedelta(seconds=299) < expires < datetime.now(UTC) + timedelta(seconds=301)


async def test_push_unique_later_and_later_unique_UNIQ_1(
    facade: QueueFacade, backend: JobQueueBackend
) -> None:
    at = datetime.now(UTC) + timedelta(minutes=10)
    assert await facade.push_unique_later(SendReport("a"), at) is True
    assert await facade.push_unique_later(SendReport("a"), at) is False
    assert await facade.later_unique(timedelta(minutes=5), SendReport("b")) is True
    assert await facade.later_unique(5, SendReport("b")) is False
    assert sorted(r.state for r in await rows(backend)) == ["delayed", "delayed"]
    with pytest.raises(ConfigurationError):
        await facade.push_unique_later(SendReport("c"), datetime(2030, 1, 1))


async def test_unique_and_debounce_on_one_class_are_refused_UNIQ_14(
    facade: QueueFacade, backend: JobQueueBackend
) -> None:
    for push in (
        facade.push_unique(Both()),
        facade.push(Both()),
        facade.push_debounced(Both(), DebounceOptions(1)),
        facade.bulk([Both(), Both()]),  # bulk arms no window, but refuses the class alike
    ):
        with pytest.raises(ConfigurationError, match="debounce_for and unique_id"):
            await push
    assert await rows(backend) == []


# -- unique_until_processing (worker) ----------------------------------------------------


async def test_lock_released_right_before_handle_UNIQ_6(
    facade: QueueFacade, backend: JobQueueBackend, drain: Drain, registry: Any
) -> None:
    registry.register(UntilProcessing)
    ATTEMPTS.clear()
    assert await facade.push_unique(UntilProcessing("a")) is True
    assert await facade.push_unique(UntilProcessing("a")) is False
    await drain(QUEUE["name"])
    assert RUNS == [("until", ("a", 1))]
    assert await facade.push_unique(UntilProcessing("a")) is True


async def test_failed_handler_already_released_so_a_duplicate_is_queued_UNIQ_6_UNIQ_7(
    facade: QueueFacade, backend: JobQueueBackend, drain: Drain, registry: Any
) -> None:
    """Attempt 1 frees the lock before its handler fails, so a duplicate pushed while the
    retry waits is a second job (UNIQ-6). Attempt 2 then starts and must leave that newer
    push's lock alone (UNIQ-7; Laravel PR #59567: a retry released a lock it did not own)."""
    registry.register(UntilProcessing)
    ATTEMPTS.clear()
    duplicates: list[bool] = []

    async def push_duplicate(event: JobExceptionOccurred) -> None:
        duplicates.append(
            await facade.later_unique(timedelta(hours=1), UntilProcessing("c", version=2))
        )

    facade.events.listen(JobExceptionOccurred, push_duplicate)
    assert await facade.push_unique(UntilProcessing("c", fail_first=True)) is True
    await drain(QUEUE["name"])
    assert RUNS == [("until", ("c", 1)), ("until", ("c", 2))]  # the retry ran
    assert duplicates == [True]
    jobs = await rows(backend)
    assert len(jobs) == 2
    [newer] = [job for job in jobs if job.data.get("version") == 2]
    key = f"UntilProcessing:{uid('c')}"
    assert await backend.get_deduplication_job_id(QUEUE["name"], key) == newer.id
    assert await facade.push_unique(UntilProcessing("c")) is False


async def test_without_a_token_the_worker_frees_nothing_UNIQ_7(
    facade: QueueFacade, backend: JobQueueBackend, drain: Drain, registry: Any
) -> None:
    """A job of the class pushed plainly (no token) runs; a plain dedup owner of the same
    key stays until its TTL."""
    registry.register(UntilProcessing)
    ATTEMPTS.clear()
    await backend.add_job(
        QUEUE["name"],
        "UntilProcessing",
        {"account": "d"},
        {"deduplication": {"id": f"UntilProcessing:{uid('d')}", "ttl_ms": 60_000}},
    )
    await drain(QUEUE["name"])
    assert RUNS == [("until", ("d", 1))]
    assert await facade.push_unique(UntilProcessing("d")) is False


# -- debounce ----------------------------------------------------------------------------


async def test_burst_keeps_the_latest_payload_UNIQ_9_UNIQ_11(
    facade: QueueFacade, backend: JobQueueBackend, drain: Drain, registry: Any
) -> None:
    registry.register(Search)
    debounced = listen(facade, JobDebounced)
    for n in range(1, 21):
        await facade.push(Search(f"term {n}"))
    [row] = await rows(backend)
    assert (row.state, row.data["term"]) == ("delayed", "term 20")
    assert len(debounced) == 19  # replaced at push while delayed
    await backend.promote_job(QUEUE["name"], row.id)
    await drain(QUEUE["name"])
    assert RUNS == [("search", "term 20")]


async def test_debounce_id_scopes_the_window_UNIQ_10(
    facade: QueueFacade, backend: JobQueueBackend
) -> None:
    await facade.push(Search("a", user=1))
    await facade.push(Search("b", user=2))
    await facade.push(Search("c", user=1))
    assert sorted(r.data["term"] for r in await rows(backend)) == ["b", "c"]


async def test_superseded_after_promotion_is_dropped_by_the_worker_UNIQ_11(
    facade: QueueFacade, backend: JobQueueBackend, drain: Drain, registry: Any
) -> None:
    registry.register(Search)
    debounced = listen(facade, JobDebounced)
    first = await facade.push_debounced(Search("old"), DebounceOptions(60, id="w"))
    await backend.promote_job(QUEUE["name"], first)  # no longer delayed: not replaceable
    second = await facade.push_debounced(Search("new"), DebounceOptions(60, id="w"))
    assert second != first
    await backend.promote_job(QUEUE["name"], second)
    # One at a time, in claim order: run side by side, "new" can complete (releasing the
    # window) before "old" checks it, and a dispatch whose window is gone runs (UNIQ-12):
    # a race the runner's check cannot tell apart (docs/decisions.md).
    await drain(QUEUE["name"], concurrency=1)
    assert RUNS == [("search", "new")]
    assert [event.job_id for event in debounced] == [first]
    old = await backend.get_job(QUEUE["name"], first)
    assert old is not None and old.state == "completed"  # acknowledged, never run


async def test_max_wait_flushes_and_restarts_the_window_UNIQ_10(
    facade: QueueFacade, backend: JobQueueBackend
) -> None:
    options = DebounceOptions(window=60, max_wait=0.001)
    first = await facade.push_debounced(Search("1"), options)
    await asyncio.sleep(0.005)  # past max_wait since the first dispatch (not a timing check)
    flushed = await facade.push_debounced(Search("2"), options)
    follower = await facade.push_debounced(Search("3"), options)
    states = {r.id: (r.state, r.data["term"]) for r in await rows(backend)}
    assert first not in states  # the delayed first dispatch was replaced
    assert states[flushed] == ("waiting", "2")
    assert states[follower] == ("delayed", "3")  # a new burst, with its own window


async def test_an_explicit_time_wins_over_the_window_and_still_collapses_PUSH_4_UNIQ_9(
    facade: QueueFacade, backend: JobQueueBackend
) -> None:
    """``later(1 h)`` of a class debounced for 60 s is stored an hour out (PUSH-4: the
    call-site time wins), owns the window, and a newer dispatch replaces it."""
    debounced = listen(facade, JobDebounced)
    before = datetime.now(UTC)
    first = await facade.later(timedelta(hours=1), Search("in an hour"))
    [row] = await rows(backend)
    assert (row.id, row.state) == (first, "delayed")
    assert row.available_at >= before + timedelta(minutes=59)  # not the 60 s window
    at = datetime.now(UTC) + timedelta(hours=2)
    second = await facade.push_later(Search("at two"), at)
    [row] = await rows(backend)
    assert (row.id, row.data["term"]) == (second, "at two")
    assert abs(row.available_at - at) < timedelta(seconds=1)
    third = await facade.push(Search("plain"))  # no call-site time: the window again
    [row] = await rows(backend)
    assert (row.id, row.data["term"]) == (third, "plain")
    assert row.available_at < datetime.now(UTC) + timedelta(seconds=61)
    assert [event.job_id for event in debounced] == [first, second]


async def test_missing_window_fails_open_UNIQ_12(
    facade: QueueFacade, backend: JobQueueBackend, drain: Drain, registry: Any
) -> None:
    registry.register(Search)
    job_id = await facade.push(Search("alone"))
    assert await backend.remove_deduplication_key(QUEUE["name"], "debounce:Search:7")
    await backend.promote_job(QUEUE["name"], job_id)
    await drain(QUEUE["name"])
    assert RUNS == [("search", "alone")]


async def test_bulk_never_arms_a_window_UNIQ_13(
    facade: QueueFacade, backend: JobQueueBackend, drain: Drain, registry: Any
) -> None:
    registry.register(Search)
    await facade.bulk([Search("a"), Search("b"), Search("c")])
    await drain(QUEUE["name"])
    assert sorted(RUNS) == [("search", "a"), ("search", "b"), ("search", "c")]
    assert await backend.get_deduplication_job_id(QUEUE["name"], "debounce:Search:7") is None


async def test_bad_debounce_options_write_nothing_UNIQ_9(
    facade: QueueFacade, backend: JobQueueBackend
) -> None:
    for options in (DebounceOptions(0), DebounceOptions(1, max_wait=0)):
        with pytest.raises(ConfigurationError):
            await facade.push_debounced(Search("x"), options)
    with pytest.raises(ConfigurationError):
        await facade.push(Search("x"), conn=object())
    assert await rows(backend) == []


def test_backends_offer_owner_tokens(backend: JobQueueBackend) -> None:
    assert isinstance(backend.dedup, Dedup)
