"""The versioned SQL of lane_pg: finding it, rendering it for a schema, installing it.

``sql/migrations/NNNN_<name>.sql`` are applied once each, in order, and recorded in
``<schema>.schema_version`` (the only record of what is installed: the Alembic revisions in
``migrations/`` call the same helpers and skip a version that is already recorded, so a
database migrated by ``migrate()``, by ``python -m lane_pg migrate`` or by a user's own
Alembic project is the same database). ``sql/functions/NN_<entity>.sql`` (in file-name
order) and ``sql/views.sql`` are ``CREATE OR REPLACE`` scripts re-applied after the
migrations on every upgrade.

Every file spells the schema ``lane``; ``render_sql`` substitutes a validated name.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lane_pg.errors import ConfigurationError, SchemaVersionMismatch

if TYPE_CHECKING:
    import asyncpg

__all__ = [
    "DEFAULT_SCHEMA",
    "MIGRATE_LOCK_KEY",
    "SCHEMA_VERSION",
    "Migration",
    "alembic_downgrade",
    "alembic_schema",
    "alembic_upgrade",
    "check_version",
    "install_sql",
    "migrate",
    "migration_files",
    "migration_sql",
    "migrations_dir",
    "render_sql",
    "repeatable_files",
    "repeatable_sql",
    "sql_dir",
    "validate_schema_name",
]

log = logging.getLogger(__name__)

DEFAULT_SCHEMA = "lane"
BREAKING_MARKER = "-- lane:breaking"
# First key of the two-key advisory lock taken by every migrate path (asyncpg, Alembic,
# the printed SQL); the second key is hashtext(schema), so different schemas do not wait.
MIGRATE_LOCK_KEY = 0x4C414E45  # "LANE"

_SCHEMA_NAME = re.compile(r"[a-z_][a-z0-9_]{0,62}")
_MIGRATION_FILE = re.compile(r"(\d{4})_([a-z0-9_]+)\.sql")
_QUALIFIED = re.compile(r'(?<![\w"])lane\.')
_SCHEMA_CLAUSE = re.compile(r"\b(SCHEMA\s+(?:IF\s+NOT\s+EXISTS\s+)?)lane\b", re.IGNORECASE)
_CREATE_SCHEMA = re.compile(r"\bCREATE\s+SCHEMA\s+(?!IF\s+NOT\s+EXISTS\b)", re.IGNORECASE)


# --------------------------------------------------------------------------- locating files
def _first_existing(name: str) -> Path:
    """``lane_pg/<name>`` inside an installed wheel, else ``<repo>/<name>`` of a checkout."""
    package_dir = Path(__file__).resolve().parent.parent
    for candidate in (package_dir / name, package_dir.parent / name):
        if candidate.is_dir():
            return candidate
    raise ConfigurationError(
        f"lane_pg cannot find its {name!r} directory (looked in {package_dir} and "
        f"{package_dir.parent}); reinstall the package"
    )


def sql_dir() -> Path:
    """The directory holding ``migrations/``, ``functions/``, ``schema.sql`` and ``views.sql``."""
    return _first_existing("sql")


def migrations_dir() -> Path:
    """The Alembic script location (``env.py``, ``versions/``).

    A user with their own Alembic project can add ``migrations_dir() / "versions"`` to
    ``version_locations``: the revisions read the schema from ``-x schema=...`` (default
    ``lane``).
    """
    return _first_existing("migrations")


@dataclass(frozen=True, slots=True)
class Migration:
    """One numbered SQL migration file."""

    version: int
    name: str
    path: Path

    @property
    def text(self) -> str:
        return self.path.read_text(encoding="utf-8")

    @property
    def breaking(self) -> bool:
        first_line = self.text.lstrip("\ufeff").split("\n", 1)[0]
        return first_line.strip() == BREAKING_MARKER

    @property
    def description(self) -> str:
        return self.name.replace("_", " ")


def migration_files() -> list[Migration]:
    """Every ``sql/migrations/NNNN_<name>.sql``, in version order (numbers must be unique)."""
    directory = sql_dir() / "migrations"
    found: dict[int, Migration] = {}
    for path in sorted(directory.glob("*.sql")) if directory.is_dir() else []:
        match = _MIGRATION_FILE.fullmatch(path.name)
        if match is None:
            continue
        version = int(match.group(1))
        if version in found:
            raise ConfigurationError(
                f"two migrations share number {version}: {found[version].path.name} and {path.name}"
            )
        found[version] = Migration(version, match.group(2), path)
    return [found[v] for v in sorted(found)]


def _schema_version() -> int:
    try:
        return max((m.version for m in migration_files()), default=0)
    except ConfigurationError:
        return 0


SCHEMA_VERSION: int = _schema_version()
"""The schema version this library requires: the highest migration number."""


# --------------------------------------------------------------------------- rendering
def validate_schema_name(name: str) -> str:
    """Return ``name`` if it is a plain lower-case SQL identifier, else raise.

    Checked before any SQL is composed (SCH-3): the name is formatted into SQL text.
    """
    if not isinstance(name, str) or _SCHEMA_NAME.fullmatch(name) is None:
        raise ConfigurationError(
            f"invalid schema name {name!r}: use 1-63 characters of a-z, 0-9 and _, "
            "not starting with a digit"
        )
    return name


def render_sql(text: str, schema: str) -> str:
    """Substitute the validated ``schema`` for the literal ``lane`` the SQL files use."""
    validate_schema_name(schema)
    if schema == DEFAULT_SCHEMA:
        return text
    text = _QUALIFIED.sub(f"{schema}.", text)
    return _SCHEMA_CLAUSE.sub(lambda m: f"{m.group(1)}{schema}", text)


def _sql_literal(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def _lock_sql(schema: str) -> str:
    return f"SELECT pg_advisory_xact_lock({MIGRATE_LOCK_KEY}, hashtext({_sql_literal(schema)}))"


def _version_row_sql(migration: Migration, schema: str) -> str:
    return (
        f"INSERT INTO {schema}.schema_version (version, breaking, description, applied_at)\n"
        f"VALUES ({migration.version}, {str(migration.breaking).lower()}, "
        f"{_sql_literal(migration.description)}, now())\n"
        "ON CONFLICT (version) DO NOTHING;\n"
    )


def migration_sql(migration: Migration, schema: str = DEFAULT_SCHEMA) -> str:
    """One migration rendered for ``schema``, followed by its ``schema_version`` row.

    ``CREATE SCHEMA`` becomes ``CREATE SCHEMA IF NOT EXISTS`` so a schema created ahead of
    time (by a DBA granting rights, or by Alembic for its version table) is accepted.
    """
    body = _CREATE_SCHEMA.sub("CREATE SCHEMA IF NOT EXISTS ", render_sql(migration.text, schema))
    header = f"-- lane_pg migration {migration.version:04d}_{migration.name}\n"
    return header + body.rstrip() + "\n\n" + _version_row_sql(migration, schema)


def repeatable_files() -> list[Path]:
    """``sql/functions/*.sql`` in file-name order, then ``sql/views.sql``."""
    directory = sql_dir()
    functions = sorted((directory / "functions").glob("*.sql"))
    views = directory / "views.sql"
    return functions + ([views] if views.is_file() else [])


def repeatable_sql(schema: str = DEFAULT_SCHEMA) -> str:
    """Every repeatable file (``repeatable_files()``) rendered for ``schema``, in order."""
    parts = []
    directory = sql_dir()
    for path in repeatable_files():
        text = render_sql(path.read_text(encoding="utf-8"), schema)
        parts.append(f"-- lane_pg {path.relative_to(directory)}\n{text.rstrip()}\n")
    return "\n".join(parts)


def install_sql(schema: str = DEFAULT_SCHEMA) -> str:
    """The whole installation as one psql script (what ``migrate --sql`` prints).

    Meant for an empty database (or one without this schema): it creates every object,
    records every version, and runs in one transaction under the migrate lock.
    """
    validate_schema_name(schema)
    parts = [
        f"-- lane_pg schema {schema!r}, version {SCHEMA_VERSION}\n"
        "-- For an empty database, in one transaction: psql -v ON_ERROR_STOP=1 -f - <dsn>\n"
        "BEGIN;\n",
        f"{_lock_sql(schema)};\n",
    ]
    parts.extend(migration_sql(m, schema) for m in migration_files())
    parts.append(repeatable_sql(schema))
    parts.append("COMMIT;\n")
    return "\n".join(parts)


# --------------------------------------------------------------------------- asyncpg path
async def _installed_versions(conn: asyncpg.Connection, schema: str) -> dict[int, bool] | None:
    """``{version: breaking}`` from ``schema_version``, or None when the table is missing."""
    exists = await conn.fetchval("SELECT to_regclass($1) IS NOT NULL", f"{schema}.schema_version")
    if not exists:
        return None
    rows = await conn.fetch(f"SELECT version, breaking FROM {schema}.schema_version")
    return {int(r["version"]): bool(r["breaking"]) for r in rows}


async def migrate(dsn: str, schema: str = DEFAULT_SCHEMA) -> int:
    """Bring ``schema`` up to ``SCHEMA_VERSION``; return the installed version.

    One transaction under an advisory lock, so concurrent callers serialise and the second
    finds nothing to do. Applies each missing migration in order with its
    ``schema_version`` row, then re-applies ``sql/functions/`` and ``views.sql``. Running it
    again changes nothing.
    """
    validate_schema_name(schema)
    import asyncpg

    migrations = migration_files()
    conn = await asyncpg.connect(dsn)
    try:
        async with conn.transaction():
            await conn.execute(_lock_sql(schema))
            installed = await _installed_versions(conn, schema) or {}
            for migration in migrations:
                if migration.version not in installed:
                    log.info(
                        "applying lane_pg migration %04d_%s", migration.version, migration.name
                    )
                    await conn.execute(migration_sql(migration, schema))
            repeatable = repeatable_sql(schema)
            if repeatable:
                await conn.execute(repeatable)
            versions = await _installed_versions(conn, schema) or {}
    finally:
        await conn.close()
    return max(versions, default=0)


def _mismatch_message(schema: str, installed: int | None, required: int, why: str) -> str:
    found = "not installed" if installed is None else f"version {installed}"
    return (
        f"lane_pg schema {schema!r} is {found} but this library requires version {required} "
        f"({why}); run `python -m lane_pg migrate` (or `alembic upgrade head`)"
    )


async def check_version(
    conn: asyncpg.Connection, schema: str, *, required: int | None = None
) -> int:
    """Return the installed version of ``schema`` if this library can use it, else raise.

    Raises ``SchemaVersionMismatch`` when the schema is missing, older than ``required``
    (default ``SCHEMA_VERSION``), or newer with a breaking migration above ``required``.
    A newer schema without breaking migrations is accepted with a warning.
    """
    validate_schema_name(schema)
    need = SCHEMA_VERSION if required is None else required
    versions = await _installed_versions(conn, schema)
    installed = max(versions) if versions else None
    if versions is None or installed is None:
        raise SchemaVersionMismatch(
            None, need, _mismatch_message(schema, None, need, "no schema_version rows")
        )
    if installed < need:
        raise SchemaVersionMismatch(
            installed, need, _mismatch_message(schema, installed, need, "it is older")
        )
    if installed > need:
        breaking = sorted(v for v, is_breaking in versions.items() if v > need and is_breaking)
        if breaking:
            raise SchemaVersionMismatch(
                installed,
                need,
                f"lane_pg schema {schema!r} is version {installed} but this library requires "
                f"version {need}, and migration {breaking[0]} above it is breaking; upgrade "
                "lane_pg to a release that knows that version (then run "
                "`python -m lane_pg migrate`)",
            )
        log.warning(
            "lane_pg schema %r is version %d, newer than the %d this library requires; "
            "continuing (no breaking migration in between)",
            schema,
            installed,
            need,
        )
    return installed


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
    after the newest revision re-apply functions and views."""
    schema = alembic_schema()
    if not _alembic_recorded(schema, version):
        _alembic_execute(migration_sql(_migration(version), schema))
    if version == SCHEMA_VERSION:
        _alembic_execute(repeatable_sql(schema))


def alembic_downgrade(version: int) -> None:
    """Downgrade step of revision ``version``.

    Revision 1 drops the schema with everything in it. When Alembic's own version table
    lives in that schema (our ``env.py``), an empty schema holding only that table is left
    for Alembic to delete its row from; ``env.py`` drops the schema once at base. A later
    revision runs ``NNNN_<name>.down.sql`` if it exists and removes its version row.
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
    migration = _migration(version)
    down = migration.path.with_name(migration.path.stem + ".down.sql")
    if down.is_file():
        _alembic_execute(render_sql(down.read_text(encoding="utf-8"), schema))
    _alembic_execute(f"DELETE FROM {schema}.schema_version WHERE version = {version};\n")
