"""The install, upgrade and downgrade SQL: migrations with their version rows, the
repeatable files re-applied with orphans dropped, what the catalog holds recorded and
restored."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from lane_pg.errors import ConfigurationError

if TYPE_CHECKING:
    pass

from lane_pg.postgres.schema.files import (
    _CREATE_SCHEMA,
    DEFAULT_SCHEMA,
    SCHEMA_VERSION,
    Migration,
    _lock_sql,
    _sql_literal,
    library_fingerprint,
    migration_files,
    render_sql,
    repeatable_sql,
    validate_schema_name,
)

log = logging.getLogger("lane_pg.postgres.schema")


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
       ``installed_sql`` row with it); 5. the kept definitions are executed (in passes:
       a view recorded before the view it reads waits for the next) and the
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
    v_pending text[];
    v_later text[];
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
    -- The views come by name, and a view over another view (lane.job_counts over
    -- lane.v_queue_counts) may come before it: one that names a view not there yet waits
    -- for the next pass; a pass that creates nothing re-raises the first one's error.
    v_pending := v_kept.definitions;
    LOOP
        v_later := '{{}}';
        FOREACH v_definition IN ARRAY v_pending LOOP
            BEGIN
                EXECUTE v_definition;
            EXCEPTION WHEN undefined_table THEN
                v_later := v_later || v_definition;
            END;
        END LOOP;
        EXIT WHEN cardinality(v_later) = 0;
        IF cardinality(v_later) = cardinality(v_pending) THEN
            EXECUTE v_later[1];
        END IF;
        v_pending := v_later;
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
