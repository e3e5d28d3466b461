"""A job's log lines (MGMT-13..15) on Redis: the list ``<tag>:logs:<id>``, one entry
``<epoch ms>:<message>`` per line, oldest first; ``add_job_log.lua``, ``get_job_logs.lua``
and ``clear_job_logs.lua`` (a job's removal deletes the list with its hash)."""

from __future__ import annotations

from typing import Any

from lane_pg.backend.logs import AddJobLog, ClearJobLogs, GetJobLogs
from lane_pg.errors import InvalidOptions
from lane_pg.redis.backend import RedisEntity, refused
from lane_pg.redis.jobs import fence
from lane_pg.redis.rows import epoch_ms, from_ms, non_negative_int
from lane_pg.types import LogEntry, LogPage, validate_queue_name


def _entry(stored: str) -> LogEntry:
    millis, _, message = stored.partition(":")
    return LogEntry(from_ms(millis), message)


def _index(value: object, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidOptions(f"{what} must be an integer, got {value!r}")
    return value


class RedisLogs(RedisEntity):
    """The ``logs`` handle on Redis."""

    async def add_job_log(self, args: AddJobLog) -> int:
        validate_queue_name(args.queue)
        message = "" if args.message is None else args.message  # lane.add_job_log's coalesce
        if not isinstance(message, str):
            raise InvalidOptions(f"a log message must be text, got {message!r}")
        keep: Any = args.keep
        valid_keep = keep is None or (
            isinstance(keep, int) and not isinstance(keep, bool) and keep >= 0
        )
        answer = await self._backend.call(
            "add_job_log",
            args.queue,
            {
                "id": args.job_id,
                "message": message,
                "keep": keep if valid_keep else None,
                "bad_keep": not valid_keep,
                "token": fence(args.token),
                "now": epoch_ms(args.now),
            },
        )
        if answer[0] == "bad_keep":
            non_negative_int(keep, "keep")  # raises, with the memory backend's message
        if answer[0] != "ok":
            refused(answer[0], args.queue, args.job_id)
        return int(answer[1])

    async def get_job_logs(self, args: GetJobLogs) -> LogPage:
        validate_queue_name(args.queue)
        answer = await self._backend.call(
            "get_job_logs",
            args.queue,
            {
                "id": args.job_id,
                "start": _index(args.start, "start"),
                "stop": _index(args.end, "end"),
                "asc": bool(args.asc),
            },
        )
        count, stored = answer
        return LogPage([_entry(line) for line in stored or []], int(count))

    async def clear_job_logs(self, args: ClearJobLogs) -> None:
        validate_queue_name(args.queue)
        keep = non_negative_int(args.keep, "keep")
        answer = await self._backend.call(
            "clear_job_logs", args.queue, {"id": args.job_id, "keep": keep}
        )
        if answer[0] != "ok":
            refused(answer[0], args.queue, args.job_id)
