"""Helpers shared by the CLI commands: common options, DSN handling, error text."""

from __future__ import annotations

import argparse
import os

from lane_pg.backend.url import redact_url
from lane_pg.errors import ConfigurationError

DEFAULT_SCHEMA = "lane"


class CommandError(Exception):
    """An expected failure of a command: printed as one line, exit code 1."""


def add_connection_arguments(parser: argparse.ArgumentParser) -> None:
    """``--dsn`` and ``--schema``, with their environment defaults."""
    parser.add_argument(
        "--dsn",
        default=None,
        help="PostgreSQL URL, postgresql://... (default: $LANE_PG_DSN, else the embedded"
        " server in ./.lane_pg)",
    )
    parser.add_argument(
        "--schema",
        default=os.environ.get("LANE_PG_SCHEMA") or DEFAULT_SCHEMA,
        help="schema holding lane_pg's tables (default: $LANE_PG_SCHEMA or 'lane')",
    )


def sqlalchemy_url(dsn: str) -> str:
    """A ``postgresql://`` DSN as a SQLAlchemy URL on the psycopg (3) driver."""
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    scheme = dsn.split("://", 1)[0] if "://" in dsn else ""
    if scheme.split("+", 1)[0] not in ("postgresql", "postgres"):
        raise ConfigurationError(
            f"invalid DSN {redact(dsn)!r}: expected a URL like "
            "postgresql://user:password@host:5432/dbname"
        )
    try:
        url = make_url("postgresql" + dsn[len(scheme) :])
    except (ArgumentError, ValueError) as exc:
        raise ConfigurationError(f"invalid DSN {redact(dsn)!r}: {exc}") from exc
    return url.set(drivername="postgresql+psycopg").render_as_string(hide_password=False)


def redact(dsn: str) -> str:
    """``dsn`` with its password replaced by ``***`` (for messages)."""
    return redact_url(dsn)


def describe_error(exc: BaseException) -> str:
    """One line saying what went wrong, driver noise removed."""
    inner: BaseException = getattr(exc, "orig", None) or exc
    text = str(inner).strip() or type(inner).__name__
    first = text.splitlines()[0].strip()
    # SQLAlchemy appends "(Background on this error at: ...)"; libpq prefixes the address.
    first = first.split("(Background on this error", 1)[0].strip()
    kind = type(inner).__name__
    return f"{kind}: {first}" if kind not in first else first
