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

import functools
import hashlib
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
    "FINGERPRINT_VERSION",
    "MIGRATE_LOCK_KEY",
    "SCHEMA_VERSION",
    "Migration",
    "alembic_downgrade",
    "alembic_schema",
    "alembic_upgrade",
    "catalog_definitions_sql",
    "check_version",
    "downgrade_sql",
    "install_sql",
    "library_fingerprint",
    "migrate",
    "migration_files",
    "migration_sql",
    "migrations_dir",
    "render_sql",
    "repeatable_files",
    "repeatable_install_sql",
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
# The migration that creates <schema>.installed_sql: from this version on, every install
# records its fingerprints there and check_version compares them.
FINGERPRINT_VERSION = 4

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
    """The directory holding ``migrations/``, ``functions/`` and ``views.sql``."""
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
    Between the two, ``_capture_sql`` records the functions of a release older than
    ``FINGERPRINT_VERSION`` once ``installed_sql`` exists (it does nothing otherwise).
    """
    body = _CREATE_SCHEMA.sub("CREATE SCHEMA IF NOT EXISTS ", render_sql(migration.text, schema))
    header = f"-- lane_pg migration {migration.version:04d}_{migration.name}\n"
    return (
        header
        + body.rstrip()
        + "\n\n"
        + _capture_sql(schema)
        + "\n"
        + _version_row_sql(migration, schema)
    )


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


@functools.cache
def library_fingerprint() -> str:
    """sha256 (hex) of this library's repeatable SQL as shipped: each file's path under
    ``sql/`` and its text (unrendered, so the schema name does not enter; line endings
    normalised, so a checkout with CRLF agrees with one without)."""
    digest = hashlib.sha256()
    directory = sql_dir()
    for path in repeatable_files():
        text = path.read_text(encoding="utf-8").replace("\r\n", "\n")
        digest.update(path.relative_to(directory).as_posix().encode() + b"\0")
        digest.update(text.encode() + b"\0")
    return digest.hexdigest()


# --------------------------------------------------------------------------- catalog record
# Deparsing (pg_get_functiondef, pg_get_viewdef) writes a name unqualified when it is
# visible in search_path and prints constants in the session's formats, so the
# definitions and their fingerprint are always computed under these settings (a session
# with search_path "lane, public" must get the same fingerprint as migrate did).
_PINNED_SETTINGS: tuple[tuple[str, str], ...] = (
    ("search_path", "pg_catalog"),
    ("DateStyle", "ISO, YMD"),
    ("IntervalStyle", "postgres"),
    ("TimeZone", "UTC"),
    ("extra_float_digits", "3"),
    ("bytea_output", "hex"),
    ("quote_all_identifiers", "off"),
)


def _pin_settings_sql() -> str:
    """An array expression that applies ``_PINNED_SETTINGS`` for the transaction."""
    calls = ", ".join(
        f"set_config({_sql_literal(name)}, {_sql_literal(value)}, true)"
        for name, value in _PINNED_SETTINGS
    )
    return f"ARRAY[{calls}]"


def _plpgsql_pinned(statements: str) -> str:
    """plpgsql ``statements`` run under ``_PINNED_SETTINGS``, the session's values put back
    afterwards (the caller's transaction goes on with its own search_path). Needs
    ``v_saved text[]`` declared."""
    save = ", ".join(f"current_setting({_sql_literal(name)})" for name, _ in _PINNED_SETTINGS)
    restore = ", ".join(
        f"set_config({_sql_literal(name)}, v_saved[{i}], true)"
        for i, (name, _) in enumerate(_PINNED_SETTINGS, start=1)
    )
    return (
        f"    v_saved := ARRAY[{save}];\n"
        f"    PERFORM {_pin_settings_sql()};\n"
        f"{statements}"
        f"    PERFORM {restore};\n"
    )


def _not_extension_member(catalog: str, alias: str) -> str:
    return (
        "NOT EXISTS (SELECT FROM pg_catalog.pg_depend d"
        f" WHERE d.classid = 'pg_catalog.{catalog}'::pg_catalog.regclass"
        f" AND d.objid = {alias}.oid AND d.deptype = 'e')"
    )


def catalog_definitions_sql(schema: str = DEFAULT_SCHEMA, gate: str = "true") -> str:
    """A query of one ``text[]``: the ``CREATE OR REPLACE`` statement of every function of
    ``schema`` (by signature), then of every view (by name), as the catalog holds them;
    members of extensions are left out. Its md5 over the elements joined by newlines is
    the catalog fingerprint. Run it under ``_PINNED_SETTINGS``; ``gate`` is a condition
    both halves test, which lets the caller make them wait for the settings."""
    validate_schema_name(schema)
    namespace = f"to_regnamespace({_sql_literal(schema)})"
    return f"""SELECT coalesce(array_agg(o.definition ORDER BY o.kind, o.name COLLATE "C"), '{{}}')
  FROM (SELECT 1 AS kind, p.oid::pg_catalog.regprocedure::text AS name,
               CASE WHEN p.prokind = 'a'  -- pg_get_functiondef refuses aggregates
                    THEN '-- aggregate ' || p.oid::pg_catalog.regprocedure::text
                    ELSE pg_catalog.pg_get_functiondef(p.oid) || ';' END AS definition
          FROM pg_catalog.pg_proc p
         WHERE p.pronamespace = {namespace} AND {gate}
           AND {_not_extension_member("pg_proc", "p")}
        UNION ALL
        SELECT 2, c.relname::text,
               format('CREATE OR REPLACE VIEW %I.%I%s AS%s', {_sql_literal(schema)}, c.relname,
                      CASE WHEN c.reloptions IS NULL THEN ''
                           ELSE ' WITH (' || array_to_string(c.reloptions, ', ') || ')' END,
                      E'\\n' || pg_catalog.pg_get_viewdef(c.oid))
          FROM pg_catalog.pg_class c
         WHERE c.relnamespace = {namespace} AND c.relkind = 'v' AND {gate}
           AND {_not_extension_member("pg_class", "c")}) o"""


def _drop_sql(kind: str, names: str, schema: str, reason: str) -> str:
    """plpgsql: ``DROP <kind> <names>`` (a text variable, NULL for none) without CASCADE; an
    object that depends on one of them stops the whole migration with a message saying
    which (``v_detail text`` must be declared)."""
    return f"""    IF {names} IS NOT NULL THEN
        BEGIN
            EXECUTE 'DROP {kind} ' || {names};
        EXCEPTION WHEN dependent_objects_still_exist THEN
            GET STACKED DIAGNOSTICS v_detail = PG_EXCEPTION_DETAIL;
            RAISE EXCEPTION 'lane_pg: cannot drop % of schema % (%): other objects depend on it',
                            {names}, {_sql_literal(schema)}, {_sql_literal(reason)}
                USING ERRCODE = 'dependent_objects_still_exist', DETAIL = v_detail,
                      HINT = 'drop or change the dependent objects (lane_pg never drops '
                             'with CASCADE), then run the migration again';
        END;
    END IF;
"""


def _drop_objects_sql(schema: str, views_from: str, routines_from: str, reason: str) -> str:
    """plpgsql: drop the views that ``views_from`` (a FROM clause giving ``pg_class c``)
    selects, then the routines and aggregates that ``routines_from`` (giving
    ``pg_proc p``) selects. Needs ``v_views``, ``v_routines``, ``v_aggregates`` and
    ``v_detail`` (text) declared."""
    signature = "p.oid::pg_catalog.regprocedure::text"
    return (
        f"""    SELECT string_agg(format('%I.%I', {_sql_literal(schema)}, c.relname), ', ')
      INTO v_views
      {views_from};
    SELECT string_agg({signature}, ', ') FILTER (WHERE p.prokind <> 'a'),
           string_agg({signature}, ', ') FILTER (WHERE p.prokind = 'a')
      INTO v_routines, v_aggregates
      {routines_from};
"""
        + _drop_sql("VIEW", "v_views", schema, reason)
        + _drop_sql("ROUTINE", "v_routines", schema, reason)
        + _drop_sql("AGGREGATE", "v_aggregates", schema, reason)
    )


def _capture_sql(schema: str) -> str:
    """A DO block recording the functions and views that a release older than
    ``FINGERPRINT_VERSION`` installed, as the definitions of the version it left the
    schema at, so that going down to that version re-creates them.

    It acts only while ``installed_sql`` exists but is still empty (right after the
    migration that creates it, before any install recorded a row), the schema has
    functions, and the highest ``schema_version`` row is an earlier transaction's
    (``applied_at < now()``): the upgrade started from that version, whose release's
    migrate last wrote the functions. (An upgrade from further below, in one transaction,
    captures nothing: no release ever ran at the version it passes through. Alembic run
    with a transaction per revision would label an older release's functions with the
    version below ``FINGERPRINT_VERSION``.) Otherwise it does nothing, so every migration
    carries it.
    """
    table = f"{schema}.installed_sql"
    record = f"""    v_definitions := ({catalog_definitions_sql(schema)});
"""
    return f"""DO $lane_pg$
DECLARE
    v_saved text[];
    v_definitions text[];
    v_version integer;
BEGIN
    IF to_regclass({_sql_literal(table)}) IS NULL THEN
        RETURN;
    END IF;
    IF EXISTS (SELECT FROM {table}) THEN
        RETURN;
    END IF;
    SELECT v.version INTO v_version
      FROM {schema}.schema_version v
     WHERE v.applied_at < now()
       AND v.version = (SELECT max(m.version) FROM {schema}.schema_version m);
    IF v_version IS NULL THEN
        RETURN;
    END IF;
{_plpgsql_pinned(record)}    IF cardinality(v_definitions) > 0 THEN
        INSERT INTO {table} (version, library_fingerprint, catalog_fingerprint, definitions)
        VALUES (v_version, NULL, md5(array_to_string(v_definitions, E'\\n')), v_definitions);
    END IF;
END $lane_pg$;
"""


def repeatable_install_sql(schema: str = DEFAULT_SCHEMA) -> str:
    """The repeatable SQL as every migrate path applies it, after the migrations:

    1. the ``(oid, xmin)`` of the schema's functions and views' rules, kept in a temporary
       table; 2. ``repeatable_sql(schema)``, whose ``CREATE OR REPLACE`` statements write a
       new catalog row version (a new xmin) for every object they define, even an unchanged
       one; 3. every function and view whose row kept its old xmin, which the files
       therefore no longer define, is dropped (no CASCADE: a dependent object stops the
       migration, naming itself); 4. ``installed_sql`` gets, for the installed version,
       ``library_fingerprint()`` and the catalog's definitions with their fingerprint.
    """
    validate_schema_name(schema)
    namespace = f"to_regnamespace({_sql_literal(schema)})"
    before = "pg_temp.lane_pg_before"
    views_from = (
        f"FROM {before} b\n"
        "      JOIN pg_catalog.pg_rewrite r\n"
        "        ON b.catalog = 'pg_rewrite' AND r.oid = b.row_oid AND r.xmin = b.row_xmin\n"
        "      JOIN pg_catalog.pg_class c ON c.oid = r.ev_class"
    )
    routines_from = (
        f"FROM {before} b\n"
        "      JOIN pg_catalog.pg_proc p\n"
        "        ON b.catalog = 'pg_proc' AND p.oid = b.row_oid AND p.xmin = b.row_xmin"
    )
    drop = _drop_objects_sql(
        schema, views_from, routines_from, "the SQL of this release does not define it"
    )
    record = f"""    v_definitions := ({catalog_definitions_sql(schema)});
"""
    return f"""-- lane_pg functions and views of schema {schema}: re-applied, the ones the files
-- no longer define dropped, the result recorded in {schema}.installed_sql.
DROP TABLE IF EXISTS {before};
CREATE TEMPORARY TABLE lane_pg_before ON COMMIT DROP AS
SELECT 'pg_proc' AS catalog, p.oid AS row_oid, p.xmin AS row_xmin
  FROM pg_catalog.pg_proc p
 WHERE p.pronamespace = {namespace} AND {_not_extension_member("pg_proc", "p")}
UNION ALL
SELECT 'pg_rewrite', r.oid, r.xmin
  FROM pg_catalog.pg_rewrite r JOIN pg_catalog.pg_class c ON c.oid = r.ev_class
 WHERE c.relnamespace = {namespace} AND c.relkind = 'v' AND r.rulename = '_RETURN'
   AND {_not_extension_member("pg_class", "c")};

{repeatable_sql(schema)}
DO $lane_pg$
DECLARE
    v_views text;
    v_routines text;
    v_aggregates text;
    v_detail text;
    v_saved text[];
    v_definitions text[];
BEGIN
{drop}{_plpgsql_pinned(record)}    INSERT INTO {schema}.installed_sql AS i
           (version, library_fingerprint, catalog_fingerprint, definitions, installed_at)
    SELECT max(v.version), {_sql_literal(library_fingerprint())},
           md5(array_to_string(v_definitions, E'\\n')), v_definitions, now()
      FROM {schema}.schema_version v
    ON CONFLICT (version) DO UPDATE
       SET library_fingerprint = excluded.library_fingerprint,
           catalog_fingerprint = excluded.catalog_fingerprint,
           definitions = excluded.definitions,
           installed_at = excluded.installed_at;
END $lane_pg$;
DROP TABLE {before};
"""


def downgrade_sql(migration: Migration, schema: str = DEFAULT_SCHEMA) -> str:
    """The down step of ``migration`` (version > 1), in one script:

    1. the definitions ``installed_sql`` holds for the version below, if any, are kept in a
       temporary table (the ``.down.sql`` may drop ``installed_sql`` itself); 2. every
       function and view of the schema is dropped (no CASCADE); 3. the tables-only
       ``NNNN_<name>.down.sql``, when it exists; 4. the ``schema_version`` row goes (and the
       ``installed_sql`` row with it); 5. the kept definitions are executed and the
       catalog must then match their fingerprint, or else the schema is left without
       functions and views and a WARNING says that the older release's ``migrate`` must
       run (its ``check_version`` refuses the schema until then).
    """
    validate_schema_name(schema)
    if migration.version <= 1:
        raise ConfigurationError("migration 1 goes down by dropping the schema")
    namespace = f"to_regnamespace({_sql_literal(schema)})"
    table = f"{schema}.installed_sql"
    keep = "pg_temp.lane_pg_restore"
    down = migration.path.with_name(migration.path.stem + ".down.sql")
    tables = render_sql(down.read_text(encoding="utf-8"), schema).rstrip() if down.is_file() else ""
    drop = _drop_objects_sql(
        schema,
        f"FROM pg_catalog.pg_class c\n"
        f"     WHERE c.relnamespace = {namespace} AND c.relkind = 'v'\n"
        f"       AND {_not_extension_member('pg_class', 'c')}",
        f"FROM pg_catalog.pg_proc p\n"
        f"     WHERE p.pronamespace = {namespace}\n"
        f"       AND {_not_extension_member('pg_proc', 'p')}",
        "the downgrade re-creates the functions and views of the older version",
    )
    verify = f"""    v_definitions := ({catalog_definitions_sql(schema)});
"""
    older = (
        f"(SELECT max(v.version) FROM {schema}.schema_version v"
        f" WHERE v.version < {migration.version})"
    )
    fingerprint = "md5(array_to_string(v_definitions, E'\\n'))"
    return f"""-- lane_pg: down from migration {migration.version:04d}_{migration.name} ({schema})
DROP TABLE IF EXISTS {keep};
CREATE TEMPORARY TABLE lane_pg_restore (version integer, catalog_fingerprint text,
                                        definitions text[]) ON COMMIT DROP;
DO $lane_pg$
DECLARE
    v_views text;
    v_routines text;
    v_aggregates text;
    v_detail text;
BEGIN
    IF to_regclass({_sql_literal(table)}) IS NOT NULL THEN
        INSERT INTO {keep}
        SELECT i.version, i.catalog_fingerprint, i.definitions
          FROM {table} i WHERE i.version = {older};
    END IF;
{drop}END $lane_pg$;

{tables}

DELETE FROM {schema}.schema_version WHERE version = {migration.version};

DO $lane_pg$
DECLARE
    v_saved text[];
    v_definitions text[];
    v_kept {keep};
    v_definition text;
    v_check_bodies text := current_setting('check_function_bodies');
BEGIN
    SELECT * INTO v_kept FROM {keep};
    IF NOT FOUND THEN
        RAISE WARNING 'lane_pg: schema % went down to version % without functions or views: '
                      'none were recorded for that version', {_sql_literal(schema)}, {older}
            USING HINT = 'run `python -m lane_pg migrate` of a lane_pg release at that version';
        RETURN;
    END IF;
    -- As at install, bodies are checked when they run: a sql function may call one that
    -- comes later in the list.
    PERFORM set_config('check_function_bodies', 'off', true);
    FOREACH v_definition IN ARRAY v_kept.definitions LOOP
        EXECUTE v_definition;
    END LOOP;
    PERFORM set_config('check_function_bodies', v_check_bodies, true);
{_plpgsql_pinned(verify)}    IF {fingerprint} IS DISTINCT FROM v_kept.catalog_fingerprint THEN
        RAISE EXCEPTION 'lane_pg: the functions and views recorded for version % of schema % '
                        'did not re-create the catalog they were recorded from',
                        v_kept.version, {_sql_literal(schema)};
    END IF;
END $lane_pg$;
DROP TABLE {keep};
"""


def install_sql(schema: str = DEFAULT_SCHEMA) -> str:
    """The whole installation as one psql script (what ``migrate --sql`` prints).

    Meant for an empty database (or one without this schema): it creates every object,
    records every version and the installed functions' fingerprints, and runs in one
    transaction under the migrate lock.
    """
    validate_schema_name(schema)
    parts = [
        f"-- lane_pg schema {schema!r}, version {SCHEMA_VERSION}\n"
        "-- For an empty database, in one transaction: psql -v ON_ERROR_STOP=1 -f - <dsn>\n"
        "BEGIN;\n",
        f"{_lock_sql(schema)};\n",
    ]
    parts.extend(migration_sql(m, schema) for m in migration_files())
    parts.append(repeatable_install_sql(schema))
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
    ``schema_version`` row, then ``repeatable_install_sql``. Running it again changes
    nothing. A schema newer than this library is refused (``SchemaVersionMismatch``): its
    functions belong to the newer release, and replacing them with older ones (and
    dropping the ones this release does not define) would break the workers running it.
    """
    validate_schema_name(schema)
    import asyncpg

    migrations = migration_files()
    conn = await asyncpg.connect(dsn)
    try:
        async with conn.transaction():
            await conn.execute(_lock_sql(schema))
            installed = await _installed_versions(conn, schema) or {}
            newest = max(installed, default=0)
            if newest > SCHEMA_VERSION:
                raise SchemaVersionMismatch(
                    newest,
                    SCHEMA_VERSION,
                    f"lane_pg schema {schema!r} is version {newest}, newer than the "
                    f"{SCHEMA_VERSION} this library installs; migrate it with a lane_pg "
                    f"release that knows version {newest}",
                )
            for migration in migrations:
                if migration.version not in installed:
                    log.info(
                        "applying lane_pg migration %04d_%s", migration.version, migration.name
                    )
                    await conn.execute(migration_sql(migration, schema))
            await conn.execute(repeatable_install_sql(schema))
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


@dataclass(frozen=True, slots=True)
class _InstalledState:
    """What ``check_version`` reads from the database in its one query."""

    versions: dict[int, bool] | None  # {version: breaking}; None: no schema_version
    recorded: bool | None  # a row for the installed version; None: no installed_sql table
    library: str | None = None  # its library_fingerprint
    catalog: str | None = None  # its catalog_fingerprint
    live: str | None = None  # the catalog fingerprint now


def _check_sql(schema: str) -> str:
    """The start-up check's one statement: a row per ``schema_version`` row, each carrying
    the installed version's recorded fingerprints and the live catalog fingerprint.

    The settings are pinned by a MATERIALIZED CTE that the catalog half reads through a
    LATERAL reference, so no definition is deparsed before they apply; ``set_config(...,
    true)`` lasts until the end of the transaction, which for an autocommit statement is
    the statement itself (``check_version`` wraps it in a rolled-back savepoint when the
    caller holds a transaction). The fingerprint is computed once (a second MATERIALIZED
    CTE) and only scalars are returned: asyncpg introspects array types on their first use
    on a connection, which cost 5 ms of every start. Measured on PostgreSQL 15, localhost,
    the real schema (68 functions and views): on a warm connection, 50 runs, 0.75 ms
    median (p95 0.8 ms; EXPLAIN ANALYZE 0.7-0.95 ms of server time, nearly all deparsing;
    a round trip is 0.05 ms); as PostgresBackend.connect runs it, as the first query on a
    new connection (20 connections), 4.1-4.5 ms median, max 5.8 ms: cold catalog caches,
    which the old two-query version check (0.7 ms there) did not touch.
    """
    definitions = catalog_definitions_sql(schema, "pinned.applied IS NOT NULL")
    return f"""WITH pinned AS MATERIALIZED (SELECT {_pin_settings_sql()} AS applied),
live AS MATERIALIZED (
    SELECT md5(array_to_string(l.definitions, E'\\n')) AS fingerprint
      FROM pinned CROSS JOIN LATERAL ({definitions}) AS l(definitions))
SELECT s.version, s.breaking, i.version IS NOT NULL AS recorded,
       i.library_fingerprint, i.catalog_fingerprint, live.fingerprint AS live_fingerprint
  FROM live
 CROSS JOIN {schema}.schema_version s
  LEFT JOIN {schema}.installed_sql i
    ON i.version = (SELECT max(m.version) FROM {schema}.schema_version m)"""


async def _installed_state(conn: asyncpg.Connection, schema: str) -> _InstalledState:
    import asyncpg

    # Inside the caller's transaction, a savepoint rolled back afterwards keeps both the
    # pinned settings and a failure (a schema without installed_sql) out of it.
    in_transaction = conn.is_in_transaction()
    try:
        if in_transaction:
            await conn.execute("SAVEPOINT lane_pg_check")
        try:
            rows = await conn.fetch(_check_sql(schema))
        finally:
            if in_transaction:
                await conn.execute(
                    "ROLLBACK TO SAVEPOINT lane_pg_check; RELEASE SAVEPOINT lane_pg_check"
                )
    except (asyncpg.UndefinedTableError, asyncpg.InvalidSchemaNameError):
        # No schema, or one older than FINGERPRINT_VERSION: the versions tell which.
        return _InstalledState(await _installed_versions(conn, schema), None)
    if not rows:
        return _InstalledState({}, None)
    first = rows[0]
    return _InstalledState(
        {int(row["version"]): bool(row["breaking"]) for row in rows},
        bool(first["recorded"]),
        first["library_fingerprint"],
        first["catalog_fingerprint"],
        first["live_fingerprint"],
    )


def _short(fingerprint: str | None) -> str:
    return "none" if fingerprint is None else fingerprint[:12]


async def check_version(
    conn: asyncpg.Connection,
    schema: str,
    *,
    required: int | None = None,
    fingerprint: str | None = None,
) -> int:
    """Return the installed version of ``schema`` if this library can use it, else raise.

    Raises ``SchemaVersionMismatch`` when the schema is missing, older than ``required``
    (default ``SCHEMA_VERSION``), or newer with a breaking migration above ``required``. A
    newer schema without breaking migrations is accepted with a warning. From
    ``FINGERPRINT_VERSION`` on it also refuses a schema whose recorded library fingerprint
    differs from ``fingerprint`` (default ``library_fingerprint()``: this library was
    deployed without running migrate), or whose functions and views differ from the ones
    recorded (changed by hand since the last migrate), or that records none. For a newer
    compatible schema the library fingerprint is not compared (it is the newer release's,
    and that release promises to serve this one); the catalog fingerprint still is when
    the newer release recorded one. One round trip (see ``_check_sql`` for the measured cost).
    """
    validate_schema_name(schema)
    need = SCHEMA_VERSION if required is None else required
    expected = library_fingerprint() if fingerprint is None else fingerprint
    state = await _installed_state(conn, schema)
    versions = state.versions
    installed = max(versions) if versions else None
    if versions is None or installed is None:
        raise SchemaVersionMismatch(
            None, need, _mismatch_message(schema, None, need, "no schema_version rows")
        )
    if installed < need:
        raise SchemaVersionMismatch(
            installed, need, _mismatch_message(schema, installed, need, "it is older")
        )
    newer = installed > need
    if newer:
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
    if state.recorded is None and need < FINGERPRINT_VERSION:
        return installed  # a release older than the record: versions are all it knows
    if newer and not state.recorded:
        # The newer release's bookkeeping is its own business: without a row to compare
        # with, a compatible schema is still served (a rolling deploy is never refused).
        log.warning(
            "lane_pg schema %r records no functions for version %d; not comparing them",
            schema,
            installed,
        )
        return installed
    run = (
        f"run `python -m lane_pg migrate` with a lane_pg release at version {installed}"
        if newer
        else "run `python -m lane_pg migrate`"
    )
    if not state.recorded:
        raise SchemaVersionMismatch(
            installed,
            need,
            f"lane_pg schema {schema!r} at version {installed} records no functions and "
            "views for that version (a downgrade found none to re-create, or an install "
            f"without lane_pg's migrate); {run}",
        )
    if not newer and state.library != expected:
        raise SchemaVersionMismatch(
            installed,
            need,
            f"lane_pg schema {schema!r} at version {installed} runs the functions and views "
            f"of another lane_pg release (recorded library fingerprint "
            f"{_short(state.library)}, this library's {_short(expected)}): the library was "
            f"deployed without a migrate; {run}",
        )
    if state.live != state.catalog:
        raise SchemaVersionMismatch(
            installed,
            need,
            f"lane_pg schema {schema!r}: its functions or views differ from the ones the "
            f"last migrate installed (catalog fingerprint {_short(state.live)}, recorded "
            f"{_short(state.catalog)}), changed by hand since; {run} to re-install them",
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
