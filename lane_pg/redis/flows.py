"""Flows (FLOW) on Redis: ``add_flow.lua``, ``add_flow_children.lua``, the dependency reads
and cuts, one script each; the dependency rows and the transitions completion, failure,
removal and retry share are in ``lua/includes/flows.lua`` (adding: ``flows_add.lua``).

A flow may span queues (a child in another queue than its parent). Each queue's keys
share its hash tag, and a script reaches the other queues' keys by their tag: on a
standalone server every key is in reach of one script. On Redis Cluster a script may only
touch one slot, so a flow whose queues' tags hash to different slots is refused when it is
added (``InvalidOptions`` naming the queues), before anything is written.
"""

from __future__ import annotations

import json
from typing import Any

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
from lane_pg.errors import FailedChildren, JobNotFound, ParentConflict
from lane_pg.options import ParsedOptions
from lane_pg.redis.backend import RedisEntity, refused
from lane_pg.redis.rows import canonical_token, epoch_ms, job_row, script_list
from lane_pg.types import JSON, JobRow, validate_queue_name
from lane_pg.types.flows import (
    ChildRef,
    Flow,
    FlowDependencies,
    FlowDependency,
    FlowDependencyCounts,
    FlowDependencyPage,
)


def _parse(name: str, data: JSON, options: JSON) -> tuple[dict[str, JSON], ParsedOptions]:
    from lane_pg.redis.jobs import checked_specs

    (spec,) = checked_specs([(name, data, options)])
    return spec.fields, spec.parsed


def _queues(node: CheckedNode[dict[str, JSON]], into: dict[str, None]) -> dict[str, None]:
    into[node.queue] = None
    for child in node.children:
        _queues(child, into)
    return into


