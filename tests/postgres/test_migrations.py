"""Schema installation: migrate(), the Alembic path, the printed SQL and the version guard.

Every test that installs something gets its own database (``lane_mig_<random>``, dropped
at the end), so these tests never touch the shared ``lane`` schema of the test database.
Comparisons use a snapshot of pg_catalog for one schema: tables and their options,
columns with types and defaults, constraints, indexes, sequences, functions (identity
arguments, result, md5 of the source and of the whole definition), views and triggers.
The fingerprints, the orphan drop and the restore of older functions on the way down are
tested in tests/postgres/test_sql_versions.py.
"""

from __future__ import annotations

import asyncio
import copy
import hashlib
import logging
import os
import re
import shutil
import subprocess
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import asyncpg
import pytest

from lane_pg.errors import ConfigurationError, SchemaVersionMismatch
from lane_pg.postgres import schema as lane_schema
from lane_pg.postgres.schema import (
    SCHEMA_VERSION,
    check_version,
    install_sql,
    migrate,
    migration_files,
    render_sql,
    repeatable_sql,
    validate_schema_name,
)
from tests.cli_runner import run_lane_pg
from tests.conftest import NewDatabase, create_database, release_databases

ADMIN_DSN = os.environ.get("LANE_PG_TEST_DSN", "postgresql://postgres@127.0.0.1:5432/test")
REPO = Path(__file__).resolve().parents[2]
BAD_NAMES = ["jobs; drop table x", "", "Lane", "1lane", "a" * 64, 'lane"x', "lane.x", "la ne"]

Snapshot = dict[str, list[tuple[Any, ...]]]


# --------------------------------------------------------------------------- fixtures
# `new_db` (a factory of fresh databases) comes from tests/conftest.py.


async def _snapshot(dsn: str, schema: str = "lane") -> Snapshot:
    """The catalog of ``schema``, with the schema name written as ``lane`` everywhere."""
    conn = await asyncpg.connect(dsn)
    try:
        queries = {
            "relations": """
                SELECT c.relname, c.relkind, c.reloptions
                FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
                WHERE n.nspname = $1 AND c.relkind IN ('r', 'p', 'v', 'm', 'S', 'f')
                  AND c.relname <> 'alembic_version'
                ORDER BY 1""",
            "columns": """
                SELECT c.relname, a.attnum, a.attname, format_type(a.atttypid, a.atttypmod),
                       a.attnotnull, pg_get_expr(d.adbin, d.adrelid), a.attidentity,
                       a.attgenerated
                FROM pg_attribute a
                JOIN pg_class c ON c.oid = a.attrelid
                JOIN pg_namespace n ON n.oid = c.relnamespace
                LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
                WHERE n.nspname = $1 AND a.attnum > 0 AND NOT a.attisdropped
                  AND c.relkind IN ('r', 'p', 'v', 'm', 'f')
                  AND c.relname <> 'alembic_version'
                ORDER BY 1, 2""",
            "constraints": """
                SELECT c.relname, k.conname, k.contype, pg_get_constraintdef(k.oid)
                FROM pg_constraint k
                JOIN pg_class c ON c.oid = k.conrelid
                JOIN pg_namespace n ON n.oid = k.connamespace
                WHERE n.nspname = $1 AND c.relname <> 'alembic_version'
                ORDER BY 1, 2""",
            "indexes": """
                SELECT tablename, indexname, indexdef FROM pg_indexes
                WHERE schemaname = $1 AND tablename <> 'alembic_version'
                ORDER BY 1, 2""",
            "sequences": """
                SELECT sequencename, data_type::text, start_value, increment_by, cycle
                FROM pg_sequences WHERE schemaname = $1 ORDER BY 1""",
            "functions": """
                SELECT p.proname, pg_get_function_identity_arguments(p.oid),
                       pg_get_function_result(p.oid), p.prokind, p.provolatile, p.proconfig,
                       l.lanname,
                       CASE WHEN p.prokind <> 'a' THEN pg_get_functiondef(p.oid) END, p.prosrc
                FROM pg_proc p
                JOIN pg_namespace n ON n.oid = p.pronamespace
                JOIN pg_language l ON l.oid = p.prolang
                WHERE n.nspname = $1
                ORDER BY 1, 2""",
            "views": """
                SELECT viewname, pg_get_viewdef(format('%I.%I', schemaname, viewname)::regclass)
                FROM pg_views WHERE schemaname = $1 ORDER BY 1""",
            "triggers": """
                SELECT c.relname, t.tgname, pg_get_triggerdef(t.oid)
                FROM pg_trigger t
                JOIN pg_class c ON c.oid = t.tgrelid
                JOIN pg_namespace n ON n.oid = c.relnamespace
                WHERE n.nspname = $1 AND NOT t.tgisinternal
                ORDER BY 1, 2""",
        }
        snap: Snapshot = {}
        for key, query in queries.items():
            rows = await conn.fetch(query, schema)
            snap[key] = [tuple(_normalize(v, schema) for v in row) for row in rows]
        snap["functions"] = [
            (*row[:-2], *(hashlib.md5(str(text).encode()).hexdigest() for text in row[-2:]))
            for row in snap["functions"]
        ]
        return snap
    finally:
        await conn.close()


