"""``_StoreSurface``: what the memory store's parts (``_Store`` and its rule mixins,
``_flow_rules``, ``_owners``, ``_groups``) give each other, declared once for the type
checker; at run time it is an empty base class."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from lane_pg.memory._records import (
        _Batch,
        _BatchRecord,
        _Dep,
        _NewJob,
        _Node,
        _Owner,
        _Queue,
        _Record,
    )
    from lane_pg.types import JSON, JobRow, JobState


class _StoreSurface:
    """The records and transitions one part of the store calls in another."""

    if TYPE_CHECKING:
        _queues: dict[str, _Queue]
        _batches: dict[str, _BatchRecord]
        _deps: dict[int, dict[tuple[str, str], _Dep]]
        _last_dep_seq: int
        _last_key: int

        def _queue(self, name: str) -> _Queue: ...

        def _find(self, queue: str, job_id: str) -> tuple[_Queue, _Record] | None: ...

        def _emit(
            self, q: _Queue, event: str, job_id: str | None, data: dict[str, JSON], now: datetime
        ) -> None: ...

        def _emit_batch(self, q: _Queue, batch: _Batch, now: datetime) -> None: ...

        def _set_state(self, q: _Queue, job: _Record, state: JobState) -> None: ...

        def _move_to_waiting(self, q: _Queue, job: _Record, *, front: bool = False) -> None: ...

        def _move_to_delayed(self, q: _Queue, job: _Record, available_at: datetime) -> None: ...

        def _finalize_terminal(
            self, q: _Queue, job: _Record, reason: str, now: datetime
        ) -> JobRow: ...

        def _delete(self, q: _Queue, job: _Record) -> None: ...

        def _remove_jobs(self, jobs: Sequence[tuple[_Queue, _Record]], now: datetime) -> None: ...

        def _insert(
            self,
            queue: str,
            new: _NewJob,
            now: datetime,
            batch: _Batch | None = None,
            *,
            parent: _Record | None = None,
            hold: bool = False,
            children: list[_Node] | None = None,
        ) -> _Record: ...

        def _flow_release(self, parents: Iterable[_Record], now: datetime) -> None: ...

        def _flow_materialise(
            self, q: _Queue, dedup_id: str, owner: _Owner, now: datetime
        ) -> None: ...

        def _waiting_parent(self, owner: _Owner) -> _Record | None: ...

        def _take_placeholder(self, parent: _Record, queue: str, dedup_id: str) -> bool: ...
