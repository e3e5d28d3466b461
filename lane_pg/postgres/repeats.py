"""Repeat series on PostgreSQL: one stored function of sql/functions/16_repeats.sql per
operation."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from lane_pg.backend.repeats import Repeats
from lane_pg.postgres.calls import Entity, Rows, job_statement, statement, value
from lane_pg.types import RepeatInfo, dumps_json, options_json

REPEAT_COLUMNS = (
    "r.key, r.job_id, r.name, r.next_at, r.count, r.every_ms, r.pattern, r.tz,"
    " r.limit_count, r.end_at, r.options::text AS options"
)


def repeat_from_row(row: Mapping[str, Any]) -> RepeatInfo:
    return RepeatInfo(
        key=row["key"],
        job_id=row["job_id"],
        name=row["name"],
        next_at=row["next_at"],
        count=row["count"],
        every_ms=row["every_ms"],
        pattern=row["pattern"],
        tz=row["tz"],
        limit=row["limit_count"],
        end_at=row["end_at"],
        options=json.loads(row["options"]),
    )


def repeat_list(rows: Rows) -> list[RepeatInfo]:
    return [repeat_from_row(row) for row in rows]


class PostgresRepeats(Entity, serves=Repeats):
    upsert_repeat = job_statement(
        "lane.upsert_repeat($1, $2, $3::jsonb, $4::jsonb, $5)",
        data=lambda data: dumps_json(data, "job data"),
        options=options_json,
    )
    remove_repeat = statement("SELECT lane.remove_repeat($1, $2, $3)", result=value)
    get_repeat = statement(
        f"SELECT {REPEAT_COLUMNS} FROM lane.list_repeats($1, 0, -1, true) AS r WHERE r.key = $2",
        result=lambda rows: repeat_from_row(rows[0]) if rows else None,
    )
    list_repeats = statement(
        f"SELECT {REPEAT_COLUMNS} FROM lane.list_repeats($1, $2, $3, $4) AS r", result=repeat_list
    )
    count_repeats = statement("SELECT lane.count_repeats($1)", result=value)
