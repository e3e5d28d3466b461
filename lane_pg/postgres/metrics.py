"""Terminal metrics (OBS-6, MGMT-28) on PostgreSQL: one call of a ``lane.*`` function of
sql/functions/75_metrics.sql each."""

from __future__ import annotations

from lane_pg.backend.metrics import Metrics
from lane_pg.postgres.calls import Entity, Rows, statement, value
from lane_pg.types.metrics import (
    JobMetrics,
    ThroughputMinute,
    validate_data_points,
    validate_index,
    validate_metrics_state,
)


def job_metrics(rows: Rows) -> JobMetrics:
    [row] = rows
    return JobMetrics(
        row["count"], row["prev_ts"], row["prev_count"], list(row["data"]), row["data_points"]
    )


def throughput(rows: Rows) -> list[ThroughputMinute]:
    return [
        ThroughputMinute(
            row["minute"],
            row["completed"],
            row["failed"],
            row["wait_p50_ms"],
            row["wait_p95_ms"],
            row["wait_p99_ms"],
            row["run_p50_ms"],
            row["run_p95_ms"],
            row["run_p99_ms"],
        )
        for row in rows
    ]


class PostgresMetrics(Entity, serves=Metrics):
    # The checks of validate_metrics_call, in its order, before anything is read.
    get_metrics = statement(
        "SELECT count, prev_ts, prev_count, data, data_points"
        " FROM lane.get_metrics($1, $2, $3, $4, $5)",
        result=job_metrics,
        state=validate_metrics_state,
        start=lambda index: validate_index(index, "start"),
        end=lambda index: validate_index(index, "end"),
        max_data_points=validate_data_points,
    )
    compact_metrics = statement(
        "SELECT lane.compact_metrics($1, $2)",
        result=value,
        max_data_points=validate_data_points,
    )
    get_throughput = statement(
        "SELECT minute, completed, failed, wait_p50_ms, wait_p95_ms, wait_p99_ms,"
        " run_p50_ms, run_p95_ms, run_p99_ms FROM lane.get_throughput($1)",
        result=throughput,
    )
