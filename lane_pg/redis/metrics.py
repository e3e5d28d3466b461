"""Terminal metrics on Redis (OBS-6, MGMT-28): per queue and state, the hash
``<tag>:metrics:<state>`` of per-minute counts (field: the minute's start in epoch ms) that
every completion and terminal failure increments (``includes/events.lua``,
``lane_count_finished``), and its field ``folded``: the minutes compaction took out of the
retained window, so the all-time count stays."""

from __future__ import annotations

from typing import Any

from lane_pg.backend.metrics import CompactMetrics, GetMetrics, GetThroughput
from lane_pg.errors import InvalidQueueName
from lane_pg.redis.backend import RedisEntity
from lane_pg.redis.maintenance import selected_queues
from lane_pg.redis.rows import from_ms
from lane_pg.types import validate_queue_name
from lane_pg.types.metrics import (
    MINUTE_MS,
    THROUGHPUT_WINDOW_MINUTES,
    JobMetrics,
    ThroughputMinute,
    metrics_window,
    throughput_minute,
    validate_data_points,
    validate_metrics_call,
)

FOLDED = "folded"
"""The field of a metrics hash holding the count of the minutes compaction folded away."""


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


def _is_queue_name(queue: str) -> bool:
    try:
        validate_queue_name(queue)
    except InvalidQueueName:
        return False
    return True


class RedisMetrics(RedisEntity):
    """The ``metrics`` handle on Redis."""

    async def get_metrics(self, args: GetMetrics) -> JobMetrics:
        validate_metrics_call(args.state, args.start, args.end, args.max_data_points)
        if not _is_queue_name(args.queue):  # no such queue: zeros, as PostgreSQL answers
            return metrics_window({}, 0, args.start, args.end, args.max_data_points)
        key = self._backend.keys(args.queue).key(f"metrics:{args.state}")
        raw: dict[Any, Any] = await self._backend.client.hgetall(key)
        minutes: dict[int, int] = {}
        folded = 0
        for field, count in raw.items():
            name = _text(field)
            if name == FOLDED:
                folded = int(count)
            else:
                minutes[int(float(name))] = int(count)
        return metrics_window(minutes, folded, args.start, args.end, args.max_data_points)

    async def compact_metrics(self, args: CompactMetrics) -> int:
        points = validate_data_points(args.max_data_points)
        backend = self._backend
        folded = 0
        for queue in await selected_queues(backend, None):
            folded += int(await backend.call("compact_metrics", queue, {"max_data_points": points}))
        return folded

    async def get_throughput(self, args: GetThroughput) -> list[ThroughputMinute]:
        """``lane.v_throughput`` of sql/views.sql over the retained finished jobs, the
        window on the server's clock."""
        if not _is_queue_name(args.queue):
            return []
        backend = self._backend
        now = await backend.now_ms(None)
        since = now - now % MINUTE_MS - (THROUGHPUT_WINDOW_MINUTES - 1) * MINUTE_MS
        rows = await backend.call("get_throughput", args.queue, {"since": since})
        minutes: dict[int, list[tuple[str, float | None, float | None]]] = {}
        for state, finished_text, processed_text, available_text in rows:
            finished = int(finished_text)
            wait = run = None
            if processed_text:
                wait = float(int(processed_text) - int(available_text))
                run = float(finished - int(processed_text))
            minutes.setdefault(finished - finished % MINUTE_MS, []).append((state, wait, run))
        result: list[ThroughputMinute] = []
        for minute in sorted(minutes):
            result.append(throughput_minute(from_ms(minute), minutes[minute]))
        return result
