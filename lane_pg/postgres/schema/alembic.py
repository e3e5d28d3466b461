"""Alembic glue: the revision files in migrations/versions/ call these."""

from __future__ import annotations

import logging
from typing import Any

from lane_pg.errors import ConfigurationError
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


def _recorded_versions(bind: Any, schema: str) -> set[int]:
    """The versions ``<schema>.schema_version`` records (empty when it does not exist)."""
    exists = bind.exec_driver_sql(
        "SELECT to_regclass(%s) IS NOT NULL", (f"{schema}.schema_version",)
    ).scalar()
    if not exists:
        return set()
    rows = bind.exec_driver_sql(f"SELECT version FROM {schema}.schema_version").fetchall()
    return {int(row[0]) for row in rows}


def _alembic_recorded(schema: str) -> set[int]:
    """The versions already in ``schema_version`` (always none offline)."""
    from alembic import context, op

    if context.is_offline_mode():
        return set()
    return _recorded_versions(op.get_bind(), schema)


def revision_id(version: int) -> str:
    """The Alembic revision id of lane_pg's migration ``version``."""
    return f"{version:04d}"


def alembic_version_location() -> str:
    """Where lane_pg's Alembic revisions are, as a package resource for a user's
    ``version_locations`` (no absolute path): ``lane_pg:migrations/versions``."""
    return "lane_pg:migrations/versions"


def reconcile_alembic_version(connection: Any = None) -> str | None:
    """Make the Alembic version table of the running ``env.py`` agree with the schema.

    ``<schema>.schema_version`` is the record of what is installed; an Alembic version
    table is one path's bookkeeping and goes stale when another path (``migrate()``, our
    CLI, another Alembic project) moved the schema. Call it in ``env.py`` after
    ``context.configure`` and before ``context.run_migrations()``: the row of lane_pg's
    branch becomes the revision of the schema's version (it is removed when the schema is
    not installed). A missing row is left missing: the revisions then run again and apply
    only what ``schema_version`` lacks. A schema newer than this library is left alone.
    Returns the revision now recorded for lane_pg's branch, or None.
    """
    from alembic import context

    ctx = context.get_context()
    bind: Any = connection if connection is not None else ctx.bind
    if bind is None or context.is_offline_mode():
        return None
    schema = alembic_schema()
    table = ctx.version_table
    if ctx.version_table_schema:
        table = f"{ctx.version_table_schema}.{table}"
    if not bind.exec_driver_sql("SELECT to_regclass(%s) IS NOT NULL", (table,)).scalar():
        return None
    lane_revisions = {revision_id(m.version): m.version for m in migration_files()}
    rows = [
        str(row[0]) for row in bind.exec_driver_sql(f"SELECT version_num FROM {table}").fetchall()
    ]
    ours = [row for row in rows if row in lane_revisions]
    if not ours:
        return None
    installed = max(_recorded_versions(bind, schema), default=None)
    if installed is not None and installed > SCHEMA_VERSION:
        return ours[0]
    known = [v for v in lane_revisions.values() if installed is not None and v <= installed]
    target = revision_id(max(known)) if known else None
    if ours == [target]:
        return target
    log.warning(
        "lane_pg: %s recorded revision %s but schema %r is at version %s: recording %s",
        table,
        ", ".join(ours),
        schema,
        installed,
        target or "none",
    )
    bind.exec_driver_sql(f"DELETE FROM {table} WHERE version_num = ANY(%s)", (ours,))
    if target is not None:
        bind.exec_driver_sql(f"INSERT INTO {table} (version_num) VALUES (%s)", (target,))
    return target


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
    from alembic import context

    if context.is_offline_mode():
        _alembic_execute(migration_sql(_migration(version), schema))
    else:
        # Every missing version up to this one, in order: Alembic's own record may be
        # stale (another path moved the schema), schema_version is not.
        recorded = _alembic_recorded(schema)
        for migration in migration_files():
            if migration.version <= version and migration.version not in recorded:
                _alembic_execute(migration_sql(migration, schema))
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
    from alembic import context

    if context.is_offline_mode():
        _alembic_execute(downgrade_sql(_migration(version), schema))
        return
    for recorded in sorted(_alembic_recorded(schema), reverse=True):
        if recorded >= version:
            _alembic_execute(downgrade_sql(_migration(recorded), schema))
