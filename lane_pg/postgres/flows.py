"""Flows on PostgreSQL: one stored function of sql/functions/17_flows.sql per operation
(``get_flow_dependencies``: the parent, then its dependencies); the derived reads are the
``Flows`` handle's own."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from lane_pg.backend.flows import (
    Flows,
    GetFlowDependencies,
    GetFlowDependencyPage,
    check_page_request,
)
from lane_pg.postgres.calls import Entity, Rows, job_list, statement
from lane_pg.postgres.rows import JOB_COLUMNS, job_from_row
from lane_pg.types import dumps_json, validate_queue_name
from lane_pg.types.flows import (
    ChildRef,
    Flow,
    FlowDependencies,
    FlowDependency,
    FlowDependencyCounts,
    FlowDependencyPage,
    FlowJob,
)


def flow_document(flow: FlowJob) -> str:
    """The tree as the jsonb text ``lane.add_flow_nodes`` takes."""
    return dumps_json(flow.to_json(), "flow")


def children_document(children: Sequence[FlowJob]) -> str:
    return dumps_json([child.to_json() for child in children], "children")


def flows_from_rows(rows: Sequence[Mapping[str, Any]], root: tuple[int, ...] = ()) -> list[Flow]:
    """The stored nodes (rows with a ``path`` and the job's columns) as trees: the nodes at
    ``root`` + one position, each with its own children, in submission order."""
    nodes: dict[tuple[int, ...], Flow] = {}
    for row in sorted(rows, key=lambda r: (len(r["path"]), list(r["path"]))):
        path = tuple(row["path"])
        node = Flow(job_from_row(row))
        nodes[path] = node
        parent = nodes.get(path[:-1])
        if parent is not None and len(path) > len(root) + 1:
            parent.children.append(node)
    return [nodes[path] for path in sorted(nodes) if len(path) == len(root) + 1]


def flow_of_rows(rows: Rows) -> Flow:
    """The tree ``lane.add_flow_nodes`` stored: the root's path is empty, its children are
    the nodes one position deep."""
    root = next(row for row in rows if not row["path"])
    return Flow(job_from_row(root), flows_from_rows([r for r in rows if r["path"]]))


def dependency_counts(rows: Rows) -> FlowDependencyCounts | None:
    row = rows[0]
    if row["processed"] is None:
        return None
    return FlowDependencyCounts(
        processed=row["processed"],
        unprocessed=row["unprocessed"],
        failed=row["failed"],
        ignored=row["ignored"],
        missing=row["missing"],
    )


class PostgresFlows(Entity, serves=Flows):
    add_flow = statement(
        f"SELECT n.path, {JOB_COLUMNS} FROM lane.add_flow_nodes($1::jsonb, $2) n,"
        " LATERAL (SELECT (n.job).*) j",
        result=flow_of_rows,
        flow=flow_document,
    )
    add_flow_children = statement(
        f"SELECT n.path, {JOB_COLUMNS}"
        " FROM lane.add_flow_children($1, $2, $3::uuid, $4::jsonb, $5) n,"
        " LATERAL (SELECT (n.job).*) j",
        result=flows_from_rows,
        queue=validate_queue_name,
        children=children_document,
    )
    get_flow_dependency_counts = statement(
        "SELECT * FROM lane.get_flow_dependency_counts($1, $2)",
        result=dependency_counts,
        queue=validate_queue_name,
    )

    async def get_flow_dependency_page(self, args: GetFlowDependencyPage) -> FlowDependencyPage:
        validate_queue_name(args.queue)
        check_page_request(args.kind, args.cursor, args.count)
        # One row past the page tells whether another page follows.
        rows = await self._db.fetch(
            "SELECT seq, child_queue, child_id, value::text AS value, reason"
            " FROM lane.get_flow_dependency_page($1, $2, $3, $4, $5)",
            args.queue,
            args.parent_id,
            args.kind,
            args.cursor,
            args.count + 1,
        )
        page = rows[: args.count]
        items = [
            FlowDependency(
                ChildRef(row["child_queue"], row["child_id"]),
                None if row["value"] is None else json.loads(row["value"]),
                row["reason"],
            )
            for row in page
        ]
        return FlowDependencyPage(items, page[-1]["seq"] if len(rows) > args.count else 0)

    async def get_flow_dependencies(self, args: GetFlowDependencies) -> FlowDependencies | None:
        validate_queue_name(args.queue)
        parents = await self._db.fetch(
            f"SELECT {JOB_COLUMNS} FROM lane.get_job($1, $2) AS j WHERE j.key IS NOT NULL",
            args.queue,
            args.parent_id,
        )
        if not parents:
            return None
        rows = await self._db.fetch(
            f"SELECT d.bucket, d.child_queue, d.child_id, d.present, {JOB_COLUMNS}"
            " FROM lane.get_flow_dependencies($1, $2) d"
            " LEFT JOIN lane.jobs j ON j.key = d.child_key"
            " ORDER BY d.seq",
            args.queue,
            args.parent_id,
        )
        return FlowDependencies(
            parent=job_from_row(parents[0]),
            children=[job_from_row(row) for row in rows if row["present"]],
            pending_child_ids=[
                ChildRef(row["child_queue"], row["child_id"])
                for row in rows
                if row["bucket"] == "unprocessed"
            ],
            missing_child_ids=[  # present NULL: a placeholder (DEDUP-18), to come
                ChildRef(row["child_queue"], row["child_id"])
                for row in rows
                if row["present"] is False
            ],
        )

    remove_unprocessed_children = statement(
        f"SELECT {JOB_COLUMNS} FROM lane.remove_unprocessed_children($1, $2, $3) AS j",
        result=job_list,
        queue=validate_queue_name,
    )
    remove_child_dependency = statement(
        "SELECT lane.remove_child_dependency($1, $2, $3)",
        result=lambda rows: bool(rows[0][0]),
        queue=validate_queue_name,
    )
