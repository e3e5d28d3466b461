"""The ``null`` connection (DRV-4): a connection over ``NullBackend``, which keeps nothing.

A push returns a fresh id (so callers that log it still work) and writes nothing; counts
are 0, listings empty, ``pop`` finds nothing and ``clear`` removes nothing, because that is
literally true (CONN-14). A settle can only be of a reservation this connection never
issued, so it is stale. Every one of those answers is the connection's ordinary operation
(``lane_pg.facade.connection``) over this backend; only pausing is not served: there is no
queue to pause.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from lane_pg.backend import (
    CAPABILITIES,
    HANDLES,
    Arguments,
    DebouncedAdd,
    JobQueueBackend,
    Operation,
)
from lane_pg.errors import JobNotFound
from lane_pg.facade.connection import Connection
from lane_pg.memory import MemoryBackend
from lane_pg.types import JobOptions, JobPage, JobRow, JobSearchPage, JobSpec


async def _discarded(arguments: dict[str, Any]) -> JobRow:
    """The snapshot a store would answer for an add, from a store thrown away after it: the
    input is checked as by any backend; the id is the push's own, or a fresh UUID."""
    options = arguments.get("options")
    document = options.to_json() if isinstance(options, JobOptions) else dict(options or {})
    document["job_id"] = document.get("job_id") or str(uuid.uuid4())
    return await MemoryBackend().jobs.add_job(
        arguments["queue"], arguments["name"], arguments.get("data"), document
    )


async def _each_discarded(arguments: dict[str, Any]) -> list[JobRow]:
    specs: Sequence[JobSpec] = arguments["specs"]
    queue = arguments["queue"]
    return [
        await _discarded({"queue": queue, "name": s.name, "data": s.data, "options": s.options})
        for s in specs
    ]


async def _debounced(arguments: dict[str, Any]) -> DebouncedAdd:
    return DebouncedAdd(await _discarded(arguments), None)


def _constant(value: Any) -> Callable[[dict[str, Any]], Awaitable[Any]]:
    async def answer(arguments: dict[str, Any]) -> Any:
        return value() if callable(value) else value

    return answer


async def _empty_page(arguments: dict[str, Any]) -> JobPage:
    return JobPage([], 0, arguments.get("offset", 0), arguments.get("limit", 0))


async def _empty_search(arguments: dict[str, Any]) -> JobSearchPage:
    return JobSearchPage([], arguments.get("offset", 0), arguments.get("limit", 0), False)


async def _no_job(arguments: dict[str, Any]) -> Any:
    raise JobNotFound(f"job {arguments['queue']}/{arguments['job_id']} does not exist")


_ANSWERS: dict[str, Callable[[dict[str, Any]], Awaitable[Any]]] = {
    "add_job": _discarded,
    "add_job_in": _discarded,
    "add_jobs": _each_discarded,
    "add_jobs_in": _each_discarded,
    "add_debounced_job": _debounced,
    "get_job": _constant(None),
    "list_queues": _constant(list),
    "get_job_count": _constant(0),
    "count_ready_jobs": _constant(0),
    "count_scheduled_jobs": _constant(0),
    "list_jobs": _empty_page,
    "list_ready_jobs": _empty_page,
    "list_scheduled_jobs": _empty_page,
    "search_jobs": _empty_search,
    "claim_jobs": _constant(list),
    "complete_job": _no_job,
    "fail_job": _no_job,
    "give_back_job": _no_job,
    "clear_queues": _constant(0),
    "same_database": _constant(False),
}
"""What ``NullBackend`` answers, by operation, from the call's arguments by name: adds are
discarded, reads find nothing, a settle finds no job. Nothing else is served."""

_OPERATIONS: dict[str, Operation] = {
    name: op for handle in (*HANDLES, *CAPABILITIES) for name, op in handle.operations.items()
}


class _Nothing:
    """The implementation behind ``NullBackend``'s handles (``_ANSWERS``)."""

    def __getattr__(self, name: str) -> Callable[..., Awaitable[Any]]:
        answer, op = _ANSWERS.get(name), _OPERATIONS.get(name)

        async def call(arguments: Arguments[Any]) -> Any:
            if answer is None or op is None:
                raise NotImplementedError(f"the null backend keeps nothing to {name}")
            return await answer(arguments.as_dict())

        return call


class NullBackend(JobQueueBackend):
    """A backend that keeps nothing: what the null and sync connections read and write."""

    kind = "null"

    def __init__(self) -> None:
        nothing = _Nothing()
        self._serve({"transactions": nothing}, default=nothing)


class NullDriver(Connection):
    """Discards pushes (tests of code that dispatches, a disabled queue)."""

    def __init__(self) -> None:
        super().__init__(NullBackend(), "null")

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"
