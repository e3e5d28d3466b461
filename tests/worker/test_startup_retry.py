"""``open_when_reachable``: what a worker retries at start-up and what it gives up on at
once, and how often it says so. The real-process side (a server that comes up after the
worker, fail-fast exits) is in tests/worker/test_lifecycle_cli.py."""

from __future__ import annotations

import asyncio
import logging
import socket
from typing import Any

import pytest

from lane_pg.errors import SchemaVersionMismatch
from lane_pg.worker.start import DatabaseUnreachable, is_unreachable, open_when_reachable

FAST: dict[str, Any] = {"first_delay": 0.001, "max_delay": 0.004}


class DriverError(Exception):
    """An error carrying a SQLSTATE, as asyncpg's do."""

    def __init__(self, sqlstate: str, message: str) -> None:
        super().__init__(message)
        self.sqlstate = sqlstate


@pytest.mark.parametrize(
    "error",
    [
        ConnectionRefusedError(111, "Connect call failed"),
        TimeoutError(),
        socket.gaierror(-2, "Name or service not known"),
        DriverError("57P03", "the database system is starting up"),
        DriverError("57P03", "the database system is shutting down"),
        DriverError("53300", "sorry, too many clients already"),
        DriverError("08006", "connection failure"),
    ],
    ids=["refused", "timeout", "dns", "starting-up", "shutting-down", "too-many", "08"],
)
def test_an_unreachable_server_is_retried(error: Exception) -> None:
    assert is_unreachable(error)


@pytest.mark.parametrize(
    "error",
    [
        DriverError("28P01", 'password authentication failed for user "app"'),
        DriverError("28000", 'role "app" does not exist'),
        DriverError("3D000", 'database "app" does not exist'),
        ValueError("invalid DSN"),
        SchemaVersionMismatch(None, 19, "schema 'lane' is not installed"),
    ],
    ids=["password", "role", "database", "dsn", "schema"],
)
def test_what_waiting_cannot_fix_is_not_retried(error: Exception) -> None:
    assert not is_unreachable(error)


async def test_retries_until_it_answers_logging_once_per_window(
    caplog: pytest.LogCaptureFixture,
) -> None:
    calls: list[int] = []

    async def opener() -> str:
        calls.append(1)
        if len(calls) < 5:
            raise ConnectionRefusedError(111, "Connect call failed")
        return "open"

    with caplog.at_level(logging.WARNING, logger="lane_pg.worker"):
        assert await open_when_reachable(opener, "the database db", **FAST) == "open"
    assert len(calls) == 5
    waiting = [r for r in caplog.records if "waiting for the database db" in r.getMessage()]
    assert len(waiting) == 1, caplog.text
    assert "ConnectionRefusedError" in waiting[0].getMessage()
    assert any("answered after" in r.getMessage() for r in caplog.records)


async def test_a_new_window_logs_again(caplog: pytest.LogCaptureFixture) -> None:
    calls: list[int] = []

    async def opener() -> str:
        calls.append(1)
        if len(calls) < 3:
            raise ConnectionRefusedError(111, "Connect call failed")
        return "open"

    with caplog.at_level(logging.WARNING, logger="lane_pg.worker"):
        await open_when_reachable(opener, "the database db", log_every=0, **FAST)
    assert caplog.text.count("waiting for the database db") == 2


async def test_fails_at_once_on_what_waiting_cannot_fix() -> None:
    calls: list[int] = []

    async def opener() -> str:
        calls.append(1)
        raise DriverError("28P01", "password authentication failed")

    with pytest.raises(DriverError, match="password"):
        await open_when_reachable(opener, "the database db", **FAST)
    assert calls == [1]


async def test_the_timeout_bounds_the_wait() -> None:
    async def opener() -> str:
        raise ConnectionRefusedError(111, "Connect call failed")

    with pytest.raises(DatabaseUnreachable, match=r"within the start-up timeout of 0\.05s"):
        await open_when_reachable(opener, "the database db", timeout=0.05, **FAST)