class RedisFlows(RedisEntity):
    """The ``flows`` handle on Redis."""

    def _node(self, node: CheckedNode[dict[str, JSON]]) -> dict[str, JSON]:
        return {
            "queue": node.queue,
            "tag": self._backend.keys(node.queue).tag,
            "spec": node.spec,
            "policy": node.parsed.parent_policy,
            "children": [self._node(child) for child in node.children],
        }

    async def _call(self, script: str, queue: str, queues: list[str], arguments: Any) -> Any:
        """``script`` with every queue of the flow registered and their meta keys in KEYS
        (the first is ``queue``'s), cron matches answered; a refusal raised."""
        from lane_pg.redis.repeats import call_scheduled

        for name in queues:
            await self._backend.register(name)
        others = [name for name in queues if name != queue]
        answer = await call_scheduled(self._backend, script, queue, arguments, others)
        _raise(answer)
        return answer

    async def add_flow(self, args: AddFlow) -> Flow:
        from lane_pg.redis.repeats import first_ticks

        root = check_flow(args.flow.to_json(), None, _parse)
        queues = list(_queues(root, {}))
        await self._backend.check_slots(queues, "a flow")
        moment = epoch_ms(args.now)
        cron: dict[str, int | None] = {}
        if root.parsed.repeat is not None:
            moment = await self._backend.now_ms(args.now)
            cron = first_ticks([(str(root.spec["name"]), root.parsed)], moment)
        answer = await self._call(
            "add_flow",
            root.queue,
            queues,
            {"now": moment, "root": self._node(root), "cron": cron},
        )
        job, rows = answer
        return Flow(job_row(root.queue, job), _trees(rows))

    async def add_flow_children(self, args: AddFlowChildren) -> list[Flow]:
        queue = validate_queue_name(args.queue)
        nodes = check_flow(
            {"name": "parent", "children": [child.to_json() for child in args.children]},
            queue,
            _parse,
        ).children
        collected: dict[str, None] = {queue: None}
        for node in nodes:
            _queues(node, collected)
        queues = list(collected)
        await self._backend.check_slots(queues, "a flow")
        answer = await self._call(
            "add_flow_children",
            queue,
            queues,
            {
                "queue": queue,
                "id": args.parent_id,
                "token": canonical_token(args.token) or "",
                "children": [self._node(node) for node in nodes],
                "now": epoch_ms(args.now),
                "cron": {},
            },
        )
        if answer[0] != "ok":
            refused(answer[0], queue, args.parent_id)
        return _trees(answer[1])

    async def get_flow_dependency_counts(
        self, args: GetFlowDependencyCounts
    ) -> FlowDependencyCounts | None:
        validate_queue_name(args.queue)
        counts = await self._backend.call(
            "get_flow_dependency_counts", args.queue, {"id": args.parent_id}
        )
        if not counts:
            return None
        return FlowDependencyCounts(
            processed=counts["processed"],
            unprocessed=counts["unprocessed"],
            failed=counts["failed"],
            ignored=counts["ignored"],
            missing=counts["missing"],
        )

    async def get_flow_dependency_page(self, args: GetFlowDependencyPage) -> FlowDependencyPage:
        validate_queue_name(args.queue)
        check_page_request(args.kind, args.cursor, args.count)
        items, cursor = await self._backend.call(
            "get_flow_dependency_page",
            args.queue,
            {"id": args.parent_id, "kind": args.kind, "cursor": args.cursor, "count": args.count},
        )
        return FlowDependencyPage(
            [
                FlowDependency(
                    ChildRef(item[0], item[1]),
                    json.loads(item[2]) if item[2] else None,
                    item[3] or None,
                )
                for item in script_list(items)
            ],
            int(cursor),
        )

    async def get_flow_dependencies(self, args: GetFlowDependencies) -> FlowDependencies | None:
        validate_queue_name(args.queue)
        answer = await self._backend.call(
            "get_flow_dependencies", args.queue, {"id": args.parent_id}
        )
        if not answer:
            return None
        parent, children, pending, missing = answer
        return FlowDependencies(
            parent=job_row(args.queue, parent),
            children=[job_row(queue, fields) for queue, fields in script_list(children)],
            pending_child_ids=[ChildRef(queue, id_) for queue, id_ in script_list(pending)],
            missing_child_ids=[ChildRef(queue, id_) for queue, id_ in script_list(missing)],
        )

    async def remove_unprocessed_children(self, args: RemoveUnprocessedChildren) -> list[JobRow]:
        validate_queue_name(args.queue)
        answer = await self._backend.call(
            "remove_unprocessed_children",
            args.queue,
            {"id": args.parent_id, "now": epoch_ms(args.now)},
        )
        if answer[0] != "ok":
            raise JobNotFound(f"job {args.parent_id!r} not found in queue {args.queue!r}")
        return [job_row(queue, fields) for queue, fields in script_list(answer[1])]

    async def remove_child_dependency(self, args: RemoveChildDependency) -> bool:
        validate_queue_name(args.queue)
        answer = await self._backend.call(
            "remove_child_dependency",
            args.queue,
            {"id": args.child_id, "now": epoch_ms(args.now)},
        )
        if answer[0] != "ok":
            raise JobNotFound(f"job {args.child_id!r} not found in queue {args.queue!r}")
        return bool(answer[1])


def _raise(answer: Any) -> None:
    """The refusal a flow script answered instead of writing."""
    from lane_pg.redis.repeats import raise_refusal

    if isinstance(answer, dict) and answer.get("error") == "parent_conflict":
        raise ParentConflict(str(answer["message"]))
    if isinstance(answer, dict) and answer.get("error") == "failed_children":
        raise FailedChildren(str(answer["message"]))
    raise_refusal(answer)


def _trees(rows: Any) -> list[Flow]:
    """The stored nodes ([path, queue, job], path from the top node) as trees, in
    submission order."""
    nodes: dict[tuple[int, ...], Flow] = {}
    for path, queue, fields in script_list(rows):
        nodes[tuple(script_list(path))] = Flow(job_row(queue, fields))
    for path in sorted(nodes):
        if len(path) > 1 and path[:-1] in nodes:
            nodes[path[:-1]].children.append(nodes[path])
    return [nodes[path] for path in sorted(nodes) if len(path) == 1]
