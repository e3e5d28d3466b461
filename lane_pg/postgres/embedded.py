"""Which PostgreSQL to use: an explicit DSN, ``LANE_PG_DSN``, or an embedded server.

With no DSN the CLI and the examples start (or join) a PostgreSQL run by the ``pgserver``
package (``pip install 'lane_pg[embedded]'``) whose data lives in ``.lane_pg/`` of the
current directory (DESIGN.md A12). Several processes share it: pgserver counts the
processes holding it and stops the server when the last one exits. The data stays.
"""

from __future__ import annotations

import logging
import os
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

from lane_pg.errors import ConfigurationError

__all__ = [
    "EMBEDDED_DIR",
    "embedded_dirs",
    "embedded_dsn",
    "embedded_notice",
    "release_embedded",
    "resolve_dsn",
]

log = logging.getLogger("lane_pg.embedded")

EMBEDDED_DIR = ".lane_pg"
DSN_ENV = "LANE_PG_DSN"

# Keeps the pgserver handle alive for the life of the process (it stops the server at
# exit when no other process holds it).
_servers: dict[Path, Any] = {}

announce: Callable[[str], None] | None = None
"""Where the notice that a process uses the embedded server goes (``embedded_notice``):
the CLI prints it as its first line; unset, it is logged at WARNING (a library user
without a DSN is told too)."""


def embedded_notice(pgdata: Path) -> str:
    """The one line saying that no DSN was given and the embedded server is used."""
    return (
        f"no --dsn and no LANE_PG_DSN: using the embedded PostgreSQL server with its data in"
        f" {pgdata} (pass --dsn postgresql://... or set LANE_PG_DSN to use your own server)"
    )


def embedded_dirs() -> list[Path]:
    """The data directories of the embedded servers this process started or joined."""
    return list(_servers)


def resolve_dsn(explicit: str | None) -> str:
    """The DSN to connect to: ``explicit``, else ``$LANE_PG_DSN``, else the embedded server."""
    if explicit:
        return explicit
    from_env = os.environ.get(DSN_ENV, "").strip()
    if from_env:
        return from_env
    return embedded_dsn()


def embedded_dsn(directory: str | os.PathLike[str] | None = None) -> str:
    """Start or join the embedded server whose data is in ``directory`` (default
    ``./.lane_pg``) and return its DSN (a unix-socket URI)."""
    try:
        with warnings.catch_warnings():
            # platformdirs warns when XDG_RUNTIME_DIR is unset (containers, CI); pgserver
            # then falls back to /tmp/runtime-<uid>, which is fine.
            warnings.filterwarnings("ignore", message=".*XDG_RUNTIME_DIR", category=UserWarning)
            import pgserver.postgres_server as pgserver
    except ImportError as exc:
        raise ConfigurationError(
            "no database given: pass --dsn or set LANE_PG_DSN, or install the embedded "
            "PostgreSQL with `pip install 'lane_pg[embedded]'`"
        ) from exc
    pgdata = Path(directory if directory is not None else Path.cwd() / EMBEDDED_DIR).resolve()
    server = _servers.get(pgdata)
    if server is None:
        try:
            with warnings.catch_warnings():
                warnings.filterwarnings("ignore", message=".*XDG_RUNTIME_DIR", category=UserWarning)
                server = pgserver.get_server(pgdata, cleanup_mode="stop")
        except Exception as exc:  # pgserver raises plain errors from initdb/pg_ctl
            raise ConfigurationError(
                f"could not start the embedded PostgreSQL in {pgdata}: {exc}"
            ) from exc
        _servers[pgdata] = server
        if announce is not None:
            announce(embedded_notice(pgdata))
        else:
            log.warning("%s", embedded_notice(pgdata))
    # postgresql://postgres:@/postgres?host=<socket dir>: asyncpg, psycopg, libpq and
    # SQLAlchemy (postgresql+psycopg) all accept this form as is (tested).
    return str(server.get_uri())


def release_embedded(directory: str | os.PathLike[str] | None = None) -> None:
    """Let go of this process's handle on the embedded server (it stops if no other
    process holds it). Also done automatically at exit."""
    pgdata = Path(directory if directory is not None else Path.cwd() / EMBEDDED_DIR).resolve()
    server = _servers.pop(pgdata, None)
    if server is not None:
        server.cleanup()
