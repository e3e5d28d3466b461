"""The listings and ``clear`` of the default connection (CONN-9, DRV-5, A16, INSP), a mixin
of ``QueueFacade`` beside its counts: ``Q.pending_jobs("billing")`` reads the default
connection. A driver that cannot list raises ``NotImplementedError`` (CONN-14).

The facade's listings answer ``InspectedJob`` values (INSP-2): the job as its class sees
it, its payload checked against the registered class. A row whose payload no longer fits
that class (a field renamed, a value of the wrong type) is still listed, with ``id=None``
and ``payload={"unparseable": True}`` (INSP-3), never hidden. A job name with no class
registered here is listed with its stored payload (another application's job: nothing
to check it against). ``Q.connection(name).pending_jobs()`` answers the stored
``JobRow`` snapshots themselves (the driver's view, DRV-5). Listing never changes a job
(INSP-4) and reads the queue named, never a forward's destination (INSP-7).
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from lane_pg.errors import InvalidPayload
from lane_pg.facade.connection import DEFAULT_LISTING_LIMIT, Connection
from lane_pg.facade.job import Job, decode_fields
from lane_pg.facade.registry import JobRegistry
from lane_pg.types import JSON, JobRow

if TYPE_CHECKING:
    from lane_pg.facade.fake import QueueFake

UNPARSEABLE: dict[str, JSON] = {"unparseable": True}


@dataclass(frozen=True, slots=True)
class InspectedJob:
    """One listed job (INSP-2): ``id`` None and ``payload`` ``{"unparseable": True}`` for a
    row whose payload does not fit its registered class (INSP-3); ``attempts`` counts the
    attempts started, a running one included; ``created_at`` is None only under a fake."""

    id: str | None
    queue: str
    name: str
    attempts: int
    payload: JSON
    created_at: datetime | None


def inspect_row(row: JobRow, registry: JobRegistry) -> InspectedJob:
    """``row`` as a listing shows it, its payload checked against ``registry``."""
    cls = registry.get(row.name)
    if cls is not None and not payload_fits(cls, row.data):
        return InspectedJob(
            None, row.queue, row.name, row.attempts_started, dict(UNPARSEABLE), row.created_at
        )
    return InspectedJob(row.id, row.queue, row.name, row.attempts_started, row.data, row.created_at)


def payload_fits(cls: type[Job], data: JSON) -> bool:
    """Whether the worker could rebuild ``cls`` from ``data``: ``decode_fields`` accepts it
    (a pydantic model validates its types there) and, for a dataclass, each stored field's
    value has the plain JSON type its annotation names (a dataclass does not check)."""
    try:
        decode_fields(cls, data)
    except InvalidPayload:
        return False
    declared: Any = cls  # a Job subclass that is a dataclass, or a pydantic model
    if not dataclasses.is_dataclass(declared) or not isinstance(data, dict):
        return True
    try:
        hints = typing.get_type_hints(declared)
    except Exception:  # an annotation that cannot be resolved here: nothing to check
        return True
    return all(
        _matches(data[field.name], hints.get(field.name, Any))
        for field in dataclasses.fields(declared)
        if field.name in data
    )


_PLAIN: dict[Any, Callable[[object], bool]] = {
    bool: lambda value: isinstance(value, bool),
    int: lambda value: isinstance(value, int) and not isinstance(value, bool),
    float: lambda value: isinstance(value, int | float) and not isinstance(value, bool),
    str: lambda value: isinstance(value, str),
    type(None): lambda value: value is None,
    list: lambda value: isinstance(value, list),
    tuple: lambda value: isinstance(value, list),
    dict: lambda value: isinstance(value, dict),
}


def _matches(value: object, annotation: Any) -> bool:
    """A shallow check of a JSON value against a field's annotation: plain types, their
    unions and containers (by their origin); anything else (a nested dataclass, an
    enum, ``Any``) is not checked here."""
    origin = typing.get_origin(annotation)
    if origin is typing.Union or origin is types.UnionType:
        return any(_matches(value, arg) for arg in typing.get_args(annotation))
    check = _PLAIN.get(origin if origin is not None else annotation)
    return True if check is None else check(value)


class ConnectionReads:
    """Listings and ``clear`` on ``self.driver()`` (the default connection)."""

    registry: JobRegistry
    _fake: QueueFake | None = None

    def driver(self) -> Connection:
        raise NotImplementedError

    def _inspected(self, rows: list[JobRow]) -> list[InspectedJob]:
        return [inspect_row(row, self.registry) for row in rows]

    async def pending_jobs(
        self, queue: str | None = None, *, limit: int = DEFAULT_LISTING_LIMIT
    ) -> list[InspectedJob]:
        """Jobs of ``queue`` (every queue when None) ready to run, at most ``limit``:
        waiting ones, then delayed ones whose time has come (the next claim promotes them),
        the jobs ``pending_size`` counts (INSP-5)."""
        if self._fake is not None:
            return self._fake.pending_jobs(queue, limit=limit)
        return self._inspected(await self.driver().pending_jobs(queue, limit=limit))

    async def delayed_jobs(
        self, queue: str | None = None, *, limit: int = DEFAULT_LISTING_LIMIT
    ) -> list[InspectedJob]:
        """Delayed jobs whose time has not come, at most ``limit``: the jobs
        ``delayed_size`` counts (a due one is pending)."""
        if self._fake is not None:
            return self._fake.delayed_jobs(queue, limit=limit)
        return self._inspected(await self.driver().delayed_jobs(queue, limit=limit))

    async def reserved_jobs(
        self, queue: str | None = None, *, limit: int = DEFAULT_LISTING_LIMIT
    ) -> list[InspectedJob]:
        """Active jobs (``reserved_size``), an expired lease included until a claim or a
        recovery takes it back (INSP-4)."""
        if self._fake is not None:
            return self._fake.reserved_jobs(queue, limit=limit)
        return self._inspected(await self.driver().reserved_jobs(queue, limit=limit))

    async def clear(self, queue: str | None = None) -> int:
        """Remove the clearable jobs (A16: never a validly leased one); returns the count."""
        if self._fake is not None:
            return self._fake.clear(queue)
        return await self.driver().clear(queue)
