"""``Q.fake()``: pushes recorded in place of written, and the assertions on them
(TEST-1..6, TEST-9, TX-15, INSP-6), on a facade with no connection and on the facade
fixture's real backends (memory and PostgreSQL), whose stores must stay untouched."""

from __future__ import annotations

import asyncio
import threading
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import ClassVar

import asyncpg
import pytest

import lane_pg
from lane_pg import Q
from lane_pg.backend import JobQueueBackend
from lane_pg.backend.failed import FailedJobRecord, MemoryFailedJobStore
from lane_pg.errors import BatchNotFound, ConfigurationError
from lane_pg.facade import (
    BackendDriver,
    DebounceOptions,
    EnvelopeOverrides,
    Job,
    JobQueued,
    JobQueueing,
    JobRegistry,
    QueueFacade,
)
from lane_pg.facade.batches import GroupRecorder
from lane_pg.memory import MemoryBackend
from lane_pg.testing import (
    FakedBatch,
    QueueFake,
    install_fake,
    lane_fake,  # noqa: F401 - the fixture, imported as a user's conftest does
)
from lane_pg.types import ALL_STATES

# -- a user's own test file ------------------------------------------------------------


@dataclass
class SendWelcomeEmail(Job):
    job_name = "SendWelcomeEmail"
    queue = "mail"
    user_id: int

    async def handle(self) -> None:
        SENT.append(self.user_id)


SENT: list[int] = []


async def signup(user_id: int) -> None:
    """The application code under test: it pushes on ``lane_pg.Q``."""
    await Q.push(SendWelcomeEmail(user_id=user_id))


async def test_a_users_test_of_signup_sees_the_welcome_mail_pushed() -> None:
    with Q.fake() as fake:
        await signup(42)
        fake.assert_pushed(SendWelcomeEmail, lambda j: j.user_id == 42)
        fake.assert_pushed_on_queue(SendWelcomeEmail, "mail")
        fake.assert_not_pushed(SendWelcomeEmail, lambda j: j.user_id == 7)
    assert Q.installed_fake() is None


async def test_the_lane_fake_fixture_is_the_fake_installed_on_Q(
    lane_fake: QueueFake,  # noqa: F811 - the imported fixture
) -> None:
    assert Q.installed_fake() is lane_fake
    await signup(5)
    assert lane_fake.pushed(SendWelcomeEmail) == [SendWelcomeEmail(user_id=5)]


# -- job types of the rest -------------------------------------------------------------


@dataclass
class Ping(Job):
    job_name = "Ping"
    n: int = 0

    async def handle(self) -> None:
        LOG.append(f"ping {self.n}")


@dataclass
class Cascade(Job):
    """A handler that pushes: ``run_pushed`` runs what it pushes too."""

    job_name = "Cascade"
    n: int = 0
    facade: ClassVar[QueueFacade | None] = None

    async def handle(self) -> None:
        LOG.append(f"cascade {self.n}")
        assert Cascade.facade is not None
        await Cascade.facade.push(Ping(n=self.n * 10))


@dataclass
class SyncPing(Job):
    job_name = "SyncPing"
    n: int = 0

    def handle(self) -> None:
        LOG.append(f"sync {self.n}")


@dataclass
class Report(Job):
    job_name = "Report"
    account: str = "a"

    def unique_id(self) -> str | None:
        return self.account


@dataclass
class Search(Job):
    job_name = "Search"
    debounce_for = timedelta(seconds=30)
    term: str = ""


@dataclass
class Both(Job):
    job_name = "Both"
    debounce_for = timedelta(seconds=30)

    def unique_id(self) -> str | None:
        return "one"


@dataclass
class Receipt(Job):
    job_name = "Receipt"
    after_commit = True
    order: int = 0


@dataclass
class GenerateReport(Job):
    job_name = "GenerateReport"
    month: str = "2024-01"


@dataclass
class UploadToBucket(Job):
    job_name = "UploadToBucket"
    bucket: str = "reports"


@dataclass
class ImportUser(Job):
    job_name = "ImportUser"
    row: int = 0


CLASSES = (Ping, Cascade, SyncPing, Report, Search, Receipt, GenerateReport, UploadToBucket)
CLASSES += (ImportUser,)
LOG: list[str] = []