def _normalize(value: Any, schema: str) -> Any:
    if schema == "lane":
        return value
    if isinstance(value, str):
        return re.sub(rf"\b{schema}\b", "lane", value)
    if isinstance(value, list):
        return [_normalize(v, schema) for v in value]
    return value


async def _version_rows(dsn: str, schema: str = "lane") -> list[tuple[Any, ...]]:
    conn = await asyncpg.connect(dsn)
    try:
        rows = await conn.fetch(
            f"SELECT version, breaking, description, applied_at FROM {schema}.schema_version "
            "ORDER BY version"
        )
        return [tuple(r) for r in rows]
    finally:
        await conn.close()


_reference: tuple[Snapshot, list[tuple[Any, ...]]] | None = None


async def _reference_install() -> tuple[Snapshot, list[tuple[Any, ...]]]:
    """The catalog and version rows ``migrate`` gives an empty database, for the tests that
    compare another path's result with it: installed once per test process on a database of
    its own (each of those tests installed a reference database of its own before); a deep
    copy each time, so a test may change what it gets."""
    global _reference
    if _reference is None:
        created: list[str] = []
        try:
            dsn = await create_database(created)
            await migrate(dsn)
            _reference = (await _snapshot(dsn), await _version_rows(dsn))
        finally:
            await release_databases(created)
    return copy.deepcopy(_reference)


async def reference_snapshot() -> Snapshot:
    """``_snapshot`` of a database that ``migrate`` installed (``_reference_install``)."""
    return (await _reference_install())[0]


async def _schemas(dsn: str) -> set[str]:
    conn = await asyncpg.connect(dsn)
    try:
        rows = await conn.fetch(
            "SELECT nspname FROM pg_namespace WHERE nspname NOT LIKE 'pg\\_%' "
            "AND nspname NOT IN ('information_schema', 'public')"
        )
        return {r["nspname"] for r in rows}
    finally:
        await conn.close()


def _alembic_upgrade(dsn: str, schema: str = "lane") -> tuple[int | None, int | None]:
    from lane_pg.cli.migrate import upgrade

    return upgrade(dsn, schema)


def _alembic(dsn: str, schema: str, action: str, target: str, sql: bool = False) -> str:
    """Run an Alembic command the way a user's ``alembic`` CLI would (own engine)."""
    import io

    from alembic import command

    from lane_pg.cli.common import sqlalchemy_url
    from lane_pg.cli.migrate import alembic_config

    buffer = io.StringIO()
    config = alembic_config(schema, sqlalchemy_url(dsn))
    config.output_buffer = buffer
    getattr(command, action)(config, target, sql=sql)
    return buffer.getvalue()


def _psql(dsn: str, script: str) -> None:
    psql = shutil.which("psql")
    if psql is None:
        pytest.skip("psql is not installed")
    subprocess.run(
        [psql, "-X", "-q", "-v", "ON_ERROR_STOP=1", "-d", dsn, "-f", "-"],
        input=script,
        text=True,
        check=True,
        capture_output=True,
        timeout=60,
    )


async def _run_in_thread(fn: Callable[..., Any], *args: Any) -> Any:
    return await asyncio.to_thread(fn, *args)


# --------------------------------------------------------------------------- files and text
def test_schema_version_is_highest_migration_number() -> None:
    files = migration_files()
    assert files, "sql/migrations holds no NNNN_<name>.sql file"
    assert SCHEMA_VERSION == files[-1].version == max(m.version for m in files)
    assert [m.version for m in files] == sorted(m.version for m in files)
    assert files[0].version == 1


