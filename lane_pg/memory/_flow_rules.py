"""The memory twin of the flow rules of sql/functions/17_flows.sql (a parent released
after its children, their outcomes told to it by policy, a retried child pending again,
trees attached and kept flow nodes materialised), mixed into ``_Store``, whose records
and transitions they use."""

from __future__ import annotations

import copy
from collections.abc import Iterable, Sequence
from datetime import datetime

from lane_pg.errors import ParentConflict
from lane_pg.memory._records import (
    _Batch,
    _Dep,
    _epoch_ms,
    _Node,
    _Owner,
    _Queue,
    _Record,
)
from lane_pg.memory._surface import _StoreSurface


class _FlowRules(_StoreSurface):
    """The flow rules; ``_Store`` gives the records and transitions declared here."""

    def _parent_of(self, job: _Record) -> tuple[_Queue, _Record] | None:
        if job.parent_queue is None or job.parent_id is None:
            return None
        return self._find(job.parent_queue, job.parent_id)

    def _flow_release(self, parents: Iterable[_Record], now: datetime) -> None:
        """lane._flow_release: waiting-children parents to waiting, or delayed while their
        own delay is not due (FLOW-3, FLOW-29); the due ones first, each in key order."""
        held = sorted((p for p in parents if p.state == "waiting-children"), key=lambda p: p.key)
        # Due against the later of now and the parent's creation (lane._flow_release).
        for parent in [p for p in held if p.available_at <= max(now, p.created_at)]:
            q = self._queue(parent.queue)
            self._move_to_waiting(q, parent)
            self._emit(q, "waiting", parent.id, {"prev": "waiting-children"}, now)
        for parent in [p for p in held if p.available_at > max(now, p.created_at)]:
            q = self._queue(parent.queue)
            self._move_to_delayed(q, parent, parent.available_at)
            data = {"delay": _epoch_ms(parent.available_at), "prev": "waiting-children"}
            self._emit(q, "delayed", parent.id, data, now)

    def _flow_resolve(self, children: Sequence[_Record], outcome: str, now: datetime) -> None:
        """lane._flow_resolve: children's terminal outcomes ('completed', 'failed',
        'removed') told to their parents, parents in key order."""
        tallies: dict[int, tuple[_Record, list[tuple[_Dep, _Record]]]] = {}
        for child in children:
            found = self._parent_of(child)
            if found is None:
                continue
            parent = found[1]
            dep = self._deps.get(parent.key, {}).get((child.queue, child.id))
            if dep is None or dep.bucket != "unprocessed":
                continue
            tallies.setdefault(parent.key, (parent, []))[1].append((dep, child))
        release: list[_Record] = []
        for parent_key in sorted(tallies):
            parent, resolved = tallies[parent_key]
            for dep, child in resolved:
                dep.bucket = _resolved_bucket(outcome, dep.policy)
                dep.value = copy.deepcopy(child.return_value) if outcome == "completed" else None
                dep.reason = child.failed_reason if outcome == "failed" else None
            failing = [(d, c) for d, c in resolved if d.policy in ("fail", "fail-deferred")]
            assert parent.deps_pending is not None
            parent.deps_pending -= len(resolved)
            if outcome == "failed" and failing:
                why = min(
                    f"child {c.id} of queue {c.queue} failed: {c.failed_reason}" for _, c in failing
                )
                if parent.state == "waiting-children" and any(
                    d.policy == "fail" for d, _ in failing
                ):
                    self._finalize_terminal(self._queue(parent.queue), parent, why, now)
                    continue
                if parent.state not in ("completed", "failed") and parent.deferred_failure is None:
                    parent.deferred_failure = why
            early = outcome == "failed" and any(
                d.policy in ("continue", "fail-deferred") for d, _ in resolved
            )
            if parent.state == "waiting-children" and (parent.deps_pending <= 0 or early):
                release.append(parent)
        self._flow_release(release, now)

    def _flow_restore(self, child: _Record, now: datetime) -> None:
        """lane._flow_restore: a retried child is pending again (FLOW-27)."""
        found = self._parent_of(child)
        if found is None:
            return
        pq, parent = found
        dep = self._deps.get(parent.key, {}).get((child.queue, child.id))
        if dep is None or dep.bucket == "unprocessed":
            return
        was = dep.bucket
        dep.bucket, dep.value, dep.reason, dep.child_key = "unprocessed", None, None, child.key
        parent.deps_pending = (parent.deps_pending or 0) + 1
        if was == "failed" and not any(
            d.bucket == "failed" for d in self._deps[parent.key].values()
        ):
            parent.deferred_failure = None
        if parent.state in ("waiting", "delayed"):
            prev = parent.state
            self._set_state(pq, parent, "waiting-children")
            parent.enqueued_seq = None
            self._emit(pq, "waiting-children", parent.id, {"prev": prev}, now)

    def _blocked_by_children(self, job: _Record) -> bool:
        """FIN-8: a parent with a pending child, or a child failure that fails it."""
        if job.deps_pending is None:
            return False
        return job.deps_pending > 0 or job.deferred_failure is not None

    def _flow_attach(
        self, parent: _Record, children: list[_Node], path: tuple[int, ...], now: datetime
    ) -> list[tuple[tuple[int, ...], _Record]]:
        """lane._flow_attach: the children stored (one batch per queue, in order of first
        appearance) and attached, then their own children."""
        stored: list[tuple[tuple[int, ...], _Record]] = []
        if not children:
            return stored
        queues = list(dict.fromkeys(child.queue for child in children))
        pending = 0
        failed: list[_Record] = []
        nested: list[tuple[int, _Record, _Node]] = []
        deps = self._deps.setdefault(parent.key, {})
        for queue in queues:
            group = [(ord_, c) for ord_, c in enumerate(children, 1) if c.queue == queue]
            batch = _Batch()
            records: list[tuple[_Record, bool]] = []
            for _, child in group:
                before = len(batch.jobs)
                record = self._insert(
                    queue,
                    child.new,
                    now,
                    batch,
                    parent=parent,
                    hold=bool(child.children),
                    children=child.children,
                )
                records.append((record, len(batch.jobs) > before))
            if batch.jobs or batch.later:
                self._emit_batch(self._queue(queue), batch, now)
            for (ord_, child), (record, fresh) in zip(group, records, strict=True):
                if not fresh and record.id != child.job_id:
                    # DEDUP-17: the owner of its deduplication id, not attached (DEDUP-18:
                    # kept as its next job, the parent holds a placeholder for it).
                    continue
                if (record.parent_queue, record.parent_id) != (parent.queue, parent.id):
                    if record.parent_id is not None and self._parent_of(record) is not None:
                        raise ParentConflict(
                            f"job {record.id} of queue {record.queue} belongs to parent"
                            f" {record.parent_id} of queue {record.parent_queue}: remove that"
                            " dependency (remove_child_dependency) before attaching it"
                            " elsewhere"
                        )
                    record.parent_queue, record.parent_id = parent.queue, parent.id
                bucket = "processed" if record.state == "completed" else "unprocessed"
                dep = deps.get((record.queue, record.id))
                if dep is not None:
                    dep.child_key = record.key
                else:
                    self._last_dep_seq += 1
                    deps[(record.queue, record.id)] = _Dep(
                        record.queue,
                        record.id,
                        record.key,
                        bucket,
                        child.new.options.parsed.parent_policy,
                        self._last_dep_seq,
                        copy.deepcopy(record.return_value) if bucket == "processed" else None,
                    )
                    if bucket == "unprocessed":
                        pending += 1
                        if record.state == "failed":
                            failed.append(record)
                stored.append(((*path, ord_), record))
                if child.children:
                    nested.append((ord_, record, child))
        parent.deps_pending = (parent.deps_pending or 0) + pending
        for ord_, record, child in nested:
            stored += self._flow_attach(record, child.children, (*path, ord_), now)
        if failed:
            self._flow_resolve(failed, "failed", now)
        if parent.state == "waiting-children" and parent.deps_pending <= 0:
            self._flow_release([parent], now)
        return stored

    def _flow_materialise(self, q: _Queue, dedup_id: str, owner: _Owner, now: datetime) -> None:
        """lane._flow_materialise: a kept flow node stored; under the parent that still
        waits for it in its placeholder's place, else as a flow of its own (DEDUP-18,
        -19)."""
        assert owner.next_job is not None
        node = _Node(q.name, owner.next_job, owner.next_children)
        parent = self._waiting_parent(owner)
        if parent is not None and self._take_placeholder(parent, q.name, dedup_id):
            if self._would_conflict(node, (parent.queue, parent.id)):
                # As lane._flow_materialise: a node whose custom id (or a custom id below
                # it) is another parent's child is a duplicate of it (ADD-3), and the
                # owner's outcome still stands. Checked first: the store is not restored
                # under a completion that holds its records.
                self._emit(q, "duplicated", node.job_id, {}, now)
                if parent.state == "waiting-children" and (parent.deps_pending or 0) <= 0:
                    self._flow_release([parent], now)
            else:
                self._flow_attach(parent, [node], (), now)
            return
        before = self._last_key
        record = self._insert(q.name, node.new, now, hold=bool(node.children))
        if node.children and record.key > before:
            self._flow_attach(record, node.children, (), now)

    def _would_conflict(self, node: _Node, parent: tuple[str, str | None]) -> bool:
        """Whether attaching ``node`` under ``parent`` would meet a ParentConflict: a
        custom id in its tree that is a retained parent's child elsewhere."""
        if node.job_id is not None:
            found = self._find(node.queue, node.job_id)
            if found is not None:
                record = found[1]
                owner = (record.parent_queue, record.parent_id)
                if record.parent_id is not None and owner != parent and self._parent_of(record):
                    return True
        below = (node.queue, node.job_id)  # a fresh node's children have a new parent
        return any(self._would_conflict(child, below) for child in node.children)


def _resolved_bucket(outcome: str, policy: str) -> str:
    """The bucket a pending dependency moves to (lane._flow_resolve's CASE)."""
    if outcome == "completed":
        return "processed"
    if outcome == "removed" or policy == "remove":
        return "removed"
    return "ignored" if policy in ("ignore", "continue") else "failed"
