"""Operations declared once, grouped into handles, called through one dispatcher.

An operation is declared by one class of its arguments, a subclass of ``Arguments[Result]``
(a dataclass-like record): its fields are the operation's parameters (their types,
defaults and keyword-only marker), its type parameter is the result, and its docstring is
the rule every backend follows. A *handle* (``Jobs``, ``Runs``, ``Queues``, ...) names one entity's
operations::

    class ClearJobLogs(Arguments[None]):
        \"\"\"Delete the log, or all but the newest ``keep`` entries.\"\"\"

        queue: str
        job_id: str
        keep: int = 0


    class Logs(Handle, name="logs"):
        clear_job_logs = operation(ClearJobLogs)

A caller writes ``await backend.logs.clear_job_logs("q", job_id, keep=5)``, typed from the
class's fields. The dispatcher builds the arguments object and hands it to the backend's
*implementation* of that name, a method of one parameter (``async def clear_job_logs(self,
args: ClearJobLogs) -> None``), so no backend writes the parameters again (River's
``*Params`` structs): PostgreSQL's implementation is mostly a ``statement`` line
(``lane_pg.postgres.calls``), memory's is the reference model.
``tests/conformance/test_operations.py`` checks that every backend implements every
operation with that one parameter and the declared result, and that a conformance test
calls it.

Hooks are the instrumentation seam (Oban's ``with_span`` shape, the observability issue's
spans and metrics): an ``OperationHook`` receives the call (the operation and its arguments
object) and a ``proceed`` function, and returns what ``proceed`` returned. With no hook
installed the dispatcher costs one attribute read and one truth test per call beyond
building the arguments object (0.5 to 0.7 µs).
"""

from __future__ import annotations

import functools
import inspect
import typing
from collections.abc import Awaitable, Callable
from dataclasses import KW_ONLY, dataclass
from typing import (
    Any,
    ClassVar,
    Generic,
    ParamSpec,
    Protocol,
    TypeVar,
    dataclass_transform,
    overload,
)

P = ParamSpec("P")
R = TypeVar("R")


_MUTABLE = (list, dict, set)


@dataclass_transform()
class _Declaring(type):
    """Makes each ``Arguments`` subclass a slotted record of its annotated fields, as
    ``dataclass(slots=True)`` would, and leaves its ``__init__`` to the first call: the
    dataclass decorator cost ~0.7 ms per class, ~75 ms of import for the 100-odd
    declarations that every CLI and worker process loads and mostly never calls."""

    def __new__(
        mcs, name: str, bases: tuple[type, ...], namespace: dict[str, Any], **kwargs: Any
    ) -> _Declaring:
        if bases:
            fields, defaults, keyword_from = _fields_of(name, namespace)
            namespace["__slots__"] = fields
            namespace["_fields"] = fields
            namespace["_defaults"] = defaults
            namespace["_keyword_from"] = keyword_from
        return super().__new__(mcs, name, bases, namespace, **kwargs)


def _fields_of(name: str, namespace: dict[str, Any]) -> tuple[tuple[str, ...], dict[str, Any], int]:
    """The annotated fields of a class body (its defaults taken out of it), and the index
    of the first keyword-only one (after ``_: KW_ONLY``)."""
    fields: list[str] = []
    defaults: dict[str, Any] = {}
    keyword_from: int | None = None
    for field, annotation in namespace.get("__annotations__", {}).items():
        text = annotation if isinstance(annotation, str) else repr(annotation)
        if text.startswith(("ClassVar", "typing.ClassVar")):
            continue
        if annotation is KW_ONLY or text in ("KW_ONLY", "dataclasses.KW_ONLY"):
            keyword_from = len(fields)
            continue
        if field in namespace:
            default = namespace.pop(field)
            if isinstance(default, _MUTABLE):
                raise TypeError(f"{name}.{field}: a mutable default would be shared by calls")
            defaults[field] = default
        elif keyword_from is None and fields and fields[-1] in defaults:
            raise TypeError(f"{name}.{field}: a field without a default after one with")
        fields.append(field)
    return tuple(fields), defaults, len(fields) if keyword_from is None else keyword_from


