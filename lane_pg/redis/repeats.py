"""Repeat series (REP) on Redis: the series records of ``lua/includes/owners.lua``, the
``repeats`` handle, and the cron matches the scripts ask the client for.

The schedule engine stays in Python (``lane_pg.types.schedule``, the rules of
sql/functions/08_schedule.sql): an interval's next tick is integer arithmetic a script does
itself, but a cron match in a time zone is not re-implemented in Lua. A script that may
need one (an add starting or continuing a series, a finish storing the next occurrence)
looks it up in ``args.cron``; when one is missing it answers ``{lane_ticks, now}`` before
writing anything, and ``call_scheduled`` computes them and calls again at that ``now``, so
the successor is still written in the script that completes its owner.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

from lane_pg.backend.repeats import CountRepeats, GetRepeat, ListRepeats, RemoveRepeat, UpsertRepeat
from lane_pg.errors import (
    ConfigurationError,
    DeduplicationConflict,
    InvalidOptions,
    JobLocked,
    JobStateConflict,
    RepeatConflict,
)
from lane_pg.options import ParsedOptions
from lane_pg.redis.backend import RedisBackend, RedisEntity
from lane_pg.redis.rows import epoch_ms, from_ms, job_row
from lane_pg.types import JSON, JobRow, RepeatInfo, validate_queue_name
from lane_pg.types.schedule import cron_next, repeat_next

_ROUNDS = 5
"""Calls of one operation that may each ask for cron matches (a finish whose series moved
between two calls asks again); more means the scripts and this module disagree."""


def series_key(name: str, repeat: dict[str, JSON]) -> str:
    """``lane._repeat_key``: the document's key, else the job name with the schedule."""
    if repeat.get("key") is not None:
        return str(repeat["key"])
    if repeat.get("every_ms") is not None:
        return f"{name}:every:{repeat['every_ms']}"
    zone = "" if repeat.get("tz") is None else f":{repeat['tz']}"
    return f"{name}:cron:{repeat['pattern']}{zone}"


def series_fields(name: str, parsed: ParsedOptions) -> dict[str, JSON] | None:
    """The ``series`` part of a spec (``includes/add.lua``), or None; ``end_at`` as text
    (cjson prints numbers with 14 digits)."""
    spec = parsed.repeat
    if spec is None:
        return None
    return {
        "key": series_key(name, parsed.document["repeat"]),
        "every_ms": spec.every_ms,
        "pattern": spec.pattern,
        "tz": spec.tz,
        "limit": spec.limit,
        "end_at": None if spec.end_at is None else str(spec.end_at),
    }


def tick_id(pattern: str, tz: str | None, after: int) -> str:
    """The key of one cron match in ``args.cron`` (``lane_tick_id``)."""
    return f"{pattern}\n{tz or ''}\n{after}"


def first_ticks(specs: Iterable[tuple[str, ParsedOptions]], now_ms: int) -> dict[str, int | None]:
    """ADD-13 for a call's specs before it writes: every series it starts has a first
    occurrence at ``now_ms`` (``InvalidOptions`` else); the cron matches those need."""
    ticks: dict[str, int | None] = {}
    seen: set[str] = set()
    moment = from_ms(now_ms)
    for name, parsed in specs:
        spec = parsed.repeat
        if spec is None:
            continue
        key = series_key(name, parsed.document["repeat"])
        first = repeat_next(spec, None, moment)
        if first is None and key not in seen:
            raise InvalidOptions(
                f"repeat series {key!r} has no occurrence left: its end_at has passed"
            )
        seen.add(key)
        if spec.pattern is not None:
            after = cron_next(spec.pattern, spec.tz, moment)
            ticks[tick_id(spec.pattern, spec.tz, now_ms)] = epoch_ms(after)
    return ticks


def _solve(needs: list[list[Any]]) -> dict[str, int | None]:
    ticks: dict[str, int | None] = {}
    for pattern, tz, after in needs:
        moment = int(float(after))
        found = cron_next(str(pattern), None if tz is None else str(tz), from_ms(moment))
        ticks[tick_id(str(pattern), tz, moment)] = epoch_ms(found)
    return ticks


