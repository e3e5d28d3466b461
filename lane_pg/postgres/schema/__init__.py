"""The versioned SQL of lane_pg: finding it, rendering it for a schema, installing it, and
checking at start that the database runs it.

``sql/migrations/NNNN_<name>.sql`` are applied once each, in order, and recorded in
``<schema>.schema_version`` (the only record of what is installed: the Alembic revisions in
``migrations/`` call the same helpers and skip a version that is already recorded, so a
database migrated by ``migrate()``, by ``python -m lane_pg migrate`` or by a user's own
Alembic project is the same database). They change tables only. ``sql/functions/NN_<entity>.sql``
(in file-name order) and ``sql/views.sql`` are ``CREATE OR REPLACE`` scripts, the
repeatable SQL, re-applied after the migrations on every upgrade by
``repeatable_install_sql``, which also drops the schema's functions and views those files no
longer define and records in ``<schema>.installed_sql`` (migration 0004), for the version
installed, the library's fingerprint (``library_fingerprint``) and the definitions the
catalog then holds with their fingerprint. ``check_version`` compares both at start; the
down path of a migration (``downgrade_sql``) drops the functions and views, runs the
tables-only ``.down.sql`` and re-creates the definitions recorded for the version below.

Every file spells the schema ``lane``; ``render_sql`` substitutes a validated name.
"""

from __future__ import annotations

from lane_pg.postgres.schema.alembic import (
    alembic_downgrade,
    alembic_schema,
    alembic_upgrade,
    alembic_version_location,
    reconcile_alembic_version,
    revision_id,
)
from lane_pg.postgres.schema.files import (
    DEFAULT_SCHEMA,
    FINGERPRINT_VERSION,
    MIGRATE_LOCK_KEY,
    SCHEMA_VERSION,
    Migration,
    library_fingerprint,
    migration_files,
    migrations_dir,
    render_sql,
    repeatable_files,
    repeatable_sql,
    sql_dir,
    validate_schema_name,
)
from lane_pg.postgres.schema.install import (
    catalog_definitions_sql,
    downgrade_sql,
    install_sql,
    migration_sql,
    repeatable_install_sql,
)
from lane_pg.postgres.schema.versions import (
    check_version,
    migrate,
)

__all__ = [
    "DEFAULT_SCHEMA",
    "FINGERPRINT_VERSION",
    "MIGRATE_LOCK_KEY",
    "SCHEMA_VERSION",
    "Migration",
    "alembic_downgrade",
    "alembic_schema",
    "alembic_upgrade",
    "alembic_version_location",
    "catalog_definitions_sql",
    "check_version",
    "downgrade_sql",
    "install_sql",
    "library_fingerprint",
    "migrate",
    "migration_files",
    "migration_sql",
    "migrations_dir",
    "reconcile_alembic_version",
    "render_sql",
    "repeatable_files",
    "repeatable_install_sql",
    "repeatable_sql",
    "revision_id",
    "sql_dir",
    "validate_schema_name",
]
