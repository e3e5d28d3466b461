"""Job classes by name (PUSH-1): what a worker looks up to run a stored job."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TypeVar

from lane_pg.errors import ConfigurationError
from lane_pg.facade.job import Job, job_name_of
from lane_pg.types import validate_job_name

J = TypeVar("J", bound=type[Job])


class JobRegistry:
    """Registered job classes, one per ``job_name``."""

    def __init__(self) -> None:
        self._classes: dict[str, type[Job]] = {}

    def register(self, cls: J) -> J:
        """Register ``cls``; registering it again is a no-op, another class under the same
        name is refused (two classes cannot both run a stored job)."""
        if not isinstance(cls, type) or not issubclass(cls, Job):
            raise TypeError(f"register_job takes a lane_pg.Job subclass, got {cls!r}")
        name = validate_job_name(job_name_of(cls))
        known = self._classes.get(name)
        if known is not None and known is not cls:
            raise ConfigurationError(
                f"job name {name!r} is already registered by {known.__module__}."
                f"{known.__qualname__}"
            )
        self._classes[name] = cls
        return cls

    def get(self, name: str) -> type[Job] | None:
        return self._classes.get(name)

    def names(self) -> list[str]:
        return sorted(self._classes)

    def __iter__(self) -> Iterator[type[Job]]:
        return iter(list(self._classes.values()))

    def __len__(self) -> int:
        return len(self._classes)

    def clear(self) -> None:
        """Forget every class (tests)."""
        self._classes.clear()


DEFAULT_REGISTRY = JobRegistry()
"""The registry ``register_job`` and workers started with ``--app`` use."""


def register_job(cls: J) -> J:
    """Register a job class for workers (PUSH-1); usable as a decorator (``@lane_pg.job``)."""
    return DEFAULT_REGISTRY.register(cls)


job = register_job