def _version_before(version: int) -> int:
    """The migration number below ``version`` (0 for none): numbers may skip."""
    return max((m.version for m in migration_files() if m.version < version), default=0)


def test_every_migration_has_an_alembic_revision() -> None:
    from alembic.script import ScriptDirectory

    from lane_pg.cli.migrate import alembic_config

    script = ScriptDirectory.from_config(alembic_config("lane"))
    revisions = {r.revision: r for r in script.walk_revisions()}
    assert set(revisions) == {f"{m.version:04d}" for m in migration_files()}
    assert script.get_heads() == [f"{SCHEMA_VERSION:04d}"]
    previous = None  # numbers are reserved per branch, so a revision follows the file before
    for migration in migration_files():
        revision = revisions[f"{migration.version:04d}"]
        expected_down = None if previous is None else f"{previous:04d}"
        assert revision.down_revision == expected_down
        previous = migration.version


def test_breaking_marker_is_read_from_the_first_line(tmp_path: Path) -> None:
    breaking = tmp_path / "0002_reshape.sql"
    breaking.write_text("-- lane:breaking\nALTER TABLE lane.jobs ADD COLUMN x int;\n")
    plain = tmp_path / "0003_more.sql"
    plain.write_text("-- note\n-- lane:breaking\nSELECT 1;\n")
    assert lane_schema.Migration(2, "reshape", breaking).breaking
    assert not lane_schema.Migration(3, "more", plain).breaking
    assert "VALUES (2, true, 'reshape'" in lane_schema.migration_sql(
        lane_schema.Migration(2, "reshape", breaking), "lane"
    )


def test_render_sql_substitutes_only_the_schema() -> None:
    text = (
        "CREATE SCHEMA IF NOT EXISTS lane;\nCREATE SCHEMA lane;\nDROP SCHEMA lane CASCADE;\n"
        "SELECT * FROM lane.jobs j JOIN lane.queues q ON true;\n"
        "PERFORM pg_notify('lane.jobs', p_queue);\n"
        'SELECT "lane".x, planelane.y, lane_x.z, lanes.w, j.lane;\n'
    )
    out = render_sql(text, "jobs_q")
    assert out == (
        "CREATE SCHEMA IF NOT EXISTS jobs_q;\nCREATE SCHEMA jobs_q;\n"
        "DROP SCHEMA jobs_q CASCADE;\n"
        "SELECT * FROM jobs_q.jobs j JOIN jobs_q.queues q ON true;\n"
        "PERFORM pg_notify('jobs_q.jobs', p_queue);\n"
        'SELECT "lane".x, planelane.y, lane_x.z, lanes.w, j.lane;\n'
    )
    assert render_sql(text, "lane") == text


@pytest.mark.parametrize("name", BAD_NAMES)
def test_invalid_schema_names_are_refused(name: str) -> None:
    with pytest.raises(ConfigurationError):
        validate_schema_name(name)
    with pytest.raises(ConfigurationError):
        render_sql("SELECT 1 FROM lane.jobs", name)
    with pytest.raises(ConfigurationError):
        install_sql(name)


async def test_invalid_schema_name_raises_before_connecting() -> None:
    class NoSql:
        def __getattr__(self, name: str) -> Any:
            raise AssertionError(f"SQL issued through {name}")

    # Port 1 refuses connections: getting ConfigurationError proves nothing was tried.
    with pytest.raises(ConfigurationError, match="invalid schema name"):
        await migrate("postgresql://postgres@127.0.0.1:1/none", "jobs; drop table x")
    with pytest.raises(ConfigurationError):
        await check_version(NoSql(), "jobs; drop table x")


def test_install_sql_is_one_transaction_for_every_file() -> None:
    text = install_sql("lane")
    assert text.count("BEGIN;") == 1
    assert text.rstrip().endswith("COMMIT;")
    assert "pg_advisory_xact_lock" in text
    for migration in migration_files():
        assert f"VALUES ({migration.version}, " in text


