"""Terminal metrics (``MetricsReader``, OBS-6) for PostgresBackend: one call of a
``lane.*`` function of sql/functions/75_metrics.sql each."""

from __future__ import annotations

from datetime import datetime
from typing import Any, cast

import asyncpg

from lane_pg.metrics import (
    DEFAULT_JOB_METRICS_RETENTION,
    JobMetrics,
    MetricsState,
    validate_data_points,
    validate_metrics_call,
)


class MetricCalls:
    """The ``MetricsReader`` methods over ``_fetch`` / ``_fetchval``, which PostgresBackend
    defines."""

    async def _fetch(self, sql: str, *args: Any) -> list[asyncpg.Record]:
        raise NotImplementedError

    async def _fetchval(self, sql: str, *args: Any) -> Any:
        raise NotImplementedError

    async def get_metrics(
        self,
        queue: str,
        state: MetricsState,
        start: int = 0,
        end: int = -1,
        *,
        max_data_points: int = DEFAULT_JOB_METRICS_RETENTION,
    ) -> JobMetrics:
        validate_metrics_call(state, start, end, max_data_points)
        [row] = await self._fetch(
            "SELECT count, prev_ts, prev_count, data, data_points"
            " FROM lane.get_metrics($1, $2, $3, $4, $5)",
            queue,
            state,
            start,
            end,
            max_data_points,
        )
        return JobMetrics(
            row["count"], row["prev_ts"], row["prev_count"], list(row["data"]), row["data_points"]
        )

    async def compact_metrics(
        self,
        *,
        max_data_points: int = DEFAULT_JOB_METRICS_RETENTION,
        now: datetime | None = None,
    ) -> int:
        validate_data_points(max_data_points)
        return cast(
            int,
            await self._fetchval("SELECT lane.compact_metrics($1, $2)", max_data_points, now),
        )
