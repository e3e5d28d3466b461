"""Wiring the facade from the environment (CONN-1..3, CONN-10, CONN-11, CONN-15, FOV-2, FOV-3).

``bootstrap_from_env()`` reads the ``LANE_PG_*`` variables and sets the default connection
of ``Q`` (or the facade given) and its registered connections; it does no I/O: a durable
driver opens its backend on first use. Everything is read and checked before the facade
is touched, so a boot error changes nothing. ``bootstrap_default()`` always wires memory
(tests, embedded use).

=================================== ==========================================================
``LANE_PG_DRIVER``                  the default connection's driver: ``postgres`` (aliases
                                    ``postgresql``, ``database``), ``redis``, ``memory``,
                                    ``local``, ``sync``, ``null``, ``failover``. Unset:
                                    ``postgres``.
``LANE_PG_DSN``, ``LANE_PG_SCHEMA`` the postgres driver's store; no DSN: the embedded server
                                    (A12 as DESIGN.md decided), resolved on first use
``LANE_PG_REDIS_URL``               the redis driver's server, ``redis://host:port/db``
                                    (``?prefix=NAME`` for a key prefix other than ``lane``);
                                    default ``redis://127.0.0.1:6379/0``
``LANE_PG_REDIS_NAMESPACE``         the redis driver's key prefix (wins over ``?prefix=``)
``LANE_PG_LOCAL_PATH``              the local driver's snapshot file (``lane_pg_local.json``)
``LANE_PG_VISIBILITY_TIMEOUT_SECS`` the lease of a driver's reservations (60)
``LANE_PG_CONNECTIONS``             more connections, ``postgres,memory``: one per entry,
                                    named after its driver; an entry naming the default's
                                    driver is an alias of the default connection
``LANE_PG_FAILOVER_CONNECTIONS``    the failover list, ``LABEL[:DRIVER],...`` (the driver
                                    defaults to the label: ``postgres,memory``); an entry
                                    reads its driver's variables, where
                                    ``LANE_PG_FAILOVER_<LABEL>_DSN`` / ``_SCHEMA`` /
                                    ``_LOCAL_PATH`` (the label upper-cased, other characters
                                    ``_``) win, so two postgres entries reach two servers
``LANE_PG_ENV``                     ``production`` makes an unknown ``LANE_PG_DRIVER`` a boot
                                    error instead of a warning and memory (CONN-2)
=================================== ==========================================================

An unknown ``LANE_PG_CONNECTIONS`` or failover entry is a boot error in every environment.
Two connections over the same store (the same DSN and schema, the same snapshot file) are
refused, here as for connections registered in code (``lane_pg.facade.stores``, CONN-11):
a ``LANE_PG_CONNECTIONS`` entry naming the default's driver is its alias (not a second
binding), and two failover entries over one store are an error. A failover entry over the
store of another connection shares that connection's driver (one binding, one pool, per
store).

A worker (``for_worker=True``) never falls back to memory: an unknown ``LANE_PG_DRIVER``
is a boot error for it in every environment (DESIGN.md, A12).
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from lane_pg.backend import JobQueueBackend
from lane_pg.backend.url import backend_kind, redact_url, validate_schema, with_redis_prefix
from lane_pg.errors import ConfigurationError
from lane_pg.facade.connection import BackendDriver, Connection, visibility_timeout_of
from lane_pg.facade.failed import default_failed_store
from lane_pg.facade.failover import FailoverDriver
from lane_pg.facade.null import NullDriver
from lane_pg.facade.queue import Q, QueueFacade
from lane_pg.facade.stores import (
    local_store,
    postgres_store,
    redis_store,
    refuse_shared_stores,
)
from lane_pg.facade.sync import SyncDriver
from lane_pg.memory import MemoryBackend
from lane_pg.memory.local import LocalBackend

log = logging.getLogger("lane_pg.facade")

DRIVER_ALIASES = {"database": "postgres", "postgresql": "postgres"}
"""Names a user may type for a driver; a connection is labelled by the name they stand for."""
DRIVER_NAMES: tuple[str, ...] = (
    "postgres",
    "database",
    "redis",
    "memory",
    "local",
    "sync",
    "null",
    "failover",
)
"""Every name ``LANE_PG_DRIVER`` accepts (CONN-2)."""
DEFAULT_REDIS_URL = "redis://127.0.0.1:6379/0"
DEFAULT_LOCAL_PATH = "lane_pg_local.json"
_LABEL_VARIABLE = re.compile(r"[^A-Z0-9]")


@dataclass
class _Wiring:
    """What one bootstrap builds, before it is applied to the facade."""

    env: Mapping[str, str]
    visibility_secs: float
    stores: dict[tuple[str, str, str], Connection] = field(default_factory=dict)

    def postgres(self, dsn: str | None, schema: str) -> Connection:
        """The postgres driver of (``dsn``, ``schema``): the one already built over that
        store if any (one binding per store), else a new lazy one."""
        key = postgres_store(dsn, schema)
        existing = self.stores.get(key)
        if existing is not None:
            return existing
        driver = BackendDriver.lazy(
            dsn, "postgres", schema=schema, visibility_timeout=self.visibility_secs
        )
        self.stores[key] = driver
        return driver

    def redis(self, url: str) -> Connection:
        """The redis driver of ``url`` (one per server and prefix, like ``postgres``)."""
        key = redis_store(url)
        existing = self.stores.get(key)
        if existing is not None:
            return existing
        driver = BackendDriver.lazy(url, "redis", visibility_timeout=self.visibility_secs)
        self.stores[key] = driver
        return driver

    def local(self, path: Path) -> Connection:
        """The local driver of the snapshot at ``path`` (one per file, like ``postgres``)."""
        key = local_store(path)
        existing = self.stores.get(key)
        if existing is not None:
            return existing

        async def open_snapshot() -> JobQueueBackend:
            return await LocalBackend.open(path)

        driver = BackendDriver.opened_by(
            open_snapshot, "local", visibility_timeout=self.visibility_secs, store=key
        )
        self.stores[key] = driver
        return driver


def _visibility_secs(env: Mapping[str, str]) -> float:
    text = (env.get("LANE_PG_VISIBILITY_TIMEOUT_SECS") or "").strip()
    if not text:
        return 60.0
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value > 0 or value == float("inf"):
        raise ConfigurationError(
            f"LANE_PG_VISIBILITY_TIMEOUT_SECS={text!r}: expected a positive number of seconds"
        )
    visibility_timeout_of(value)  # whole milliseconds and in range, or a clear error
    return value


def _kind(name: str) -> str:
    return DRIVER_ALIASES.get(name, name)


def _build(kind: str, wiring: _Wiring, *, prefix: str = "") -> Connection:
    """The driver of a known kind (``_kind`` applied), configured from its variables:
    ``{prefix}DSN`` etc. when set (a failover entry's own), else ``LANE_PG_DSN`` etc."""
    env = wiring.env

    def setting(name: str) -> str | None:
        return (prefix and env.get(f"{prefix}{name}")) or env.get(f"LANE_PG_{name}") or None

    if kind == "postgres":
        schema = validate_schema(setting("SCHEMA") or "lane")
        dsn = setting("DSN")
        if dsn:
            backend_kind(dsn)  # a malformed or unsupported URL fails boot, not the first push
        return wiring.postgres(dsn, schema)
    if kind == "redis":
        url = setting("REDIS_URL") or DEFAULT_REDIS_URL
        if backend_kind(url) != "redis":
            raise ConfigurationError(
                f"LANE_PG_REDIS_URL={redact_url(url)!r}: expected a redis:// URL"
                " (rediss:// for TLS, redis+cluster:// for a Redis Cluster)"
            )
        namespace = setting("REDIS_NAMESPACE")
        if namespace:
            url = with_redis_prefix(url, namespace)
        return wiring.redis(url)
    if kind == "memory":
        return BackendDriver(MemoryBackend(), "memory", visibility_timeout=wiring.visibility_secs)
    if kind == "local":
        return wiring.local(Path(setting("LOCAL_PATH") or DEFAULT_LOCAL_PATH))
    if kind == "sync":
        return SyncDriver()
    if kind == "null":
        return NullDriver()
    if kind == "failover":
        return _failover(wiring)
    raise ConfigurationError(f"unknown queue driver {kind!r}: use one of {_accepted()}")


def _accepted() -> str:
    return ", ".join(DRIVER_NAMES)


def _entries(text: str, variable: str) -> list[str]:
    entries = [entry.strip() for entry in text.split(",")]
    if not text.strip() or any(not entry for entry in entries):
        raise ConfigurationError(
            f"{variable}={text!r}: expected a comma-separated list of names, none empty"
        )
    return entries


def _failover(wiring: _Wiring) -> Connection:
    variable = "LANE_PG_FAILOVER_CONNECTIONS"
    text = wiring.env.get(variable) or ""
    if not text.strip():
        raise ConfigurationError(
            f"LANE_PG_DRIVER=failover needs {variable}, e.g. {variable}=postgres,memory or"
            " pg-a:postgres,pg-b:postgres with LANE_PG_FAILOVER_PG_A_DSN and _PG_B_DSN"
        )
    built: list[tuple[str, Connection]] = []
    suffixes: dict[str, str] = {}
    for entry in _entries(text, variable):
        label, _, driver_text = entry.partition(":")
        label, name = label.strip(), (driver_text.strip() or label.strip()).lower()
        kind = _kind(name)
        if not label:
            raise ConfigurationError(f"{variable}: entry {entry!r} has no label")
        if kind == "failover":
            raise ConfigurationError(f"{variable}: a failover list cannot contain failover")
        if kind not in DRIVER_NAMES:
            raise ConfigurationError(
                f"{variable}: entry {entry!r} names an unknown driver {name!r}: use one of"
                f" {', '.join(name for name in DRIVER_NAMES if name != 'failover')}"
            )
        suffix = _LABEL_VARIABLE.sub("_", label.upper())
        if suffix in suffixes:
            raise ConfigurationError(
                f"{variable}: labels {suffixes[suffix]!r} and {label!r} read the same"
                f" variables (LANE_PG_FAILOVER_{suffix}_*): give them distinct labels"
            )
        suffixes[suffix] = label
        driver = _build(kind, wiring, prefix=f"LANE_PG_FAILOVER_{suffix}_")
        built.append((label, driver))
        # CONN-11, FOV-3: each entry its own store (the FailoverDriver checks it too).
        refuse_shared_stores(
            built, aliases=False, hint=f"set LANE_PG_FAILOVER_{suffix}_DSN to reach another server"
        )
    return FailoverDriver(built, visibility_timeout=wiring.visibility_secs)


def driver_from_env(kind: str, env: Mapping[str, str]) -> Connection:
    """The driver of kind ``kind``, configured from that driver's variables."""
    wiring = _Wiring(env, _visibility_secs(env))
    return _build(_kind(kind.strip().lower()), wiring)


def bootstrap_from_env(
    facade: QueueFacade | None = None,
    env: Mapping[str, str] | None = None,
    *,
    for_worker: bool = False,
) -> QueueFacade:
    """Configure ``facade`` (``Q``) from ``env`` (``os.environ``) and return it (see the
    module docstring); ``for_worker``: refuse the memory fallback."""
    facade = facade or Q
    env = os.environ if env is None else env
    wiring = _Wiring(env, _visibility_secs(env))
    requested = (env.get("LANE_PG_DRIVER") or "postgres").strip().lower()
    kind = _kind(requested)
    if kind not in DRIVER_NAMES:
        production = (env.get("LANE_PG_ENV") or "").strip().lower() == "production"
        if production or for_worker:
            why = "LANE_PG_ENV=production" if production else "a worker never runs on memory"
            raise ConfigurationError(
                f"LANE_PG_DRIVER={requested!r} is not a queue driver ({why}): use one of"
                f" {_accepted()}"
            )
        log.warning(
            "LANE_PG_DRIVER=%r is not a queue driver (accepted: %s); falling back to the"
            " memory driver: jobs live in this process only and are lost when it exits"
            " (LANE_PG_ENV=production refuses this)",
            requested,
            _accepted(),
        )
        kind = "memory"
    default = _build(kind, wiring)
    registered: dict[str, Connection] = {}
    extra = env.get("LANE_PG_CONNECTIONS") or ""
    if extra.strip():
        for entry in _entries(extra, "LANE_PG_CONNECTIONS"):
            name = _kind(entry.lower())
            if name not in DRIVER_NAMES:
                raise ConfigurationError(
                    f"LANE_PG_CONNECTIONS: unknown driver {entry!r}: use one of {_accepted()}"
                )
            if name in registered:
                raise ConfigurationError(f"LANE_PG_CONNECTIONS: {name!r} is given twice")
            # The default's own driver is an alias of it (CONN-11): one store, one binding.
            registered[name] = default if name == kind else _build(name, wiring)
    facade.set_driver(default)
    store = default_failed_store(default)  # FAIL-8: the postgres default's database store
    if store is not None:
        facade.set_failed_store(store)
    for name, driver in registered.items():
        facade.register_connection(name, driver)
    return facade


def bootstrap_default(facade: QueueFacade | None = None) -> QueueFacade:
    """Wire the memory driver as the default connection (CONN-15)."""
    facade = facade or Q
    facade.set_driver(driver_from_env("memory", {}))
    return facade
