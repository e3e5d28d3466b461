"""Counting and listing a queue's jobs on Redis (MGMT-2, MGMT-23..27, INSP): the state
indexes' sizes and members, read in one MULTI so that counts come from one instant."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from datetime import datetime, timedelta
from typing import Any

from lane_pg.backend.reads import (
    CountPendingJobs,
    CountReadyJobs,
    CountScheduledJobs,
    GetCountsPerPriority,
    GetJobCount,
    GetJobCounts,
    GetQueueStats,
    ListJobs,
    ListReadyJobs,
    ListScheduledJobs,
    NextDueIn,
    SearchFilter,
    SearchJobs,
    search_filter,
)
from lane_pg.redis.backend import RedisEntity
from lane_pg.redis.rows import (
    check_state,
    job_row,
    member_job,
    non_negative_int,
    script_list,
)
from lane_pg.redis.server import RedisClient
from lane_pg.types import (
    ALL_STATES,
    JobPage,
    JobRow,
    JobSearchPage,
    JobState,
    QueueStats,
    validate_priority,
)

_SEARCH_BATCH = 500
"""Jobs read per round trip of a search: a page stops early, a deep one takes a few."""


async def _lex_batches(
    client: RedisClient, key: str, newest_first: bool
) -> AsyncIterator[list[str]]:
    """The members of an index whose scores are all 0 (waiting, waiting-children), in
    member order (from the end when ``newest_first``), a batch at a time."""
    last: str | None = None
    while True:
        if newest_first:
            high = "+" if last is None else f"({last}"
            found: Any = await client.zrange(
                key, high, "-", desc=True, bylex=True, offset=0, num=_SEARCH_BATCH
            )
        else:
            low = "-" if last is None else f"({last}"
            found = await client.zrange(key, low, "+", bylex=True, offset=0, num=_SEARCH_BATCH)
        if not found:
            return
        batch = [member.decode() for member in found]
        yield batch
        last = batch[-1]


async def _score_batches(
    client: RedisClient, key: str, newest_first: bool
) -> AsyncIterator[list[str]]:
    """The members of a scored index (delayed by due time, completed and failed by finish
    time; ties by member, that is by key) in (score, member) order, from the end when
    ``newest_first``, a batch at a time. A batch goes on after the last (score, member)
    read: the rest of that score's members, then the next scores."""
    last: tuple[int, str] | None = None
    while True:
        batch: list[str] = []
        if last is None:
            low, high = "-inf", "+inf"
        else:
            score, member = last
            same: Any = await client.zrange(key, score, score, byscore=True)
            batch = [m.decode() for m in same]
            batch = (
                [m for m in reversed(batch) if m < member]
                if newest_first
                else [m for m in batch if m > member]
            )
            low, high = ("-inf", f"({score}") if newest_first else (f"({score}", "+inf")
        found: Any = await client.zrange(
            key,
            high if newest_first else low,
            low if newest_first else high,
            desc=newest_first,
            byscore=True,
            offset=0,
            num=_SEARCH_BATCH,
            withscores=True,
        )
        batch += [m.decode() for m, _ in found]
        if not batch:
            return
        yield batch
        if found:
            last = (int(found[-1][1]), found[-1][0].decode())
        else:  # only the rest of the last score: nothing after it
            return


def _is_match(values: list[str], search: SearchFilter) -> bool:
    """Whether a job's [state, name, data] (``lua/search_jobs.lua``) is a match."""
    state, name, data = values
    if state != search.state:
        return False  # gone, or left the state
    return search.matches(name, json.loads(data) if search.path is not None else None)