@pytest.fixture(autouse=True)
def _fresh_log() -> None:
    LOG.clear()
    SENT.clear()


@pytest.fixture
def bare() -> QueueFacade:
    """A facade with no connection registered at all: the fake must not need one."""
    return QueueFacade(registry=JobRegistry())


@pytest.fixture
def routed(facade: QueueFacade, queue_name: str) -> QueueFacade:
    """The fixture's real facade (memory or PostgreSQL) with every job type routed to the
    test's own queue, so its store can be checked for writes."""
    for cls in CLASSES:
        facade.route(cls, queue=queue_name)
    return facade


async def stored(backend: JobQueueBackend, queue: str) -> int:
    return len((await backend.list_jobs(queue, ALL_STATES, limit=100)).items)


# -- TEST-1: the guard -------------------------------------------------------------------


async def test_pushes_are_recorded_with_payload_time_and_overrides_not_written_TEST_1(
    bare: QueueFacade,
) -> None:
    at = datetime.now(UTC) + timedelta(hours=1)
    with bare.fake() as fake:
        await bare.push(Ping(n=1))
        await bare.push_later(Ping(n=2), at)
        await bare.push_with(Ping(n=3), EnvelopeOverrides(queue="urgent", max_tries=1))
        first, later, custom = fake.pushes
        assert (first.payload, first.available_at, first.queue) == ({"n": 1}, None, "default")
        assert (later.payload, later.available_at) == ({"n": 2}, at)
        assert (custom.queue, custom.overrides) == (
            "urgent",
            EnvelopeOverrides(queue="urgent", max_tries=1),
        )
        assert first.connection == "default"
    assert fake.pushes == []  # forgotten on exit
    assert bare.installed_fake() is None
    with pytest.raises(ConfigurationError, match="no queue connection"):
        await bare.push(Ping())  # the fake is gone: the facade needs its driver again


async def test_install_fake_uninstall_and_async_with_TEST_1(bare: QueueFacade) -> None:
    fake = install_fake(bare)
    try:
        await bare.push(Ping(n=1))
        fake.assert_pushed_times(Ping, 1)
        with pytest.raises(ConfigurationError, match="already installed"):
            bare.fake().install()
    finally:
        fake.uninstall()
    assert bare.installed_fake() is None and fake.pushes == []
    async with bare.fake() as again:
        await bare.push(Ping(n=2))
        assert again.pushed(Ping) == [Ping(n=2)]
    assert bare.installed_fake() is None


def test_two_threads_faking_one_facade_never_see_each_others_pushes_TEST_1() -> None:
    facade = QueueFacade(registry=JobRegistry())
    inside = threading.Event()
    seen: dict[int, list[int]] = {}
    errors: list[BaseException] = []

    async def use(n: int) -> None:
        with facade.fake() as fake:
            inside.set()
            for _ in range(5):
                await facade.push(Ping(n=n))
                await asyncio.sleep(0.01)  # the other thread would push now, were it in
            seen[n] = [job.n for job in fake.pushed(Ping)]

    def thread(n: int) -> None:
        try:
            asyncio.run(use(n))
        except BaseException as exc:
            errors.append(exc)

    first = threading.Thread(target=thread, args=(1,))
    first.start()
    assert inside.wait(10)
    second = threading.Thread(target=thread, args=(2,))
    second.start()
    first.join(30)
    second.join(30)
    assert errors == []
    assert seen == {1: [1] * 5, 2: [2] * 5}


# -- TEST-2: assertions ------------------------------------------------------------------


