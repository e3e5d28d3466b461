"""A queue's retained event stream (EVS-2, EVS-7).

The rules every backend follows are in ``lane_pg.backend`` (the package docstring)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import KW_ONLY

from lane_pg.backend.operation import Arguments, Handle, operation, stream_operation
from lane_pg.errors import InvalidOptions
from lane_pg.types import (
    JSON,
    QueueEvent,
    validate_queue_name,
)

DEFAULT_EVENT_POLL_INTERVAL = 0.1
"""Seconds between a subscriber's looks at the stream when nothing is arriving."""


def subscription_arguments(
    queue: str, from_id: object, poll_interval: object
) -> tuple[int | None, float]:
    """``subscribe_events``' arguments, checked at the call: the id to start after (None
    for ``"$"``) and the poll interval."""
    validate_queue_name(queue)
    return resume_after(from_id), validate_poll_interval(poll_interval)


def resume_after(from_id: object) -> int | None:
    """The id a subscription starts after: None for ``"$"`` (the stream's end)."""
    if from_id == "$":
        return None
    if isinstance(from_id, str) and from_id.isdigit():
        return int(from_id)
    if isinstance(from_id, int) and not isinstance(from_id, bool) and from_id >= 0:
        return from_id
    raise InvalidOptions(f"from_id must be '$' or a non-negative event id, got {from_id!r}")


MAX_EVENT_ID = 2**63 - 1
"""The largest event id (a bigint)."""


def event_bound(value: str | int) -> int:
    """An inclusive ``read_events`` bound: ``"-"`` is below every id and ``"+"`` above."""
    if value == "-":
        return 0
    if value == "+":
        return MAX_EVENT_ID
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str) and value.isascii() and value.isdigit():
        return int(value)
    raise InvalidOptions(f"event id bound must be '-', '+' or an integer id, got {value!r}")


def validate_poll_interval(poll_interval: object) -> float:
    if (
        isinstance(poll_interval, bool)
        or not isinstance(poll_interval, int | float)
        or not 0 < poll_interval <= 60
    ):
        raise InvalidOptions(
            f"poll_interval must be a number of seconds in (0, 60], got {poll_interval!r}"
        )
    return float(poll_interval)


class ReadEvents(Arguments[list[QueueEvent]]):
    """Retained events of the queue with ids in ``[start, end]`` in id order; ``"-"``
    is the first and ``"+"`` the last (EVS-2)."""

    queue: str
    start: str | int = "-"
    end: str | int = "+"
    limit: int = 100


class SubscribeEvents(Arguments[AsyncIterator[QueueEvent]]):
    """The queue's events with ids above ``from_id`` in id order, each once, waiting
    for new ones without end (break out of the loop, or cancel, to stop). ``"$"``:
    only events committed after iteration starts (the first ``__anext__``); an id
    (a ``QueueEvent.id``, int or decimal text): resume after it, ``0`` from the
    oldest retained event. An event trimmed before the subscriber read it is not
    seen. Bad arguments raise ``InvalidOptions`` at the call, before anything is
    read."""

    queue: str
    from_id: str | int = "$"
    _: KW_ONLY
    poll_interval: float = DEFAULT_EVENT_POLL_INTERVAL


class RecordAction(Arguments[int | None]):
    """Record that an operator did ``action`` (``"pause"``, ``"retry"``, ...) to the
    queue, or to its job ``job_id``: event ``action {action, actor, ...details}`` in the
    queue's stream, for an audit of what a dashboard or a script changed. The event's
    id, or None when nothing was written: a queue that does not exist (nothing is
    created) or that records no events (``set_queue_events``). ``action`` must be 1 to
    100 characters and ``details`` a JSON object (its ``action`` and ``actor`` keys are
    overwritten), else ``InvalidOptions`` and nothing is written."""

    queue: str
    action: str
    _: KW_ONLY
    actor: str | None = None
    job_id: str | None = None
    details: dict[str, JSON] | None = None


def action_event_data(args: RecordAction) -> dict[str, JSON]:
    """The checked event data of ``record_action`` (both backends)."""
    if not isinstance(args.action, str) or not 1 <= len(args.action) <= 100:
        raise InvalidOptions(f"action must be 1 to 100 characters, got {args.action!r}")
    if args.details is not None and not isinstance(args.details, dict):
        raise InvalidOptions(f"details must be a JSON object, got {args.details!r}")
    if args.actor is not None and not isinstance(args.actor, str):
        raise InvalidOptions(f"actor must be text, got {args.actor!r}")
    data: dict[str, JSON] = dict(args.details or {})
    data["action"] = args.action
    data["actor"] = args.actor
    try:
        json.dumps(data, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise InvalidOptions(f"details must be a JSON object: {exc}") from None
    return data


class Events(Handle, name="events"):
    """A queue's retained event stream (EVS-2, EVS-7)."""

    __slots__ = ()

    read_events = operation(ReadEvents)
    subscribe_events = stream_operation(SubscribeEvents)
    record_action = operation(RecordAction)
