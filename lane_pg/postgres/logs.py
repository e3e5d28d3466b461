"""A job's log lines on PostgreSQL: ``lane.add_job_log``, ``get_job_logs``, ``clear_job_logs``
(sql/functions/80_logs.sql)."""

from __future__ import annotations

from lane_pg.backend.logs import Logs
from lane_pg.postgres.arguments import optional_token_text
from lane_pg.postgres.calls import Entity, Rows, nothing, statement, value
from lane_pg.types import LogEntry, LogPage


def log_page(rows: Rows) -> LogPage:
    row = rows[0]
    entries = [
        LogEntry(ts, message) for ts, message in zip(row["ts"], row["messages"], strict=True)
    ]
    return LogPage(entries, row["count"])


class PostgresLogs(Entity, serves=Logs):
    add_job_log = statement(
        "SELECT lane.add_job_log($1, $2, $3, $4, $5, $6::uuid)",
        result=value,
        token=optional_token_text,
    )
    get_job_logs = statement(
        "SELECT count, ts, messages FROM lane.get_job_logs($1, $2, $3, $4, $5)", result=log_page
    )
    clear_job_logs = statement("SELECT lane.clear_job_logs($1, $2, $3)", result=nothing)
