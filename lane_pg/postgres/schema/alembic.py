"""Alembic glue: the revision files in migrations/versions/ call these."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from lane_pg.errors import ConfigurationError

if TYPE_CHECKING:
    pass

from lane_pg.postgres.schema.files import (
    DEFAULT_SCHEMA,
    SCHEMA_VERSION,
    Migration,
    _sql_literal,
    migration_files,
    validate_schema_name,
)
from lane_pg.postgres.schema.install import downgrade_sql, migration_sql, repeatable_install_sql

log = logging.getLogger("lane_pg.postgres.schema")


# --------------------------------------------------------------------------- Alembic glue
# Called from the revision files in migrations/versions/ so that every revision is two
# lines and the rules live here, next to the asyncpg path they must agree with.
def alembic_schema() -> str:
    """The schema an Alembic run targets: ``config.attributes['lane_pg_schema']``, else
    ``-x schema=...``, else the ini option ``lane_pg.schema``, else ``lane``."""
    from alembic import context

    config = context.config
    name = config.attributes.get("lane_pg_schema")
    if name is None:
        name = context.get_x_argument(as_dictionary=True).get("schema")
    if name is None:
        name = config.get_main_option("lane_pg.schema", DEFAULT_SCHEMA)
    return validate_schema_name(str(name))


def _alembic_execute(sql: str) -> None:
    from alembic import context, op

    if not sql.strip():
        return
    if context.is_offline_mode():
        import sqlalchemy as sa

        # text() would read ":name" as a bind parameter; "\:" is its escape for a colon.
        op.execute(sa.text(sql.replace(":", "\\:")))
    else:
        # Straight to the driver without parameters: psycopg then runs the whole script
        # (many statements, '%' and ':' untouched) in one round trip.
        op.get_bind().exec_driver_sql(sql, execution_options={"no_parameters": True})


def _alembic_recorded(schema: str, version: int) -> bool:
    """Whether ``version`` is already in ``schema_version`` (always False offline)."""
    from alembic import context, op

    if context.is_offline_mode():
        return False
    bind: Any = op.get_bind()
    exists = bind.exec_driver_sql(
        "SELECT to_regclass(%s) IS NOT NULL", (f"{schema}.schema_version",)
    ).scalar()
    if not exists:
        return False
    found = bind.exec_driver_sql(
        f"SELECT 1 FROM {schema}.schema_version WHERE version = %s", (version,)
    ).scalar()
    return found is not None


def _migration(version: int) -> Migration:
    for migration in migration_files():
        if migration.version == version:
            return migration
    raise ConfigurationError(f"no file sql/migrations/{version:04d}_*.sql for revision {version}")


def alembic_upgrade(version: int) -> None:
    """Upgrade step of Alembic revision ``version``: apply the SQL file unless
    ``schema_version`` already records it (a database migrated by ``migrate()``), and
    after the newest revision ``repeatable_install_sql`` (functions and views re-applied,
    the ones no longer defined dropped, fingerprints recorded)."""
    schema = alembic_schema()
    if not _alembic_recorded(schema, version):
        _alembic_execute(migration_sql(_migration(version), schema))
    if version == SCHEMA_VERSION:
        _alembic_execute(repeatable_install_sql(schema))


def alembic_downgrade(version: int) -> None:
    """Downgrade step of revision ``version``.

    Revision 1 drops the schema with everything in it. When Alembic's own version table
    lives in that schema (our ``env.py``), an empty schema holding only that table is left
    for Alembic to delete its row from; ``env.py`` drops the schema once at base. A later
    revision runs ``downgrade_sql``: functions and views dropped, the tables-only
    ``NNNN_<name>.down.sql``, its version row removed, the functions and views recorded
    for the version below re-created (or none, with a warning).
    """
    from alembic import op

    schema = alembic_schema()
    if version == 1:
        sql = f"DROP SCHEMA IF EXISTS {schema} CASCADE;\n"
        ctx = op.get_context()
        if ctx.version_table_schema == schema:
            table = f"{schema}.{ctx.version_table}"
            heads = ctx.get_current_heads() or ("0001",)
            values = ", ".join(f"({_sql_literal(h)})" for h in heads)
            sql += (
                f"CREATE SCHEMA {schema};\n"
                f"CREATE TABLE {table} (version_num varchar(32) NOT NULL PRIMARY KEY);\n"
                f"INSERT INTO {table} (version_num) VALUES {values};\n"
            )
        _alembic_execute(sql)
        return
    _alembic_execute(downgrade_sql(_migration(version), schema))
