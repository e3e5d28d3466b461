"""Flows (FLOW): ``lane.add_flow_nodes``, ``lane.add_flow_children`` and the dependency
reads and cuts of sql/functions/17_flows.sql; the transitions they share with completion,
failure and removal (``_flow_resolve``, ``_flow_release``, ``_flow_restore``) and with a
deduplication owner's kept next job (``_flow_attach``, ``_flow_materialise``) are in
``_store``."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from contextlib import contextmanager

from lane_pg.backend.flows import (
    AddFlow,
    AddFlowChildren,
    CheckedNode,
    GetFlowDependencies,
    GetFlowDependencyCounts,
    GetFlowDependencyPage,
    RemoveChildDependency,
    RemoveUnprocessedChildren,
    check_flow,
    check_page_request,
)
from lane_pg.errors import FailedChildren
from lane_pg.memory._records import (
    _Dep,
    _NewJob,
    _Node,
    _parse_spec,
    _Record,
)
from lane_pg.memory._store import MemoryEntity
from lane_pg.options import ParsedOptions
from lane_pg.types import JSON, JobRow, validate_queue_name
from lane_pg.types.flows import (
    ChildRef,
    Flow,
    FlowDependencies,
    FlowDependency,
    FlowDependencyCounts,
    FlowDependencyPage,
)


def _check_flow(document: JSON, parent_queue: str | None) -> _Node:
    """lane._check_flow (``lane_pg.backend.flows.check_flow``), as memory's nodes."""

    def parse(name: str, data: JSON, options: JSON) -> tuple[_NewJob, ParsedOptions]:
        new = _parse_spec(name, data, options)
        return new, new.options.parsed

    def convert(node: CheckedNode[_NewJob]) -> _Node:
        return _Node(node.queue, node.spec, [convert(child) for child in node.children])

    return convert(check_flow(document, parent_queue, parse))


