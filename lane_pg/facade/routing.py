"""Routes and forwards (ROUTE): where a push goes, resolved once per push.

Queue: the override's, else the route's, else ``Job.queue``, else ``default``; then a
forward of that queue, one lookup (ROUTE-5..7). Connection: the override's, else the route's,
else ``Job.connection``, else the default connection's name (CONN-8). A forward never moves
a job to another connection; a gated forward applies only on its connection (ROUTE-6), under
any of its names (CONN-11).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from lane_pg.facade.envelope import EnvelopeOverrides
from lane_pg.facade.job import DEFAULT_QUEUE, Job
from lane_pg.types import validate_queue_name


@dataclass(frozen=True, slots=True)
class Route:
    connection: str | None = None
    queue: str | None = None


@dataclass(frozen=True, slots=True)
class Forward:
    queue: str
    connection: str | None
    """The gate: the forward applies only to pushes on this connection (None: all)."""


class Routing:
    """Operator routes by job class and forwards by queue name. ``same_connection`` says
    whether a forward's gate and a push's connection are one connection (the facade's
    aliases, CONN-11); without it, names compare as text."""

    def __init__(self, same_connection: Callable[[str, str], bool] | None = None) -> None:
        self._routes: dict[type[Job], Route] = {}
        self._forwards: dict[str, Forward] = {}
        self._same: Callable[[str, str], bool] = same_connection or (lambda a, b: a == b)

    def route(
        self, cls: type[Job], *, connection: str | None = None, queue: str | None = None
    ) -> None:
        """Send ``cls``'s pushes to ``queue`` and/or ``connection`` (ROUTE-2); keyed by the
        class itself, so a renamed job is an error here, not a silent miss (ROUTE-3)."""
        if not isinstance(cls, type) or not issubclass(cls, Job):
            raise TypeError(f"route takes a lane_pg.Job subclass, got {cls!r}")
        if queue is not None:
            validate_queue_name(queue)
        self._routes[cls] = Route(connection=connection, queue=queue)

    def forward(self, source: str, destination: str, connection: str | None = None) -> None:
        """Rewrite future pushes to ``source`` onto ``destination`` (ROUTE-5, -6). A
        self-forward removes an earlier one (ROUTE-7)."""
        validate_queue_name(source)
        if not destination:
            raise ValueError("forward needs a destination queue")
        validate_queue_name(destination)
        if destination == source:
            self._forwards.pop(source, None)
        else:
            self._forwards[source] = Forward(destination, connection)

    def forward_for(self, source: str) -> tuple[str, str | None] | None:
        """``(destination, connection gate)`` of ``source``'s forward, or None (ROUTE-10)."""
        found = self._forwards.get(source)
        return None if found is None else (found.queue, found.connection)

    def forwarded(self, queue: str, connection: str) -> str:
        """The queue a push to ``queue`` on ``connection`` lands on (single hop)."""
        found = self._forwards.get(queue)
        if found is None or (
            found.connection is not None and not self._same(found.connection, connection)
        ):
            return queue
        return found.queue

    def queue_of(self, cls: type[Job]) -> str:
        """The queue ``cls``'s pushes land on before any forward: its route's, else
        ``cls.queue``, else ``default`` (what a worker serves for it by default)."""
        return self._routes.get(cls, Route()).queue or cls.queue or DEFAULT_QUEUE

    def claim_queues(self, queues: list[str], connection: str) -> list[str]:
        """A worker started on ``queues`` also claims their forward destinations (ROUTE-5);
        pause is still checked on the names it was started with (PAUSE-8)."""
        out = list(queues)
        for queue in queues:
            target = self.forwarded(queue, connection)
            if target not in out:
                out.append(target)
        return out

    def resolve(
        self, job: Job, overrides: EnvelopeOverrides, default_connection: str
    ) -> tuple[str, str]:
        """``(queue, connection)`` of one push (ROUTE-2, CONN-8, ROUTE-5)."""
        route = self._routes.get(type(job), Route())
        cls = type(job)
        connection = (
            overrides.connection or route.connection or cls.connection or default_connection
        )
        queue = overrides.queue or self.queue_of(cls)
        validate_queue_name(queue)
        return self.forwarded(queue, connection), connection

    def clear(self) -> None:
        self._routes.clear()
        self._forwards.clear()
