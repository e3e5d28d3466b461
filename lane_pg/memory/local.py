"""The ``local`` store (DRV-2): a memory store persisted as one JSON snapshot file.

``LocalBackend.open(path)`` is a ``MemoryBackend`` (the same rules, the same reference
model) whose whole state is written to ``path`` after every call that may change it, and
read back by the next ``open``: jobs in every state with their logs, events and event ids,
dedup owners with their pending next jobs and released owners, repeat schedulers, flow
dependency rows with children's processed values and failure markers (kept after the child
row is gone), queue settings, claim logs, metrics, leaderships and every sequence, so ids
continue where they stopped. For development and single-machine use: one process holds
a snapshot file at a time (an exclusive lock on ``path + ".lock"``; a second ``open``
raises ``ConfigurationError``), and each write replaces the file atomically (write,
fsync, rename), so a crash leaves the last complete snapshot.

The snapshot holds the store's declared state (``_Store.STATE``: its records, indexes and
sequences, never this process's clock, hooks or waiters) and encodes it field by field of
its records, with tagged JSON for what JSON has no type for (``{"$d": [[key, value],
...]}`` for a dict, ``$t`` tuple, ``$s`` set, ``$dt`` datetime, ``$td`` timedelta, ``$c``
a record class and its fields). A value of any other type raises ``TypeError`` instead of
being dropped, so a new kind of state cannot silently miss the file. Records are rebuilt
without running their constructors (the values were valid when stored); only classes of
lane_pg's record modules are ever instantiated from a file.
"""

from __future__ import annotations

import dataclasses
import importlib
import json
import os
import random
from collections.abc import Awaitable, Callable
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from lane_pg._moved import new_home
from lane_pg.backend import OperationCall, Reads
from lane_pg.errors import ConfigurationError
from lane_pg.memory import MemoryBackend
from lane_pg.memory._records import _Queue
from lane_pg.memory._store import _Store

FORMAT = "lane_pg.local"
VERSION = 1
RECORD_MODULES = frozenset(
    {
        "lane_pg.memory._records",
        "lane_pg.options",
        "lane_pg.types.schedule",
        # A snapshot written before lane_pg.types became a package names its classes
        # "lane_pg.types:<class>": the package re-exports every one of them.
        "lane_pg.types",
        "lane_pg.types.base",
        "lane_pg.types.options",
        "lane_pg.types.snapshots",
        "lane_pg.types.settle",
        "lane_pg.types.pages",
        "lane_pg.types.lanes",
        "lane_pg.types.flows",
        # Modules that moved (lane_pg._moved): a snapshot may name their old place.
        "lane_pg.schedule",
        "lane_pg.flows",
    }
)
READ_METHODS = frozenset(
    {
        *Reads.operations,
        "get_job",
        "get_job_state",
        "get_job_finished_result",
        "get_job_logs",
        "read_events",
        "subscribe_events",
        "is_queue_paused",
        "get_pause_status",
        "get_queue_retention",
        "get_queue_events",
        "list_queues",
        "get_metrics",
    }
)
"""Calls that change nothing, so they write no snapshot."""


# -- the codec -----------------------------------------------------------------------------


def encode(value: Any) -> Any:
    """``value`` as JSON-ready data (see the module docstring); ``TypeError`` for a type
    the snapshot cannot hold."""
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            raise TypeError(f"cannot snapshot the float {value!r}")
        return value
    if isinstance(value, list):
        return [encode(item) for item in value]
    if isinstance(value, tuple):
        return {"$t": [encode(item) for item in value]}
    if isinstance(value, set | frozenset):
        return {"$s": sorted((encode(item) for item in value), key=json.dumps)}
    if isinstance(value, dict):
        return {"$d": [[encode(key), encode(item)] for key, item in value.items()]}
    if isinstance(value, datetime):
        return {"$dt": value.isoformat()}
    if isinstance(value, timedelta):
        return {"$td": [value.days, value.seconds, value.microseconds]}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        cls = type(value)
        if cls.__module__ not in RECORD_MODULES:
            raise TypeError(f"cannot snapshot a {cls.__module__}.{cls.__qualname__}")
        fields: dict[str, Any] = {}
        for field in dataclasses.fields(value):
            item = getattr(value, field.name)
            if isinstance(value, _Queue) and field.name == "by_state":
                # The index holds the same records as ``jobs``: ids, in index order.
                item = {state: list(index) for state, index in item.items()}
            fields[field.name] = encode(item)
        return {"$c": f"{cls.__module__}:{cls.__qualname__}", "f": fields}
    raise TypeError(f"cannot snapshot a {type(value).__qualname__}: {value!r}")


def decode(data: Any) -> Any:
    """The value ``encode`` wrote."""
    if isinstance(data, list):
        return [decode(item) for item in data]
    if not isinstance(data, dict):
        return data
    if "$t" in data:
        return tuple(decode(item) for item in data["$t"])
    if "$s" in data:
        return {decode(item) for item in data["$s"]}
    if "$d" in data:
        return {decode(key): decode(item) for key, item in data["$d"]}
    if "$dt" in data:
        return datetime.fromisoformat(data["$dt"])
    if "$td" in data:
        days, seconds, micros = data["$td"]
        return timedelta(days=days, seconds=seconds, microseconds=micros)
    if "$c" in data:
        return _record(data["$c"], {name: decode(item) for name, item in data["f"].items()})
    raise ValueError(f"not a snapshot value: {sorted(data)}")


