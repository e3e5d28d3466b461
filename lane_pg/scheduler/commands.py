"""What the lane scheduler runs (LANE-3): commands, their type and their payload.

A command is either

* an object with ``async execute()`` returning a JSON-serialisable value and a
  ``command_type: str`` attribute (the form the seed uses), or
* any async callable taking no arguments (``command_type`` optional; the callable's
  ``__name__`` is used when it has none). ``FunctionCommand`` wraps one with a type.

**Persistence.** A command is persistable when it has a ``payload`` attribute holding
JSON. With a storage configured, the manager saves ``(command_type, payload)`` of every
persistable command at submit, and recovery rebuilds it with the factory registered for
its ``command_type`` (LREL-6): ``factory(payload)`` must return an equivalent command.
Commands without a ``payload`` attribute live in memory only.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Protocol, TypeAlias, runtime_checkable

from lane_pg.types import JSON


@runtime_checkable
class ExecutableCommand(Protocol):
    @property
    def command_type(self) -> str: ...

    def execute(self) -> Awaitable[JSON]: ...


@runtime_checkable
class PersistableCommand(Protocol):
    """A command the storage can save and a factory can rebuild."""

    @property
    def command_type(self) -> str: ...

    @property
    def payload(self) -> JSON: ...

    def execute(self) -> Awaitable[JSON]: ...


Command: TypeAlias = ExecutableCommand | Callable[[], Awaitable[JSON]]
CommandFactory: TypeAlias = Callable[[JSON], Command]
"""Rebuilds a command of one ``command_type`` from its persisted payload."""

_NO_PAYLOAD = object()


@dataclass(frozen=True, slots=True)
class FunctionCommand:
    """An async function as a command with an explicit type (never persisted)."""

    fn: Callable[[], Awaitable[JSON]]
    command_type: str = "function"

    def execute(self) -> Awaitable[JSON]:
        return self.fn()


def command_type_of(command: Command) -> str:
    value = getattr(command, "command_type", None)
    if isinstance(value, str) and value:
        return value
    name = getattr(command, "__name__", None)
    return name if isinstance(name, str) and name else type(command).__name__


def has_payload(command: Command) -> bool:
    return getattr(command, "payload", _NO_PAYLOAD) is not _NO_PAYLOAD


def payload_of(command: Command) -> JSON:
    return getattr(command, "payload", None)


def invoke(command: Command) -> Awaitable[JSON]:
    """Start one attempt: ``command.execute()`` if it has one, else ``command()``."""
    if isinstance(command, ExecutableCommand):
        return command.execute()
    if callable(command):
        return command()
    raise TypeError(f"not a command: {command!r}")
