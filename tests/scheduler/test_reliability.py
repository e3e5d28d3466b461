"""LREL-1..4 and 6..8: dead letters, storage, recovery, shutdown and drain."""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import pytest

from lane_pg.scheduler import (
    COMMAND_COMPLETED,
    COMMAND_DEAD_LETTERED,
    COMMAND_FAILED,
    SHUTDOWN_STARTED,
    CommandFailed,
    DeadLetter,
    DeadLetterQueue,
    DrainTimeout,
    LaneConfig,
    LaneManager,
    LaneStorage,
    LocalStorage,
    ShutdownInProgress,
    StoredCommand,
)
from lane_pg.types import JSON

DEADLINE = 5.0


@dataclass
class JobRow:
    """A persistable command: ``command_type`` plus a JSON ``payload``."""

    payload: JSON
    command_type: str = "job"
    fail: bool = False

    async def execute(self) -> JSON:
        if self.fail:
            raise RuntimeError(f"failed {self.payload}")
        return self.payload


class RecordingStorage:
    """A ``LaneStorage`` stub that records every call."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []

    async def save_command(self, command: StoredCommand) -> None:
        self.calls.append(("save_command", command.command_id))

    async def load_commands(self) -> list[StoredCommand]:
        return []

    async def remove_command(self, command_id: str) -> None:
        self.calls.append(("remove_command", command_id))

    async def save_dead_letter(self, letter: DeadLetter) -> None:
        self.calls.append(("save_dead_letter", letter.command_id))

    async def load_dead_letters(self) -> list[DeadLetter]:
        return []

    async def clear_all(self) -> None:
        self.calls.append(("clear_all", ""))


async def test_lrel_1_dlq_keeps_the_newest_letters() -> None:
    dlq = DeadLetterQueue(2)
    manager = LaneManager.builder().with_lane("work", LaneConfig(1, 1)).with_dlq(dlq).build()
    dead = manager.subscribe_filtered(lambda e: e.key == COMMAND_DEAD_LETTERED)
    async with manager:
        futures = []
        for i in range(3):
            fut = await manager.submit("work", JobRow(i, command_type=f"type-{i}", fail=True))
            futures.append(fut)
            with pytest.raises(CommandFailed):
                await asyncio.wait_for(fut, DEADLINE)
    letters = await dlq.list()
    assert [(x.command_type, x.error) for x in letters] == [
        ("type-1", "RuntimeError: failed 1"),
        ("type-2", "RuntimeError: failed 2"),
    ]
    assert [x.command_id for x in letters] == [f.command_id for f in futures[1:]]
    assert all(x.lane_id == "work" and x.attempts == 1 for x in letters)
    assert all(isinstance(x.failed_at, datetime) for x in letters)
    assert [e.command_type for e in dead.drain_nowait()] == ["type-0", "type-1", "type-2"]


async def test_lrel_2_no_dlq_no_dead_letter_event() -> None:
    manager = LaneManager.builder().with_lane("work", LaneConfig(1, 1)).build()
    stream = manager.subscribe_filtered(lambda e: e.key in {COMMAND_FAILED, COMMAND_DEAD_LETTERED})
    async with manager:
        fut = await manager.submit("work", JobRow(1, fail=True))
        with pytest.raises(CommandFailed):
            await asyncio.wait_for(fut, DEADLINE)
        assert [e.key for e in stream.drain_nowait()] == [COMMAND_FAILED]
    assert manager.dlq is None


async def test_lrel_3_storage_protocol_call_sequence() -> None:
    storage = RecordingStorage()
    typed: LaneStorage = storage  # the stub satisfies the protocol (checked by mypy)
    manager = (
        LaneManager.builder()
        .with_lane("work", LaneConfig(1, 1))
        .with_storage(typed)
        .with_dlq(DeadLetterQueue(5))
        .build()
    )
    async with manager:
        good = await manager.submit("work", JobRow("ok"))
        await asyncio.wait_for(good, DEADLINE)
        assert storage.calls == [
            ("save_command", good.command_id),
            ("remove_command", good.command_id),
        ]
        storage.calls.clear()
        bad = await manager.submit("work", JobRow("no", fail=True))
        with pytest.raises(CommandFailed):
            await asyncio.wait_for(bad, DEADLINE)
        assert storage.calls == [
            ("save_command", bad.command_id),
            ("save_dead_letter", bad.command_id),
            ("remove_command", bad.command_id),
        ]
        storage.calls.clear()

        async def not_persistable() -> JSON:  # no payload attribute: memory only
            return 1

        await asyncio.wait_for(await manager.submit("work", not_persistable), DEADLINE)
        assert storage.calls == []


async def test_lrel_4_local_storage_survives_a_restart(tmp_path: Path) -> None:
    root = tmp_path / "missing" / "queue_data"
    storage = LocalStorage(root)
    assert root.is_dir()
    now = datetime.now(UTC)
    commands = [StoredCommand(f"c{i}", "work", "job", {"n": i}, now) for i in range(3)]
    for command in commands:
        await storage.save_command(command)
    await storage.remove_command("c1")
    letters = [DeadLetter("work", f"d{i}", "job", f"error {i}", 2, now, {"n": i}) for i in range(2)]
    for letter in letters:
        await storage.save_dead_letter(letter)

    reopened = LocalStorage(root)
    assert await reopened.load_commands() == [commands[0], commands[2]]
    assert await reopened.load_dead_letters() == letters
    await reopened.clear_all()
    assert await reopened.load_commands() == []
    assert await reopened.load_dead_letters() == []


async def test_lrel_6_recovery_rebuilds_through_the_factory(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    first = LaneManager.builder().with_default_lanes().with_storage(LocalStorage(tmp_path)).build()
    futures = [await first.submit("query", JobRow({"n": i})) for i in range(2)]
    futures.append(await first.submit("query", JobRow({"n": 9}, command_type="mystery")))
    await first.stop()  # never started: the three commands stay persisted
    assert all(f.cancelled() for f in futures)

    rebuilt: list[JSON] = []

    def factory(payload: JSON) -> JobRow:
        rebuilt.append(payload)
        return JobRow(payload)

    storage = LocalStorage(tmp_path)
    dlq = DeadLetterQueue(10)
    second = (
        LaneManager.builder()
        .with_default_lanes()
        .with_storage(storage)
        .with_dlq(dlq)
        .with_command_factory("job", factory)
        .build()
    )
    completed = second.subscribe_filtered(lambda e: e.key == COMMAND_COMPLETED)
    with caplog.at_level(logging.WARNING, logger="lane_pg.scheduler"):
        async with second:
            for _ in range(2):
                await asyncio.wait_for(completed.recv(), DEADLINE)
            await second.drain(DEADLINE)
    assert rebuilt == [{"n": 0}, {"n": 1}]
    assert await storage.load_commands() == []
    [letter] = await dlq.list()
    assert (letter.command_type, letter.payload, letter.attempts) == ("mystery", {"n": 9}, 0)
    assert "mystery" in letter.error
    assert [x.command_type for x in await storage.load_dead_letters()] == ["mystery"]
    assert any("mystery" in record.getMessage() for record in caplog.records)


async def test_lrel_7_shutdown_refuses_new_commands() -> None:
    manager = LaneManager.builder().with_lane("work", LaneConfig(1, 1)).build()
    events = manager.subscribe_filtered(lambda e: e.key == SHUTDOWN_STARTED)
    async with manager:
        await manager.shutdown()
        await manager.shutdown()
        with pytest.raises(ShutdownInProgress):
            await manager.submit("work", JobRow(1))
        assert len(events.drain_nowait()) == 1
    assert events.drain_nowait() == []  # stop() after shutdown() emits nothing more


async def test_lrel_8_drain_waits_for_accepted_work_or_times_out() -> None:
    async def short() -> JSON:
        await asyncio.sleep(0.1)
        return "done"

    gate = asyncio.Event()

    async def blocked() -> JSON:
        await gate.wait()
        return "released"

    manager = LaneManager.builder().with_lane("work", LaneConfig(1, 1)).build()
    async with manager:
        running = await manager.submit("work", short)
        queued = await manager.submit("work", short)  # accepted, not yet started
        await manager.shutdown()
        began = time.monotonic()
        await manager.drain(DEADLINE)
        assert 0.18 <= time.monotonic() - began < 2.0
        assert running.result() == queued.result() == "done"

    manager = LaneManager.builder().with_lane("work", LaneConfig(1, 1)).build()
    async with manager:
        stuck = await manager.submit("work", blocked)
        began = time.monotonic()
        with pytest.raises(DrainTimeout) as info:
            await manager.drain(0.05)
        assert 0.045 <= time.monotonic() - began < 2.0
        assert info.value.outstanding == 1
        gate.set()
        await manager.drain(DEADLINE)
        assert stuck.result() == "released"
