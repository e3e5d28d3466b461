"""Operations declared once, grouped into handles, called through one dispatcher.

A *handle* (``Jobs``, ``Runs``, ``Queues``, ...) is a small class of declarations: each
method marked ``@operation`` states one operation's name, typed parameters, result and, in
its docstring, the rule every backend follows. The declaration is the only place the
signature is written for callers: ``Handle.__init_subclass__`` replaces each declared method
by the one dispatcher (``_dispatcher``), which calls the backend's implementation of that
name and, when hooks are installed, runs them around the call.

A backend builds one instance of each handle it serves over an *implementation*: any object
with a method of each operation's name (PostgreSQL: a thin caller of the stored function of
that name; memory: the reference model). ``tests/test_operations.py`` checks that every
declared operation has an implementation of the same parameters on every backend, and a
conformance test that calls it.

Hooks are the instrumentation seam (Oban's ``with_span`` shape, the observability issue's
spans and metrics): an ``OperationHook`` receives the call and a ``proceed`` function, and
returns what ``proceed`` returned. With no hook installed the dispatcher costs one
attribute read and one truth test per call.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol, TypeVar

F = TypeVar("F", bound=Callable[..., Any])

_MARK = "__lane_operation__"


def operation(declaration: F) -> F:
    """Mark a handle method as an operation declaration (its body is never run)."""
    setattr(declaration, _MARK, True)
    return declaration


@dataclass(frozen=True, slots=True)
class Operation:
    """One declared operation: where it is declared and what it takes."""

    handle: str
    """The handle's name, which is also the backend attribute that holds it (``jobs``)."""
    name: str
    """The operation's name: the implementation method's name and, where the operation is
    one stored function, that function's name (``add_job`` calls ``lane.add_job``)."""
    signature: inspect.Signature
    """The declared parameters (without ``self``) and result annotation."""
    doc: str
    """The rule, as the declaration's docstring states it."""
    streams: bool = False
    """True for an operation that returns an async iterator (``subscribe_events``): it is
    called, not awaited, and hooks see only the call that creates the iterator."""

    @property
    def qualified_name(self) -> str:
        return f"{self.handle}.{self.name}"

    def arguments(self, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> dict[str, Any]:
        """The call's arguments by parameter name, defaults included (for hooks)."""
        bound = self.signature.bind(*args, **kwargs)
        bound.apply_defaults()
        return dict(bound.arguments)


@dataclass(frozen=True, slots=True)
class OperationCall:
    """What a hook is told about one call."""

    operation: Operation
    args: tuple[Any, ...]
    kwargs: Mapping[str, Any]
    backend: str
    """The backend's kind (``postgresql``, ``memory``)."""

    @property
    def arguments(self) -> dict[str, Any]:
        """The arguments by parameter name, defaults included."""
        return self.operation.arguments(self.args, self.kwargs)


class OperationHook(Protocol):
    """Runs around every operation of the backends it is installed on.

    It must await ``proceed()`` exactly once and return (or raise) what it gave: a hook
    observes calls, it does not change them."""

    async def __call__(self, call: OperationCall, proceed: Callable[[], Awaitable[Any]]) -> Any: ...


class Hooks:
    """The hooks installed on one backend, shared by all of its handles."""

    __slots__ = ("_backend", "installed")

    def __init__(self, backend: str) -> None:
        self._backend = backend
        self.installed: tuple[OperationHook, ...] = ()
        """Outermost first; empty (falsy) when none is installed: the dispatcher's test."""

    def add(self, hook: OperationHook) -> None:
        """Install ``hook`` innermost (it runs inside the hooks installed before it)."""
        self.installed = (*self.installed, hook)

    def remove(self, hook: OperationHook) -> None:
        """Uninstall ``hook``; a hook that is not installed is ignored."""
        self.installed = tuple(h for h in self.installed if h is not hook)

    async def run(
        self,
        op: Operation,
        implementation: Callable[..., Awaitable[Any]],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
    ) -> Any:
        call = OperationCall(op, args, kwargs, self._backend)

        async def innermost() -> Any:
            return await implementation(*args, **kwargs)

        proceed: Callable[[], Awaitable[Any]] = innermost
        for hook in reversed(self.installed):
            proceed = functools.partial(hook, call, proceed)
        return await proceed()


class Handle:
    """Base of the handles: the declarations of one entity's operations.

    A subclass names itself (``class Jobs(Handle, name="jobs")``); its ``@operation``
    methods become dispatchers. Methods without the mark are ordinary code shared by every
    backend (an operation derived from the declared ones, written once here).
    """

    __slots__ = ("_hooks", "_impl")

    name: ClassVar[str] = ""
    operations: ClassVar[dict[str, Operation]] = {}
    """This handle's operations by name, in declaration order."""

    def __init__(self, implementation: object, hooks: Hooks) -> None:
        self._impl = implementation
        self._hooks = hooks

    def __init_subclass__(cls, *, name: str = "", **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if name:
            cls.name = name
        operations = {
            k: v for base in cls.__mro__[1:] for k, v in getattr(base, "operations", {}).items()
        }
        for attribute, value in list(vars(cls).items()):
            if callable(value) and getattr(value, _MARK, False):
                op = Operation(
                    handle=cls.name,
                    name=attribute,
                    signature=_declared_signature(value),
                    doc=inspect.getdoc(value) or "",
                    streams=not inspect.iscoroutinefunction(value),
                )
                operations[attribute] = op
                setattr(cls, attribute, _dispatcher(op, value))
        cls.operations = operations


def _declared_signature(declaration: Callable[..., Any]) -> inspect.Signature:
    signature = inspect.signature(declaration)
    parameters = list(signature.parameters.values())[1:]  # without self
    return signature.replace(parameters=parameters)


def _dispatcher(op: Operation, declaration: Callable[..., Any]) -> Callable[..., Any]:
    """The one call path of every operation of every backend."""
    name = op.name
    if op.streams:

        def stream(self: Handle, /, *args: Any, **kwargs: Any) -> Any:
            return getattr(self._impl, name)(*args, **kwargs)

        return functools.update_wrapper(stream, declaration)

    async def dispatch(self: Handle, /, *args: Any, **kwargs: Any) -> Any:
        implementation = getattr(self._impl, name)
        hooks = self._hooks
        if hooks.installed:
            return await hooks.run(op, implementation, args, kwargs)
        return await implementation(*args, **kwargs)

    return functools.update_wrapper(dispatch, declaration)
