"""``python -m lane_pg migrate``: install or upgrade the schema with Alembic.

No alembic.ini is needed: the Alembic config is built here, pointing at the migrations
shipped with the package. The schema's own ``schema_version`` decides what is installed:
lane's ``alembic_version`` row is reconciled with it first (``reconcile_alembic_version``),
so a schema moved by another path (``migrate()``, a user's Alembic project) is upgraded
from where it really is. ``--sql`` prints the full installation script instead
(``lane_pg.postgres.schema.install_sql``), for psql or a DBA; it needs no database.
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from lane_pg.cli.common import (
    CommandError,
    add_connection_arguments,
    describe_error,
    redact,
    sqlalchemy_url,
)
from lane_pg.postgres.pooler import target_of
from lane_pg.postgres.schema import (
    SCHEMA_VERSION,
    install_sql,
    migrations_dir,
    validate_schema_name,
)

if TYPE_CHECKING:
    from alembic.config import Config
    from sqlalchemy.engine import Connection

HELP = "install or upgrade the lane_pg schema (idempotent)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_connection_arguments(parser)
    parser.add_argument(
        "--sql",
        action="store_true",
        help="print the SQL that installs the schema on an empty database, and exit",
    )


def alembic_config(schema: str, url: str | None = None) -> Config:
    """An ``alembic.config.Config`` for lane_pg's migrations (no ini file)."""
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(migrations_dir()))
    if url is not None:
        # ConfigParser interpolation: a literal '%' (url-encoded password) must be doubled.
        config.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    config.attributes["lane_pg_schema"] = validate_schema_name(schema)
    return config


def upgrade(dsn: str, schema: str = "lane") -> tuple[int | None, int | None]:
    """``alembic upgrade head`` on ``dsn`` in one transaction; returns the schema version
    before and after."""
    from alembic import command
    from sqlalchemy import create_engine, pool

    config = alembic_config(schema)
    config.attributes["lane_pg_command"] = "upgrade"
    target = target_of(dsn)  # one transaction: fine through a transaction pooler
    engine = create_engine(
        sqlalchemy_url(target.dsn),
        poolclass=pool.NullPool,
        connect_args={"connect_timeout": 10, **target.psycopg_options()},
    )
    try:
        with engine.begin() as conn:
            before = installed_version(conn, schema)
            if before is not None and before > SCHEMA_VERSION:
                # Its functions belong to the newer release: replacing them would break
                # the workers running it (as lane_pg.postgres.schema.migrate refuses).
                raise CommandError(
                    f"lane_pg schema {schema!r} is version {before}, newer than the"
                    f" {SCHEMA_VERSION} this library installs; migrate it with a lane_pg"
                    f" release that knows version {before}"
                )
            config.attributes["connection"] = conn
            command.upgrade(config, "head")
            after = installed_version(conn, schema)
    finally:
        engine.dispose()
    return before, after


def installed_version(conn: Connection, schema: str) -> int | None:
    """``max(version)`` of ``<schema>.schema_version``, None when there is none."""
    exists = conn.exec_driver_sql(
        "SELECT to_regclass(%s) IS NOT NULL", (f"{schema}.schema_version",)
    ).scalar()
    if not exists:
        return None
    value = conn.exec_driver_sql(f"SELECT max(version) FROM {schema}.schema_version").scalar()
    return None if value is None else int(value)


def run(args: argparse.Namespace) -> int:
    schema = validate_schema_name(args.schema)
    if args.sql:
        sys.stdout.write(install_sql(schema))
        return 0
    from sqlalchemy.exc import SQLAlchemyError

    from lane_pg.postgres.embedded import resolve_dsn

    dsn = resolve_dsn(args.dsn)
    try:
        before, after = upgrade(dsn, schema)
    except SQLAlchemyError as exc:
        raise CommandError(f"cannot migrate {redact(dsn)}: {describe_error(exc)}") from exc
    if after is None:
        raise CommandError(f"migration ran but {schema}.schema_version is empty")
    if before == after:
        print(f"lane_pg: schema {schema!r} already at version {after} (functions refreshed)")
    else:
        was = "not installed" if before is None else f"version {before}"
        print(f"lane_pg: schema {schema!r} migrated from {was} to version {after}")
    return 0
