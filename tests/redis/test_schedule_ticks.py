"""The cron matches a script asks the client for (lane_pg.redis.repeats.call_scheduled):
a finish that needs one writes nothing until it has it, and the successor it then stores
is the schedule's next match after the completion, in the same script."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from redis.asyncio import Redis

from lane_pg.redis.backend import RedisBackend
from lane_pg.redis.rows import epoch_ms
from lane_pg.types import ALL_STATES, QueueDemand

START = datetime(2026, 3, 28, 23, 0, tzinfo=UTC)
HOURLY = {"repeat": {"pattern": "15 * * * *", "tz": "Europe/Berlin", "key": "k"}}


async def test_a_cron_finish_asks_for_its_tick_before_writing(
    redis_client: Redis, prefix: str
) -> None:
    backend = RedisBackend(redis_client, prefix=prefix, owns_client=False)
    first = await backend.add_job("q", "n", None, HOURLY, now=START)
    assert first.available_at == datetime(2026, 3, 28, 23, 15, tzinfo=UTC)
    [job] = await backend.claim_jobs("w", [QueueDemand("q", 1)], 30, now=first.available_at)
    assert job.lock_token is not None
    late = START + timedelta(hours=5, minutes=20)  # downtime: four ticks passed
    events_before = await redis_client.xlen(backend.keys("q").events)

    # Without the match, the script answers with what it needs and writes nothing.
    answer = await backend.call(
        "complete_jobs",
        "q",
        {"items": [[job.id, job.lock_token, "null"]], "now": epoch_ms(late), "want_jobs": True},
    )
    assert answer["now"] == epoch_ms(late)
    assert ["15 * * * *", "Europe/Berlin", epoch_ms(late)] in answer["lane_ticks"]
    assert (await backend.get_job("q", job.id)).state == "active"
    assert await redis_client.xlen(backend.keys("q").events) == events_before

    # Through the client, the completion and the successor land in one call; the missed
    # ticks are skipped (the first match after the late completion).
    await backend.complete_job("q", job.id, job.lock_token, None, now=late)
    page = await backend.list_jobs("q", ALL_STATES, limit=10)
    states = sorted((row.state, row.available_at) for row in page.items)
    assert states == [
        ("completed", first.available_at),
        ("delayed", datetime(2026, 3, 29, 5, 15, tzinfo=UTC)),  # 07:15 CEST
    ]
    info = await backend.get_repeat("q", "k")
    assert info is not None and info.count == 2


async def test_an_interval_successor_needs_no_round_trip(redis_client: Redis, prefix: str) -> None:
    backend = RedisBackend(redis_client, prefix=prefix, owns_client=False)
    await backend.add_job("q", "n", None, {"repeat": {"every_ms": 7000}}, now=START)
    [job] = await backend.claim_jobs("w", [QueueDemand("q", 1)], 30, now=START)
    assert job.lock_token is not None
    late = START + timedelta(milliseconds=7000 * 1_000_003 + 1)
    answer = await backend.call(
        "complete_jobs",
        "q",
        {"items": [[job.id, job.lock_token, "null"]], "now": epoch_ms(late), "want_jobs": False},
    )
    assert answer == [["ok", "completed"]]
    info = await backend.get_repeat("q", "n:every:7000")
    assert info is not None
    assert info.next_at == START + timedelta(milliseconds=7000 * 1_000_004)


async def test_a_stall_that_stores_a_kept_cron_job_asks_for_its_tick_first(
    redis_client: Redis, prefix: str
) -> None:
    """The owner of a keep-last id fails for good on stalling; the duplicate it kept is a
    cron series' first occurrence, stored in the same script once the client gave its
    match (recover_stalled.lua through call_scheduled)."""
    backend = RedisBackend(redis_client, prefix=prefix, owns_client=False)
    keep = {"deduplication": {"id": "d", "keep_last_if_active": True}}
    owner = await backend.add_job("q", "n", None, keep, now=START)
    [running] = await backend.claim_jobs("w", [QueueDemand("q", 1)], 30, now=START)
    kept = await backend.add_job("q", "n", None, {**keep, **HOURLY}, now=START)
    assert kept.id == owner.id == running.id
    late = START + timedelta(minutes=40)
    events_before = await redis_client.xlen(backend.keys("q").events)

    answer = await backend.call(
        "recover_stalled", "q", {"now": epoch_ms(late), "max_stalled_count": 0}
    )
    assert ["15 * * * *", "Europe/Berlin", epoch_ms(late)] in answer["lane_ticks"]
    assert (await backend.get_job("q", owner.id)).state == "active"
    assert await redis_client.xlen(backend.keys("q").events) == events_before

    outcome = await backend.recover_stalled(["q"], max_stalled_count=0, now=late)
    assert [(o.id, o.state) for o in outcome] == [(owner.id, "failed")]
    successor_id = await backend.get_deduplication_job_id("q", "d")
    assert successor_id is not None and successor_id != owner.id
    successor = await backend.get_job("q", successor_id)
    assert successor is not None
    assert (successor.state, successor.available_at) == (
        "delayed",
        datetime(2026, 3, 29, 0, 15, tzinfo=UTC),
    )
