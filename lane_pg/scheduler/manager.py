"""The lane manager: an asyncio, in-process priority scheduler over named lanes (LANE).

Scheduling (LANE-5/6): whenever a slot frees or work arrives, the scheduler starts the
head of the lane with the best rank among lanes that have pending work, spare lane
concurrency, spare global concurrency and room in their rate-limit window. A lane's rank
is ``(priority - boost of its head, head's submission order)``: lower priority numbers
first, boosted heads earlier (LCFG-7), and the older head on a tie. Within a lane commands
start in submission order. The only timers are rate-limit windows and retry delays; all
other decisions happen synchronously when state changes, so there is no polling.

Attempts (LCFG-1..4): each dispatch is one attempt, with the lane's timeout. A timed-out
attempt is reported (``timeout`` event) and cancelled, and keeps its slot until the
command has actually ended (LANE-6: one that swallows its cancellation is not run beside
another, and is logged when it ends). A failed or timed-out attempt with retries left
gives its slot back and re-enters the lane's queue (in submission order) after the retry
delay; otherwise it settles as a terminal failure: ``failed`` event, dead letter (DLQ and
storage), storage removal, then the future.

Distributed queue (LANE-9, ``distributed``): the rules above still decide what starts and
when, and the slot is taken at that moment (``started`` event). Instead of running the
attempt at once, the manager enqueues a ``DistributedItem``; one runner task per partition
(from ``start()`` to ``stop()``) dequeues its partition and runs the attempt, then calls
``complete`` before the outcome settles. Each attempt is one enqueue/dequeue/complete cycle
(a retry is a new item). An enqueue that raises fails the command; a complete that raises
is logged. Runners sleep on an event the manager's own enqueue sets, polling at
``poll_interval`` for a queue that delivers later or is fed by someone else.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from types import TracebackType
from typing import TYPE_CHECKING, Any

from lane_pg.scheduler.clock import Clock, SystemClock
from lane_pg.scheduler.commands import (
    Command,
    CommandFactory,
    ExecutableCommand,
    command_type_of,
    has_payload,
    invoke,
    payload_of,
)
from lane_pg.scheduler.config import LaneConfig, to_seconds
from lane_pg.scheduler.distributed import (
    DEFAULT_POLL_INTERVAL,
    DistributedItem,
    DistributedQueue,
    PartitionRunners,
    partition_for,
)
from lane_pg.scheduler.errors import (
    CommandFailed,
    DrainTimeout,
    InvalidLaneConfig,
    LaneTimeout,
    ShutdownInProgress,
    UnknownCommandType,
    UnknownLane,
    describe_error,
)
from lane_pg.scheduler.events import (
    COMMAND_COMPLETED,
    COMMAND_DEAD_LETTERED,
    COMMAND_FAILED,
    COMMAND_RETRY,
    COMMAND_STARTED,
    COMMAND_SUBMITTED,
    COMMAND_TIMEOUT,
    LANE_IDLE,
    LANE_PRESSURE,
    SHUTDOWN_STARTED,
    EventEmitter,
    EventFilter,
    EventStream,
    LaneEvent,
)
from lane_pg.scheduler.reliability import DeadLetter, DeadLetterQueue, LaneStorage, StoredCommand
from lane_pg.types import JSON, Duration, check_json

if TYPE_CHECKING:
    from lane_pg.scheduler.builder import LaneManagerBuilder

logger = logging.getLogger("lane_pg.scheduler")

"""Seconds a distributed queue's runner waits on an empty partition before asking again."""


class CommandFuture(asyncio.Future[Any]):
    """The future ``submit`` returns (LANE-4), naming the command it settles."""

    def __init__(self, command_id: str, lane_id: str, *, loop: asyncio.AbstractEventLoop) -> None:
        super().__init__(loop=loop)
        self.command_id = command_id
        self.lane_id = lane_id


@dataclass(frozen=True, slots=True)
class LaneInfo:
    name: str
    priority: int
    config: LaneConfig


@dataclass(frozen=True, slots=True)
class LaneStats:
    name: str
    pending: int
    running: int
    pressured: bool


class _AttemptTimedOut(TimeoutError):
    """One attempt ran past the lane's timeout (reported as a plain ``TimeoutError``)."""


def _error_text(exc: BaseException) -> str:
    if isinstance(exc, _AttemptTimedOut):
        return f"TimeoutError: {exc}"
    return describe_error(exc)