async def test_each_push_assertion_passes_and_fails_naming_what_was_pushed_TEST_2(
    bare: QueueFacade,
) -> None:
    bare.register_connection("reports", BackendDriver(MemoryBackend(), "memory"))
    bare.route(UploadToBucket, connection="reports")
    with bare.fake() as fake:
        with pytest.raises(AssertionError, match="expected a push of Ping; nothing was pushed"):
            fake.assert_pushed(Ping)
        fake.assert_nothing_pushed()

        await bare.push(Ping(n=1))
        await bare.later(timedelta(minutes=5), Ping(n=2))
        await bare.later_with(timedelta(minutes=1), Ping(n=3), EnvelopeOverrides(max_tries=9))
        await bare.push(UploadToBucket(bucket="b"))

        fake.assert_pushed(Ping)
        fake.assert_pushed(Ping, lambda job: job.n == 2)
        fake.assert_pushed_times(Ping, 3)
        assert fake.pushed(Ping, lambda job: job.n > 1) == [Ping(n=2), Ping(n=3)]
        fake.assert_pushed_later(Ping)
        fake.assert_pushed_later(Ping, lambda job, at: job.n == 2 and at > datetime.now(UTC))
        fake.assert_pushed_on_queue(Ping, "default")
        fake.assert_pushed_on_connection(UploadToBucket, "reports")
        fake.assert_not_pushed(GenerateReport)
        fake.assert_not_pushed(Ping, lambda job: job.n == 4)
        assert fake.pushed_with_overrides(Ping) == [
            EnvelopeOverrides(),
            EnvelopeOverrides(),
            EnvelopeOverrides(max_tries=9),
        ]

        listing = r"pushed:.*Ping on default/default: Ping\(n=1\).*UploadToBucket on reports"
        with pytest.raises(
            AssertionError, match=r"(?s)expected a push of GenerateReport; " + listing
        ):
            fake.assert_pushed(GenerateReport)
        with pytest.raises(AssertionError, match="Ping matching the predicate"):
            fake.assert_pushed(Ping, lambda job: job.n == 4)
        with pytest.raises(AssertionError, match=r"expected 1 push\(es\) of Ping, got 3"):
            fake.assert_pushed_times(Ping, 1)
        with pytest.raises(AssertionError, match="delayed push of UploadToBucket"):
            fake.assert_pushed_later(UploadToBucket)
        with pytest.raises(AssertionError, match="delayed push of Ping matching"):
            fake.assert_pushed_later(Ping, lambda job, at: job.n == 1)
        with pytest.raises(AssertionError, match=r"Ping on queue 'mail'; (?s:.*)Ping\(n=2\)"):
            fake.assert_pushed_on_queue(Ping, "mail")
        with pytest.raises(AssertionError, match="UploadToBucket on connection 'default'"):
            fake.assert_pushed_on_connection(UploadToBucket, "default")
        with pytest.raises(AssertionError, match=r"(?s)no push of Ping, found 3; " + listing):
            fake.assert_not_pushed(Ping)
        with pytest.raises(AssertionError, match=r"(?s)expected nothing pushed; " + listing):
            fake.assert_nothing_pushed()


async def test_bulk_records_each_job_and_the_events_still_fire_TEST_2(bare: QueueFacade) -> None:
    events: list[object] = []
    bare.events.listen(JobQueueing, events.append)
    bare.events.listen(JobQueued, events.append)
    with bare.fake() as fake:
        ids = await bare.bulk([Ping(n=n) for n in range(3)])
        assert fake.pushed(Ping) == [Ping(n=0), Ping(n=1), Ping(n=2)]
        assert ids == [push.id for push in fake.pushes] and len(set(ids)) == 3
    assert [type(event) for event in events] == [JobQueueing, JobQueued] * 3


# -- TEST-3: unique and debounce -------------------------------------------------------


async def test_unique_pushes_are_always_fresh_and_debounced_ones_undelayed_TEST_3(
    routed: QueueFacade, backend: JobQueueBackend, queue_name: str
) -> None:
    key = Report(queue_name)  # a lock is one per connection: the key is the test's own
    with routed.fake() as fake:
        assert await routed.push_unique(key) is True
        assert await routed.push_unique(key) is True  # no lock is held
        assert await routed.later_unique(timedelta(minutes=1), key) is True
        soon = datetime.now(UTC) + timedelta(minutes=2)
        assert await routed.push_unique_later(key, soon) is True
        fake.assert_pushed_times(Report, 4)
        fake.assert_pushed_later(Report, lambda job, at: at == soon)

        await routed.push(Search("x"))
        await routed.push_debounced(Ping(n=1), DebounceOptions(timedelta(seconds=30)))
        assert [push.available_at for push in fake.pushes[4:]] == [None, None]
        assert await routed.pending_size(queue_name) == 4  # no window held any back

        with pytest.raises(ConfigurationError, match="debounced or unique, not both"):
            await routed.push(Both())
        with pytest.raises(ConfigurationError, match="debounced or unique, not both"):
            await routed.push_unique(Both())
        fake.assert_not_pushed(Both)
    assert await stored(backend, queue_name) == 0
    assert await routed.push_unique(key) is True  # the fake took no lock


