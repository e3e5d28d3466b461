"""The queues a worker serves when it is not told which: the ones its code declares.

A worker claims from named queues only unless it is told to serve every queue
(``WorkerConfig(all_queues=True)``, ``worker --all-queues``): in a database two apps
share, a worker of every queue would claim the other app's jobs and fail them for good as
unknown names. Without lanes, ``App.create_worker``, ``run_worker`` and
``python -m lane_pg worker`` serve

* the lanes declared on the App (``App(lanes=...)``), with their priorities and bounds;
* the queue of each registered job class (its route's, else ``Job.queue``, else
  ``default``), priority 0, unbounded;
* and the forward destination of each of those (ROUTE-5), paused as its source (PAUSE-8).

Processor functions (``@app.processor("name")``) declare no queue: an app of those alone
names its queues as lanes or ``--queue``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from lane_pg.facade.queue import QueueFacade
from lane_pg.facade.registry import JobRegistry
from lane_pg.types import Lane

_NOTHING_NAMED = (
    "no queue to serve: the app declares no lanes and registers no job class (processor"
    " functions name no queue); name them with "
)
NO_QUEUES = (
    _NOTHING_NAMED + "--queue NAME (repeatable), lanes on the App (App(lanes=[Lane('emails')]))"
    " or a `queue` on your job classes, or serve every queue of the database with --all-queues"
)
"""Why a worker without queues refuses to start, and the ways to name them (CLI)."""
NO_QUEUES_IN_CODE = (
    _NOTHING_NAMED + "WorkerConfig(lanes=(Lane('emails'),)), lanes on the App"
    " (App(lanes=[Lane('emails')])) or a `queue` on your job classes, or serve every queue"
    " of the database with WorkerConfig(all_queues=True)"
)
"""The same, for ``App.create_worker`` and ``run_worker``."""


def job_class_queues(registry: JobRegistry | None, facade: QueueFacade) -> list[str]:
    """The queue each job class of ``registry`` is pushed to (routes applied, forwards not),
    once each, sorted."""
    if registry is None:
        return []
    return sorted({facade.routing.queue_of(cls) for cls in registry})


def with_forwards(
    lanes: tuple[Lane, ...], facade: QueueFacade, connection: str
) -> tuple[Lane, ...]:
    """``lanes`` plus a lane for each forward destination of theirs (ROUTE-5), with its
    source's priority and bound and paused as its source (PAUSE-8)."""
    by_name = {lane.name: lane for lane in lanes}
    extra = []
    for lane in lanes:
        target = facade.routing.forwarded(lane.name, connection)
        if target not in by_name:
            by_name[target] = Lane(
                target,
                lane.priority,
                lane.max_concurrency,
                lane.min_concurrency,
                pause_as=lane.name,
            )
            extra.append(by_name[target])
    return lanes + tuple(extra)


def declared_lanes(
    lanes: Sequence[Lane], registry: JobRegistry | None, facade: QueueFacade
) -> tuple[Lane, ...]:
    """``lanes`` plus a lane (priority 0, no bound) for every job class queue they lack;
    forwards not applied (``with_forwards``)."""
    names = {lane.name for lane in lanes}
    extra: Iterable[Lane] = (
        Lane(queue) for queue in job_class_queues(registry, facade) if queue not in names
    )
    return tuple(lanes) + tuple(extra)
