"""The contract itself: every operation declared once, implemented by every backend with
the declared parameters, exercised by a conformance test, and called through the one
dispatcher whose hooks see every call."""

from __future__ import annotations

import inspect
import re
import typing
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
from lane_pg.backend.jobs import AddJob
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
    """An implementation takes the declaration's arguments object and returns the declared
    result: the parameters are written once, in the declaration, so no backend can take a
    call the contract does not describe."""
    for handle in _served(backend):
        assert type(handle).operations, type(handle).__name__
        for name, op in type(handle).operations.items():
            implementation = getattr(handle._impl, name, None)
            assert implementation is not None, f"{backend.kind} lacks {op.qualified_name}"
            if backend.kind == "null":
                continue  # answers every operation alike, from the arguments object
            parameters = list(inspect.signature(implementation).parameters)
            assert parameters == ["args"], f"{backend.kind} {op.qualified_name}: {parameters}"
            hints = typing.get_type_hints(implementation)
            where = f"{backend.kind} {op.qualified_name}"
            assert hints["args"] is op.arguments, where
            assert hints["return"] == op.result, where


def test_declarations_name_their_operation_and_state_a_rule() -> None:
    """``AddJob`` declares ``add_job``: the class name is the operation's, capitalised, so
    a reader finds one from the other; and every declaration says what it does."""
    for handle in (*HANDLES, *CAPABILITIES):
        for name, op in handle.operations.items():
            assert op.arguments.__name__ == name.title().replace("_", ""), op.qualified_name
            assert op.doc, f"{op.qualified_name} states no rule"


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
    assert first.arguments == AddJob(queue_name, "hooked", {"n": 1})
    assert first.arguments.as_dict() == {
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


async def test_a_wrapper_hands_a_call_on_through_the_same_path(
    backend: JobQueueBackend, queue_name: str
) -> None:
    """``handle.perform(args)`` runs the operation ``args`` declares, hooks included: how a
    wrapper of a backend forwards a call without restating its parameters."""
    seen: list[str] = []
    recorder = Recorder("hook", seen)
    backend.hooks.add(recorder)
    try:
        added = await backend.jobs.perform(AddJob(queue_name, "forwarded", {"n": 2}))
    finally:
        backend.hooks.remove(recorder)
    assert seen == ["hook before add_job", "hook after add_job"]
    assert recorder.calls[0].arguments == AddJob(queue_name, "forwarded", {"n": 2})
    assert await backend.jobs.get_job(queue_name, added.id) == added