# -- TEST-4: batches ---------------------------------------------------------------------


async def test_a_batch_is_recorded_its_jobs_pushed_and_it_stays_pending_TEST_4(
    routed: QueueFacade, backend: JobQueueBackend, queue_name: str
) -> None:
    with routed.fake() as fake:
        fake.assert_nothing_batched()
        batch_id = await (
            routed.batch([ImportUser(1), ImportUser(2), ImportUser(3)])
            .add(Ping(n=9))
            .name("import")
            .then("notify")
            .catch("alert")
            .allow_failures()
            .dispatch()
        )
        fake.assert_batch_count(1)
        fake.assert_batched(lambda batch: batch.name == "import" and batch.id == batch_id)
        (batch,) = fake.batched()
        assert isinstance(batch, FakedBatch)
        assert batch.jobs_of(ImportUser) == [ImportUser(1), ImportUser(2), ImportUser(3)]
        assert (batch.then, batch.catch, batch.finally_, batch.allow_failures) == (
            "notify",
            "alert",
            None,
            True,
        )
        fake.assert_pushed(ImportUser, lambda job: job.row == 3)
        fake.assert_pushed_times(ImportUser, 3)

        found = await routed.find_batch(batch_id)
        assert found is not None
        assert (found.id, found.name, found.total_jobs, found.pending_jobs) == (
            batch_id,
            "import",
            4,
            4,
        )
        assert not found.finished and not found.cancelled
        assert await routed.find_batch(str(uuid.uuid4())) is None

        await routed.add_to_batch(batch_id, [ImportUser(4)])
        assert batch.jobs_of(ImportUser)[-1] == ImportUser(4)
        fake.assert_pushed_times(ImportUser, 4)
        found = await routed.find_batch(batch_id)
        assert found is not None and (found.total_jobs, found.pending_jobs) == (5, 5)
        with pytest.raises(BatchNotFound):
            await routed.add_to_batch(str(uuid.uuid4()), [ImportUser(5)])

        with pytest.raises(
            AssertionError, match=r"expected 2 batch\(es\), got 1; (?s:.*)ImportUser"
        ):
            fake.assert_batch_count(2)
        with pytest.raises(AssertionError, match="batch matching the predicate; batches:"):
            fake.assert_batched(lambda batch: batch.name == "export")
        with pytest.raises(AssertionError, match=r"expected no batch; (?s:.*)ImportUser"):
            fake.assert_nothing_batched()
    assert await stored(backend, queue_name) == 0


# -- TEST-5: chains ----------------------------------------------------------------------


async def test_a_chain_is_recorded_head_first_and_its_head_pushed_TEST_5(
    routed: QueueFacade, backend: JobQueueBackend, queue_name: str
) -> None:
    with routed.fake() as fake:
        fake.assert_nothing_chained()
        head_id = await (
            routed.chain([GenerateReport("2024-02"), UploadToBucket("s3")])
            .catch("alert")
            .dispatch()
        )
        fake.assert_chained(["GenerateReport", "UploadToBucket"])
        fake.assert_chained([GenerateReport, UploadToBucket])
        (chain,) = fake.chained()
        assert chain.id == head_id and chain.catch == "alert"
        assert chain.link(GenerateReport, 0) == GenerateReport("2024-02")
        assert chain.link(UploadToBucket) == UploadToBucket("s3")
        with pytest.raises(AssertionError, match="no link 1"):
            chain.link(GenerateReport, 1)
        fake.assert_pushed(GenerateReport)
        fake.assert_not_pushed(UploadToBucket)  # a later link waits for the one before

        with pytest.raises(AssertionError, match=r"chain \['GenerateReport'\]; chains:"):
            fake.assert_chained(["GenerateReport"])
        with pytest.raises(AssertionError, match=r"expected no chain; (?s:.*)UploadToBucket"):
            fake.assert_nothing_chained()
    assert await stored(backend, queue_name) == 0


