"""Flows (FLOW): adding parent/child trees and reading their dependencies.

The rules every backend follows are in ``lane_pg.types.flows`` (the module docstring). Each
backend implements the primitives of ``Flows`` (its operations); the handle derives the other
reads from them once, for every backend.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import KW_ONLY
from datetime import datetime

from lane_pg.backend.operation import Arguments, Handle, operation
from lane_pg.errors import InvalidOptions
from lane_pg.types import JSON, JobRow
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