class Arguments(Generic[R], metaclass=_Declaring):
    """Base of an operation's declaration: a record of its parameters (annotated fields,
    their defaults, ``_: KW_ONLY``), whose type parameter is the operation's result and
    whose docstring is its rule. Instances have slots, ``==`` and a ``repr`` as a
    dataclass's do."""

    __slots__ = ()
    _fields: ClassVar[tuple[str, ...]] = ()
    """The parameters' names in declared order."""
    _defaults: ClassVar[dict[str, Any]] = {}
    _keyword_from: ClassVar[int] = 0
    """The index of the first keyword-only parameter (``len(_fields)`` when none is)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        cls = type(self)
        cls.__init__ = _compiled_init(cls)  # type: ignore[method-assign]
        cls.__init__(self, *args, **kwargs)

    def as_dict(self) -> dict[str, Any]:
        """The arguments by parameter name (for hooks and logs; values are not copied)."""
        return {name: getattr(self, name) for name in self._fields}

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return all(getattr(self, name) == getattr(other, name) for name in self._fields)

    def __repr__(self) -> str:
        fields = ", ".join(f"{name}={value!r}" for name, value in self.as_dict().items())
        return f"{type(self).__name__}({fields})"


def parameters_of(cls: type[Arguments[Any]]) -> inspect.Signature:
    """The call's parameters as ``cls`` declares them."""
    parameters = []
    for position, name in enumerate(cls._fields):
        kind = (
            inspect.Parameter.KEYWORD_ONLY
            if position >= cls._keyword_from
            else inspect.Parameter.POSITIONAL_OR_KEYWORD
        )
        default = cls._defaults.get(name, inspect.Parameter.empty)
        parameters.append(inspect.Parameter(name, kind, default=default))
    return inspect.Signature(parameters)


def _compiled_init(cls: type[Arguments[Any]]) -> Callable[..., None]:
    """``cls.__init__``, written as ``dataclasses`` writes it."""
    header: list[str] = []
    for position, name in enumerate(cls._fields):
        if position == cls._keyword_from:
            header.append("*")
        header.append(f"{name}=_defaults[{name!r}]" if name in cls._defaults else name)
    body = "".join(f"    self.{name} = {name}\n" for name in cls._fields) or "    pass\n"
    namespace: dict[str, Any] = {"_defaults": cls._defaults}
    exec(f"def __init__(self, {', '.join(header)}):\n{body}", namespace)
    init: Callable[..., None] = namespace["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    return init


class Declared(Generic[P, R]):
    """A handle attribute declaring one operation (``operation(ClearJobLogs)``); the handle
    replaces it by the dispatcher, and type checkers read the call's signature from it."""

    def __init__(self, arguments: Callable[P, Arguments[R]], *, streams: bool) -> None:
        self.arguments = arguments
        self.streams = streams

    @overload
    def __get__(self, instance: None, owner: type) -> Declared[P, R]: ...
    @overload
    def __get__(self, instance: object, owner: type) -> Callable[P, Awaitable[R]]: ...
    def __get__(self, instance: object, owner: type) -> Any:  # pragma: no cover (replaced)
        raise TypeError("an operation declared outside a Handle subclass")


class DeclaredStream(Declared[P, R]):
    """``stream_operation``: the call returns the async iterator itself, not an awaitable."""

    @overload  # type: ignore[override]
    def __get__(self, instance: None, owner: type) -> DeclaredStream[P, R]: ...
    @overload
    def __get__(self, instance: object, owner: type) -> Callable[P, R]: ...
    def __get__(self, instance: object, owner: type) -> Any:  # pragma: no cover (replaced)
        raise TypeError("an operation declared outside a Handle subclass")


def operation(arguments: Callable[P, Arguments[R]]) -> Declared[P, R]:
    """Declare the operation whose arguments class is ``arguments`` (see the docstring)."""
    return Declared(arguments, streams=False)


def stream_operation(arguments: Callable[P, Arguments[R]]) -> DeclaredStream[P, R]:
    """Declare an operation that returns an async iterator (``subscribe_events``): it is
    called, not awaited, and hooks see only the call that creates the iterator."""
    return DeclaredStream(arguments, streams=True)


@dataclass(frozen=True, slots=True)
class Operation:
    """One declared operation: where it is declared and what it takes."""

    handle: str
    """The handle's name, which is also the backend attribute that holds it (``jobs``)."""
    name: str
    """The operation's name: the implementation method's name and, where the operation is
    one stored function, that function's name (``add_job`` calls ``lane.add_job``)."""
    arguments: type[Arguments[Any]]
    """The declaration: the class of the call's arguments."""
    signature: inspect.Signature
    """The call's parameters, as the arguments class takes them."""
    result: Any
    """The declared result type (``Arguments``' type parameter)."""
    doc: str
    """The rule, as the declaration's docstring states it."""
    streams: bool = False

    @property
    def qualified_name(self) -> str:
        return f"{self.handle}.{self.name}"


@dataclass(frozen=True, slots=True)
class OperationCall:
    """What a hook is told about one call."""

    operation: Operation
    arguments: Arguments[Any]
    """The call's arguments object (``call.arguments.queue``; ``as_dict()`` for all)."""
    backend: str
    """The backend's kind (``postgresql``, ``memory``)."""


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
        implementation: Callable[[Arguments[Any]], Awaitable[Any]],
        arguments: Arguments[Any],
    ) -> Any:
        call = OperationCall(op, arguments, self._backend)
        # Partials, not closures or wrapping coroutines: each coroutine layer is passed
        # through on every resume of the call (a one-job Redis add spent 4.5 us of its
        # 89 us of client CPU in this dispatch, min of 30 x 500).
        proceed: Callable[[], Awaitable[Any]] = functools.partial(implementation, arguments)
        for hook in reversed(self.installed):
            proceed = functools.partial(hook, call, proceed)
        return await proceed()


