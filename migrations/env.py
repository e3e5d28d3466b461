"""Alembic environment of lane_pg.

Run through ``python -m lane_pg migrate`` (no alembic.ini needed) or ``alembic`` with an ini
whose ``script_location`` points here. The schema comes from the config attribute
``lane_pg_schema``, ``-x schema=NAME`` or the ini option ``lane_pg.schema`` (default
``lane``); Alembic's own version table lives in that schema.

The record of what is installed is ``<schema>.schema_version``: a revision whose version
is already recorded there (a database migrated by ``lane_pg.postgres.schema.migrate``)
applies nothing, so every path gives the same database.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Mapping
from typing import Any

from alembic import context
from alembic.runtime.migration import MigrationContext, MigrationInfo
from sqlalchemy import create_engine, pool
from sqlalchemy.engine import Connection

from lane_pg.postgres.schema import (
    MIGRATE_LOCK_KEY,
    alembic_schema,
    reconcile_alembic_version,
    repeatable_install_sql,
)

config = context.config
log = logging.getLogger("lane_pg.migrations")
SCHEMA = alembic_schema()
VERSION_TABLE = "alembic_version"


def _is_upgrade_command() -> bool:
    """True for ``upgrade`` (set by our CLI, or read from the alembic command line)."""
    if config.attributes.get("lane_pg_command") == "upgrade":
        return True
    cmd: Any = getattr(config.cmd_opts, "cmd", None)
    return bool(cmd) and getattr(cmd[0], "__name__", "") == "upgrade"


def run_migrations_offline() -> None:
    """``--sql``: print the script instead of running it."""
    context.configure(
        url=config.get_main_option("sqlalchemy.url") or "postgresql+psycopg://",
        literal_binds=True,
        dialect_opts={"paramstyle": "named"},
        version_table=VERSION_TABLE,
        version_table_schema=SCHEMA,
        transactional_ddl=True,
    )
    with context.begin_transaction():
        context.execute(f"SELECT pg_advisory_xact_lock({MIGRATE_LOCK_KEY}, hashtext('{SCHEMA}'))")
        context.execute(f"CREATE SCHEMA IF NOT EXISTS {SCHEMA}")
        context.run_migrations()


def _run(connection: Connection) -> None:
    state: dict[str, Any] = {"steps": 0, "down": False, "down_to_base": False}

    def on_version_apply(
        ctx: MigrationContext,
        step: MigrationInfo,
        heads: Collection[Any],
        run_args: Mapping[str, Any],
    ) -> None:
        state["steps"] += 1
        if not step.is_upgrade:
            state["down"] = True
            state["down_to_base"] = state["down_to_base"] or not heads

    context.configure(
        connection=connection,
        version_table=VERSION_TABLE,
        version_table_schema=SCHEMA,
        transactional_ddl=True,
        on_version_apply=on_version_apply,
    )
    with context.begin_transaction():
        # Same lock as lane_pg.postgres.schema.migrate: concurrent migrations serialise.
        connection.exec_driver_sql(
            "SELECT pg_advisory_xact_lock(%s, hashtext(%s))", (MIGRATE_LOCK_KEY, SCHEMA)
        )
        existed = connection.exec_driver_sql(
            "SELECT 1 FROM pg_namespace WHERE nspname = %s", (SCHEMA,)
        ).scalar()
        if not existed:
            # Alembic creates its version table before the first revision runs.
            connection.exec_driver_sql(f"CREATE SCHEMA {SCHEMA}")
        # Another path (migrate(), a user's Alembic project) may have moved the schema
        # since this version table was written: schema_version decides.
        reconcile_alembic_version(connection)
        context.run_migrations()
        at_base = not context.get_context().get_current_heads()
        if state["down_to_base"] or (not existed and at_base):
            connection.exec_driver_sql(f"DROP SCHEMA IF EXISTS {SCHEMA} CASCADE")
        elif state["steps"] == 0 and not at_base and _is_upgrade_command():
            # Nothing was pending: still re-apply functions and views, which change
            # between releases without a new migration number.
            connection.exec_driver_sql(
                repeatable_install_sql(SCHEMA), execution_options={"no_parameters": True}
            )
        elif state["down"] and not at_base:
            _warn_if_without_functions(connection)


def _warn_if_without_functions(connection: Connection) -> None:
    """After a downgrade that found no recorded functions for the version it reached (the
    SQL says so too, as a WARNING the driver does not show)."""
    found = connection.exec_driver_sql(
        "SELECT EXISTS (SELECT FROM pg_proc WHERE pronamespace = to_regnamespace(%s))",
        (SCHEMA,),
    ).scalar()
    if not found:
        log.warning(
            "lane_pg schema %r went down to a version whose functions and views were never "
            "recorded: it has none now; run `python -m lane_pg migrate` of a lane_pg "
            "release at that version",
            SCHEMA,
        )


def run_migrations_online() -> None:
    connection = config.attributes.get("connection")
    if connection is not None:
        _run(connection)
        return
    url = config.get_main_option("sqlalchemy.url")
    if not url:
        raise RuntimeError("set sqlalchemy.url (or pass a connection in config.attributes)")
    engine = create_engine(url, poolclass=pool.NullPool)
    try:
        with engine.connect() as conn:
            _run(conn)
            conn.commit()
    finally:
        engine.dispose()


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
