"""``python -m lane_pg events QUEUE [--record on|off]`` in a subprocess, as a user runs it
(event recording per queue; ADD-9 and EVS-4 while on). Its bad-DSN, bad-name and help
cases run with the other queue commands' in tests/test_cli_queue_commands.py."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from lane_pg.postgres.backend import PostgresBackend
from tests.test_cli_queue_commands import cli, unique_queue


@pytest.fixture
async def backend(pg_dsn: str) -> AsyncIterator[PostgresBackend]:
    be = await PostgresBackend.connect(pg_dsn, max_size=2)
    yield be
    await be.close()


async def test_events_shows_on_for_a_new_queue(pg_dsn: str, backend: PostgresBackend) -> None:
    queue = unique_queue("evshow")
    result = await cli("events", queue, "--dsn", pg_dsn)
    assert result.returncode == 0, result.stderr
    assert result.stdout == f"lane_pg: queue '{queue}': record events on\n"
    assert result.stderr == ""
    assert queue not in await backend.list_queues()  # showing creates nothing


async def test_events_turns_recording_off_and_on(pg_dsn: str, backend: PostgresBackend) -> None:
    queue = unique_queue("evset")
    result = await cli("events", queue, "--record", "off", dsn=pg_dsn)
    assert result.returncode == 0, result.stderr
    assert result.stdout == f"lane_pg: set queue '{queue}': record events off\n"
    assert await backend.get_queue_events(queue) is False
    assert queue in await backend.list_queues()
    await backend.add_job(queue, "quiet")
    assert await backend.read_events(queue) == []

    shown = await cli("events", queue, dsn=pg_dsn)
    assert shown.stdout == f"lane_pg: queue '{queue}': record events off\n"
    result = await cli("events", queue, "--record", "ON", dsn=pg_dsn)
    assert result.returncode == 0, result.stderr
    assert result.stdout == f"lane_pg: set queue '{queue}': record events on\n"
    assert await backend.get_queue_events(queue) is True


@pytest.mark.parametrize("value", ["maybe", "1", "true", ""])
async def test_events_refuses_other_values_and_changes_nothing(
    pg_dsn: str, backend: PostgresBackend, value: str
) -> None:
    queue = unique_queue("evbad")
    await backend.set_queue_events(queue, record=False)
    result = await cli("events", queue, "--record", value, dsn=pg_dsn)
    assert result.returncode == 1
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("lane_pg events: error: ")
    assert "expected 'on' or 'off'" in lines[0]
    assert await backend.get_queue_events(queue) is False