async def test_a_chain_across_connections_is_refused_under_the_fake_TEST_5(
    routed: QueueFacade,
) -> None:
    other = MemoryBackend()
    routed.register_connection("other", BackendDriver(other, "memory"))
    routed.route(UploadToBucket, connection="other")
    try:
        with routed.fake() as fake:
            with pytest.raises(ConfigurationError, match="different connections"):
                await routed.chain([GenerateReport(), UploadToBucket()]).dispatch()
            fake.assert_nothing_chained()
            fake.assert_nothing_pushed()
    finally:
        await other.close()


# -- TEST-6: retries ---------------------------------------------------------------------


def failed_record(connection: str, queue: str, n: int) -> FailedJobRecord:
    """The record a worker would have written for a ``Ping`` that failed on ``queue``."""
    return FailedJobRecord(
        id=str(uuid.uuid4()),
        connection=connection,
        queue=queue,
        job_name="Ping",
        envelope={
            "queue": queue,
            "id": str(1000 + n),
            "name": "Ping",
            "data": {"n": n},
            "options": {"attempts": 3},
            "created_at_ms": 0,
        },
        exception="ValueError: boom",
        failed_at=datetime.now(UTC),
    )


async def test_retries_push_into_the_fake_and_remove_the_record_TEST_6(
    routed: QueueFacade, backend: JobQueueBackend, queue_name: str
) -> None:
    routed.registry.register(Ping)
    store = MemoryFailedJobStore()
    routed.set_failed_store(store)
    records = [failed_record(routed.connection_name(), queue_name, n) for n in (1, 2, 3)]
    for record in records:
        await store.log(record)
    with routed.fake() as fake:
        assert await routed.retry_failed(records[0].id) is True
        fake.assert_pushed(Ping, lambda job: job.n == 1)
        assert await store.find(records[0].id) is None
        assert await routed.retry_all_failed() == 2
        assert fake.pushed(Ping) == [Ping(n=1), Ping(n=2), Ping(n=3)]
        fake.assert_pushed_on_queue(Ping, queue_name)
        fake.assert_pushed_on_connection(Ping, routed.connection_name())
        assert await store.all() == []
    assert await stored(backend, queue_name) == 0  # the installed driver got no write


async def test_a_retry_under_the_fake_needs_no_connection_TEST_6(bare: QueueFacade) -> None:
    bare.registry.register(Ping)
    store = MemoryFailedJobStore()
    bare.set_failed_store(store)
    record = failed_record("default", "billing", 4)  # a connection never registered
    await store.log(record)
    unknown = dataclass_replace_name(failed_record("default", "billing", 5), "Nobody")
    await store.log(unknown)
    with bare.fake() as fake:
        assert await bare.retry_all_failed() == 1
        fake.assert_pushed_on_queue(Ping, "billing")
    assert [kept.id for kept in await store.all()] == [unknown.id]  # no class: kept


def dataclass_replace_name(record: FailedJobRecord, name: str) -> FailedJobRecord:
    envelope = {**record.envelope, "name": name}
    return FailedJobRecord(
        record.id,
        record.connection,
        record.queue,
        name,
        envelope,
        record.exception,
        record.failed_at,
    )


# -- TEST-9 / TX-15: after commit --------------------------------------------------------


