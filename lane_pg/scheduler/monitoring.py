"""Watching the lane scheduler: depth alerts on its events, and a polling monitor.

    alerts = AlertManager().with_queue_depth_alerts(warning=100, critical=1000)
    alerts.add_callback(lambda alert: page(alert.message))
    manager = LaneManager.builder().with_default_lanes().with_alerts(alerts).build()

    monitor = QueueMonitor(manager, MonitorConfig(interval=5, pending_warning_threshold=500))
    await monitor.start()
    print((await monitor.stats()).total_pending)

An alert fires when a lane's depth (commands waiting: queued or waiting to retry) reaches
a threshold, once per crossing: it fires again only after the depth went back below that
threshold. A callback that raises is logged and never disturbs the scheduler; an async
callback runs as a task.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Literal

from lane_pg.scheduler.errors import InvalidLaneConfig
from lane_pg.scheduler.events import LaneEvent

if TYPE_CHECKING:
    from lane_pg.scheduler.manager import LaneManager, LaneStats

logger = logging.getLogger("lane_pg.scheduler")

AlertLevel = Literal["warning", "critical"]


@dataclass(frozen=True, slots=True)
class Alert:
    level: AlertLevel
    lane_id: str
    message: str
    depth: int = 0
    at: datetime = field(default_factory=lambda: datetime.now(UTC))


AlertCallback = Callable[[Alert], Any]


def _count(value: object, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InvalidLaneConfig(f"{what} must be an integer >= 1, got {value!r}")
    return value


class AlertManager:
    """Depth alerts per lane, delivered to callbacks (attach with ``with_alerts``)."""

    def __init__(self) -> None:
        self._warning: int | None = None
        self._critical: int | None = None
        self._callbacks: list[AlertCallback] = []
        self._levels: dict[str, set[AlertLevel]] = {}
        self._manager: LaneManager | None = None
        self._tasks: set[asyncio.Task[Any]] = set()

    def with_queue_depth_alerts(self, warning: int, critical: int) -> AlertManager:
        """Alert at ``warning`` and at ``critical`` commands waiting in one lane."""
        warning, critical = _count(warning, "warning"), _count(critical, "critical")
        if critical < warning:
            raise InvalidLaneConfig(f"critical ({critical}) must be >= warning ({warning})")
        self._warning, self._critical = warning, critical
        return self

    def add_callback(self, callback: AlertCallback) -> AlertManager:
        self._callbacks.append(callback)
        return self

    def attach(self, manager: LaneManager) -> None:
        self._manager = manager
        manager.add_observer(self.observe)

    def observe(self, event: LaneEvent) -> None:
        if self._manager is None or event.lane_id is None:
            return
        self.check(event.lane_id, self._manager.lane_stats(event.lane_id).pending)

    def check(self, lane_id: str, depth: int) -> list[Alert]:
        """The alerts ``depth`` raises for ``lane_id`` now (delivered to the callbacks)."""
        fired: set[AlertLevel] = self._levels.setdefault(lane_id, set())
        raised: list[Alert] = []
        levels: tuple[tuple[AlertLevel, int | None], ...] = (
            ("warning", self._warning),
            ("critical", self._critical),
        )
        for level, threshold in levels:
            if threshold is None:
                continue
            if depth < threshold:
                fired.discard(level)  # re-armed: the next crossing alerts again
            elif level not in fired:
                fired.add(level)
                raised.append(
                    Alert(
                        level,
                        lane_id,
                        f"lane {lane_id!r}: {depth} commands waiting (the {level} threshold"
                        f" is {threshold})",
                        depth,
                    )
                )
        for alert in raised:
            self._deliver(alert)
        return raised

    def _deliver(self, alert: Alert) -> None:
        for callback in list(self._callbacks):
            try:
                result = callback(alert)
                if inspect.isawaitable(result):
                    task = asyncio.ensure_future(result)
                    self._tasks.add(task)
                    task.add_done_callback(self._finished)
            except Exception:
                logger.exception("lane alert callback %r raised", callback)

    def _finished(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            logger.error("lane alert callback raised", exc_info=task.exception())


@dataclass(frozen=True, slots=True)
class MonitorConfig:
    """``interval``: seconds between polls; a threshold (None: none) logs a warning when
    the total of waiting (or running) commands over all lanes reaches it."""

    interval: float = 5.0
    pending_warning_threshold: int | None = None
    active_warning_threshold: int | None = None

    def __post_init__(self) -> None:
        if isinstance(self.interval, bool) or not self.interval > 0:
            raise InvalidLaneConfig(f"interval must be > 0 seconds, got {self.interval!r}")
        for name in ("pending_warning_threshold", "active_warning_threshold"):
            value = getattr(self, name)
            if value is not None:
                _count(value, name)


@dataclass(frozen=True, slots=True)
class MonitorStats:
    total_pending: int
    total_active: int
    lanes: dict[str, LaneStats]
    at: datetime


class QueueMonitor:
    """Polls a ``LaneManager`` every ``config.interval`` once started and logs a warning
    when a total crosses its threshold (once per crossing); ``stats()`` reads the
    manager now."""

    def __init__(self, queue: LaneManager, config: MonitorConfig | None = None) -> None:
        self.queue = queue
        self.config = config if config is not None else MonitorConfig()
        self._task: asyncio.Task[None] | None = None
        self._over: set[str] = set()
        self.last: MonitorStats | None = None
        """The stats of the last poll."""

    async def stats(self) -> MonitorStats:
        lanes = {info.name: self.queue.lane_stats(info.name) for info in self.queue.lanes()}
        return MonitorStats(
            sum(stats.pending for stats in lanes.values()),
            sum(stats.running for stats in lanes.values()),
            lanes,
            datetime.now(UTC),
        )

    async def start(self) -> None:
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self._poll(), name="lane_pg-queue-monitor")

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    async def _poll(self) -> None:
        while True:
            self.last = stats = await self.stats()
            self._warn("pending", stats.total_pending, self.config.pending_warning_threshold)
            self._warn("active", stats.total_active, self.config.active_warning_threshold)
            await asyncio.sleep(self.config.interval)

    def _warn(self, what: str, value: int, threshold: int | None) -> None:
        if threshold is None:
            return
        if value < threshold:
            self._over.discard(what)
        elif what not in self._over:
            self._over.add(what)
            logger.warning(
                "lane scheduler: %d commands %s over all lanes (threshold %d)",
                value,
                what,
                threshold,
            )


__all__ = ["Alert", "AlertManager", "MonitorConfig", "MonitorStats", "QueueMonitor"]