@dataclass(eq=False, slots=True)
class _Entry:
    seq: int
    command_id: str
    lane: _Lane
    command: Command
    command_type: str
    persisted: bool
    payload: JSON
    future: CommandFuture | None
    submitted_at: float
    retries: int = 0


@dataclass(eq=False, slots=True)
class _Lane:
    name: str
    priority: int
    config: LaneConfig
    queue: deque[_Entry] = field(default_factory=deque)
    running: int = 0
    retry_waiting: int = 0
    starts: deque[float] = field(default_factory=deque)
    pressured: bool = False

    @property
    def pending(self) -> int:
        return len(self.queue) + self.retry_waiting

    def rate_wait(self, now: float) -> float:
        """Seconds until this lane may start another command (0: now)."""
        limit = self.config.rate_limit
        if limit.max_starts is None:
            return 0.0
        window = limit.window_seconds
        while self.starts and self.starts[0] <= now - window:
            self.starts.popleft()
        if len(self.starts) < limit.max_starts:
            return 0.0
        return max(self.starts[0] + window - now, 1e-6)

    def insert(self, entry: _Entry) -> None:
        """Queue ``entry`` in submission order (a retry goes back ahead of later work)."""
        for index, queued in enumerate(self.queue):
            if queued.seq > entry.seq:
                self.queue.insert(index, entry)
                return
        self.queue.append(entry)


