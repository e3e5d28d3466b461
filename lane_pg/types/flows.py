"""Flows (FLOW): a parent job that runs after its children, and the reads of its
dependencies.

A flow is a tree of ``FlowJob`` nodes. ``add_flow`` stores the whole tree in one
transaction: each node with children waits in ``waiting-children`` until every child has
completed (or was removed, or failed under a policy that lets it go on); the others are
ordinary jobs. A child's options may carry one failure policy, which says what its
terminal failure does to its parent:

* none (the default): the parent fails at once (``failed prev=waiting-children``), or,
  when it was already released, is failed by the worker that claims it;
* ``fail_parent_on_failure``: the parent is released with a deferred failure naming the
  child, which the worker applies before the parent's processor would run;
* ``ignore_dependency_on_failure``: the failure is recorded (ignored bucket) and the
  parent goes on once its other children are done;
* ``continue_parent_on_failure``: recorded as well, and the parent is released at once;
* ``remove_dependency_on_failure``: the dependency is dropped, recorded nowhere.

The same rule applies on every path by which a child ends: completion, failure, stalled
recovery past its limit, removal, ``remove_on_fail``. A child's result stays under its
parent (``lane.flow_deps``) after the child's own row is cleaned away; it goes with the
parent's row.

A node whose deduplication id another job owns is not stored (DEDUP-17, -19). When the
owner is running and the node asks for ``keep_last_if_active``, the node is kept as the
owner's next job with its parent and its own children: a kept child's parent waits for it
under the pending id ``0:<dedup id>`` (``ChildRef(queue, "0:report")``, never missing)
until the owner finishes, when the child is stored and takes that place in the same
transaction; a kept root is stored with its children then (DEDUP-18, -19). Whatever drops
the kept job instead (a later duplicate, which takes its place and parent;
``remove_deduplication_key``; the owner removed, drained or obliterated; its row expiring;
``remove_unprocessed_children`` of the parent) releases the parent it was to join.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal, NamedTuple, TypeAlias

from lane_pg.types.base import JSON, check_json
from lane_pg.types.options import JobOptions, options_document
from lane_pg.types.snapshots import JobRow

__all__ = [
    "DEPENDENCY_KINDS",
    "ChildRef",
    "DependencyKind",
    "Flow",
    "FlowDependencies",
    "FlowDependency",
    "FlowDependencyCounts",
    "FlowDependencyPage",
    "FlowDependencySelectedCounts",
    "FlowDependencyValues",
    "FlowJob",
]

DependencyKind: TypeAlias = Literal["processed", "unprocessed", "ignored", "failed"]
DEPENDENCY_KINDS: tuple[DependencyKind, ...] = ("processed", "unprocessed", "ignored", "failed")
"""The dependency buckets a caller reads, in the order multi-bucket reads give them."""


@dataclass(frozen=True, slots=True)
class FlowJob:
    """One node of a flow: a job and the children it waits for.

    ``queue`` defaults to the parent's queue (the root must name one). ``options`` take
    what ``add_job`` takes, plus at most one failure-policy flag on a child.
    """

    name: str
    data: JSON = None
    options: JobOptions | dict[str, JSON] | None = None
    queue: str | None = None
    children: Sequence[FlowJob] = ()

    def to_json(self) -> dict[str, JSON]:
        """The node as ``lane.add_flow`` takes it (the data checked as JSON here)."""
        node: dict[str, JSON] = {
            "name": self.name,
            "data": check_json(self.data, "data"),
            "options": options_document(self.options),
        }
        if self.queue is not None:
            node["queue"] = self.queue
        if self.children:
            node["children"] = [child.to_json() for child in self.children]
        return node


@dataclass(frozen=True, slots=True)
class Flow:
    """A stored flow node: its job and the stored children, in submission order (a child
    skipped because another job owns its deduplication id is not there, DEDUP-17)."""

    job: JobRow
    children: list[Flow] = field(default_factory=list)


class ChildRef(NamedTuple):
    """A child job by queue and id (children may live in other queues than the parent)."""

    queue: str
    id: str

    def __str__(self) -> str:
        return f"{self.queue}:{self.id}"


@dataclass(frozen=True, slots=True)
class FlowDependency:
    """One dependency row: the child, its value (processed), its failure reason (ignored,
    failed)."""

    child: ChildRef
    value: JSON = None
    reason: str | None = None


@dataclass(frozen=True, slots=True)
class FlowDependencyPage:
    """One page of a bucket (FLOW-20); ``next_cursor == 0`` means there is no more."""

    items: list[FlowDependency]
    next_cursor: int


@dataclass(frozen=True, slots=True)
class FlowDependencyCounts:
    """A parent's dependencies per bucket (FLOW-17); ``missing`` counts children whose
    own rows are gone (their results may still be here)."""

    processed: int
    unprocessed: int
    failed: int
    ignored: int
    missing: int


@dataclass(frozen=True, slots=True)
class FlowDependencySelectedCounts:
    """The counts a caller asked for (FLOW-18); None for a bucket not asked for."""

    processed: int | None = None
    unprocessed: int | None = None
    ignored: int | None = None
    failed: int | None = None


@dataclass(frozen=True, slots=True)
class FlowDependencyValues:
    """Every bucket of a parent (FLOW-19): processed values and ignored reasons by child,
    the unprocessed and failed children."""

    processed: dict[ChildRef, JSON]
    unprocessed: list[ChildRef]
    ignored: dict[ChildRef, str | None]
    failed: list[ChildRef]


@dataclass(frozen=True, slots=True)
class FlowDependencies:
    """A parent with its children (FLOW-16): the children's current snapshots, the pending
    ones, and the ones whose rows no longer exist."""

    parent: JobRow
    children: list[JobRow]
    pending_child_ids: list[ChildRef]
    missing_child_ids: list[ChildRef]
