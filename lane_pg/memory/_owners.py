"""The memory twin of the owner rules of sql/functions/15_dedup.sql (deduplication ids,
unique locks, reservations, keep-last next jobs and the flow placeholders they hold), mixed
into ``_Store``, whose transitions they call.

An owner row lives in its job's queue (``_Queue.owners``). A unique id (kind ``unique``,
migration 0018) is one lock in the whole connection: ``_unique_owner`` finds it in whichever
queue holds it, as ``lane.dedup_owners_unique_id_idx`` makes it one row.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from lane_pg.errors import DeduplicationConflict
from lane_pg.memory._records import (
    _MILLISECOND,
    _Batch,
    _Dep,
    _NewJob,
    _Node,
    _Owner,
    _parse_options,
    _placeholder_id,
    _Queue,
    _Record,
)
from lane_pg.memory._surface import _StoreSurface
from lane_pg.options import Deduplication
from lane_pg.types import JSON


class _OwnerRules(_StoreSurface):
    """The owner rules; ``_Store`` gives the records and transitions declared here."""

    def _owner_job(self, q: _Queue, owner: _Owner, now: datetime) -> _Record | None:
        """lane._dedup_owner_job: the owner's job while the owner blocks duplicates."""
        job = None if owner.job_id is None else q.jobs.get(owner.job_id)
        if job is None or job.key != owner.job_key:
            return None
        if job.state == "active" and owner.keep_last:
            return job
        if owner.expires_at is not None:
            return job if owner.expires_at > now else None
        return job if job.state not in ("completed", "failed") else None

    def _unique_owner(self, dedup_id: str) -> tuple[_Queue, _Owner] | None:
        """The unique lock on ``dedup_id`` in whichever queue holds it (UNIQ-1: one per
        connection, lane.dedup_owners_unique_id_idx)."""
        for q in self._queues.values():
            owner = q.owners.get(dedup_id)
            if owner is not None and owner.kind == "unique":
                return q, owner
        return None

    def _owner_for(
        self, q: _Queue | None, dedup_id: str, kind: str
    ) -> tuple[_Queue, _Owner] | None:
        """The row an id of ``kind`` meets in ``q``: a unique id's lock in any queue, else
        the queue's own owner of the id (the two share each queue's ids)."""
        found = self._unique_owner(dedup_id) if kind == "unique" else None
        owner = None if q is None or found is not None else q.owners.get(dedup_id)
        return found if owner is None or q is None else (q, owner)

    def _unique_take(
        self,
        q: _Queue,
        dedup: Deduplication,
        key: int,
        job_id: str,
        now: datetime,
        batch: _Batch | None,
        parent: _Record | None,
    ) -> _Record | None:
        """lane._dedup_take for a unique id (UNIQ-1): a live lock of any queue keeps it;
        this push's reservation, or a row that no longer blocks, is replaced by the new
        job's lock (the reserved job keeping the reservation's expiry, TX-10)."""
        assert dedup.ttl_ms is not None  # parse_options: kind 'unique' needs a TTL
        expires = now + dedup.ttl_ms * _MILLISECOND
        found = self._owner_for(q, dedup.id, "unique")
        if found is not None:
            home, owner = found
            if owner.reserved_at(now):
                if owner.token != dedup.token:
                    raise _reserved(home, dedup.id, owner)
                assert owner.expires_at is not None
                expires = owner.expires_at
            else:
                holder = self._owner_job(home, owner, now)
                in_batch = batch is not None and any(j is holder for j in batch.jobs)
                if holder is not None and batch is not None and in_batch:
                    batch.later += [
                        (event, holder.id, _dedup_event_data(dedup.id, job_id))
                        for event in ("debounced", "deduplicated")
                    ]
                    return holder
                if holder is not None:
                    if dedup.extend_ttl:
                        owner.expires_at = expires
                    self._dedup_events(home, holder.id, dedup.id, job_id, now)
                    return holder
            del home.owners[dedup.id]
            self._dedup_next_dropped(home.name, dedup.id, owner, now, attaching=parent)
        q.owners[dedup.id] = _Owner(
            key, job_id, expires, False, token=dedup.token, kind="unique", created_at=now
        )
        return None

    def _check_reservations(self, queue: str, specs: Sequence[_NewJob], now: datetime) -> None:
        """Before an add writes anything: a spec meeting another push's live reservation
        fails the whole call, as lane._dedup_take's error rolls lane.add_jobs back (a spec
        whose custom id is stored never reaches the dedup check, ADD-3)."""
        q = self._queues.get(queue)
        for new in specs:
            opts = new.options.parsed
            dedup = opts.deduplication
            found = None if dedup is None else self._owner_for(q, dedup.id, dedup.kind)
            if dedup is None or found is None or not found[1].reserved_at(now):
                continue
            home, owner = found
            if owner.token != dedup.token and not (
                q is not None and opts.job_id is not None and opts.job_id in q.jobs
            ):
                raise _reserved(home, dedup.id, owner)

    def _dedup_events(
        self, q: _Queue, owner_id: str, dedup_id: str, loser_id: str, now: datetime
    ) -> None:
        self._emit(q, "debounced", owner_id, _dedup_event_data(dedup_id, loser_id), now)
        self._emit(q, "deduplicated", owner_id, _dedup_event_data(dedup_id, loser_id), now)

    def _dedup_take(
        self,
        q: _Queue,
        dedup: Deduplication,
        new: _NewJob,
        key: int,
        job_id: str,
        now: datetime,
        batch: _Batch | None,
        parent: _Record | None = None,
        children: list[_Node] | None = None,
    ) -> _Record | None:
        """lane._dedup_take: None when the new job owns the id now, else the job that
        keeps it. An owner added earlier in the same call deduplicates plainly (DEDUP-20),
        as lane._store_jobs does for an owner it has not stored yet. A flow node kept as
        the next job keeps its ``parent`` (which holds a placeholder for it) and
        ``children`` (DEDUP-18, -19)."""
        if dedup.kind == "unique":
            return self._unique_take(q, dedup, key, job_id, now, batch, parent)
        expires = None if dedup.ttl_ms is None else now + dedup.ttl_ms * _MILLISECOND
        fresh = _Owner(
            key, job_id, expires, dedup.keep_last_if_active, token=dedup.token, created_at=now
        )
        owner = q.owners.get(dedup.id)
        if owner is not None and owner.reserved_at(now):
            # A live reservation (TX-10): the add carrying its token takes it over with
            # its expiry; any other add is refused (there is no owner job to return).
            if owner.token == dedup.token:
                owner.job_key, owner.job_id, owner.kind = key, job_id, "dedup"
                return None
            raise _reserved(q, dedup.id, owner)
        holder = None if owner is None else self._owner_job(q, owner, now)
        if owner is not None and holder is None:
            self._dedup_next_dropped(q.name, dedup.id, owner, now, attaching=parent)
        if owner is None or holder is None:
            q.owners[dedup.id] = fresh
            return None
        if batch is not None and any(job is holder for job in batch.jobs):
            batch.later += [
                (event, holder.id, _dedup_event_data(dedup.id, job_id))
                for event in ("debounced", "deduplicated")
            ]
            return holder
        if dedup.replace_delayed and _replaceable(holder):
            # The row names the new job first, so the removal (which releases only a row
            # naming the removed job) leaves it to the new owner.
            fresh.expires_at = expires if dedup.extend_ttl else owner.expires_at
            # lane._dedup_take updates the row: a debounce burst it holds goes on (UNIQ-10).
            fresh.created_at = owner.created_at
            q.owners[dedup.id] = fresh
            self._remove_jobs([(q, holder)], now)
            self._dedup_next_dropped(q.name, dedup.id, owner, now, attaching=parent)
            self._dedup_events(q, job_id, dedup.id, holder.id, now)
            return None
        if dedup.keep_last_if_active and holder.state == "active":
            next_parent = None
            if parent is not None:
                # DEDUP-18: the placeholder before the replaced one goes (lane._dedup_take).
                next_parent = (parent.queue, parent.id, parent.key)
                self._flow_hold(parent, q.name, dedup.id, new.options.parsed.parent_policy, now)
            replaced_parent = owner.next_parent
            if (None if replaced_parent is None else replaced_parent[2]) != (
                None if parent is None else parent.key
            ):
                self._dedup_next_dropped(q.name, dedup.id, owner, now, attaching=parent)
            owner.next_job = new
            owner.next_parent = next_parent
            owner.next_children = list(children or [])
            owner.keep_last = True
            owner.expires_at = None
        elif dedup.extend_ttl:
            owner.expires_at = expires
        self._dedup_events(q, holder.id, dedup.id, job_id, now)
        return holder

    def _dedup_finish(self, q: _Queue, job: _Record, now: datetime) -> None:
        """lane._dedup_finish for one job that just completed or failed for good."""
        owner = None if job.dedup_id is None else q.owners.get(job.dedup_id)
        if owner is None or job.dedup_id is None or owner.job_key != job.key:
            return
        if (
            owner.next_job is not None
            or owner.keep_last
            or owner.expires_at is None
            or owner.expires_at <= now
        ):
            del q.owners[job.dedup_id]
        if owner.next_job is not None and (owner.next_parent or owner.next_children):
            self._flow_materialise(q, job.dedup_id, owner, now)  # DEDUP-18, -19
        elif owner.next_job is not None:
            self._insert(q.name, owner.next_job, now)

    def _dedup_release(
        self, q: _Queue, job: _Record, now: datetime, *, tell: bool = True
    ) -> _Owner | None:
        """lane._dedup_release: a deleted job gives up its id while the row names it, and
        the parent of a kept next job stops waiting for it (DEDUP-18; with ``tell``
        False the caller does that). Returns the deleted row."""
        owner = None if job.dedup_id is None else q.owners.get(job.dedup_id)
        if owner is None or job.dedup_id is None or owner.job_key != job.key:
            return None
        del q.owners[job.dedup_id]
        if tell:
            self._dedup_next_dropped(q.name, job.dedup_id, owner, now)
        return owner

    def _flow_hold(
        self, parent: _Record, queue: str, dedup_id: str, policy: str, now: datetime
    ) -> None:
        """lane._flow_hold: the parent waits for the kept next job of ``dedup_id``."""
        deps = self._deps.setdefault(parent.key, {})
        dep = deps.get((queue, _placeholder_id(dedup_id)))
        if dep is not None:
            dep.policy = policy
            return
        self._last_dep_seq += 1
        deps[(queue, _placeholder_id(dedup_id))] = _Dep(
            queue, _placeholder_id(dedup_id), None, "unprocessed", policy, self._last_dep_seq
        )
        parent.deps_pending = (parent.deps_pending or 0) + 1

    def _waiting_parent(self, owner: _Owner) -> _Record | None:
        """The parent a kept next job was to join, while its row exists."""
        if owner.next_parent is None:
            return None
        queue, parent_id, key = owner.next_parent
        found = self._find(queue, parent_id)
        return None if found is None or found[1].key != key else found[1]

    def _take_placeholder(self, parent: _Record, queue: str, dedup_id: str) -> bool:
        """The placeholder for ``dedup_id`` leaves the parent's pending set (if there)."""
        deps = self._deps.get(parent.key, {})
        dep = deps.get((queue, _placeholder_id(dedup_id)))
        if dep is None or dep.bucket != "unprocessed":
            return False
        del deps[(queue, _placeholder_id(dedup_id))]
        assert parent.deps_pending is not None
        parent.deps_pending -= 1
        return True

    def _dedup_next_dropped(
        self,
        queue: str,
        dedup_id: str,
        owner: _Owner,
        now: datetime,
        *,
        attaching: _Record | None = None,
    ) -> None:
        """lane._dedup_next_dropped: a kept next job that will never be stored no longer
        holds its parent, which is released when nothing else is pending (not
        ``attaching``, whose caller checks once its children are counted)."""
        parent = self._waiting_parent(owner)
        if parent is None or not self._take_placeholder(parent, queue, dedup_id):
            return
        pending = parent.deps_pending or 0
        if parent.state == "waiting-children" and pending <= 0 and parent is not attaching:
            self._flow_release([parent], now)

    def _dedup_reclaim(self, q: _Queue, job: _Record, now: datetime, *, apply: bool) -> None:
        """lane._dedup_reclaim: a retried job takes its id back (DEDUP-13); with ``apply``
        False only its check."""
        if job.dedup_id is None:
            return
        dedup = _parse_options(job.options).parsed.deduplication
        assert dedup is not None
        owner = q.owners.get(job.dedup_id)
        if owner is not None and owner.reserved_at(now):
            raise DeduplicationConflict(
                f"deduplication id {job.dedup_id!r} of queue {q.name} is reserved by a pending"
                f" push: job {job.id} cannot be retried until it is released"
            )
        if owner is not None and owner.job_key != job.key:
            holder = self._owner_job(q, owner, now)
            if holder is not None:
                raise DeduplicationConflict(
                    f"deduplication id {job.dedup_id!r} of queue {q.name} is held by job"
                    f" {holder.id}: job {job.id} cannot be retried until it is released"
                )
        if not apply:
            return
        if owner is not None:
            self._dedup_next_dropped(q.name, job.dedup_id, owner, now)
        expires = None if dedup.ttl_ms is None else now + dedup.ttl_ms * _MILLISECOND
        q.owners[job.dedup_id] = _Owner(
            job.key, job.id, expires, dedup.keep_last_if_active, token=dedup.token, created_at=now
        )


def _replaceable(job: _Record) -> bool:
    """lane._dedup_replaceable (DEDUP-7): a delayed owner that is standalone, neither in a
    flow (child or parent) nor a repeat series' occurrence, may be removed by a replacing
    add; any other owner is kept."""
    return (
        job.state == "delayed"
        and job.parent_id is None
        and job.deps_pending is None
        and job.repeat_key is None
    )


def _reserved(q: _Queue, dedup_id: str, owner: _Owner) -> DeduplicationConflict:
    return DeduplicationConflict(
        f"deduplication id {dedup_id!r} of queue {q.name} is reserved by a pending push"
        f" until {owner.expires_at}"
    )


def _dedup_event_data(dedup_id: str, loser_id: str) -> dict[str, JSON]:
    """lane._dedup_event_data: what `debounced` and `deduplicated` carry (DEDUP-2)."""
    return {"deduplicationId": dedup_id, "deduplicatedJobId": loser_id}