async def call_scheduled(
    backend: RedisBackend,
    script: str,
    queue: str,
    arguments: dict[str, Any],
    others: Sequence[str] = (),
) -> Any:
    """``backend.call``, answering a script's request for cron matches (``{lane_ticks,
    now}``: nothing was written) and calling again at the ``now`` it acted at."""
    for _ in range(_ROUNDS):
        answer = await backend.call(script, queue, arguments, others)
        if not (isinstance(answer, dict) and "lane_ticks" in answer):
            return answer
        cron = dict(arguments.get("cron") or {})
        cron.update(_solve(answer["lane_ticks"]))
        arguments = {**arguments, "now": int(answer["now"]), "cron": cron}
    raise ConfigurationError(f"script {script} kept asking for cron matches")


def raise_refusal(answer: Any) -> None:
    """Raise the error a script reported instead of writing (``{error, message}``)."""
    if not (isinstance(answer, dict) and "error" in answer):
        return
    errors: dict[str, type[Exception]] = {
        "dedup_conflict": DeduplicationConflict,
        "invalid": InvalidOptions,
        "state_conflict": JobStateConflict,
        "locked": JobLocked,
        "repeat_conflict": RepeatConflict,
    }
    raise errors[str(answer["error"])](str(answer["message"]))


class RedisRepeats(RedisEntity):
    """The ``repeats`` handle on Redis (REP-8..12)."""

    async def upsert_repeat(self, args: UpsertRepeat) -> JobRow:
        from lane_pg.redis.jobs import checked_specs

        validate_queue_name(args.queue)
        backend = self._backend
        [spec] = checked_specs([(args.name, args.data, args.options)])
        if spec.parsed.repeat is None:
            raise InvalidOptions('upsert_repeat needs options with a "repeat" document')
        now = await backend.now_ms(args.now)
        cron = first_ticks([(args.name, spec.parsed)], now)
        await backend.register(args.queue)
        answer = await call_scheduled(
            backend,
            "upsert_repeat",
            args.queue,
            {"now": now, "spec": spec.fields, "cron": cron},
        )
        raise_refusal(answer)
        return job_row(args.queue, answer)

    async def remove_repeat(self, args: RemoveRepeat) -> str | None:
        validate_queue_name(args.queue)
        answer = await self._backend.call(
            "remove_repeat", args.queue, {"key": args.key, "now": epoch_ms(args.now)}
        )
        raise_refusal(answer)
        return None if answer is None or answer == "" else str(answer)

    async def _live(self, queue: str, key: str | None) -> list[RepeatInfo]:
        validate_queue_name(queue)
        answer = await self._backend.call("list_repeats", queue, {"key": key})
        return [_info(row) for row in answer or []]

    async def get_repeat(self, args: GetRepeat) -> RepeatInfo | None:
        found = await self._live(args.queue, args.key)
        return found[0] if found else None

    async def list_repeats(self, args: ListRepeats) -> list[RepeatInfo]:
        infos = sorted(await self._live(args.queue, None), key=lambda info: info.key)
        infos.sort(key=lambda info: info.next_at, reverse=not args.ascending)  # stable
        first = max(args.start, 0)
        return infos[first:] if args.end < 0 else infos[first : max(args.end + 1, first)]

    async def count_repeats(self, args: CountRepeats) -> int:
        return len(await self._live(args.queue, None))


def _optional_int(row: dict[str, str], name: str) -> int | None:
    value = row.get(name)
    return None if value is None else int(value)


def _info(row: dict[str, str]) -> RepeatInfo:
    end_at = _optional_int(row, "end_at")
    return RepeatInfo(
        key=row["key"],
        job_id=row["job_id"],
        name=row["name"],
        next_at=from_ms(row["available_at"]),
        count=int(row["count"]),
        every_ms=_optional_int(row, "every_ms"),
        pattern=row.get("pattern"),
        tz=row.get("tz"),
        limit=_optional_int(row, "limit"),
        end_at=None if end_at is None else from_ms(end_at),
        options=json.loads(row["options"]),
    )