def _record(name: str, fields: dict[str, Any]) -> Any:
    module_name, _, qualname = name.partition(":")
    module_name = new_home(module_name) if module_name in RECORD_MODULES else module_name
    if module_name not in RECORD_MODULES:
        raise ValueError(f"the snapshot names a class outside lane_pg's records: {name}")
    cls = getattr(importlib.import_module(module_name), qualname, None)
    if not (isinstance(cls, type) and dataclasses.is_dataclass(cls)):
        raise ValueError(f"the snapshot names an unknown record class: {name}")
    record = object.__new__(cls)
    for field in dataclasses.fields(cls):
        if field.name in fields:
            value = fields[field.name]
        elif field.default is not dataclasses.MISSING:
            value = field.default  # a field added since the snapshot was written
        elif field.default_factory is not dataclasses.MISSING:
            value = field.default_factory()
        else:
            raise ValueError(f"the snapshot's {name} has no {field.name!r}")
        object.__setattr__(record, field.name, value)
    if isinstance(record, _Queue):
        ids: dict[Any, list[str]] = record.by_state  # type: ignore[assignment]
        record.by_state = {
            state: {job_id: record.jobs[job_id] for job_id in index} for state, index in ids.items()
        }
    return record


def snapshot_of(backend: MemoryBackend) -> dict[str, Any]:
    """The whole store of ``backend`` (its declared ``STATE``) as one JSON document."""
    state = {name: encode(getattr(backend, name)) for name in _Store.STATE}
    return {"format": FORMAT, "version": VERSION, "store": state}


def restore(backend: MemoryBackend, document: Any, source: str) -> None:
    if not (
        isinstance(document, dict)
        and document.get("format") == FORMAT
        and isinstance(document.get("store"), dict)
    ):
        raise ConfigurationError(f"{source} is not a lane_pg local snapshot")
    if document.get("version") != VERSION:
        raise ConfigurationError(
            f"{source} is a version {document.get('version')!r} snapshot; this lane_pg"
            f" reads version {VERSION}"
        )
    stored = document["store"]
    missing = [name for name in _Store.STATE if name not in stored]
    if set(missing) - _Store.STATE_ADDED:
        raise ConfigurationError(f"{source} is a snapshot without {', '.join(missing)}")
    for name in _Store.STATE:
        if name in stored:
            setattr(backend, name, decode(stored[name]))


# -- the backend ---------------------------------------------------------------------------


class LocalBackend(MemoryBackend):
    """A ``MemoryBackend`` saved to a JSON snapshot after every call that may change it."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        clock: Callable[[], datetime] | None = None,
        rng: random.Random | None = None,
    ) -> None:
        super().__init__(clock, rng)
        self._local_path = Path(path)
        self._local_lock: Any = None
        self.hooks.add(_SaveAfterChanges(self))

    @classmethod
    async def open(
        cls,
        path: str | os.PathLike[str],
        *,
        clock: Callable[[], datetime] | None = None,
        rng: random.Random | None = None,
    ) -> LocalBackend:
        """The store saved at ``path`` (a new, empty one when the file does not exist)."""
        backend = cls(path, clock=clock, rng=rng)
        backend._lock()
        try:
            target = backend._local_path
            if target.exists():
                try:
                    document = json.loads(target.read_text(encoding="utf-8"))
                except (OSError, ValueError) as exc:
                    raise ConfigurationError(f"cannot read snapshot {target}: {exc}") from exc
                restore(backend, document, str(target))
            else:
                backend.save()
        except BaseException:
            backend._unlock()
            raise
        return backend

    @property
    def path(self) -> Path:
        return self._local_path

    def _lock(self) -> None:
        import fcntl

        self._local_path.parent.mkdir(parents=True, exist_ok=True)
        handle = open(f"{self._local_path}.lock", "a+b")  # noqa: SIM115 - held until close
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            handle.close()
            raise ConfigurationError(
                f"the local store {self._local_path} is open in another process (or twice in"
                " this one): one process holds a snapshot file at a time"
            ) from exc
        self._local_lock = handle

    def _unlock(self) -> None:
        if self._local_lock is not None:
            self._local_lock.close()  # closing the file releases the flock
            self._local_lock = None

    def save(self) -> None:
        """Write the snapshot now (every changing call does)."""
        text = json.dumps(snapshot_of(self), separators=(",", ":"))
        temporary = self._local_path.with_name(self._local_path.name + ".tmp")
        with open(temporary, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, self._local_path)

    async def close(self) -> None:
        if self._local_lock is not None:
            self.save()
            self._unlock()


class _SaveAfterChanges:
    """The hook that keeps the file current: after every operation that may change the
    store, also after a refusal (a call that raises has changed nothing, and saving then
    costs a write, never a lost change)."""

    def __init__(self, backend: LocalBackend) -> None:
        self._backend = backend

    async def __call__(self, call: OperationCall, proceed: Callable[[], Awaitable[Any]]) -> Any:
        try:
            return await proceed()
        finally:
            if call.operation.name not in READ_METHODS and self._backend._local_lock is not None:
                self._backend.save()
