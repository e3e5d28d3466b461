"""Repeat series (REP): ``lane.upsert_repeat``, ``lane.list_repeats`` and friends."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from lane_pg.backend.repeats import CountRepeats, GetRepeat, ListRepeats, RemoveRepeat, UpsertRepeat
from lane_pg.errors import InvalidOptions, JobStateConflict
from lane_pg.memory._records import _parse_spec, _Queue, _Series, check_series_left, series_key
from lane_pg.memory._store import MemoryEntity
from lane_pg.types import JobRow, RepeatInfo, validate_queue_name

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


class MemoryRepeats(MemoryEntity):
    """Managing repeat series (REP-8..12)."""

    def _live_series(self, q: _Queue) -> list[tuple[str, _Series]]:
        """The queue's series with a live owner; the others are deleted (REP-11)."""
        for key in [
            key for key, row in q.series.items() if not self._store._series_owner(q, key, row)
        ]:
            del q.series[key]
        return list(q.series.items())

    def _info(self, q: _Queue, key: str, row: _Series) -> RepeatInfo:
        owner = q.jobs[row.job_id]
        spec = row.spec
        return RepeatInfo(
            key=key,
            job_id=owner.id,
            name=row.template.name,
            next_at=owner.available_at,
            count=row.count,
            every_ms=spec.every_ms,
            pattern=spec.pattern,
            tz=spec.tz,
            limit=spec.limit,
            end_at=None if spec.end_at is None else _EPOCH + timedelta(milliseconds=spec.end_at),
            options=dict(row.template.options.parsed.document),
        )

    async def upsert_repeat(self, args: UpsertRepeat) -> JobRow:
        validate_queue_name(args.queue)
        new = _parse_spec(args.name, args.data, args.options)
        if new.options.parsed.repeat is None:
            raise InvalidOptions('upsert_repeat needs options with a "repeat" document')
        moment = self._store._now(args.now)
        q = self._store._queue(args.queue)
        key = series_key(args.name, new.options.parsed.document["repeat"])
        row = q.series.get(key)
        owner = None if row is None else self._store._series_owner(q, key, row)
        if owner is not None and owner.state == "active":
            raise JobStateConflict(
                f"job {owner.id} owns repeat series {key!r} and is active: it cannot be replaced"
            )
        check_series_left([new], moment)
        if owner is not None:
            self._store._dedup_release(q, owner, moment)
            self._store._delete(q, owner)
            self._store._emit(q, "removed", owner.id, {"prev": owner.state}, moment)
        return self._store._insert(args.queue, new, moment).snapshot()

    async def remove_repeat(self, args: RemoveRepeat) -> str | None:
        q = self._store._queues.get(args.queue)
        row = None if q is None else q.series.get(args.key)
        if q is None or row is None:
            return None
        owner = self._store._series_owner(q, args.key, row)
        if owner is not None:
            self._store._remove(q, owner, self._store._now(args.now))  # JobLocked before any change
        q.series.pop(args.key, None)
        return None if owner is None else owner.id

    async def get_repeat(self, args: GetRepeat) -> RepeatInfo | None:
        q = self._store._queues.get(args.queue)
        if q is None:
            return None
        found = dict(self._live_series(q)).get(args.key)
        return None if found is None else self._info(q, args.key, found)

    async def list_repeats(self, args: ListRepeats) -> list[RepeatInfo]:
        q = self._store._queues.get(args.queue)
        if q is None:
            return []
        infos = sorted(
            (self._info(q, key, row) for key, row in self._live_series(q)),
            key=lambda info: info.key,
        )
        infos.sort(key=lambda info: info.next_at, reverse=not args.ascending)  # stable: key order
        first = max(args.start, 0)
        return infos[first:] if args.end < 0 else infos[first : max(args.end + 1, first)]

    async def count_repeats(self, args: CountRepeats) -> int:
        q = self._store._queues.get(args.queue)
        return 0 if q is None else len(self._live_series(q))
