"""The in-process lane scheduler: priority lanes of async commands, no database.

>>> manager = LaneManager.builder().with_default_lanes().build()
>>> await manager.start()
>>> future = await manager.submit("query", FetchCommand(url))
>>> result = await future

See ``manager`` for the scheduling rules, ``commands`` for what a command is and how it is
persisted, ``config`` for lane options, ``events`` for the event stream and ``distributed``
for running started commands through a partitioned queue.
"""

from __future__ import annotations

from lane_pg.scheduler.builder import LaneManagerBuilder
from lane_pg.scheduler.clock import Clock, ManualClock, SystemClock
from lane_pg.scheduler.commands import (
    Command,
    CommandFactory,
    ExecutableCommand,
    FunctionCommand,
    PersistableCommand,
)
from lane_pg.scheduler.config import LaneConfig, PriorityBoostConfig, RateLimitConfig
from lane_pg.scheduler.distributed import (
    DistributedItem,
    DistributedQueue,
    LocalDistributedQueue,
    partition_for,
)
from lane_pg.scheduler.errors import (
    CommandFailed,
    DrainTimeout,
    EventStreamClosed,
    InvalidLaneConfig,
    LaneTimeout,
    ShutdownInProgress,
    UnknownCommandType,
    UnknownLane,
)
from lane_pg.scheduler.events import (
    COMMAND_COMPLETED,
    COMMAND_DEAD_LETTERED,
    COMMAND_FAILED,
    COMMAND_RETRY,
    COMMAND_STARTED,
    COMMAND_SUBMITTED,
    COMMAND_TIMEOUT,
    EVENTS_LAGGED,
    LANE_IDLE,
    LANE_PRESSURE,
    SHUTDOWN_STARTED,
    EventEmitter,
    EventFilter,
    EventStream,
    LaneEvent,
)
from lane_pg.scheduler.manager import (
    CommandFuture,
    LaneInfo,
    LaneManager,
    LaneStats,
)
from lane_pg.scheduler.metrics import (
    HistogramSummary,
    LocalMetricsBackend,
    MetricsBackend,
    MetricsSnapshot,
    QueueMetrics,
)
from lane_pg.scheduler.monitoring import (
    Alert,
    AlertManager,
    MonitorConfig,
    MonitorStats,
    QueueMonitor,
)
from lane_pg.scheduler.otel import OtelMetricsBackend
from lane_pg.scheduler.reliability import (
    DeadLetter,
    DeadLetterQueue,
    LaneStorage,
    LocalStorage,
    StoredCommand,
)
from lane_pg.types import RetryPolicy

__all__ = [
    "COMMAND_COMPLETED",
    "COMMAND_DEAD_LETTERED",
    "COMMAND_FAILED",
    "COMMAND_RETRY",
    "COMMAND_STARTED",
    "COMMAND_SUBMITTED",
    "COMMAND_TIMEOUT",
    "EVENTS_LAGGED",
    "LANE_IDLE",
    "LANE_PRESSURE",
    "SHUTDOWN_STARTED",
    "Alert",
    "AlertManager",
    "Clock",
    "Command",
    "CommandFactory",
    "CommandFailed",
    "CommandFuture",
    "DeadLetter",
    "DeadLetterQueue",
    "DistributedItem",
    "DistributedQueue",
    "DrainTimeout",
    "EventEmitter",
    "EventFilter",
    "EventStream",
    "EventStreamClosed",
    "ExecutableCommand",
    "FunctionCommand",
    "HistogramSummary",
    "InvalidLaneConfig",
    "LaneConfig",
    "LaneEvent",
    "LaneInfo",
    "LaneManager",
    "LaneManagerBuilder",
    "LaneStats",
    "LaneStorage",
    "LaneTimeout",
    "LocalDistributedQueue",
    "LocalMetricsBackend",
    "LocalStorage",
    "ManualClock",
    "MetricsBackend",
    "MetricsSnapshot",
    "MonitorConfig",
    "MonitorStats",
    "OtelMetricsBackend",
    "PersistableCommand",
    "PriorityBoostConfig",
    "QueueMetrics",
    "QueueMonitor",
    "RateLimitConfig",
    "RetryPolicy",
    "ShutdownInProgress",
    "StoredCommand",
    "SystemClock",
    "UnknownCommandType",
    "UnknownLane",
    "partition_for",
]
