"""``LaneManagerBuilder``: a lane manager's lanes, dead-letter queue, storage, limits,
clock, metrics, alerts and distributed queue, set one by one, then ``build()``."""

from __future__ import annotations

from typing import TYPE_CHECKING

from lane_pg.scheduler.clock import Clock
from lane_pg.scheduler.commands import CommandFactory
from lane_pg.scheduler.config import LaneConfig
from lane_pg.scheduler.distributed import DEFAULT_POLL_INTERVAL, DistributedQueue
from lane_pg.scheduler.errors import InvalidLaneConfig
from lane_pg.scheduler.events import EventEmitter
from lane_pg.scheduler.manager import LaneManager
from lane_pg.scheduler.reliability import DeadLetterQueue, LaneStorage
from lane_pg.types import Duration

if TYPE_CHECKING:
    from lane_pg.scheduler.metrics import QueueMetrics
    from lane_pg.scheduler.monitoring import AlertManager


class LaneManagerBuilder:
    """``LaneManager.builder(emitter).with_default_lanes().with_lane(...).build()``."""

    def __init__(self, emitter: EventEmitter | None = None) -> None:
        self._emitter = emitter
        self._lanes: dict[str, tuple[LaneConfig, int]] = {}
        self._dlq: DeadLetterQueue | None = None
        self._storage: LaneStorage | None = None
        self._factories: dict[str, CommandFactory] = {}
        self._global: int | None = None
        self._clock: Clock | None = None
        self._metrics: QueueMetrics | None = None
        self._alerts: AlertManager | None = None
        self._distributed: DistributedQueue | None = None
        self._poll_interval: Duration | None = DEFAULT_POLL_INTERVAL

    def with_default_lanes(self) -> LaneManagerBuilder:
        """LANE-1: the lanes of ``lane_pg.types.DEFAULT_LANES`` (one shared definition)."""
        from lane_pg.types import DEFAULT_LANES

        for lane in DEFAULT_LANES:
            maximum = lane.max_concurrency
            if maximum is None:
                raise InvalidLaneConfig(f"default lane {lane.name!r} has no max_concurrency")
            config = LaneConfig(min_concurrency=lane.min_concurrency, max_concurrency=maximum)
            self._lanes[lane.name] = (config, lane.priority)
        return self

    def with_lane(
        self, name: str, config: LaneConfig | None = None, priority: int = 0
    ) -> LaneManagerBuilder:
        """Add lane ``name`` or replace the lane of that name (LANE-2)."""
        if not isinstance(name, str) or not name or name != name.strip():
            raise InvalidLaneConfig(f"invalid lane name {name!r}")
        if isinstance(priority, bool) or not isinstance(priority, int) or priority < 0:
            raise InvalidLaneConfig(f"lane {name!r}: priority must be an integer >= 0")
        self._lanes[name] = (config if config is not None else LaneConfig(), priority)
        return self

    def with_dlq(self, dlq: DeadLetterQueue) -> LaneManagerBuilder:
        self._dlq = dlq
        return self

    def with_storage(self, storage: LaneStorage) -> LaneManagerBuilder:
        self._storage = storage
        return self

    def with_command_factory(
        self, command_type: str, factory: CommandFactory
    ) -> LaneManagerBuilder:
        self._factories[command_type] = factory
        return self

    def with_global_concurrency(self, limit: int | None) -> LaneManagerBuilder:
        """At most ``limit`` commands run at once over all lanes (None: only lane limits)."""
        self._global = limit
        return self

    def with_clock(self, clock: Clock) -> LaneManagerBuilder:
        self._clock = clock
        return self

    def with_metrics(self, metrics: QueueMetrics) -> LaneManagerBuilder:
        """Count and time every command per lane (``QueueMetrics.local()`` or your backend)."""
        self._metrics = metrics
        return self

    def with_alerts(self, alerts: AlertManager) -> LaneManagerBuilder:
        """Deliver lane depth alerts (``AlertManager().with_queue_depth_alerts(...)``)."""
        self._alerts = alerts
        return self

    def with_distributed_queue(
        self, queue: DistributedQueue, *, poll_interval: Duration | None = DEFAULT_POLL_INTERVAL
    ) -> LaneManagerBuilder:
        """Run started commands through ``queue`` (LANE-9): ``LocalDistributedQueue.auto()``
        or any ``DistributedQueue``. A runner whose partition is empty waits for the
        manager's next enqueue, or ``poll_interval`` seconds (None: only the former)."""
        self._distributed = queue
        self._poll_interval = poll_interval
        return self

    def build(self) -> LaneManager:
        manager = LaneManager(
            dict(self._lanes),
            emitter=self._emitter,
            dlq=self._dlq,
            storage=self._storage,
            factories=self._factories,
            global_concurrency=self._global,
            clock=self._clock,
            distributed_queue=self._distributed,
            poll_interval=self._poll_interval,
        )
        if self._metrics is not None:
            self._metrics.attach(manager)
        if self._alerts is not None:
            self._alerts.attach(manager)
        return manager


__all__ = ["LaneManagerBuilder"]
