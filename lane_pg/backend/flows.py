"""Flows (FLOW): adding parent/child trees and reading their dependencies.

The rules every backend follows are in ``lane_pg.types.flows`` (the module docstring). Each
backend implements the primitives of ``Flows`` (its operations); the handle derives the other
reads from them once, for every backend.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import KW_ONLY, dataclass, field
from datetime import datetime
from typing import Generic, TypeVar

from lane_pg.backend.operation import Arguments, Handle, operation
from lane_pg.errors import InvalidJobId, InvalidOptions, InvalidQueueName
from lane_pg.options import FLOW_POLICY_FLAGS, ParsedOptions
from lane_pg.types import JSON, JobRow, validate_queue_name
from lane_pg.types.flows import (
    DEPENDENCY_KINDS,
    ChildRef,
    DependencyKind,
    Flow,
    FlowDependencies,
    FlowDependency,
    FlowDependencyCounts,
    FlowDependencyPage,
    FlowDependencySelectedCounts,
    FlowDependencyValues,
    FlowJob,
)

_PAGE = 1000
"""Rows per page when a derived read walks a whole bucket."""


def check_page_request(kind: str, cursor: int, count: int) -> None:
    """The arguments lane.get_flow_dependency_page refuses, refused the same way."""
    if kind not in DEPENDENCY_KINDS:
        raise InvalidOptions(
            f"invalid dependency kind {kind!r}: use processed, unprocessed, ignored or failed"
        )
    if (
        isinstance(cursor, bool)
        or not isinstance(cursor, int)
        or cursor < 0
        or isinstance(count, bool)
        or not isinstance(count, int)
        or count < 1
    ):
        raise InvalidOptions(
            f"a dependency page needs a cursor >= 0 and a count >= 1, got {cursor} and {count}"
        )


_NODE_KEYS = ("queue", "name", "data", "options", "children")
Spec = TypeVar("Spec")


@dataclass(slots=True)
class CheckedNode(Generic[Spec]):
    """One checked flow node: its queue, the backend's checked spec and its options."""

    queue: str
    spec: Spec
    parsed: ParsedOptions
    children: list[CheckedNode[Spec]] = field(default_factory=list)

    @property
    def job_id(self) -> str | None:
        return self.parsed.job_id


def check_flow(
    document: JSON,
    parent_queue: str | None,
    parse: Callable[[str, JSON, JSON], tuple[Spec, ParsedOptions]],
) -> CheckedNode[Spec]:
    """lane._check_flow: every node checked, breadth first, before anything is written
    (``parse`` checks one node's name, data and options as its backend stores them); then
    no custom id twice in one queue."""
    root: CheckedNode[Spec] | None = None
    pending: list[tuple[JSON, str | None, CheckedNode[Spec] | None]] = [
        (document, parent_queue, None)
    ]
    custom_ids: list[tuple[str, str]] = []
    position = 0
    while position < len(pending):
        node, default_queue, parent = pending[position]
        if not isinstance(node, dict):
            raise InvalidOptions(
                'a flow node must be a JSON object {"queue", "name", "data", "options",'
                f' "children"}}, got {node!r}'
            )
        if any(key not in _NODE_KEYS for key in node):
            raise InvalidOptions(
                f"unknown flow node key in {node!r}: a node takes queue, name, data, options"
                " and children"
            )
        given = node.get("queue")
        if given is not None and not isinstance(given, str):
            raise InvalidQueueName(f"a queue name must be a string, got {given!r}")
        queue = given if given is not None else default_queue
        if queue is None:
            raise InvalidQueueName("the flow's root needs a queue")
        validate_queue_name(queue)
        name = node.get("name")
        if not isinstance(name, str):
            raise InvalidOptions(f"invalid job name {name!r}: use 1-255 characters")
        options = node.get("options")
        options = {} if options is None else options
        if (
            isinstance(options, dict)
            and position == 0
            and parent_queue is None
            and any(options.get(flag) is not None for flag in FLOW_POLICY_FLAGS)
        ):
            raise InvalidOptions(
                "a failure-policy flag belongs on a child (it says what its parent does when"
                " it fails); the root of a flow has no parent"
            )
        spec, parsed = parse(name, node.get("data"), options)
        checked = CheckedNode(queue, spec, parsed)
        if checked.job_id is not None:
            custom_ids.append((queue, checked.job_id))
        children = node.get("children")
        if parsed.repeat is not None and (
            position > 0 or parent_queue is not None or "children" in node
        ):
            raise InvalidOptions(
                "repeat options cannot be part of a flow: a series schedules lone jobs"
            )
        if children is not None:
            if not isinstance(children, list):
                raise InvalidOptions(
                    f"children must be a JSON array of flow nodes, got {children!r}"
                )
            pending.extend((child, queue, checked) for child in children)
        if parent is None:
            root = checked
        else:
            parent.children.append(checked)
        position += 1
    seen: set[tuple[str, str]] = set()
    for queue, job_id in custom_ids:  # after every node, as in SQL
        if (queue, job_id) in seen:
            raise InvalidJobId(f"job id {job_id!r} appears twice in queue {queue} of one flow")
        seen.add((queue, job_id))
    assert root is not None
    return root