class Handle:
    """Base of the handles: the declarations of one entity's operations.

    A subclass names itself (``class Jobs(Handle, name="jobs")``); its ``operation(...)``
    attributes become dispatchers. Its ordinary methods are code shared by every backend
    (an operation derived from the declared ones, written once here).
    """

    __slots__ = ("_hooks", "_impl")

    name: ClassVar[str] = ""
    operations: ClassVar[dict[str, Operation]] = {}
    """This handle's operations by name, in declaration order."""
    _declarations: ClassVar[dict[type[Arguments[Any]], Operation]] = {}

    def __init__(self, implementation: object, hooks: Hooks) -> None:
        self._impl = implementation
        self._hooks = hooks

    async def perform(self, arguments: Arguments[R]) -> R:
        """Call the operation that ``arguments``' class declares, as the dispatcher does:
        how a wrapper of a backend hands a call on without restating its parameters."""
        result: R = await _invoke(self, self._declarations[type(arguments)], arguments)
        return result

    def __init_subclass__(cls, *, name: str = "", **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if name:
            cls.name = name
        operations = {
            k: v for base in cls.__mro__[1:] for k, v in getattr(base, "operations", {}).items()
        }
        for attribute, value in list(vars(cls).items()):
            if isinstance(value, Declared):
                op = _declared(cls.name, attribute, value)
                operations[attribute] = op
                setattr(cls, attribute, _dispatcher(op))
        cls.operations = operations
        cls._declarations = {op.arguments: op for op in operations.values() if not op.streams}


def _declared(handle: str, name: str, declared: Declared[Any, Any]) -> Operation:
    arguments: Any = declared.arguments
    if not (isinstance(arguments, type) and issubclass(arguments, Arguments)):
        raise TypeError(f"{handle}.{name}: the declaration must be a class of Arguments")
    results = [
        typing.get_args(base)
        for base in getattr(arguments, "__orig_bases__", ())
        if typing.get_origin(base) is Arguments
    ]
    doc = vars(arguments).get("__doc__") or ""
    if not doc:
        raise TypeError(f"{handle}.{name}: {arguments.__name__} states no rule (docstring)")
    if not results:
        raise TypeError(f"{handle}.{name}: {arguments.__name__} must subclass Arguments[Result]")
    return Operation(
        handle=handle,
        name=name,
        arguments=arguments,
        signature=parameters_of(arguments),
        result=results[0][0],
        doc=inspect.cleandoc(doc),
        streams=declared.streams,
    )


def _invoke(handle: Handle, op: Operation, arguments: Arguments[Any]) -> Awaitable[Any]:
    """The one call path: the backend's implementation of ``op``, inside the hooks. Not a
    coroutine of its own: the caller awaits what it returns (one layer fewer per call)."""
    implementation = getattr(handle._impl, op.name)
    hooks = handle._hooks
    if hooks.installed:
        return hooks.run(op, implementation, arguments)
    result: Awaitable[Any] = implementation(arguments)
    return result


def _dispatcher(op: Operation) -> Callable[..., Any]:
    """The method a handle gets for ``op``: it builds the arguments object and takes the
    one call path (``_invoke``); a stream's is called, not awaited, so hooks skip it."""
    name = op.name
    build = op.arguments
    method: Callable[..., Any]

    if op.streams:

        def method(self: Handle, /, *args: Any, **kwargs: Any) -> Any:
            return getattr(self._impl, name)(build(*args, **kwargs))

    else:

        async def method(self: Handle, /, *args: Any, **kwargs: Any) -> Any:
            return await _invoke(self, op, build(*args, **kwargs))

    method.__name__ = method.__qualname__ = name
    method.__doc__ = op.doc
    method.__signature__ = op.signature  # type: ignore[union-attr]
    return method