class LaneManager:
    """Schedules commands over priority lanes. Build one with ``LaneManager.builder()``."""

    def __init__(
        self,
        lanes: dict[str, tuple[LaneConfig, int]],
        *,
        emitter: EventEmitter | None = None,
        dlq: DeadLetterQueue | None = None,
        storage: LaneStorage | None = None,
        factories: dict[str, CommandFactory] | None = None,
        global_concurrency: int | None = None,
        clock: Clock | None = None,
        distributed_queue: DistributedQueue | None = None,
        poll_interval: Duration | None = DEFAULT_POLL_INTERVAL,
    ) -> None:
        if not lanes:
            raise InvalidLaneConfig("a lane manager needs at least one lane")
        if global_concurrency is not None and (
            isinstance(global_concurrency, bool)
            or not isinstance(global_concurrency, int)
            or global_concurrency < 1
        ):
            raise InvalidLaneConfig(f"global concurrency must be >= 1: {global_concurrency!r}")
        if distributed_queue is not None and not isinstance(distributed_queue, DistributedQueue):
            raise TypeError(
                "not a distributed queue (enqueue, dequeue, complete, num_partitions,"
                f" worker_id): {distributed_queue!r}"
            )
        poll: float | None = None
        if poll_interval is not None:
            poll = to_seconds(poll_interval, "distributed queue poll interval")
            if poll <= 0:
                raise InvalidLaneConfig(
                    f"distributed queue poll interval must be > 0 or None: {poll_interval!r}"
                )
        self._lanes = {
            name: _Lane(name, priority, config) for name, (config, priority) in lanes.items()
        }
        self._emitter = emitter if emitter is not None else EventEmitter()
        self._dlq = dlq
        self._storage = storage
        self._factories = dict(factories or {})
        self._global_limit = global_concurrency
        self._clock: Clock = clock if clock is not None else SystemClock()
        self._seq = 0
        self._running_total = 0
        self._entries: dict[str, _Entry] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._timer: asyncio.Task[None] | None = None
        self._timer_deadline = 0.0
        self._settled = asyncio.Event()
        self._settled.set()
        self._saving: set[str] = set()  # ids whose save_command is in flight
        self._start_lock = asyncio.Lock()
        self._started = False
        self._shutting_down = False
        self._observers: list[Callable[[LaneEvent], None]] = []
        self._stopped = False
        self._distributed = distributed_queue
        self._poll_interval = poll
        self._runners: PartitionRunners[_Entry] | None = None

    @staticmethod
    def builder(emitter: EventEmitter | None = None) -> LaneManagerBuilder:
        from lane_pg.scheduler.builder import LaneManagerBuilder

        return LaneManagerBuilder(emitter)

    # -- introspection -------------------------------------------------------------------

    @property
    def emitter(self) -> EventEmitter:
        return self._emitter

    @property
    def dlq(self) -> DeadLetterQueue | None:
        return self._dlq

    @property
    def storage(self) -> LaneStorage | None:
        return self._storage

    @property
    def clock(self) -> Clock:
        return self._clock

    @property
    def global_concurrency(self) -> int | None:
        return self._global_limit

    @property
    def distributed_queue(self) -> DistributedQueue | None:
        return self._distributed

    @property
    def started(self) -> bool:
        return self._started

    @property
    def shutting_down(self) -> bool:
        return self._shutting_down

    @property
    def outstanding(self) -> int:
        """Accepted commands not yet settled (pending, running or waiting to retry)."""
        return len(self._entries)

    def lanes(self) -> list[LaneInfo]:
        """The lanes, highest priority (lowest number) first."""
        ordered = sorted(self._lanes.values(), key=lambda lane: (lane.priority, lane.name))
        return [LaneInfo(lane.name, lane.priority, lane.config) for lane in ordered]

    def lane_stats(self, lane_id: str) -> LaneStats:
        lane = self._lane(lane_id)
        return LaneStats(lane.name, lane.pending, lane.running, lane.pressured)

    def subscribe(self) -> EventStream:
        return self._emitter.subscribe()

    def subscribe_filtered(self, pred: EventFilter) -> EventStream:
        return self._emitter.subscribe_filtered(pred)

    # -- lifecycle -----------------------------------------------------------------------

    async def start(self) -> None:
        """Recover persisted commands (LREL-6), then start dispatching (LANE-7)."""
        if self._stopped:
            raise ShutdownInProgress("a stopped lane manager cannot be restarted")
        async with self._start_lock:
            if self._started:
                return
            if self._storage is not None:
                await self._recover(self._storage)
            if self._distributed is not None:
                self._runners = PartitionRunners(
                    self._distributed,
                    self._poll_interval,
                    run=self._run,
                    refused=self._not_enqueued,
                    spawn=self._spawn,
                )
                self._runners.start()
            self._started = True
            self._pump()

    async def shutdown(self) -> None:
        """Stop accepting commands (LREL-7); accepted ones still run (see ``drain``)."""
        if self._shutting_down:
            return
        self._shutting_down = True
        self._emit(SHUTDOWN_STARTED)

    async def drain(self, timeout: Duration) -> None:  # noqa: ASYNC109 (the spec's API, LREL-8)
        """Wait until every accepted command has settled, or raise ``DrainTimeout`` (LREL-8)."""
        seconds = to_seconds(timeout, "drain timeout")
        if not self._entries:
            return
        settled = asyncio.ensure_future(self._settled.wait())
        expiry = asyncio.ensure_future(self._clock.sleep(seconds))
        try:
            await asyncio.wait({settled, expiry}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            settled.cancel()
            expiry.cancel()
        if self._entries:
            raise DrainTimeout(len(self._entries), seconds)

    async def stop(self) -> None:
        """Shut down and cancel everything at once: running attempts, retry timers, futures.

        Persisted commands that did not settle stay in storage for the next ``start()``.
        """
        await self.shutdown()
        self._stopped = True
        if self._runners is not None:  # first, so none hands a dequeued item to a new task
            await self._runners.stop()
        tasks = list(self._tasks)
        if self._timer is not None:
            tasks.append(self._timer)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._timer = None
        for entry in self._entries.values():
            if entry.future is not None:
                entry.future.cancel()
        self._entries.clear()
        for lane in self._lanes.values():
            lane.queue.clear()
            lane.retry_waiting = 0
        self._settled.set()

    async def __aenter__(self) -> LaneManager:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stop()

    # -- submit --------------------------------------------------------------------------

    async def submit(self, lane_id: str, command: Command) -> CommandFuture:
        """Accept ``command`` on lane ``lane_id``; the future settles with its outcome.

        Raises ``UnknownLane``, ``ShutdownInProgress``, ``TypeError`` for a non-command and
        ``InvalidPayload`` for a persistable command whose payload is not JSON (when a storage
        or a distributed queue carries it). Never waits for a slot or the rate limit (LCFG-6);
        it awaits only the storage write.
        """
        if self._shutting_down:
            raise ShutdownInProgress("the lane manager is shutting down")
        lane = self._lane(lane_id)
        if not isinstance(command, ExecutableCommand) and not callable(command):
            raise TypeError(f"not a command (no execute() and not callable): {command!r}")
        command_id = uuid.uuid4().hex
        command_type = command_type_of(command)
        persisted = self._storage is not None and has_payload(command)
        carried = persisted or (self._distributed is not None and has_payload(command))
        payload = check_json(payload_of(command), "command payload") if carried else None
        if persisted and self._storage is not None:
            self._saving.add(command_id)  # so a concurrent recovery does not load it too
            try:
                await self._storage.save_command(
                    StoredCommand(command_id, lane.name, command_type, payload, datetime.now(UTC))
                )
            finally:
                self._saving.discard(command_id)
        future = CommandFuture(command_id, lane.name, loop=asyncio.get_running_loop())
        self._seq += 1
        self._accept(
            _Entry(
                seq=self._seq,
                command_id=command_id,
                lane=lane,
                command=command,
                command_type=command_type,
                persisted=persisted,
                payload=payload,
                future=future,
                submitted_at=self._clock.monotonic(),
            )
        )
        return future

    def _lane(self, lane_id: str) -> _Lane:
        lane = self._lanes.get(lane_id)
        if lane is None:
            raise UnknownLane(lane_id)
        return lane

    def _accept(self, entry: _Entry) -> None:
        self._entries[entry.command_id] = entry
        self._settled.clear()
        entry.lane.insert(entry)
        # The event carries the lane only (its catalogue); observers also get the command
        # id, which latency and wait times need.
        self._emit(COMMAND_SUBMITTED, lane_id=entry.lane.name, observed_id=entry.command_id)
        self._pump()

    async def _recover(self, storage: LaneStorage) -> None:
        known = self._entries.keys() | self._saving
        stored = [c for c in await storage.load_commands() if c.command_id not in known]
        # Recovered commands were accepted in an earlier life: they go ahead of this one's.
        first_seq = -len(stored)
        for offset, saved in enumerate(stored):
            lane = self._lanes.get(saved.lane_id)
            factory = self._factories.get(saved.command_type)
            error: BaseException | None = None
            command: Command | None = None
            if lane is None:
                error = UnknownLane(saved.lane_id)
            elif factory is None:
                error = UnknownCommandType(
                    f"no command factory registered for type {saved.command_type!r}"
                )
            else:
                try:
                    command = factory(saved.payload)
                except Exception as exc:
                    error = exc
            if lane is None or command is None:
                assert error is not None
                logger.warning(
                    "lane recovery: dead-lettering command %s (%s): %s",
                    saved.command_id,
                    saved.command_type,
                    describe_error(error),
                )
                letter = DeadLetter(
                    lane_id=saved.lane_id,
                    command_id=saved.command_id,
                    command_type=saved.command_type,
                    error=describe_error(error),
                    attempts=0,
                    failed_at=datetime.now(UTC),
                    payload=saved.payload,
                )
                await self._dead_letter(letter)
                await self._forget(saved.command_id)
                continue
            self._accept(
                _Entry(
                    seq=first_seq + offset,
                    command_id=saved.command_id,
                    lane=lane,
                    command=command,
                    command_type=saved.command_type,
                    persisted=True,
                    payload=saved.payload,
                    future=None,
                    submitted_at=self._clock.monotonic(),
                )
            )

    # -- dispatch ------------------------------------------------------------------------

    def _pump(self) -> None:
        """Start every command that may start now, then update pressure and the timer."""
        if self._started and not self._stopped:
            now = self._clock.monotonic()
            wake: float | None = None
            while self._global_limit is None or self._running_total < self._global_limit:
                best: _Lane | None = None
                best_rank: tuple[int, int] | None = None
                for lane in self._lanes.values():
                    if not lane.queue or lane.running >= lane.config.max_concurrency:
                        continue
                    wait = lane.rate_wait(now)
                    if wait > 0:
                        wake = wait if wake is None else min(wake, wait)
                        continue
                    head = lane.queue[0]
                    boost = lane.config.priority_boost.boost_for(now - head.submitted_at)
                    rank = (lane.priority - boost, head.seq)
                    if best_rank is None or rank < best_rank:
                        best, best_rank = lane, rank
                if best is None:
                    break
                self._start(best.queue.popleft(), now)
            if wake is not None:
                self._arm_timer(now, wake)
        for lane in self._lanes.values():
            self._check_pressure(lane)

    def _start(self, entry: _Entry, now: float) -> None:
        lane = entry.lane
        lane.running += 1
        self._running_total += 1
        if lane.config.rate_limit.max_starts is not None:
            lane.starts.append(now)
        self._emit(
            COMMAND_STARTED,
            lane_id=lane.name,
            command_id=entry.command_id,
            command_type=entry.command_type,
        )
        if self._runners is None:
            self._spawn(self._run(entry))
        else:
            self._spawn(self._dispatch(self._runners, entry))

    def _spawn(self, coro: Any) -> None:
        task: asyncio.Task[None] = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _arm_timer(self, now: float, delay: float) -> None:
        deadline = now + delay
        if self._timer is not None and not self._timer.done():
            if self._timer_deadline <= deadline:
                return
            self._timer.cancel()
        self._timer_deadline = deadline
        self._timer = asyncio.get_running_loop().create_task(self._fire_timer(delay))

    async def _fire_timer(self, delay: float) -> None:
        await self._clock.sleep(delay)
        self._timer = None
        self._pump()

    def _check_pressure(self, lane: _Lane) -> None:
        threshold = lane.config.pressure_threshold
        if threshold is None:
            return
        pending = lane.pending
        if not lane.pressured and pending >= threshold:
            lane.pressured = True
            self._emit(LANE_PRESSURE, lane_id=lane.name)
        elif lane.pressured and pending == 0:
            lane.pressured = False
            self._emit(LANE_IDLE, lane_id=lane.name)

    def _release(self, lane: _Lane) -> None:
        lane.running -= 1
        self._running_total -= 1

    # -- attempts and settlement ---------------------------------------------------------

    async def _run(self, entry: _Entry, item: DistributedItem | None = None) -> None:
        """One attempt and its outcome; ``item``: the distributed queue's, to complete."""
        try:
            value = await self._attempt(entry)
        except asyncio.CancelledError as exc:
            self._release(entry.lane)
            task = asyncio.current_task()
            if self._stopped or (task is not None and task.cancelling()):
                raise
            # The command cancelled itself (nobody cancelled us): a failed attempt.
            if item is not None:
                await self._complete(item, exc)
            await self._attempt_failed(entry, exc)
        except Exception as exc:
            self._release(entry.lane)
            if item is not None:
                await self._complete(item, exc)
            await self._attempt_failed(entry, exc)
        else:
            self._release(entry.lane)
            self._pump()
            if item is not None:
                await self._complete(item, None)
            await self._succeed(entry, value)

    # -- the distributed queue (LANE-9) -------------------------------------------------

    async def _dispatch(self, runners: PartitionRunners[_Entry], entry: _Entry) -> None:
        """Hand a started attempt to the distributed queue (its slot is taken)."""
        item = DistributedItem(
            command_id=entry.command_id,
            lane_id=entry.lane.name,
            priority=entry.lane.priority,
            command_type=entry.command_type,
            payload=entry.payload,
            partition=partition_for(entry.command_id, runners.partitions),
            attempt=entry.retries + 1,
        )
        await runners.dispatch(entry, item)

    async def _not_enqueued(self, entry: _Entry, exc: BaseException) -> None:
        self._release(entry.lane)
        self._pump()
        await self._fail(entry, exc)

    async def _complete(self, item: DistributedItem, exc: BaseException | None) -> None:
        runners = self._runners
        assert runners is not None
        await runners.complete(item, None if exc is None else _error_text(exc))

    async def _attempt(self, entry: _Entry) -> JSON:
        timeout = entry.lane.config.timeout_seconds
        if timeout is None:
            return await invoke(entry.command)
        work = asyncio.ensure_future(invoke(entry.command))
        expiry = asyncio.ensure_future(self._clock.sleep(timeout))
        try:
            await asyncio.wait({work, expiry}, return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:
            work.cancel()
            expiry.cancel()
            raise
        if work.done():
            expiry.cancel()
            return work.result()
        timed_out = _AttemptTimedOut(f"command timed out after {timeout:g}s")
        self._emit(
            COMMAND_TIMEOUT,
            lane_id=entry.lane.name,
            command_id=entry.command_id,
            error=_error_text(timed_out),
        )
        # LANE-6: the slot is the command's until it has actually ended. One that swallows
        # its cancellation keeps the slot (a command run beside it would break the lane's
        # maximum) and is reported when it ends.
        work.cancel()
        cancelled_at = self._clock.monotonic()
        try:
            await asyncio.wait({work})
        except asyncio.CancelledError:
            work.cancel()
            raise
        if not work.cancelled():
            _consume_outcome(work)
            logger.warning(
                "lane %s: command %s (%s) timed out after %gs and ignored its cancellation:"
                " it kept its slot %.3fs longer, until it ended",
                entry.lane.name,
                entry.command_id,
                entry.command_type,
                timeout,
                self._clock.monotonic() - cancelled_at,
            )
        raise timed_out

    async def _attempt_failed(self, entry: _Entry, exc: BaseException) -> None:
        lane = entry.lane
        policy = lane.config.retry_policy
        if entry.retries < policy.retries and not self._stopped:
            entry.retries += 1
            lane.retry_waiting += 1
            self._emit(
                COMMAND_RETRY, lane_id=lane.name, command_id=entry.command_id, attempt=entry.retries
            )
            self._spawn(self._retry_later(entry, policy.delay_for(entry.retries)))
            self._pump()
            return
        self._pump()
        await self._fail(entry, exc)

    async def _retry_later(self, entry: _Entry, delay: float) -> None:
        await self._clock.sleep(delay)
        entry.lane.retry_waiting -= 1
        entry.lane.insert(entry)
        self._pump()

    async def _succeed(self, entry: _Entry, value: JSON) -> None:
        self._emit(COMMAND_COMPLETED, lane_id=entry.lane.name, command_id=entry.command_id)
        if entry.persisted:
            await self._forget(entry.command_id)
        if entry.future is not None and not entry.future.done():
            entry.future.set_result(value)
        self._done(entry)

    async def _fail(self, entry: _Entry, exc: BaseException) -> None:
        lane = entry.lane
        attempts = entry.retries + 1
        error = _error_text(exc)
        self._emit(COMMAND_FAILED, lane_id=lane.name, command_id=entry.command_id, error=error)
        letter = DeadLetter(
            lane_id=lane.name,
            command_id=entry.command_id,
            command_type=entry.command_type,
            error=error,
            attempts=attempts,
            failed_at=datetime.now(UTC),
            payload=entry.payload,
        )
        await self._dead_letter(letter)
        if entry.persisted:
            await self._forget(entry.command_id)
        if entry.future is not None and not entry.future.done():
            failure_type = LaneTimeout if isinstance(exc, _AttemptTimedOut) else CommandFailed
            cause: BaseException = TimeoutError(str(exc)) if failure_type is LaneTimeout else exc
            entry.future.set_exception(
                failure_type(
                    lane_id=lane.name,
                    command_id=entry.command_id,
                    command_type=entry.command_type,
                    attempts=attempts,
                    cause=cause,
                )
            )
        self._done(entry)

    async def _dead_letter(self, letter: DeadLetter) -> None:
        """DLQ (and its event) when configured; storage whenever configured (LREL-1..3)."""
        if self._dlq is not None:
            await self._dlq.push(letter)
            self._emit(
                COMMAND_DEAD_LETTERED,
                lane_id=letter.lane_id,
                command_id=letter.command_id,
                command_type=letter.command_type,
            )
        if self._storage is not None:
            try:
                await self._storage.save_dead_letter(letter)
            except Exception:
                logger.exception("lane storage: could not save dead letter %s", letter.command_id)

    async def _forget(self, command_id: str) -> None:
        if self._storage is None:
            return
        try:
            await self._storage.remove_command(command_id)
        except Exception:
            logger.exception("lane storage: could not remove command %s", command_id)

    def _done(self, entry: _Entry) -> None:
        self._entries.pop(entry.command_id, None)
        if not self._entries:
            self._settled.set()

    def add_observer(self, observer: Callable[[LaneEvent], None]) -> None:
        """Call ``observer`` with every event, synchronously, as it is emitted (metrics and
        alerts: ``with_metrics``, ``with_alerts``). One that raises is logged and dropped
        from that event only; it must not block."""
        self._observers.append(observer)

    def _emit(self, key: str, *, observed_id: str | None = None, **fields: Any) -> None:
        event = LaneEvent(key, **fields)
        self._emitter.emit(event)
        if observed_id is not None:
            event = LaneEvent(key, event.timestamp, command_id=observed_id, **fields)
        for observer in self._observers:
            try:
                observer(event)
            except Exception:
                logger.exception("lane observer %r raised on %s", observer, key)


def _consume_outcome(task: asyncio.Future[Any]) -> None:
    if not task.cancelled():
        task.exception()


__all__ = [
    "CommandFuture",
    "LaneInfo",
    "LaneManager",
    "LaneStats",
]