class AddFlow(Arguments[Flow]):
    """Store a whole tree in one transaction and return its stored nodes (FLOW-1,
    -11..13, DEDUP-17, -19). The root names its queue; a node with children waits in
    ``waiting-children``. Invalid input anywhere, a custom id twice in one queue
    (FLOW-2) or a child that belongs to another parent (``ParentConflict``, FLOW-13)
    rejects the whole tree with nothing written."""

    flow: FlowJob
    _: KW_ONLY
    now: datetime | None = None


class AddFlowChildren(Arguments[list[Flow]]):
    """A running parent, under its lock token, adds children and waits for them
    (FLOW-14): it leaves ``active`` for ``waiting-children`` (its run not counted as an
    attempt) and is released at once if nothing it attached is pending.
    ``FailedChildren`` while a child failure fails it (FLOW-15)."""

    queue: str
    parent_id: str
    token: str
    children: Sequence[FlowJob]
    _: KW_ONLY
    now: datetime | None = None


class GetFlowDependencyCounts(Arguments[FlowDependencyCounts | None]):
    """Counts per bucket, None for an unknown parent (FLOW-17)."""

    queue: str
    parent_id: str


class GetFlowDependencyPage(Arguments[FlowDependencyPage]):
    """One page of a bucket, in attach order after ``cursor`` (0: from the start); its
    ``next_cursor`` continues it, 0 when done (FLOW-20). The same cost at any cursor."""

    queue: str
    parent_id: str
    kind: DependencyKind
    cursor: int = 0
    count: int = 20


class GetFlowDependencies(Arguments[FlowDependencies | None]):
    """The parent, its children's snapshots, the pending and the missing ones (FLOW-16);
    None for an unknown parent."""

    queue: str
    parent_id: str


class RemoveUnprocessedChildren(Arguments[list[JobRow]]):
    """Remove the pending children nobody runs or holds (FLOW-24), releasing the parent
    when nothing is pending; they stay listed, as missing."""

    queue: str
    parent_id: str
    _: KW_ONLY
    now: datetime | None = None


class RemoveChildDependency(Arguments[bool]):
    """Detach a child from its parent, results included (FLOW-25); False when it has
    none."""

    queue: str
    child_id: str
    _: KW_ONLY
    now: datetime | None = None


