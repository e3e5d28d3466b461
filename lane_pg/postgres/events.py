"""A queue's event stream on PostgreSQL: ``read_events`` (EVS-2, ``lane.read_events`` of
sql/functions/70_events.sql) and the live subscription (EVS-7).

A subscriber polls: ``lane.event_horizon`` says how far the stream is final, then
``lane.read_events`` reads up to there, in id order. No NOTIFY is added to any write
(DESIGN.md: a pg_notify in every commit halved concurrent enqueue), so the write paths
pay nothing; an event arrives within about one ``poll_interval`` of its commit, a
little more while other transactions are still writing events (docs/decisions.md).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass

from lane_pg.backend.events import (
    Events,
    RecordAction,
    SubscribeEvents,
    action_event_data,
    subscription_arguments,
)
from lane_pg.postgres.arguments import event_bound
from lane_pg.postgres.calls import Entity, Rows, statement
from lane_pg.postgres.rows import EVENT_COLUMNS, event_from_row
from lane_pg.types import QueueEvent, dumps_json

_BATCH_SPAN = 1023
"""A batch row's sub-events have the ids row id .. row id + 1023 (migration 0007)."""
_PAGE = 1000
_SETTLING_POLL = 0.01
"""Seconds before looking again while events up to a known id wait for their writers."""
_MAX_PENDING = 64


@dataclass(slots=True)
class _Checkpoint:
    """Events up to ``last_id`` are final once none of ``writers`` is running."""

    last_id: int
    writers: frozenset[str]


def events(rows: Rows) -> list[QueueEvent]:
    return [event_from_row(row) for row in rows]


class PostgresEvents(Entity, serves=Events):
    read_events = statement(
        f"SELECT {EVENT_COLUMNS} FROM lane.read_events($1, $2, $3, $4) AS e",
        result=events,
        start=lambda bound: event_bound(bound, "-"),
        end=lambda bound: event_bound(bound, "+"),
    )

    async def record_action(self, args: RecordAction) -> int | None:
        data = dumps_json(action_event_data(args), "action details")
        [row] = await self._db.fetch(
            "SELECT lane.record_action($1, $2, $3::jsonb) AS id", args.queue, args.job_id, data
        )
        return None if row["id"] is None else int(row["id"])

    def subscribe_events(self, args: SubscribeEvents) -> AsyncIterator[QueueEvent]:
        return self._follow(
            args.queue, *subscription_arguments(args.queue, args.from_id, args.poll_interval)
        )

    async def _horizon(self) -> _Checkpoint:
        [row] = await self._db.fetch("SELECT last_id, writers FROM lane.event_horizon()")
        return _Checkpoint(row["last_id"] + _BATCH_SPAN, frozenset(row["writers"]))

    async def _follow(
        self, queue: str, after: int | None, poll_interval: float
    ) -> AsyncIterator[QueueEvent]:
        if after is None:  # "$": whatever has an id already is not new
            after = (await self._horizon()).last_id
        pending: list[_Checkpoint] = []
        while True:
            now = await self._horizon()
            # A checkpoint vouches for every id up to its own, so the newest settled one
            # is enough, and dropping the oldest (a long writer) only delays nothing newer.
            pending = [*pending[-_MAX_PENDING:], now]
            final = None
            for index in range(len(pending) - 1, -1, -1):
                if not pending[index].writers & now.writers:
                    final = pending[index].last_id
                    del pending[: index + 1]
                    break
            if final is not None and final > after:
                # This statement's snapshot is taken after the writers were read.
                while True:
                    rows = await self._db.fetch(
                        f"SELECT {EVENT_COLUMNS} FROM lane.read_events($1, $2, $3, $4) AS e",
                        queue,
                        after + 1,
                        final,
                        _PAGE,
                    )
                    for row in rows:
                        event = event_from_row(row)
                        after = event.id
                        yield event
                    if len(rows) < _PAGE:
                        break
                after = max(after, final)
            await asyncio.sleep(_SETTLING_POLL if pending else poll_interval)