class RedisReads(RedisEntity):
    """The ``reads`` handle on Redis."""

    async def get_job_counts(self, args: GetJobCounts) -> dict[JobState, int]:
        wanted = list(dict.fromkeys(check_state(state) for state in (args.states or ALL_STATES)))
        keys = self._backend.keys(args.queue)
        async with self._backend.client.pipeline(transaction=True) as pipe:
            for state in wanted:
                pipe.zcard(keys.key(state))
            counts = await pipe.execute()
        return {state: int(count) for state, count in zip(wanted, counts, strict=True)}

    async def get_job_count(self, args: GetJobCount) -> int:
        return sum((await self.get_job_counts(GetJobCounts(args.queue, args.states))).values())

    async def count_pending_jobs(self, args: CountPendingJobs) -> int:
        states: list[JobState] = ["waiting", "delayed", "waiting-children"]
        return await self.get_job_count(GetJobCount(args.queue, states))

    async def get_queue_stats(self, args: GetQueueStats) -> QueueStats:
        keys = self._backend.keys(args.queue)
        async with self._backend.client.pipeline(transaction=True) as pipe:
            pipe.hget(keys.meta, "paused")
            for state in ALL_STATES:
                pipe.zcard(keys.key(state))
            paused, *counts = await pipe.execute()
        return QueueStats.from_counts(
            paused == b"1", {state: int(n) for state, n in zip(ALL_STATES, counts, strict=True)}
        )

    async def _due_split(self, queue: str, now: datetime | None) -> tuple[int, int, int]:
        """Waiting, due delayed and not-yet-due delayed counts at ``now`` (the server's
        clock when None)."""
        keys = self._backend.keys(queue)
        client = self._backend.client
        moment = await self._backend.now_ms(now)
        async with client.pipeline(transaction=True) as pipe:
            pipe.zcard(keys.waiting)
            pipe.zcount(keys.delayed, "-inf", moment)
            pipe.zcount(keys.delayed, f"({moment}", "+inf")
            waiting, due, later = await pipe.execute()
        return int(waiting), int(due), int(later)

    async def count_ready_jobs(self, args: CountReadyJobs) -> int:
        waiting, due, _ = await self._due_split(args.queue, args.now)
        return waiting + due

    async def count_scheduled_jobs(self, args: CountScheduledJobs) -> int:
        return (await self._due_split(args.queue, args.now))[2]

    async def _members(self, queue: str, states: list[JobState]) -> list[tuple[int, int, str]]:
        """(state rank, key, id) of every job of ``states``."""
        keys = self._backend.keys(queue)
        async with self._backend.client.pipeline(transaction=True) as pipe:
            for state in states:
                pipe.zrange(keys.key(state), 0, -1)
            found = await pipe.execute()
        return [
            (ALL_STATES.index(state), *member_job(state, member.decode()))
            for state, members in zip(states, found, strict=True)
            for member in members
        ]

    async def _rows(self, queue: str, ids: list[str]) -> list[JobRow]:
        """The jobs of ``ids`` still stored, in that order."""
        keys = self._backend.keys(queue)
        async with self._backend.client.pipeline(transaction=False) as pipe:
            for job_id in ids:
                pipe.hgetall(keys.job(job_id))
            hashes: list[dict[bytes, bytes]] = await pipe.execute()
        return [
            job_row(queue, {k.decode(): v.decode() for k, v in raw.items()})
            for raw in hashes
            if raw
        ]

    async def list_jobs(self, args: ListJobs) -> JobPage:
        wanted = [
            s for s in ALL_STATES if s in {check_state(s) for s in (args.states or ALL_STATES)}
        ]
        offset = non_negative_int(args.offset, "offset")
        limit = non_negative_int(args.limit, "limit")
        matches = sorted(await self._members(args.queue, wanted), reverse=args.descending)
        page = [job_id for _, _, job_id in matches[offset : offset + limit]]
        return JobPage(await self._rows(args.queue, page), len(matches), offset, limit)

    async def _readiness_page(
        self, queue: str, ready: bool, offset: int, limit: int, now: datetime | None
    ) -> JobPage:
        non_negative_int(offset, "offset")
        non_negative_int(limit, "limit")
        keys = self._backend.keys(queue)
        client = self._backend.client
        moment = await self._backend.now_ms(now)
        async with client.pipeline(transaction=True) as pipe:
            pipe.zrange(keys.waiting, 0, -1)
            if ready:
                pipe.zrange(keys.delayed, "-inf", moment, byscore=True)
            else:
                pipe.zrange(keys.delayed, f"({moment}", "+inf", byscore=True)
            waiting, delayed = await pipe.execute()
        matches: list[tuple[int, int, str]] = []
        if ready:
            matches += [(0, *member_job("waiting", m.decode())) for m in waiting]
        matches += [(1, *member_job("delayed", m.decode())) for m in delayed]
        matches.sort()
        page = [job_id for _, _, job_id in matches[offset : offset + limit]]
        return JobPage(await self._rows(queue, page), len(matches), offset, limit)

    async def list_ready_jobs(self, args: ListReadyJobs) -> JobPage:
        return await self._readiness_page(args.queue, True, args.offset, args.limit, args.now)

    async def list_scheduled_jobs(self, args: ListScheduledJobs) -> JobPage:
        return await self._readiness_page(args.queue, False, args.offset, args.limit, args.now)

    async def get_counts_per_priority(self, args: GetCountsPerPriority) -> dict[int, int]:
        wanted = [validate_priority(priority) for priority in args.priorities]
        keys = self._backend.keys(args.queue)
        async with self._backend.client.pipeline(transaction=True) as pipe:
            for priority in wanted:
                # A waiting member starts with its priority in 7 digits (order.lua).
                low = f"[{priority:07d}"
                high = f"({priority + 1:07d}"
                pipe.zlexcount(keys.waiting, low, high)
            counts = await pipe.execute()
        return {p: int(n) for p, n in zip(wanted, counts, strict=True)}

    async def search_jobs(self, args: SearchJobs) -> JobSearchPage:
        """The state's index in lane.search_jobs' order, read in batches: of each job
        its state, name and (with a data filter) data text (``lua/search_jobs.lua``),
        matched here (the JSON rules live once, in ``lane_pg.backend.reads``), until the
        page and one match more are found; then the page's hashes. Not one snapshot, as
        in SQL: a job that left the state before its fields or its hash were read is
        left out (a page may then hold one match fewer)."""
        search = search_filter(args)
        skip = search.offset  # matches before the page, counted, not kept
        page: list[str] = []  # the ids of the page's matches and one more: has_more
        async for batch in self._search_batches(args.queue, search):
            found = script_list(
                await self._backend.call(
                    "search_jobs", args.queue, {"ids": batch, "data": search.path is not None}
                )
            )
            for job_id, values in zip(batch, found, strict=True):
                if not _is_match(values, search):
                    continue
                if skip:
                    skip -= 1
                else:
                    page.append(job_id)
            if len(page) > search.limit:
                break
        rows = [row for row in await self._rows(args.queue, page) if row.state == search.state]
        return JobSearchPage(
            rows[: search.limit], search.offset, search.limit, len(page) > search.limit
        )

    async def _search_batches(self, queue: str, search: SearchFilter) -> AsyncIterator[list[str]]:
        """The ids of the state's jobs in search order, a batch at a time. Each batch
        starts after the last member read, not at a rank, so jobs that enter or leave
        the index meanwhile (claims take from the head of waiting) neither repeat a job
        nor skip one."""
        key = self._backend.keys(queue).key(search.state)
        client = self._backend.client
        state = search.state
        if state == "active":
            # Scored by lease expiry, searched oldest first (by key): active jobs are as
            # many as the workers run, so the whole index is read and sorted.
            members: Any = await client.zrange(key, 0, -1)
            ids = [job_id for _, job_id in sorted(member_job(state, m.decode()) for m in members)]
            for start in range(0, len(ids), _SEARCH_BATCH):
                yield ids[start : start + _SEARCH_BATCH]
            return
        batches = (
            _lex_batches(client, key, state == "waiting-children")
            if state in ("waiting", "waiting-children")
            else _score_batches(client, key, state in ("completed", "failed"))
        )
        async for batch in batches:
            yield [member_job(state, member)[1] for member in batch]

    async def next_due_in(self, args: NextDueIn) -> timedelta | None:
        client = self._backend.client
        queues: list[str]
        if args.queues is None:
            members: Any = await client.smembers(self._backend.queues_key)
            queues = sorted(m.decode() for m in members)
        else:
            queues = list(args.queues)
        earliest: float | None = None
        for queue in queues:
            first: list[Any] = await client.zrange(
                self._backend.keys(queue).delayed, 0, 0, withscores=True
            )
            if first and (earliest is None or first[0][1] < earliest):
                earliest = first[0][1]
        if earliest is None:
            return None
        now = await self._backend.now_ms(None)
        return timedelta(milliseconds=max(int(earliest) - now, 0))
