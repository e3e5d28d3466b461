"""Where a queue's data lives in Redis: every key of one queue under one hash tag.

Redis Cluster puts a key in the slot of the part between its first ``{`` and ``}``, and a
script may only touch keys of one slot. All keys of queue ``emails`` under prefix
``lane`` start with ``{lane:emails}``, so every script of that queue runs on one node. An
operation that spans queues (a flow, a batch or a chain across queues) runs where one
script reaches every key (a standalone server) and is refused on Redis Cluster unless its
queues share a slot (``RedisBackend.check_slots``), rather than failing half-way with
CROSSSLOT (bullmq #459, #2589).
"""

from __future__ import annotations

import re

from lane_pg.errors import ConfigurationError
from lane_pg.types import validate_queue_name

DEFAULT_PREFIX = "lane"
_PREFIX = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}")


def validate_prefix(prefix: str) -> str:
    """A key prefix: 1-64 characters from A-Z a-z 0-9 _ . : - (no brace: it would move
    the hash tag)."""
    if not isinstance(prefix, str) or not _PREFIX.fullmatch(prefix):
        raise ConfigurationError(
            f"invalid Redis key prefix {prefix!r}: use 1-64 characters from"
            " A-Z a-z 0-9 _ . : -, starting with a letter or digit"
        )
    return prefix


class QueueKeys:
    """The keys of one queue. ``tag`` is the hash tag all of them share."""

    __slots__ = ("prefix", "queue", "tag")

    def __init__(self, queue: str, prefix: str = DEFAULT_PREFIX) -> None:
        self.queue = validate_queue_name(queue)
        self.prefix = validate_prefix(prefix)
        self.tag = f"{{{self.prefix}:{self.queue}}}"

    def key(self, name: str) -> str:
        """``{prefix:queue}:name``: a key of this queue."""
        return f"{self.tag}:{name}"

    def job(self, job_id: str) -> str:
        """The hash of one job."""
        return f"{self.tag}:job:{job_id}"

    @property
    def meta(self) -> str:
        """The queue's settings: pause flag, limits, retention, event recording."""
        return self.key("meta")

    @property
    def waiting(self) -> str:
        """Sorted set of waiting job ids, scored by the claim order (priority, then
        FIFO/LIFO sequence): one index, so jobs without a priority never jump ahead."""
        return self.key("waiting")

    @property
    def delayed(self) -> str:
        """Sorted set of delayed job ids, scored by when each is due (epoch ms)."""
        return self.key("delayed")

    @property
    def active(self) -> str:
        """Sorted set of active job ids, scored by when each lease expires (epoch ms)."""
        return self.key("active")

    @property
    def events(self) -> str:
        """The event stream (``XADD ... MAXLEN ~``)."""
        return self.key("events")

    @property
    def marker(self) -> str:
        """What a blocked claimer waits on (``BZPOPMIN``)."""
        return self.key("marker")
