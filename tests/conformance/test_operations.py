"""The contract itself: every operation declared once, implemented by every backend with
the declared parameters, exercised by a conformance test, and called through the one
dispatcher whose hooks see every call."""

from __future__ import annotations

import inspect
import re
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from lane_pg.backend import (
    CAPABILITIES,
    HANDLES,
    Handle,
    JobQueueBackend,
    OperationCall,
)
from lane_pg.errors import JobNotFound

CONFORMANCE = Path(__file__).parent


def _served(backend: JobQueueBackend) -> list[Handle]:
    handles = [getattr(backend, handle.name) for handle in HANDLES]
    served = [getattr(backend, capability.name) for capability in CAPABILITIES]
    return handles + [handle for handle in served if handle is not None]


def test_operation_names_are_unique_across_handles() -> None:
    names = [name for handle in (*HANDLES, *CAPABILITIES) for name in handle.operations]
    assert len(names) == len(set(names))


def test_every_backend_serves_every_handle_with_the_declared_parameters(
    backend: JobQueueBackend,
) -> None:
    """An implementation takes exactly the declared parameters (names, kinds, defaults):
    the declaration is the one place a caller reads, so an implementation that drifted
    from it would take a call the contract does not describe."""
    for handle in _served(backend):
        assert type(handle).operations, type(handle).__name__
        for name, op in type(handle).operations.items():
            implementation = getattr(handle._impl, name, None)
            assert implementation is not None, f"{backend.kind} lacks {op.qualified_name}"
            declared = [(p.name, p.kind, p.default) for p in op.signature.parameters.values()]
            implemented = [
                (p.name, p.kind, p.default)
                for p in inspect.signature(implementation).parameters.values()
            ]
            assert implemented == declared, f"{backend.kind} {op.qualified_name}"


def test_every_operation_has_a_conformance_test() -> None:
    """Each operation is called somewhere in this suite, which runs on every backend."""
    text = "\n".join(path.read_text() for path in CONFORMANCE.glob("test_*.py"))
    called = set(re.findall(r"\.(\w+)\(", text))
    missing = [
        op.qualified_name
        for handle in (*HANDLES, *CAPABILITIES)
        for op in handle.operations.values()
        if op.name not in called and handle in HANDLES
    ]
    assert missing == []


class Recorder:
    """A hook that records what it sees and passes every call through unchanged."""

    def __init__(self, label: str, seen: list[str]) -> None:
        self.label = label
        self.seen = seen
        self.calls: list[OperationCall] = []
        self.outcomes: list[object] = []

    async def __call__(self, call: OperationCall, proceed: Callable[[], Awaitable[Any]]) -> Any:
        self.calls.append(call)
        self.seen.append(f"{self.label} before {call.operation.name}")
        try:
            result = await proceed()
        except Exception as exc:
            self.outcomes.append(exc)
            raise
        finally:
            self.seen.append(f"{self.label} after {call.operation.name}")
        self.outcomes.append(result)
        return result


async def test_hooks_see_every_call_with_its_arguments_and_outcome(
    backend: JobQueueBackend, queue_name: str
) -> None:
    seen: list[str] = []
    outer, inner = Recorder("outer", seen), Recorder("inner", seen)
    backend.hooks.add(outer)
    backend.hooks.add(inner)
    try:
        added = await backend.jobs.add_job(queue_name, "hooked", {"n": 1})
        with pytest.raises(JobNotFound):
            await backend.jobs.promote_job(queue_name, "no-such-job")
    finally:
        backend.hooks.remove(outer)
        backend.hooks.remove(inner)
    await backend.jobs.get_job(queue_name, added.id)  # after removal: not seen

    assert seen == [
        "outer before add_job",
        "inner before add_job",
        "inner after add_job",
        "outer after add_job",
        "outer before promote_job",
        "inner before promote_job",
        "inner after promote_job",
        "outer after promote_job",
    ]
    first = outer.calls[0]
    assert first.operation.qualified_name == "jobs.add_job"
    assert first.backend == backend.kind
    assert first.arguments == {
        "queue": queue_name,
        "name": "hooked",
        "data": {"n": 1},
        "options": None,
        "now": None,
    }
    assert outer.outcomes[0] == added
    assert isinstance(outer.outcomes[1], JobNotFound)


async def test_an_operation_is_still_reachable_by_its_name_on_the_backend(
    backend: JobQueueBackend, queue_name: str
) -> None:
    """Code written before the handles (``backend.add_job``) keeps working; the typed path
    is the handle."""
    added = await backend.add_job(queue_name, "flat")  # type: ignore[attr-defined]
    assert await backend.jobs.get_job(queue_name, added.id) == added
    with pytest.raises(AttributeError):
        backend.no_such_operation  # type: ignore[attr-defined]  # noqa: B018
