"""Context that travels with a job (CTX-1..7): values set where a job is pushed are there
again, in the worker, while it runs.

    import lane_pg.context

    with lane_pg.context.scope(tenant_id="acme"):
        await Q.push(Report(...))             # the job's handler reads tenant_id again
    lane_pg.context.add_hidden("api_token", token)   # stored with the job, never logged

Each push stores ``snapshot()`` with the job; the worker runs each attempt in
``restore(snapshot)``: a fresh scope, so what a job adds reaches neither the pusher, nor the
next job, nor its own next attempt (CTX-3). Visible values are for the job and for what
reports on it; hidden values travel to the job store and the failed-job store but never
into a log line (CTX-6).

The values live in one scope object per ``contextvars`` context: a task started inside a
scope shares it (as a request's tasks share the request), a thread of the worker's pool
for sync handlers too, so a value a sync ``handle()`` adds is read by the listeners of
its ``JobProcessed``. A task that adds a value outside any scope gets a scope of its own
(``add`` makes one), so two requests served by two tasks never see each other's values;
``scope()`` makes the boundary explicit.

Values must be JSON (they are stored with the job); ``add`` refuses anything else before
it is stored. This module imports nothing of lane_pg, so every layer may use it.
"""

from __future__ import annotations

import contextlib
import contextvars
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

VISIBLE = "visible"
HIDDEN = "hidden"
"""The two keys of a snapshot: ``{"visible": {...}, "hidden": {...}}``."""


@dataclass(slots=True)
class ContextData:
    """The values of one scope: what the hooks receive, and may change (CTX-7)."""

    visible: dict[str, Any] = field(default_factory=dict)
    hidden: dict[str, Any] = field(default_factory=dict)

    def is_empty(self) -> bool:
        return not self.visible and not self.hidden

    def copy(self) -> ContextData:
        # Through JSON: a snapshot never shares a mutable value with the live scope.
        return ContextData(_json_copy(self.visible), _json_copy(self.hidden))


_SCOPE: contextvars.ContextVar[ContextData | None] = contextvars.ContextVar(
    "lane_pg_context", default=None
)
_DEHYDRATING: list[Callable[[ContextData], None]] = []
_HYDRATED: list[Callable[[ContextData], None]] = []


def _json_copy(values: dict[str, Any]) -> dict[str, Any]:
    if not values:
        return {}
    copied: dict[str, Any] = json.loads(json.dumps(values))
    return copied


def _checked(key: str, value: Any) -> Any:
    if not isinstance(key, str) or not key:
        raise TypeError(f"a context key is a non-empty string, got {key!r}")
    try:
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise TypeError(
            f"context value {key!r} must be JSON (it is stored with each job pushed): {exc}"
        ) from None
    return value


def _current() -> ContextData | None:
    return _SCOPE.get()


def _writable() -> ContextData:
    """The task's scope, made now (for this task and the tasks it starts) if it has none."""
    data = _SCOPE.get()
    if data is None:
        data = ContextData()
        _SCOPE.set(data)
    return data


def add(key: str, value: Any) -> None:
    """Set a visible value (JSON) for this scope and the jobs pushed from it."""
    _writable().visible[key] = _checked(key, value)


def add_hidden(key: str, value: Any) -> None:
    """Set a hidden value: it travels with the jobs pushed from here, never into logs."""
    _writable().hidden[key] = _checked(key, value)


def get(key: str, default: Any = None) -> Any:
    data = _current()
    return default if data is None else data.visible.get(key, default)


def get_hidden(key: str, default: Any = None) -> Any:
    data = _current()
    return default if data is None else data.hidden.get(key, default)


def all() -> dict[str, Any]:
    """A copy of the visible values."""
    data = _current()
    return {} if data is None else dict(data.visible)


def all_hidden() -> dict[str, Any]:
    data = _current()
    return {} if data is None else dict(data.hidden)


def forget(key: str) -> None:
    """Remove ``key`` from the visible and the hidden values (absent: nothing happens)."""
    data = _current()
    if data is not None:
        data.visible.pop(key, None)
        data.hidden.pop(key, None)


@contextlib.contextmanager
def scope(**values: Any) -> Iterator[None]:
    """A new scope holding this scope's values plus ``values`` (visible); on exit the
    enclosing scope is back as it was, whatever was added inside."""
    outer = _current()
    inner = ContextData() if outer is None else outer.copy()
    for key, value in values.items():
        inner.visible[key] = _checked(key, value)
    token = _SCOPE.set(inner)
    try:
        yield
    finally:
        _SCOPE.reset(token)


def snapshot() -> dict[str, Any] | None:
    """What a push stores (CTX-1): ``{"visible": {...}, "hidden": {...}}`` of this scope,
    after the ``dehydrating`` hooks changed a copy of it; None when both are empty."""
    data = _current()
    if data is None and not _DEHYDRATING:
        return None
    copied = ContextData() if data is None else data.copy()
    for hook in list(_DEHYDRATING):
        hook(copied)
    if copied.is_empty():
        return None
    return {VISIBLE: _json_copy(copied.visible), HIDDEN: _json_copy(copied.hidden)}


def _from_snapshot(stored: object) -> ContextData:
    """A fresh scope holding a stored snapshot's values (a malformed one: nothing)."""
    data = ContextData()
    if isinstance(stored, dict):
        visible, hidden = stored.get(VISIBLE), stored.get(HIDDEN)
        if isinstance(visible, dict):
            data.visible.update(_json_copy(visible))
        if isinstance(hidden, dict):
            data.hidden.update(_json_copy(hidden))
    return data


@contextlib.contextmanager
def restore(stored: object, *, hooks: bool = True) -> Iterator[ContextData]:
    """A fresh scope holding a stored snapshot's values (None: empty) for the ``with``
    block, then the scope before it again (CTX-2, CTX-3). The ``hydrated`` hooks run in
    it first (``hooks=False``: not, for reading a job's context without running it)."""
    data = _from_snapshot(stored)
    token = _SCOPE.set(data)
    try:
        if hooks:
            for hook in list(_HYDRATED):
                hook(data)
        yield data
    finally:
        _SCOPE.reset(token)


def dehydrating(hook: Callable[[ContextData], None]) -> Callable[[], None]:
    """Call ``hook(data)`` at each snapshot (each push) with a copy of the scope's values
    it may change: what it leaves is what the job stores. Returns the function that
    removes the hook."""
    _DEHYDRATING.append(hook)
    return lambda: _remove(_DEHYDRATING, hook)


def hydrated(hook: Callable[[ContextData], None]) -> Callable[[], None]:
    """Call ``hook(data)`` at each restore (each attempt), inside the restored scope, with
    its values (changes stay for the attempt). Returns the function that removes it."""
    _HYDRATED.append(hook)
    return lambda: _remove(_HYDRATED, hook)


def _remove(
    hooks: list[Callable[[ContextData], None]], hook: Callable[[ContextData], None]
) -> None:
    if hook in hooks:
        hooks.remove(hook)


def clear_hooks() -> None:
    """Forget every ``dehydrating`` and ``hydrated`` hook (tests)."""
    _DEHYDRATING.clear()
    _HYDRATED.clear()
