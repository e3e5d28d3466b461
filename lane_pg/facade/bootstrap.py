"""Wiring the facade from the environment (CONN-2, CONN-3, CONN-15).

``bootstrap_from_env()`` reads the ``LANE_PG_*`` variables and sets the default connection
of ``Q`` (or the facade given); it does no I/O: a durable driver opens its backend on first
use. With nothing configured the default is PostgreSQL on ``$LANE_PG_DSN``, else the
embedded server (A12 as DESIGN.md decided): a worker never silently falls back to memory.
``bootstrap_default()`` always wires memory (tests, embedded use).

Variables: ``LANE_PG_DRIVER`` (``postgres``, alias ``database``; ``memory``),
``LANE_PG_DSN``, ``LANE_PG_SCHEMA``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from lane_pg.errors import ConfigurationError
from lane_pg.facade.driver import BackendDriver, QueueDriver
from lane_pg.facade.queue import Q, QueueFacade

DRIVER_ALIASES = {"database": "postgres"}


def driver_from_env(kind: str, env: Mapping[str, str]) -> QueueDriver:
    """The driver of kind ``kind``, configured from that driver's variables."""
    kind = DRIVER_ALIASES.get(kind, kind)
    if kind == "postgres":
        from lane_pg.postgres.schema import validate_schema_name  # the rule is PostgreSQL's

        schema = validate_schema_name(env.get("LANE_PG_SCHEMA") or "lane")
        return BackendDriver.lazy(env.get("LANE_PG_DSN") or None, "postgres", schema=schema)
    if kind == "memory":
        from lane_pg.memory import MemoryBackend

        return BackendDriver(MemoryBackend(), "memory")
    raise ConfigurationError(f"unknown queue driver {kind!r}: use postgres (database) or memory")


def bootstrap_from_env(
    facade: QueueFacade | None = None, env: Mapping[str, str] | None = None
) -> QueueFacade:
    """Configure ``facade`` (``Q``) from ``env`` (``os.environ``) and return it."""
    facade = facade or Q
    env = os.environ if env is None else env
    kind = (env.get("LANE_PG_DRIVER") or "postgres").strip().lower()
    driver = driver_from_env(kind, env)
    facade.set_driver(driver)
    if DRIVER_ALIASES.get(kind, kind) == "postgres":  # FAIL-8: its database store
        from lane_pg.postgres.failed import DatabaseFailedJobStore

        facade.set_failed_store(DatabaseFailedJobStore(driver))  # type: ignore[arg-type]
    return facade


def bootstrap_default(facade: QueueFacade | None = None) -> QueueFacade:
    """Wire the memory driver as the default connection (CONN-15)."""
    facade = facade or Q
    facade.set_driver(driver_from_env("memory", {}))
    return facade