class MemoryFlows(MemoryEntity):
    """Flows (FLOW-1..29)."""

    @contextmanager
    def _all_or_nothing(self) -> Iterator[None]:
        """A flow is one transaction: a refusal met while writing (ParentConflict) puts
        every record back as it was (the store's state as a snapshot names it, ``STATE``)."""
        store = self._store
        saved = copy.deepcopy({name: getattr(store, name) for name in store.STATE})
        try:
            yield
        except BaseException:
            for name, value in saved.items():
                setattr(store, name, value)
            raise

    async def add_flow(self, args: AddFlow) -> Flow:
        root = _check_flow(args.flow.to_json(), None)
        moment = self._store._now(args.now)
        with self._all_or_nothing():
            before = self._store._last_key
            record = self._store._insert(
                root.queue, root.new, moment, hold=bool(root.children), children=root.children
            )
            fresh = record.key > before
            stored: list[tuple[tuple[int, ...], _Record]] = []
            if fresh or record.id == root.job_id:  # else DEDUP-19: the owner's flow stands
                stored = self._store._flow_attach(record, root.children, (), moment)
        return Flow(record.snapshot(), _trees(stored, ()))

    async def add_flow_children(self, args: AddFlowChildren) -> list[Flow]:
        queue = args.queue
        parent_id = args.parent_id
        validate_queue_name(queue)
        moment = self._store._now(args.now)
        q, parent = self._store._owned(queue, parent_id, args.token)
        nodes = _check_flow(
            {"name": parent.name, "children": [child.to_json() for child in args.children]}, queue
        ).children
        if parent.deferred_failure is not None or any(
            dep.bucket == "failed" for dep in self._store._deps.get(parent.key, {}).values()
        ):
            raise FailedChildren(
                f"job {parent_id} of queue {queue} has a failed child that fails it: it cannot"
                " add children"
            )
        with self._all_or_nothing():
            self._store._set_state(q, parent, "waiting-children")
            self._store._end_lease(parent)
            parent.worker_id = None
            parent.enqueued_seq = None
            parent.attempts_started = max(parent.attempts_started - 1, 0)
            parent.deps_pending = parent.deps_pending or 0
            self._store._emit(q, "waiting-children", parent.id, {"prev": "active"}, moment)
            stored = self._store._flow_attach(parent, nodes, (), moment)
            if parent.state == "waiting-children" and parent.deps_pending <= 0:
                self._store._flow_release([parent], moment)
        return _trees(stored, ())

    def _present(self, dep: _Dep) -> _Record | None:
        found = self._store._find(dep.child_queue, dep.child_id)
        return None if found is None or found[1].key != dep.child_key else found[1]

    async def get_flow_dependency_counts(
        self, args: GetFlowDependencyCounts
    ) -> FlowDependencyCounts | None:
        validate_queue_name(args.queue)
        found = self._store._find(args.queue, args.parent_id)
        if found is None:
            return None
        deps = list(self._store._deps.get(found[1].key, {}).values())
        return FlowDependencyCounts(
            processed=sum(dep.bucket == "processed" for dep in deps),
            unprocessed=sum(dep.bucket == "unprocessed" for dep in deps),
            failed=sum(dep.bucket == "failed" for dep in deps),
            ignored=sum(dep.bucket == "ignored" for dep in deps),
            missing=sum(dep.child_key is not None and self._present(dep) is None for dep in deps),
        )

    async def get_flow_dependency_page(self, args: GetFlowDependencyPage) -> FlowDependencyPage:
        validate_queue_name(args.queue)
        check_page_request(args.kind, args.cursor, args.count)
        found = self._store._find(args.queue, args.parent_id)
        deps = [] if found is None else list(self._store._deps.get(found[1].key, {}).values())
        rows = sorted(
            (d for d in deps if d.bucket == args.kind and d.seq > args.cursor), key=lambda d: d.seq
        )
        page = rows[: args.count]
        items = [
            FlowDependency(
                ChildRef(dep.child_queue, dep.child_id), copy.deepcopy(dep.value), dep.reason
            )
            for dep in page
        ]
        return FlowDependencyPage(items, page[-1].seq if len(rows) > args.count else 0)

    async def get_flow_dependencies(self, args: GetFlowDependencies) -> FlowDependencies | None:
        validate_queue_name(args.queue)
        found = self._store._find(args.queue, args.parent_id)
        if found is None:
            return None
        deps = sorted(self._store._deps.get(found[1].key, {}).values(), key=lambda d: d.seq)
        present = [(dep, self._present(dep)) for dep in deps]
        return FlowDependencies(
            parent=found[1].snapshot(),
            children=[child.snapshot() for _, child in present if child is not None],
            pending_child_ids=[
                ChildRef(dep.child_queue, dep.child_id)
                for dep in deps
                if dep.bucket == "unprocessed"
            ],
            missing_child_ids=[  # a placeholder (DEDUP-18) is to come, not missing
                ChildRef(dep.child_queue, dep.child_id)
                for dep, child in present
                if child is None and dep.child_key is not None
            ],
        )

    async def remove_unprocessed_children(self, args: RemoveUnprocessedChildren) -> list[JobRow]:
        validate_queue_name(args.queue)
        moment = self._store._now(args.now)
        _, parent = self._store._require(args.queue, args.parent_id)
        deps = sorted(self._store._deps.get(parent.key, {}).values(), key=lambda d: d.seq)
        doomed = [
            child
            for dep in deps
            if dep.bucket == "unprocessed"
            and (child := self._present(dep)) is not None
            and child.state in ("waiting", "delayed", "waiting-children")
        ]
        snapshots = [child.snapshot() for child in doomed]
        self._store._remove_jobs(
            [(self._store._queue(child.queue), child) for child in doomed], moment
        )
        kept = [d for d in deps if d.bucket == "unprocessed" and d.child_key is None]
        for dep in kept:  # DEDUP-18: the kept next jobs it waits for are dropped too
            q = self._store._queues.get(dep.child_queue)
            dedup_id = dep.child_id[2:]
            owner = None if q is None else q.owners.get(dedup_id)
            if owner is None or owner.next_parent is None or owner.next_parent[2] != parent.key:
                continue
            self._store._dedup_next_dropped(dep.child_queue, dedup_id, owner, moment)
            owner.next_job, owner.next_parent, owner.next_children = None, None, []
        return snapshots

    async def remove_child_dependency(self, args: RemoveChildDependency) -> bool:
        validate_queue_name(args.queue)
        moment = self._store._now(args.now)
        _, child = self._store._require(args.queue, args.child_id)
        if child.parent_id is None:
            return False
        found = self._store._parent_of(child)
        child.parent_queue, child.parent_id = None, None
        if found is None:
            return True
        parent = found[1]
        deps = self._store._deps.get(parent.key, {})
        dep = deps.pop((args.queue, args.child_id), None)
        if (
            dep is not None
            and dep.bucket == "failed"
            and not any(d.bucket == "failed" for d in deps.values())
        ):
            parent.deferred_failure = None  # FIN-8
        if dep is not None and dep.bucket == "unprocessed":
            assert parent.deps_pending is not None
            parent.deps_pending -= 1
            if parent.state == "waiting-children" and parent.deps_pending <= 0:
                self._store._flow_release([parent], moment)
        return True


def _trees(stored: list[tuple[tuple[int, ...], _Record]], root: tuple[int, ...]) -> list[Flow]:
    """The stored nodes under ``root`` as trees, in submission order (snapshots taken
    now, after the whole call)."""
    nodes = {path: Flow(record.snapshot()) for path, record in stored}
    for path in sorted(nodes):
        if len(path) > len(root) + 1 and path[:-1] in nodes:
            nodes[path[:-1]].children.append(nodes[path])
    return [nodes[path] for path in sorted(nodes) if len(path) == len(root) + 1]