class Flows(Handle, name="flows"):
    """Adding flows and reading or cutting their dependencies (FLOW-1..29).

    The reads without the mark derive from the declared ones, once for every backend."""

    __slots__ = ()

    add_flow = operation(AddFlow)
    add_flow_children = operation(AddFlowChildren)
    get_flow_dependency_counts = operation(GetFlowDependencyCounts)
    get_flow_dependency_page = operation(GetFlowDependencyPage)
    get_flow_dependencies = operation(GetFlowDependencies)
    remove_unprocessed_children = operation(RemoveUnprocessedChildren)
    remove_child_dependency = operation(RemoveChildDependency)

    async def _whole_bucket(
        self, queue: str, parent_id: str, kind: DependencyKind
    ) -> list[FlowDependency]:
        items: list[FlowDependency] = []
        cursor = 0
        while True:
            page = await self.get_flow_dependency_page(queue, parent_id, kind, cursor, _PAGE)
            items.extend(page.items)
            if page.next_cursor == 0:
                return items
            cursor = page.next_cursor

    async def get_flow_dependency_selected_counts(
        self,
        queue: str,
        parent_id: str,
        *,
        processed: bool = False,
        unprocessed: bool = False,
        ignored: bool = False,
        failed: bool = False,
    ) -> FlowDependencySelectedCounts | None:
        """The buckets asked for (all four when none is), the others None (FLOW-18)."""
        counts = await self.get_flow_dependency_counts(queue, parent_id)
        if counts is None:
            return None
        every = not (processed or unprocessed or ignored or failed)
        return FlowDependencySelectedCounts(
            processed=counts.processed if every or processed else None,
            unprocessed=counts.unprocessed if every or unprocessed else None,
            ignored=counts.ignored if every or ignored else None,
            failed=counts.failed if every or failed else None,
        )

    async def get_flow_dependency_values(self, queue: str, parent_id: str) -> FlowDependencyValues:
        """Every bucket in full (FLOW-19)."""
        processed = await self._whole_bucket(queue, parent_id, "processed")
        unprocessed = await self._whole_bucket(queue, parent_id, "unprocessed")
        ignored = await self._whole_bucket(queue, parent_id, "ignored")
        failed = await self._whole_bucket(queue, parent_id, "failed")
        return FlowDependencyValues(
            processed={item.child: item.value for item in processed},
            unprocessed=[item.child for item in unprocessed],
            ignored={item.child: item.reason for item in ignored},
            failed=[item.child for item in failed],
        )

    async def get_flow_dependency_pages(
        self,
        queue: str,
        parent_id: str,
        *,
        processed: int | None = None,
        unprocessed: int | None = None,
        ignored: int | None = None,
        failed: int | None = None,
        count: int = 20,
    ) -> dict[DependencyKind, FlowDependencyPage]:
        """A page of each bucket given a cursor, in the order processed, unprocessed,
        ignored, failed (FLOW-21); all four from the start when none is given."""
        cursors: dict[DependencyKind, int | None] = {
            "processed": processed,
            "unprocessed": unprocessed,
            "ignored": ignored,
            "failed": failed,
        }
        if all(cursor is None for cursor in cursors.values()):
            cursors = dict.fromkeys(DEPENDENCY_KINDS, 0)
        pages: dict[DependencyKind, FlowDependencyPage] = {}
        for kind in DEPENDENCY_KINDS:
            cursor = cursors[kind]
            if cursor is not None:
                pages[kind] = await self.get_flow_dependency_page(
                    queue, parent_id, kind, cursor, count
                )
        return pages

    async def get_flow_children_values(self, queue: str, parent_id: str) -> dict[ChildRef, JSON]:
        """The completed children's return values, JSON null included (FLOW-22)."""
        return {
            item.child: item.value
            for item in await self._whole_bucket(queue, parent_id, "processed")
        }

    async def get_flow_ignored_children_failures(
        self, queue: str, parent_id: str
    ) -> dict[ChildRef, str | None]:
        """The failure reasons of children whose parent tolerated them (ignore, continue);
        failures of ``remove_dependency_on_failure`` children are not kept (FLOW-23)."""
        return {
            item.child: item.reason
            for item in await self._whole_bucket(queue, parent_id, "ignored")
        }
