"""The lane scheduler's storage in PostgreSQL (LREL-5): the same storage contract as the
file storage (LREL-3, LREL-4), and a manager restarted over it resubmits what was in
flight (LREL-6)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import pytest

from lane_pg.errors import LaneError
from lane_pg.postgres.backend import PostgresBackend
from lane_pg.postgres.lane_storage import PostgresLaneStorage
from lane_pg.scheduler import (
    COMMAND_COMPLETED,
    DeadLetter,
    DeadLetterQueue,
    LaneManager,
    StoredCommand,
)
from lane_pg.types import JSON


@dataclass
class Charge:
    payload: JSON
    command_type: str = "charge"

    async def execute(self) -> JSON:
        return self.payload


@pytest.fixture
async def backend(pg_dsn: str) -> AsyncIterator[PostgresBackend]:
    opened = await PostgresBackend.connect(pg_dsn, max_size=2)
    yield opened
    await opened.close()


@pytest.fixture
def name() -> str:
    return f"app-{uuid.uuid4().hex[:10]}"


async def test_commands_and_dead_letters_survive_a_restart_LREL_5(
    backend: PostgresBackend, pg_dsn: str, name: str
) -> None:
    storage = PostgresLaneStorage(backend, name=name)
    now = datetime.now(UTC).replace(microsecond=0)
    commands = [
        StoredCommand(f"c{i}", "work", "job", {"n": i}, now + timedelta(seconds=i))
        for i in range(3)
    ]
    for command in reversed(commands):  # stored out of order, loaded in submission order
        await storage.save_command(command)
    await storage.remove_command("c1")
    letters = [
        DeadLetter("work", f"d{i}", "job", f"error {i}", 2, now, {"n": i} if i else None)
        for i in range(2)
    ]
    for letter in letters:
        await storage.save_dead_letter(letter)
    other = PostgresLaneStorage(backend, name=f"{name}-other")
    await other.save_command(StoredCommand("c0", "work", "job", None, now))

    restarted = await PostgresBackend.connect(pg_dsn, max_size=1)
    try:
        reopened = PostgresLaneStorage(restarted, name=name)
        assert await reopened.load_commands() == [commands[0], commands[2]]
        assert await reopened.load_dead_letters() == letters
        await reopened.clear_all()
        assert await reopened.load_commands() == []
        assert await reopened.load_dead_letters() == []
        # Another storage name is another application's: untouched.
        assert [c.command_id for c in await other.load_commands()] == ["c0"]
    finally:
        await other.clear_all()
        await restarted.close()


async def test_a_restarted_manager_resubmits_what_was_in_flight_LREL_5_LREL_6(
    backend: PostgresBackend, name: str
) -> None:
    storage = PostgresLaneStorage(backend, name=name)
    first = LaneManager.builder().with_default_lanes().with_storage(storage).build()
    futures = [await first.submit("query", Charge({"n": n})) for n in range(2)]
    futures.append(await first.submit("query", Charge({"n": 9}, command_type="mystery")))
    await first.stop()  # never started: the three commands stay stored
    assert all(future.cancelled() for future in futures)
    assert len(await storage.load_commands()) == 3

    rebuilt: list[JSON] = []

    def factory(payload: JSON) -> Charge:
        rebuilt.append(payload)
        return Charge(payload)

    dlq = DeadLetterQueue(10)
    second = (
        LaneManager.builder()
        .with_default_lanes()
        .with_storage(PostgresLaneStorage(backend, name=name))
        .with_dlq(dlq)
        .with_command_factory("charge", factory)
        .build()
    )
    completed = second.subscribe_filtered(lambda event: event.key == COMMAND_COMPLETED)
    async with second:
        for _ in range(2):
            await asyncio.wait_for(completed.recv(), 10)
        await second.drain(10)
    assert sorted(rebuilt, key=str) == [{"n": 0}, {"n": 1}]
    assert await storage.load_commands() == []
    [letter] = await storage.load_dead_letters()
    assert (letter.command_type, letter.payload) == ("mystery", {"n": 9})
    await storage.clear_all()


async def test_bad_input_is_refused_and_stores_nothing_LREL_5(
    backend: PostgresBackend, name: str
) -> None:
    with pytest.raises(ValueError, match="name"):
        PostgresLaneStorage(backend, name="")
    storage = PostgresLaneStorage(backend, name=name)
    now = datetime.now(UTC)
    with pytest.raises(LaneError):
        await storage.save_command(StoredCommand("", "work", "job", None, now))
    with pytest.raises(ValueError, match="JSON"):
        await storage.save_command(StoredCommand("c", "work", "job", {"n": float("nan")}, now))
    assert await storage.load_commands() == []
