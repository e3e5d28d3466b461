"""A queue's settings on Redis (PAUSE, RET-1, EVS-3, CLI-6): fields of its meta hash, and the
connection-wide switches in the settings hash ``{prefix}:settings``.

Meta fields written here: ``paused`` ('1', the queue's own pause; absent when resumed, and a
'0' of earlier versions reads as resumed and is deleted when read), ``paused_all`` and
``paused_all_epoch`` (the connection-wide pause as this queue was last told it),
``keep_completed`` / ``keep_failed`` (a count, ``all`` for None: keep every job; absent:
``DEFAULT_KEEP_COMPLETED`` / ``DEFAULT_KEEP_FAILED``) and ``record_events`` ('0'/'1',
absent: on). ``claim_jobs.lua`` reads the pause fields, ``includes/events.lua``
``record_events``.

The connection-wide pause (PAUSE-4) cannot be one script: the set of queues and the
settings hash share a slot of their own, which no queue's script may touch. ``pause_all``
flips the switch and bumps its generation (``pause_epoch``) in the MULTI that also reads
the set, then tells each queue of the set (``pause_all.lua``, which keeps the latest
generation's value). A queue registers (``RedisBackend.register``) by adding itself to the
set in a MULTI that also reads the switch: Redis runs the two MULTIs one after the other,
so either the flip's read of the set includes the new queue, or the registration read the
flipped switch and gives it to the queue itself; the generation makes a registration that
read the switch before a flip harmless when its write lands after the flip's.
"""

from __future__ import annotations

from typing import Any, cast

from lane_pg.backend.queues import (
    GetPauseStatus,
    GetQueueEvents,
    GetQueueRetention,
    IsQueuePaused,
    ListQueues,
    PauseAll,
    PauseQueue,
    ResumeAll,
    ResumeQueue,
    SetQueueEvents,
    SetQueueRetention,
    SignalRestart,
)
from lane_pg.redis.backend import RedisBackend, RedisEntity
from lane_pg.types import (
    DEFAULT_KEEP_COMPLETED,
    DEFAULT_KEEP_FAILED,
    PauseStatus,
    QueueRetention,
    validate_queue_name,
    validate_record_events,
)

KEEP_ALL = "all"
"""A retention bound of None (keep every finished job of that state) in the meta hash."""


def _keep(value: bytes | None, default: int) -> int | None:
    """A stored retention bound: absent is the default, ``all`` None."""
    if value is None:
        return default
    return None if value.decode() == KEEP_ALL else int(value)


async def known_queues(backend: RedisBackend) -> list[str]:
    """Every registered queue's name, sorted (the set ``backend.queues_key``)."""
    members: Any = await backend.client.smembers(backend.queues_key)
    return sorted(member.decode() for member in members)


class RedisQueues(RedisEntity):
    """The ``queues`` handle on Redis."""

    async def _set_paused(self, queue: str, *, paused: bool) -> None:
        validate_queue_name(queue)
        await self._backend.register(queue)
        await self._backend.call("pause_queue", queue, {"paused": paused, "now": None})

    async def pause_queue(self, args: PauseQueue) -> None:
        await self._set_paused(args.queue, paused=True)

    async def resume_queue(self, args: ResumeQueue) -> None:
        await self._set_paused(args.queue, paused=False)

    async def _switch(self, *, paused: bool) -> None:
        backend = self._backend
        async with backend.client.pipeline(transaction=True) as pipe:
            pipe.hset(backend.settings_key, "paused_all", "1" if paused else "0")
            pipe.hincrby(backend.settings_key, "pause_epoch", 1)
            pipe.smembers(backend.queues_key)
            _, epoch, members = await pipe.execute()
        arguments = {"paused": paused, "epoch": int(epoch), "wake": not paused}
        for queue in sorted(member.decode() for member in cast(list[bytes], members)):
            await backend.call("pause_all", queue, arguments)

    async def pause_all(self, args: PauseAll) -> None:
        await self._switch(paused=True)

    async def resume_all(self, args: ResumeAll) -> None:
        await self._switch(paused=False)

    async def signal_restart(self, args: SignalRestart) -> int:
        backend = self._backend
        signal = await backend.now_ms(None)
        async with backend.client.pipeline(transaction=True) as pipe:
            pipe.hset(backend.settings_key, "restart_at", str(signal))
            pipe.smembers(backend.queues_key)
            _, members = await pipe.execute()
        for queue in sorted(member.decode() for member in cast(list[bytes], members)):
            await backend.call("signal_restart", queue, None)
        return signal

    async def set_queue_retention(self, args: SetQueueRetention) -> None:
        validate_queue_name(args.queue)
        bounds = QueueRetention(args.keep_completed, args.keep_failed)
        fields = {
            "keep_completed": KEEP_ALL if bounds.keep_completed is None else bounds.keep_completed,
            "keep_failed": KEEP_ALL if bounds.keep_failed is None else bounds.keep_failed,
        }
        await self._settings(args.queue, {name: str(value) for name, value in fields.items()})

    async def get_queue_retention(self, args: GetQueueRetention) -> QueueRetention:
        validate_queue_name(args.queue)
        meta = self._backend.keys(args.queue).meta
        stored: Any = await self._backend.client.hmget(meta, ["keep_completed", "keep_failed"])
        completed, failed = stored
        return QueueRetention(
            _keep(completed, DEFAULT_KEEP_COMPLETED), _keep(failed, DEFAULT_KEEP_FAILED)
        )

    async def set_queue_events(self, args: SetQueueEvents) -> None:
        validate_queue_name(args.queue)
        record = validate_record_events(args.record)  # before the queue is created
        await self._settings(args.queue, {"record_events": "1" if record else "0"})

    async def _settings(self, queue: str, fields: dict[str, str]) -> None:
        await self._backend.register(queue)
        await self._backend.call(
            "set_queue_settings", queue, {"set": fields, "create": True, "now": None}
        )

    async def get_queue_events(self, args: GetQueueEvents) -> bool:
        validate_queue_name(args.queue)
        flag = await self._backend.client.hget(self._backend.keys(args.queue).meta, "record_events")
        return flag != b"0"

    async def is_queue_paused(self, args: IsQueuePaused) -> bool:
        validate_queue_name(args.queue)
        return bool(await self._backend.call("is_queue_paused", args.queue, {}))

    async def get_pause_status(self, args: GetPauseStatus) -> PauseStatus:
        backend = self._backend
        if args.queues is None:
            names = await known_queues(backend)
        else:
            names = list(dict.fromkeys(validate_queue_name(name) for name in args.queues))
        # One MULTI: the switch, the restart signal and the flags of one instant (on a
        # cluster, where the queues' flags live in several slots, one read per node).
        async with backend.snapshot() as pipe:
            pipe.hmget(backend.settings_key, ["paused_all", "restart_at"])
            for name in names:
                pipe.hget(backend.keys(name).meta, "paused")
            (paused_all, restart_at), *flags = await pipe.execute()
        paused = frozenset(name for name, flag in zip(names, flags, strict=True) if flag == b"1")
        restart = None if restart_at is None else int(restart_at)
        return PauseStatus(paused_all == b"1", paused, restart)

    async def list_queues(self, args: ListQueues) -> list[str]:
        return await known_queues(self._backend)