async def test_after_commit_pushes_are_recorded_inside_the_open_transaction_TEST_9(
    routed: QueueFacade,
    backend: JobQueueBackend,
    queue_name: str,
    pg_dsn: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    conn = await asyncpg.connect(pg_dsn)
    try:
        with routed.fake() as fake:
            async with lane_pg.transaction(conn):
                await routed.push(Receipt(order=1))  # Job.after_commit
                await routed.push_after_commit(Ping(n=2))
                monkeypatch.setenv("LANE_PG_AFTER_COMMIT", "true")
                await routed.push(Ping(n=3))
                await routed.bulk([Ping(n=4)])
                assert conn.is_in_transaction()
                fake.assert_pushed(Receipt, lambda job: job.order == 1)
                assert fake.pushed(Ping) == [Ping(n=2), Ping(n=3), Ping(n=4)]
                assert fake.pushed_with_overrides(Ping)[0] == EnvelopeOverrides(after_commit=True)
            fake.assert_pushed_times(Ping, 3)  # the commit adds nothing
    finally:
        await conn.close()
    assert await stored(backend, queue_name) == 0


# -- INSP-6: counts and listings -----------------------------------------------------


async def test_counts_and_listings_answer_from_the_recorded_pushes_INSP_6(
    bare: QueueFacade,
) -> None:
    with bare.fake():
        await bare.push(Ping(n=1))
        await bare.later(timedelta(hours=1), Ping(n=2))
        await bare.push_with(Ping(n=3), EnvelopeOverrides(queue="other"))
        assert (await bare.size(), await bare.size("default"), await bare.size("other")) == (
            3,
            2,
            1,
        )
        assert await bare.pending_size("default") == 1
        assert await bare.delayed_size() == 1
        assert await bare.reserved_size() == 0
        pending = await bare.pending_jobs()
        assert [(job.queue, job.name, job.payload, job.attempts) for job in pending] == [
            ("default", "Ping", {"n": 1}, 0),
            ("other", "Ping", {"n": 3}, 0),
        ]
        assert all(job.created_at is None and job.id for job in pending)
        (delayed,) = await bare.delayed_jobs("default")
        assert (delayed.payload, delayed.created_at) == ({"n": 2}, None)
        assert await bare.reserved_jobs() == []
        assert await bare.pending_jobs(limit=1) == pending[:1]
        assert await bare.clear("other") == 1
        assert await bare.clear() == 2
        assert await bare.size() == 0


# -- nothing written, whatever the push ------------------------------------------------


async def test_no_push_of_any_kind_writes_to_the_real_store(
    routed: QueueFacade, backend: JobQueueBackend, backend_kind: str, queue_name: str, pg_dsn: str
) -> None:
    with routed.fake() as fake:
        await routed.push(Ping(n=1))
        await routed.later(timedelta(seconds=5), Ping(n=2))
        await routed.bulk([Ping(n=3), Ping(n=4)])
        await routed.push_unique(Report(queue_name))
        await routed.push(Search("q"))
        batch_id = await routed.batch([ImportUser(1)]).dispatch()
        await routed.chain([GenerateReport(), UploadToBucket()]).dispatch()
        assert len(fake.pushes) == 8
    assert await stored(backend, queue_name) == 0
    if backend_kind == "postgres":  # and asked of the table itself
        conn = await asyncpg.connect(pg_dsn)
        try:
            jobs = await conn.fetchval(
                "SELECT count(*) FROM lane.jobs WHERE queue = $1", queue_name
            )
            keys = await conn.fetchval(
                "SELECT count(*) FROM lane.dedup_owners"
                " WHERE queue = $1 OR dedup_id LIKE '%' || $1 || '%'",
                queue_name,
            )
            batches = await conn.fetchval(
                "SELECT count(*) FROM lane.batches WHERE id::text = $1", batch_id
            )
        finally:
            await conn.close()
        assert (jobs, keys, batches) == (0, 0, 0)


# -- running the recorded jobs ---------------------------------------------------------


async def test_run_pushed_runs_every_recorded_job_in_push_order(bare: QueueFacade) -> None:
    Cascade.facade = bare
    try:
        with bare.fake() as fake:
            await bare.push(Cascade(n=1))
            await bare.push(SyncPing(n=2))
            await bare.later(timedelta(hours=1), Ping(n=3))
            assert await fake.run_pushed() == 4
            assert LOG == ["cascade 1", "sync 2", "ping 3", "ping 10"]
            assert await fake.run_pushed() == 0  # each job runs once
            fake.assert_pushed(Ping, lambda job: job.n == 10)
    finally:
        Cascade.facade = None


def test_the_fake_is_the_group_recorder_the_builders_consult(bare: QueueFacade) -> None:
    with bare.fake() as fake:
        recorder: GroupRecorder | None = bare.installed_fake()
        assert recorder is fake