async def test_the_stop_event_ends_the_wait() -> None:
    stop = asyncio.Event()
    calls: list[int] = []

    async def opener() -> str:
        calls.append(1)
        if len(calls) == 2:
            stop.set()
        raise ConnectionRefusedError(111, "Connect call failed")

    assert await open_when_reachable(opener, "the database db", stop=stop, first_delay=0.01) is None
    assert len(calls) == 2


async def test_a_server_that_was_down_gets_time_to_have_its_schema_installed(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Compose order: the server comes up, then a migrate runs beside the worker."""
    answers = [
        ConnectionRefusedError(111, "Connect call failed"),
        SchemaVersionMismatch(None, 19, "schema 'lane' is not installed"),
        SchemaVersionMismatch(None, 19, "schema 'lane' is not installed"),
    ]

    async def opener() -> str:
        if answers:
            raise answers.pop(0)
        return "open"

    with caplog.at_level(logging.WARNING, logger="lane_pg.worker"):
        assert await open_when_reachable(opener, "the database db", **FAST) == "open"
    assert caplog.text.count("answers, but schema 'lane' is not installed") == 1, caplog.text


async def test_the_setup_grace_is_bounded() -> None:
    answers: list[Exception] = [ConnectionRefusedError(111, "Connect call failed")]

    async def opener() -> str:
        if answers:
            raise answers.pop(0)
        raise SchemaVersionMismatch(None, 19, "schema 'lane' is not installed")

    with pytest.raises(DatabaseUnreachable, match="answers, but schema 'lane' is not installed"):
        await open_when_reachable(opener, "the database db", setup_grace=0.02, **FAST)


async def test_a_database_created_after_the_worker_started_is_waited_for(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A server up from the start without the database: a createdb (then a migrate) may
    come, so the first answer is not final; the wait goes on through the missing schema."""
    answers: list[Exception] = [
        DriverError("3D000", 'database "app" does not exist'),
        DriverError("3D000", 'database "app" does not exist'),
        SchemaVersionMismatch(None, 19, "schema 'lane' is not installed"),
    ]

    async def opener() -> str:
        if answers:
            raise answers.pop(0)
        return "open"

    with caplog.at_level(logging.WARNING, logger="lane_pg.worker"):
        assert await open_when_reachable(opener, "the database db", **FAST) == "open"
    assert caplog.text.count('answers, but database "app" does not exist') == 1, caplog.text


async def test_a_missing_database_is_waited_for_no_longer_than_the_grace() -> None:
    async def opener() -> str:
        raise DriverError("3D000", 'database "app" does not exist')

    with pytest.raises(DatabaseUnreachable, match='answers, but database "app" does not exist'):
        await open_when_reachable(opener, "the database db", setup_grace=0.02, **FAST)


@pytest.mark.parametrize(
    "error",
    [
        SchemaVersionMismatch(None, 19, "schema 'lane' is not installed"),
        SchemaVersionMismatch(3, 19, "schema 'lane' is older"),
    ],
    ids=["missing", "older"],
)
async def test_a_server_up_from_the_start_fails_at_once_without_its_schema(
    error: Exception,
) -> None:
    calls: list[int] = []

    async def opener() -> str:
        calls.append(1)
        raise error

    with pytest.raises(SchemaVersionMismatch):
        await open_when_reachable(opener, "the database db", **FAST)
    assert calls == [1]


async def test_an_older_schema_is_never_waited_for() -> None:
    answers: list[Exception] = [ConnectionRefusedError(111, "Connect call failed")]

    async def opener() -> str:
        if answers:
            raise answers.pop(0)
        raise SchemaVersionMismatch(3, 19, "schema 'lane' is older")

    with pytest.raises(SchemaVersionMismatch, match="older"):
        await open_when_reachable(opener, "the database db", **FAST)
