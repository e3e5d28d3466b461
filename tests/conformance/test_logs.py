"""Job logs (MGMT-13..15, EVS-5)."""

from __future__ import annotations

import pytest

from lane_pg.backend import JobQueueBackend
from lane_pg.types import LogPage
from tests.helpers import Clock, events


async def five_logs(backend: JobQueueBackend, queue: str, clock: Clock) -> str:
    job = await backend.add_job(queue, "n", now=clock.at(0))
    for i in range(1, 6):
        kept = await backend.add_job_log(queue, job.id, f"m{i}", now=clock.at(i))
        assert kept == i
    return job.id


def messages(page: LogPage) -> list[str]:
    return [entry.message for entry in page.logs]


async def test_add_log_appends_with_timestamp_MGMT_13(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    job_id = await five_logs(backend, queue_name, clock)
    page = await backend.get_job_logs(queue_name, job_id)
    assert page.count == 5
    assert messages(page) == ["m1", "m2", "m3", "m4", "m5"]
    assert [entry.ts for entry in page.logs] == [clock.at(i) for i in range(1, 6)]


async def test_add_log_keep_trims_to_newest_MGMT_13(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    job = await backend.add_job(queue_name, "n", now=clock.at(0))
    results = [
        await backend.add_job_log(queue_name, job.id, f"m{i}", keep=3, now=clock.at(i))
        for i in range(1, 6)
    ]
    assert results == [1, 2, 3, 3, 3]
    page = await backend.get_job_logs(queue_name, job.id)
    assert (messages(page), page.count) == (["m3", "m4", "m5"], 3)


async def test_logs_write_no_events_EVS_5_MGMT_13(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    job = await backend.add_job(queue_name, "n", now=clock.at(0))
    before = await events(backend, queue_name)
    await backend.add_job_log(queue_name, job.id, "a", now=clock.at(1))
    await backend.add_job_log(queue_name, job.id, "b", keep=1, now=clock.at(2))
    await backend.get_job_logs(queue_name, job.id)
    await backend.clear_job_logs(queue_name, job.id)
    assert await events(backend, queue_name) == before


@pytest.mark.parametrize(
    ("start", "end", "asc", "expected"),
    [
        (0, 1, True, ["m1", "m2"]),
        (0, 1, False, ["m5", "m4"]),
        (0, -1, True, ["m1", "m2", "m3", "m4", "m5"]),
        (0, -1, False, ["m5", "m4", "m3", "m2", "m1"]),
        (-2, -1, True, ["m4", "m5"]),
        (-2, -1, False, ["m2", "m1"]),
        (1, 3, True, ["m2", "m3", "m4"]),
        (1, -2, False, ["m4", "m3", "m2"]),
        (3, 100, True, ["m4", "m5"]),
        (4, 4, False, ["m1"]),
        (3, 1, True, []),
        (10, 20, True, []),
        (-100, 0, True, ["m1"]),
    ],
)
async def test_get_logs_windows_MGMT_14(
    backend: JobQueueBackend,
    queue_name: str,
    clock: Clock,
    start: int,
    end: int,
    asc: bool,
    expected: list[str],
) -> None:
    job_id = await five_logs(backend, queue_name, clock)
    page = await backend.get_job_logs(queue_name, job_id, start, end, asc=asc)
    assert messages(page) == expected
    assert page.count == 5


async def test_get_logs_missing_job_or_no_logs_MGMT_14(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    assert await backend.get_job_logs(queue_name, "missing") == LogPage([], 0)
    job = await backend.add_job(queue_name, "n", now=clock.at(0))
    assert await backend.get_job_logs(queue_name, job.id) == LogPage([], 0)


async def test_clear_logs_keep_newest_MGMT_15(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    job_id = await five_logs(backend, queue_name, clock)
    await backend.clear_job_logs(queue_name, job_id, keep=2)
    page = await backend.get_job_logs(queue_name, job_id)
    assert (messages(page), page.count) == (["m4", "m5"], 2)


async def test_clear_logs_all_MGMT_15(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    job_id = await five_logs(backend, queue_name, clock)
    await backend.clear_job_logs(queue_name, job_id)
    assert await backend.get_job_logs(queue_name, job_id) == LogPage([], 0)
    assert await backend.add_job_log(queue_name, job_id, "again", now=clock.at(9)) == 1


async def test_logs_are_per_job_MGMT_13(
    backend: JobQueueBackend, queue_name: str, queue_b: str, clock: Clock
) -> None:
    a = await backend.add_job(queue_name, "a", None, {"job_id": "same"}, now=clock.at(0))
    b = await backend.add_job(queue_b, "b", None, {"job_id": "same"}, now=clock.at(0))
    other = await backend.add_job(queue_name, "c", now=clock.at(0))
    await backend.add_job_log(queue_name, a.id, "for a", now=clock.at(1))
    await backend.add_job_log(queue_b, b.id, "for b", now=clock.at(1))
    assert messages(await backend.get_job_logs(queue_name, "same")) == ["for a"]
    assert messages(await backend.get_job_logs(queue_b, "same")) == ["for b"]
    assert (await backend.get_job_logs(queue_name, other.id)).count == 0


async def test_a_message_is_kept_as_written_MGMT_13(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    job = await backend.add_job(queue_name, "n", now=clock.at(0))
    written = ["12:30: a:b", "", 'line one\nline "two" \\ é ✓ 😀', "   "]
    for i, message in enumerate(written):
        await backend.add_job_log(queue_name, job.id, message, now=clock.at(i + 1))
    page = await backend.get_job_logs(queue_name, job.id, asc=False)
    assert messages(page) == written[::-1]
    assert [entry.ts for entry in page.logs] == [clock.at(i) for i in range(4, 0, -1)]