# --------------------------------------------------------------------------- migrate()
async def test_migrate_installs_every_object_and_version_row(new_db: NewDatabase) -> None:
    dsn = await new_db()
    assert await migrate(dsn) == SCHEMA_VERSION
    rows = await _version_rows(dsn)
    assert [(r[0], r[1], r[2]) for r in rows] == [
        (m.version, m.breaking, m.description) for m in migration_files()
    ]
    snap = await _snapshot(dsn)
    relations = {r[0] for r in snap["relations"]}
    assert {"jobs", "queues", "events", "schema_version"} <= relations
    functions = {r[0] for r in snap["functions"]}
    assert {"add_job", "claim_jobs", "complete_job", "fail_job"} <= functions
    views = {r[0] for r in snap["views"]}
    declared = set(re.findall(r"CREATE OR REPLACE VIEW lane\.(\w+)", repeatable_sql()))
    assert declared and declared <= views
    conn = await asyncpg.connect(dsn)
    try:
        assert await check_version(conn, "lane") == SCHEMA_VERSION
    finally:
        await conn.close()


async def test_migrate_twice_changes_nothing(new_db: NewDatabase) -> None:
    dsn = await new_db()
    await migrate(dsn)
    before, rows_before = await _snapshot(dsn), await _version_rows(dsn)
    assert await migrate(dsn) == SCHEMA_VERSION
    assert await _snapshot(dsn) == before
    assert await _version_rows(dsn) == rows_before


async def test_concurrent_migrations_serialise(new_db: NewDatabase) -> None:
    dsn = await new_db()
    results = await asyncio.gather(*(migrate(dsn) for _ in range(4)))
    assert results == [SCHEMA_VERSION] * 4
    assert len(await _version_rows(dsn)) == len(migration_files())


async def test_custom_schema_name(new_db: NewDatabase) -> None:
    dsn = await new_db()
    assert await migrate(dsn, "lane_custom") == SCHEMA_VERSION
    assert await _schemas(dsn) == {"lane_custom"}
    assert await _snapshot(dsn, "lane_custom") == await reference_snapshot()
    conn = await asyncpg.connect(dsn)
    try:
        assert await check_version(conn, "lane_custom") == SCHEMA_VERSION
        # Every function body was rendered: nothing still points at schema "lane".
        sources = await conn.fetch(
            "SELECT p.proname, p.prosrc FROM pg_proc p "
            "JOIN pg_namespace n ON n.oid = p.pronamespace WHERE n.nspname = 'lane_custom'"
        )
        stale = [r["proname"] for r in sources if re.search(r"(?<![\w\"])lane\.", r["prosrc"])]
        assert stale == []
        job_id = await conn.fetchval("SELECT (lane_custom.add_job('q1', 'hello')).id")
        assert await conn.fetchval("SELECT count(*) FROM lane_custom.jobs WHERE id = $1", job_id)
    finally:
        await conn.close()


# --------------------------------------------------------------------------- Alembic / CLI
async def test_alembic_path_and_migrate_give_the_same_catalog(new_db: NewDatabase) -> None:
    by_alembic, by_asyncpg = await new_db(), await new_db()
    assert await _run_in_thread(_alembic_upgrade, by_alembic) == (None, SCHEMA_VERSION)
    await migrate(by_asyncpg)
    snap = await _snapshot(by_asyncpg)
    assert await _snapshot(by_alembic) == snap

    def versions(rows: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
        return [r[:3] for r in rows]

    assert versions(await _version_rows(by_alembic)) == versions(await _version_rows(by_asyncpg))

    # Each path accepts a database the other one migrated, and changes nothing.
    rows = await _version_rows(by_alembic)
    assert await migrate(by_alembic) == SCHEMA_VERSION
    assert await _version_rows(by_alembic) == rows
    rows = await _version_rows(by_asyncpg)
    before = SCHEMA_VERSION
    assert await _run_in_thread(_alembic_upgrade, by_asyncpg) == (before, SCHEMA_VERSION)
    assert await _version_rows(by_asyncpg) == rows
    assert await _snapshot(by_asyncpg) == snap
    conn = await asyncpg.connect(by_asyncpg)
    try:
        assert await conn.fetchval("SELECT version_num FROM lane.alembic_version") == (
            f"{SCHEMA_VERSION:04d}"
        )
    finally:
        await conn.close()
    # Upgrading an up-to-date database again is a no-op too.
    assert await _run_in_thread(_alembic_upgrade, by_alembic) == (before, SCHEMA_VERSION)
    assert await _snapshot(by_alembic) == snap


async def test_printed_sql_through_psql_gives_the_same_catalog(new_db: NewDatabase) -> None:
    by_psql = await new_db()
    printed = await asyncio.to_thread(
        run_lane_pg, "migrate", "--sql", env=dict(os.environ), cwd=REPO
    )
    assert printed.returncode == 0, printed.stderr
    await _run_in_thread(_psql, by_psql, printed.stdout)
    reference, reference_rows = await _reference_install()
    assert await _snapshot(by_psql) == reference
    assert [r[:3] for r in await _version_rows(by_psql)] == [r[:3] for r in reference_rows]
    assert await migrate(by_psql) == SCHEMA_VERSION  # and it is upgradable afterwards


async def test_alembic_offline_sql_installs_the_schema(new_db: NewDatabase) -> None:
    dsn = await new_db()
    script = await _run_in_thread(_alembic, dsn, "lane", "upgrade", "head", True)
    assert "CREATE TABLE lane.jobs" in script
    await _run_in_thread(_psql, dsn, script)
    assert await _snapshot(dsn) == await reference_snapshot()
    # Alembic then knows the database is at head.
    assert await _run_in_thread(_alembic_upgrade, dsn) == (SCHEMA_VERSION, SCHEMA_VERSION)


async def test_alembic_downgrade_base_removes_everything(new_db: NewDatabase) -> None:
    dsn = await new_db()
    await _run_in_thread(_alembic, dsn, "lane_custom", "upgrade", "head")
    assert await _schemas(dsn) == {"lane_custom"}
    # SCH-6: one revision down and the version guard refuses the schema.
    await _run_in_thread(_alembic, dsn, "lane_custom", "downgrade", "-1")
    conn = await asyncpg.connect(dsn)
    try:
        with pytest.raises(SchemaVersionMismatch) as info:
            await check_version(conn, "lane_custom")
        assert info.value.installed == (_version_before(SCHEMA_VERSION) or None)
        assert info.value.required == SCHEMA_VERSION
    finally:
        await conn.close()
    # Down to base: the schema and everything in it are gone.
    await _run_in_thread(_alembic, dsn, "lane_custom", "downgrade", "base")
    assert await _schemas(dsn) == set()
    conn = await asyncpg.connect(dsn)
    try:
        with pytest.raises(SchemaVersionMismatch) as info:
            await check_version(conn, "lane_custom")
        assert info.value.installed is None
        assert info.value.required == SCHEMA_VERSION
        leftovers = await conn.fetchval(
            "SELECT count(*) FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace "
            "WHERE n.nspname LIKE 'lane%'"
        )
        assert leftovers == 0
    finally:
        await conn.close()
    # Downgrading an empty database leaves nothing behind; upgrading again works.
    await _run_in_thread(_alembic, dsn, "lane_custom", "downgrade", "base")
    assert await _schemas(dsn) == set()
    await _run_in_thread(_alembic, dsn, "lane_custom", "upgrade", "head")
    assert await _schemas(dsn) == {"lane_custom"}


async def _downgrade_restores(
    new_db: NewDatabase,
    version: int,
    dropped: str,
    check: Callable[[asyncpg.Connection], Awaitable[None]] | None = None,
) -> None:
    """Alembic from head down to ``version`` (every revision above it: functions and views
    dropped, its tables-only .down.sql, the functions recorded for the version below
    re-created when there are any): the tables, constraints and indexes of migrations
    1..``version`` applied in order, no function whose source matches ``dropped`` (a column
    the downgrade removed), ``check`` passes on the result; upgrading again gives
    migrate()'s catalog."""
    dsn, older = await new_db(), await new_db()
    await _run_in_thread(_alembic_upgrade, dsn)
    await _run_in_thread(_alembic, dsn, "lane", "downgrade", f"{version:04d}")
    conn = await asyncpg.connect(older)
    try:
        for migration in migration_files()[:version]:
            await conn.execute(render_sql(migration.text, "lane"))
    finally:
        await conn.close()
    down, expected = await _snapshot(dsn), await _snapshot(older)
    views = {row[0] for row in down["views"]}  # views re-created for the older version
    for key in ("relations", "columns", "constraints", "indexes", "sequences"):
        assert [r for r in down[key] if r[0] not in views] == expected[key], key
    assert [r[0] for r in await _version_rows(dsn)] == list(range(1, version + 1))
    conn = await asyncpg.connect(dsn)
    try:
        stale = await conn.fetch(
            "SELECT p.proname FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace"
            " WHERE n.nspname = 'lane' AND p.prosrc ~ $1",
            dropped,
        )
        assert stale == []
        if check is not None:
            await check(conn)
    finally:
        await conn.close()
    await _run_in_thread(_alembic_upgrade, dsn)
    again, fresh = await _snapshot(dsn), await reference_snapshot()
    # Re-added columns get new attribute numbers (dropped ones keep theirs): compare the
    # columns in order, without the numbers.
    for snap in (again, fresh):
        snap["columns"] = [(row[0], *row[2:]) for row in snap["columns"]]
    assert again == fresh


async def _no_functions_or_views(conn: asyncpg.Connection) -> None:
    """A database installed at head recorded no functions for an older version: the
    downgrade leaves none rather than functions of another version."""
    found = await conn.fetchval(
        "SELECT (SELECT count(*) FROM pg_proc WHERE pronamespace = 'lane'::regnamespace)"
        " + (SELECT count(*) FROM pg_class WHERE relnamespace = 'lane'::regnamespace"
        " AND relkind = 'v')"
    )
    assert found == 0


async def test_downgrade_of_queue_retention_restores_version_1(new_db: NewDatabase) -> None:
    """Revision 0002 down: no function left reading keep_completed / keep_failed."""
    await _downgrade_restores(new_db, 1, "keep_(completed|failed)", _no_functions_or_views)


async def jobs_run_with_events(conn: asyncpg.Connection) -> None:
    """Functions a downgrade re-created work: an add, a claim and a completion write their
    events (every queue records by default)."""
    job_id = await conn.fetchval("SELECT (lane.add_job('down_q', 'n')).id")
    token = await conn.fetchval(
        "SELECT lock_token FROM lane.claim_jobs('w', ARRAY['down_q'], ARRAY[1], 60000)"
    )
    await conn.execute("SELECT lane.complete_job('down_q', $1, $2)", job_id, token)
    events = await conn.fetch("SELECT event FROM lane.events WHERE queue = 'down_q' ORDER BY id")
    assert [row["event"] for row in events] == [
        "added",
        "waiting",
        "active",
        "completed",
        "drained",
    ]


async def test_downgrade_of_queue_events_restores_version_2(new_db: NewDatabase) -> None:
    """Revision 0003 down: the events key on id plus the (queue, id) index again, and no
    function left reading record_events. Installed at head, the database never ran
    version 2 functions, so none come back (re-creating recorded ones, and running them:
    test_sql_versions.test_downgrade_re_creates_the_functions_of_the_release_upgraded_from)."""
    await _downgrade_restores(new_db, 2, "record_events", _no_functions_or_views)


async def test_downgrade_of_event_batches_keeps_every_event_and_its_id_EVS_1(
    new_db: NewDatabase,
) -> None:
    """Revision 0007 down: each batch row becomes the single rows lane.read_events gave,
    ids included, and the id sequence goes on above the highest of them."""
    dsn = await new_db()
    await _run_in_thread(_alembic_upgrade, dsn)
    conn = await asyncpg.connect(dsn)
    try:
        await conn.execute(
            "SELECT lane.add_jobs('down_q', array_fill('n'::text, ARRAY[1500]),"
            " array_fill('1'::jsonb, ARRAY[1500]), array_fill('{}'::jsonb, ARRAY[1500]))"
        )
        await conn.execute("SELECT lane.add_job('down_q', 'single')")
        await conn.execute("SELECT * FROM lane.claim_jobs('w', ARRAY['down_q'], ARRAY[3], 60000)")
        assert await conn.fetchval("SELECT count(*) FROM lane.events") == 7  # 2+2+1+1+1
        before = [
            tuple(r)
            for r in await conn.fetch(
                "SELECT id, event, job_id, data::text FROM lane.read_events('down_q', NULL,"
                " NULL, 10000)"
            )
        ]
    finally:
        await conn.close()
    assert len(before) == 3005
    await _run_in_thread(_alembic, dsn, "lane", "downgrade", "0006")
    conn = await asyncpg.connect(dsn)
    try:
        after = [
            tuple(r)
            for r in await conn.fetch(
                "SELECT id, event, job_id, data::text FROM lane.events ORDER BY id"
            )
        ]
        assert after == before
        fresh = await conn.fetchval(
            "INSERT INTO lane.events (queue, event, created_at) VALUES ('down_q', 'x', now())"
            " RETURNING id"
        )
        assert fresh == before[-1][0] + 1
    finally:
        await conn.close()


async def test_generated_ids_from_before_0008_are_still_found_and_never_reissued_ADD_2(
    new_db: NewDatabase,
) -> None:
    """Jobs whose generated id came from lane.job_id_seq (not their key's text) keep being
    found by id after 0008, also when an old id equals another row's key; new generated ids
    start above every old one; going down puts the unique (queue, id) constraint back and
    lane.job_id_seq above every key."""
    dsn = await new_db()
    await _run_in_thread(_alembic, dsn, "lane", "upgrade", "0007")
    conn = await asyncpg.connect(dsn)
    try:
        # Version 7's add_job took id = nextval('lane.job_id_seq'), key from the identity;
        # the two drift apart (here by one: key 1 holds id '2', key 2 id '3', ...).
        await conn.execute("SELECT setval('lane.job_id_seq', 1)")
        for name in ("a", "b", "c"):
            await conn.execute(
                "INSERT INTO lane.jobs (queue, id, name, state, order_key, enqueued_seq,"
                " created_at, available_at) VALUES ('old_q', nextval('lane.job_id_seq')::text,"
                " $1, 'waiting', 0, 0, now(), now())",
                name,
            )
        await conn.execute(
            "INSERT INTO lane.jobs (queue, id, name, state, order_key, created_at, available_at)"
            " VALUES ('old_q', 'custom-1', 'd', 'waiting', 0, now(), now())"
        )
        old = {
            r["id"]: (r["key"], r["name"])
            for r in await conn.fetch("SELECT key, id, name FROM lane.jobs ORDER BY key")
        }
    finally:
        await conn.close()
    assert set(old) == {"2", "3", "4", "custom-1"} and old["2"][0] == 1
    await _run_in_thread(_alembic_upgrade, dsn)
    conn = await asyncpg.connect(dsn)
    try:
        for job_id, (key, name) in old.items():
            row = await conn.fetchrow("SELECT key, name FROM lane.get_job('old_q', $1)", job_id)
            assert row is not None and (row["key"], row["name"]) == (key, name), job_id
        fresh = await conn.fetchrow("SELECT key, id FROM lane.add_job('old_q', 'new')")
        assert fresh["id"] == str(fresh["key"]) and fresh["key"] > 4
        # An old job is claimed and completed through the key lookups like any other.
        claimed = await conn.fetch(
            "SELECT id, lock_token FROM lane.claim_jobs('w', ARRAY['old_q'], ARRAY[5], 60000)"
        )
        assert {r["id"] for r in claimed} == set(old) | {fresh["id"]}
        for r in claimed:
            state = await conn.fetchval(
                "SELECT (lane.complete_job('old_q', $1, $2)).state", r["id"], r["lock_token"]
            )
            assert state == "completed", r["id"]
        # A custom id stays unique, and adding it again returns the stored job.
        again = await conn.fetchval(
            "SELECT (lane.add_job('old_q', 'x', 'null', '{\"job_id\": \"custom-1\"}')).key"
        )
        assert again == old["custom-1"][0]
    finally:
        await conn.close()
    await _run_in_thread(_alembic, dsn, "lane", "downgrade", "0007")
    conn = await asyncpg.connect(dsn)
    try:
        assert (
            await conn.fetchval(
                "SELECT count(*) FROM pg_constraint WHERE conname = 'jobs_queue_id_key'"
            )
            == 1
        )
        assert await conn.fetchval("SELECT nextval('lane.job_id_seq')") > fresh["key"]
    finally:
        await conn.close()


async def test_downgrade_base_after_migrate(new_db: NewDatabase) -> None:
    """A database installed by migrate() and then stamped by Alembic downgrades too."""
    dsn = await new_db()
    await migrate(dsn)
    await _run_in_thread(_alembic_upgrade, dsn)
    await _run_in_thread(_alembic, dsn, "lane", "downgrade", "base")
    assert await _schemas(dsn) == set()


# --------------------------------------------------------------------------- version guard
@pytest.fixture(scope="module")
async def guard_dsn() -> AsyncIterator[str]:
    """One migrated database for the version-guard tests of this module."""
    created: list[str] = []
    dsn = await create_database(created)
    await migrate(dsn)
    yield dsn
    await release_databases(created)


@pytest.fixture
async def migrated(guard_dsn: str) -> AsyncIterator[asyncpg.Connection]:
    """A connection inside a transaction rolled back at the end: each test fakes a
    different installed state without touching the others."""
    conn = await asyncpg.connect(guard_dsn)
    tx = conn.transaction()
    await tx.start()
    try:
        yield conn
    finally:
        await tx.rollback()
        await conn.close()


async def test_check_version_accepts_the_current_schema(migrated: asyncpg.Connection) -> None:
    assert await check_version(migrated, "lane") == SCHEMA_VERSION


async def test_check_version_refuses_a_missing_schema(migrated: asyncpg.Connection) -> None:
    with pytest.raises(SchemaVersionMismatch) as info:
        await check_version(migrated, "lane_elsewhere")
    assert info.value.installed is None
    assert f"version {SCHEMA_VERSION}" in str(info.value)
    assert "python -m lane_pg migrate" in str(info.value)


async def test_check_version_refuses_an_older_schema(migrated: asyncpg.Connection) -> None:
    await migrated.execute("DELETE FROM lane.schema_version WHERE version = $1", SCHEMA_VERSION)
    older = _version_before(SCHEMA_VERSION)
    if older < 1:  # only one migration so far: fake an older installed state
        older = 0
        await migrated.execute(
            "INSERT INTO lane.schema_version (version, description) VALUES (0, 'older')"
        )
    with pytest.raises(SchemaVersionMismatch) as info:
        await check_version(migrated, "lane")
    assert (info.value.installed, info.value.required) == (older, SCHEMA_VERSION)
    message = str(info.value)
    assert f"version {older}" in message
    assert f"version {SCHEMA_VERSION}" in message
    assert "python -m lane_pg migrate" in message


async def test_check_version_refuses_when_library_needs_newer(
    migrated: asyncpg.Connection,
) -> None:
    required = SCHEMA_VERSION + 1
    with pytest.raises(SchemaVersionMismatch) as info:
        await check_version(migrated, "lane", required=required)
    assert (info.value.installed, info.value.required) == (SCHEMA_VERSION, required)
    assert f"version {SCHEMA_VERSION}" in str(info.value)
    assert f"version {required}" in str(info.value)


async def test_check_version_refuses_a_newer_breaking_schema(
    migrated: asyncpg.Connection,
) -> None:
    newer = SCHEMA_VERSION + 2
    await migrated.execute(
        "INSERT INTO lane.schema_version (version, breaking, description) "
        "VALUES ($1, false, 'compatible'), ($2, true, 'breaking')",
        SCHEMA_VERSION + 1,
        newer,
    )
    with pytest.raises(SchemaVersionMismatch) as info:
        await check_version(migrated, "lane")
    assert (info.value.installed, info.value.required) == (newer, SCHEMA_VERSION)
    assert f"version {newer}" in str(info.value)
    assert f"version {SCHEMA_VERSION}" in str(info.value)
    assert "breaking" in str(info.value)


async def test_check_version_accepts_a_newer_compatible_schema(
    migrated: asyncpg.Connection, caplog: pytest.LogCaptureFixture
) -> None:
    newer = SCHEMA_VERSION + 1
    await migrated.execute(
        "INSERT INTO lane.schema_version (version, breaking, description) "
        "VALUES ($1, false, 'compatible')",
        newer,
    )
    with caplog.at_level(logging.WARNING, logger="lane_pg.postgres.schema"):
        assert await check_version(migrated, "lane") == newer
    assert any("newer" in r.getMessage() for r in caplog.records)


# --------------------------------------------------------------------------- files agree
async def test_migrate_equals_the_migration_files_applied_in_order(new_db: NewDatabase) -> None:
    """The tables migrate() installs are the migration files' and nothing else: each file
    as plain SQL in its own transaction, then the repeatable files, give the same catalog
    (migrate() adds only the version rows and installed_sql's rows). This replaces the
    hand-kept sql/schema.sql, which restated the migrations' result (docs/decisions.md)."""
    from_files = await new_db()
    conn = await asyncpg.connect(from_files)
    try:
        for migration in migration_files():
            await conn.execute(render_sql(migration.text, "lane"))
        await conn.execute(repeatable_sql("lane"))
    finally:
        await conn.close()
    assert await _snapshot(from_files) == await reference_snapshot()  # migrate()'s
