"""The database knows which SQL it runs (SCH-2, SCH-6): fingerprints, orphans, restores.

Every migrate records in ``<schema>.installed_sql``, for the version it installs, the
library's fingerprint and the catalog's definitions with theirs; ``check_version`` (hence
``PostgresBackend.connect``) compares both; migrate drops the functions and views the files
no longer define; a downgrade re-creates the definitions recorded for the version below.
Each test that installs something gets fresh databases (``new_db``).
"""

from __future__ import annotations

import hashlib
import logging
import re
import shutil
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import asyncpg
import pytest

from lane_pg.errors import SchemaVersionMismatch
from lane_pg.postgres import schema as lane_schema
from lane_pg.postgres.backend import PostgresBackend
from lane_pg.postgres.schema import (
    FINGERPRINT_VERSION,
    SCHEMA_VERSION,
    Migration,
    catalog_definitions_sql,
    check_version,
    downgrade_sql,
    install_sql,
    library_fingerprint,
    migrate,
    migration_files,
    migration_sql,
    repeatable_install_sql,
    repeatable_sql,
    sql_dir,
)
from tests.conftest import NewDatabase
from tests.postgres.test_migrations import (
    Snapshot,
    _alembic,
    _alembic_upgrade,
    _psql,
    _run_in_thread,
    _snapshot,
    _version_rows,
    jobs_run_with_events,
    reference_snapshot,
)

HAND_CHANGE = """
CREATE OR REPLACE FUNCTION lane.get_job_state(p_queue text, p_id text)
RETURNS text LANGUAGE sql STABLE AS $$ SELECT 'active'::text $$;
"""

# What a hand (or an older release) leaves behind: an old overload, removed routines of
# every kind, a removed view and one built on it.
ORPHANS = """
CREATE FUNCTION lane.update_job_progress(p_queue text, p_id text, p_progress jsonb)
RETURNS void LANGUAGE sql AS $$ SELECT $$;
CREATE FUNCTION lane.some_removed_fn() RETURNS integer LANGUAGE sql AS $$ SELECT 1 $$;
CREATE PROCEDURE lane.some_removed_proc() LANGUAGE sql AS $$ SELECT 1 $$;
CREATE AGGREGATE lane.some_removed_agg(integer) (SFUNC = int4pl, STYPE = integer);
CREATE VIEW lane.some_removed_view AS SELECT 1 AS one;
CREATE VIEW lane.over_removed_view AS SELECT one FROM lane.some_removed_view;
"""
ORPHAN_ROUTINES = [
    "lane.update_job_progress(text, text, jsonb)",
    "lane.some_removed_fn()",
    "lane.some_removed_proc()",
    "lane.some_removed_agg(integer)",
]
ORPHAN_VIEWS = ["lane.some_removed_view", "lane.over_removed_view"]


async def _connect(dsn: str, **kwargs: Any) -> asyncpg.Connection:
    return await asyncpg.connect(dsn, **kwargs)


async def _installed_rows(conn: asyncpg.Connection, schema: str = "lane") -> list[asyncpg.Record]:
    return list(
        await conn.fetch(
            f"SELECT version, library_fingerprint, catalog_fingerprint, definitions"
            f" FROM {schema}.installed_sql ORDER BY version"
        )
    )


async def _present(conn: asyncpg.Connection, routines: list[str], views: list[str]) -> list[str]:
    """Which of ``routines`` (signatures) and ``views`` exist."""
    found = [r for r in routines if await conn.fetchval("SELECT to_regprocedure($1)", r)]
    return found + [v for v in views if await conn.fetchval("SELECT to_regclass($1)", v)]


def _without_attnums(snap: Snapshot) -> Snapshot:
    return {**snap, "columns": [(row[0], *row[2:]) for row in snap["columns"]]}


@pytest.fixture
def fresh_fingerprint() -> Iterator[None]:
    """library_fingerprint() is cached per process: recompute it around a test that
    changes what it reads."""
    library_fingerprint.cache_clear()
    yield
    library_fingerprint.cache_clear()


def _copy_sql(tmp_path: Path) -> Path:
    copy = tmp_path / "sql"
    shutil.copytree(sql_dir(), copy)
    return copy


# --------------------------------------------------------------------------- the library side
def test_library_fingerprint_follows_the_repeatable_files_text(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fresh_fingerprint: None
) -> None:
    """Any change of a function or view file (content, name) changes it; line endings and
    the migrations do not."""
    original = library_fingerprint()
    assert re.fullmatch(r"[0-9a-f]{64}", original)
    copy = _copy_sql(tmp_path)
    monkeypatch.setattr(lane_schema.files, "sql_dir", lambda: copy)

    def fingerprint() -> str:
        library_fingerprint.cache_clear()
        return library_fingerprint()

    assert fingerprint() == original
    some_file = sorted((copy / "functions").glob("*.sql"))[-1]
    text = some_file.read_text(encoding="utf-8")
    some_file.write_bytes(text.replace("\n", "\r\n").encode())
    assert fingerprint() == original
    (copy / "migrations" / "0001_initial.sql").write_text("-- changed\n", encoding="utf-8")
    assert fingerprint() == original
    some_file.write_text(text + "\n-- one more comment\n", encoding="utf-8")
    changed = fingerprint()
    assert changed != original
    some_file.write_text(text, encoding="utf-8")
    assert fingerprint() == original
    some_file.rename(some_file.with_name("99_renamed.sql"))
    assert fingerprint() not in (original, changed)
    views = copy / "views.sql"
    views.write_text(views.read_text(encoding="utf-8") + "\n", encoding="utf-8")
    assert fingerprint() not in (original, changed)


# --------------------------------------------------------------------------- what migrate records
async def test_migrate_records_the_fingerprints_of_what_it_installed(new_db: NewDatabase) -> None:
    dsn, custom = await new_db(), await new_db()
    await migrate(dsn)
    conn = await _connect(dsn)
    try:
        [row] = await _installed_rows(conn)  # a fresh install captures nothing older
        assert row["version"] == SCHEMA_VERSION
        assert row["library_fingerprint"] == library_fingerprint()
        definitions: list[str] = row["definitions"]
        assert (
            row["catalog_fingerprint"] == hashlib.md5("\n".join(definitions).encode()).hexdigest()
        )
        functions = await conn.fetchval(
            "SELECT count(*) FROM pg_proc WHERE pronamespace = 'lane'::regnamespace"
        )
        views = await conn.fetchval(
            "SELECT count(*) FROM pg_class WHERE relnamespace = 'lane'::regnamespace"
            " AND relkind = 'v'"
        )
        assert functions > 0 and views > 0
        assert [d.startswith("CREATE OR REPLACE FUNCTION lane.") for d in definitions] == [
            True
        ] * functions + [False] * views
        assert all(d.startswith("CREATE OR REPLACE VIEW lane.") for d in definitions[functions:])
        assert await check_version(conn, "lane") == SCHEMA_VERSION
        await migrate(dsn)
        [again] = await _installed_rows(conn)
        assert again["library_fingerprint"] == row["library_fingerprint"]
        assert again["catalog_fingerprint"] == row["catalog_fingerprint"]
    finally:
        await conn.close()
    # Another schema: the same library fingerprint, the same definitions but for the name.
    await migrate(custom, "lane_custom")
    conn = await _connect(custom)
    try:
        [other] = await _installed_rows(conn, "lane_custom")
        assert other["library_fingerprint"] == row["library_fingerprint"]
        assert other["catalog_fingerprint"] != row["catalog_fingerprint"]
        renamed = [re.sub(r"\blane_custom\b", "lane", d) for d in other["definitions"]]
        assert renamed == definitions
        assert await check_version(conn, "lane_custom") == SCHEMA_VERSION
    finally:
        await conn.close()


SESSION_SETTINGS = {
    "search_path": "lane, public",
    "TimeZone": "Asia/Kolkata",
    "DateStyle": "SQL, DMY",
    "IntervalStyle": "sql_standard",
    "extra_float_digits": "0",
    "quote_all_identifiers": "on",
}


async def _settings(conn: asyncpg.Connection) -> dict[str, str]:
    return {name: await conn.fetchval(f"SHOW {name}") for name in SESSION_SETTINGS}


async def test_catalog_fingerprint_ignores_the_session_settings_and_keeps_them(
    new_db: NewDatabase,
) -> None:
    """A session whose search_path contains the schema (and other formats) gets the
    fingerprint migrate recorded, and its settings are untouched after the check, in
    autocommit and inside a transaction (which stays usable)."""
    dsn = await new_db()
    await migrate(dsn)
    conn = await _connect(dsn, server_settings=SESSION_SETTINGS)
    try:
        settings = await _settings(conn)
        assert settings["search_path"] == "lane, public"
        # Deparsed under these settings the catalog reads differently: pinning matters.
        unpinned = await conn.fetchval(
            f"SELECT md5(array_to_string(({catalog_definitions_sql('lane')}), E'\\n'))"
        )
        [row] = await _installed_rows(conn)
        assert unpinned != row["catalog_fingerprint"]
        assert await check_version(conn, "lane") == SCHEMA_VERSION
        assert await _settings(conn) == settings
        async with conn.transaction():
            await conn.execute("SET LOCAL TimeZone = 'America/Lima'")
            inside = await _settings(conn)
            assert await check_version(conn, "lane") == SCHEMA_VERSION
            assert await _settings(conn) == inside
            assert await conn.fetchval("SELECT 1") == 1
            # A schema without installed_sql fails the query: the transaction survives.
            with pytest.raises(SchemaVersionMismatch):
                await check_version(conn, "lane_elsewhere")
            assert await conn.fetchval("SELECT 2") == 2
    finally:
        await conn.close()


# --------------------------------------------------------------------------- start-up check
async def test_check_version_refuses_a_function_changed_by_hand_SCH_6(
    new_db: NewDatabase,
) -> None:
    dsn = await new_db()
    await migrate(dsn)
    conn = await _connect(dsn)
    try:
        definition = "SELECT pg_get_functiondef('lane.get_job_state(text, text)'::regprocedure)"
        original = await conn.fetchval(definition)
        [row] = await _installed_rows(conn)
        await conn.execute(HAND_CHANGE)
        with pytest.raises(SchemaVersionMismatch) as info:
            await check_version(conn, "lane")
        message = str(info.value)
        assert (info.value.installed, info.value.required) == (SCHEMA_VERSION, SCHEMA_VERSION)
        # Both fingerprints, the live one first, then the recorded one.
        live, recorded = re.findall(r"\b[0-9a-f]{12}\b", message)
        assert recorded == row["catalog_fingerprint"][:12] != live
        assert "changed by hand" in message
        assert "python -m lane_pg migrate" in message
        with pytest.raises(SchemaVersionMismatch):
            await PostgresBackend.connect(dsn)
        await migrate(dsn)
        assert await check_version(conn, "lane") == SCHEMA_VERSION
        assert await conn.fetchval(definition) == original
    finally:
        await conn.close()


async def test_backend_connect_refuses_an_upgrade_deployed_without_migrate_SCH_6(
    new_db: NewDatabase, monkeypatch: pytest.MonkeyPatch, fresh_fingerprint: None
) -> None:
    """Another library (here: another fingerprint in this process) against the schema the
    first one migrated is refused by PostgresBackend.connect until it runs migrate; then
    the first one is refused in turn. A recorded fingerprint changed in the database is
    refused the same way."""
    dsn = await new_db()
    await migrate(dsn)
    ours = library_fingerprint()
    upgraded = "f" * 64
    for module in (lane_schema.install, lane_schema.versions):  # what records and checks it
        monkeypatch.setattr(module, "library_fingerprint", lambda: upgraded)
    with pytest.raises(SchemaVersionMismatch) as info:
        await PostgresBackend.connect(dsn)
    message = str(info.value)
    assert ours[:12] in message and upgraded[:12] in message
    assert "without a migrate" in message and "python -m lane_pg migrate" in message
    await migrate(dsn)  # the upgraded library's migrate
    backend = await PostgresBackend.connect(dsn)
    await backend.close()
    monkeypatch.undo()
    with pytest.raises(SchemaVersionMismatch, match=r"f{12}"):
        await PostgresBackend.connect(dsn)
    await migrate(dsn)
    backend = await PostgresBackend.connect(dsn)
    await backend.close()
    conn = await _connect(dsn)
    try:
        await conn.execute("UPDATE lane.installed_sql SET library_fingerprint = repeat('0', 64)")
    finally:
        await conn.close()
    with pytest.raises(SchemaVersionMismatch, match=r"0{12}"):
        await PostgresBackend.connect(dsn)


async def test_check_version_refuses_a_schema_that_records_no_functions(
    new_db: NewDatabase,
) -> None:
    dsn = await new_db()
    await migrate(dsn)
    conn = await _connect(dsn)
    try:
        await conn.execute("DELETE FROM lane.installed_sql")
        with pytest.raises(SchemaVersionMismatch, match="records no functions") as info:
            await check_version(conn, "lane")
        assert "python -m lane_pg migrate" in str(info.value)
        await migrate(dsn)
        assert await check_version(conn, "lane") == SCHEMA_VERSION
    finally:
        await conn.close()


async def test_a_newer_compatible_schema_is_served_but_still_checked_for_hand_changes(
    new_db: NewDatabase, caplog: pytest.LogCaptureFixture
) -> None:
    """A rolling deploy: the newer release migrated (its own library fingerprint recorded
    at its version), this one keeps starting with a warning; a function changed by hand is
    still refused, with a message pointing at the newer release's migrate."""
    dsn = await new_db()
    await migrate(dsn)
    conn = await _connect(dsn)
    newer = SCHEMA_VERSION + 1
    transaction = conn.transaction()
    await transaction.start()
    try:
        await conn.execute(
            "INSERT INTO lane.schema_version (version, breaking, description)"
            " VALUES ($1, false, 'compatible')",
            newer,
        )
        await conn.execute(
            "INSERT INTO lane.installed_sql"
            " (version, library_fingerprint, catalog_fingerprint, definitions)"
            " SELECT $1, repeat('e', 64), catalog_fingerprint, definitions"
            " FROM lane.installed_sql WHERE version = $2",
            newer,
            SCHEMA_VERSION,
        )
        with caplog.at_level(logging.WARNING, logger="lane_pg.postgres.schema"):
            assert await check_version(conn, "lane") == newer
        assert any("newer" in r.getMessage() for r in caplog.records)
        await conn.execute(HAND_CHANGE)
        with pytest.raises(SchemaVersionMismatch, match="changed by hand") as info:
            await check_version(conn, "lane")
        assert f"release at version {newer}" in str(info.value)
    finally:
        await transaction.rollback()
        await conn.close()


async def test_migrate_refuses_a_newer_schema_and_changes_nothing(new_db: NewDatabase) -> None:
    dsn = await new_db()
    await migrate(dsn)
    conn = await _connect(dsn)
    try:
        await conn.execute(
            "INSERT INTO lane.schema_version (version, description) VALUES ($1, 'newer')",
            SCHEMA_VERSION + 1,
        )
        await conn.execute(ORPHANS)  # the newer release's functions, say
    finally:
        await conn.close()
    before, rows = await _snapshot(dsn), await _version_rows(dsn)
    with pytest.raises(SchemaVersionMismatch) as info:
        await migrate(dsn)
    assert (info.value.installed, info.value.required) == (SCHEMA_VERSION + 1, SCHEMA_VERSION)
    assert f"version {SCHEMA_VERSION + 1}" in str(info.value)
    assert await _snapshot(dsn) == before
    assert await _version_rows(dsn) == rows


# --------------------------------------------------------------------------- no orphans
def _by_asyncpg(dsn: str) -> None:
    import asyncio

    asyncio.run(migrate(dsn))


def _by_alembic(dsn: str) -> None:
    _alembic_upgrade(dsn)


def _by_printed_sql(dsn: str) -> None:
    """The end of ``migrate --sql`` (install_sql), as psql runs it, on a migrated schema."""
    tail = repeatable_install_sql("lane")
    assert install_sql("lane").endswith(tail + "\nCOMMIT;\n")
    _psql(dsn, f"BEGIN;\n{tail}COMMIT;\n")


@pytest.mark.parametrize(
    "path", [_by_asyncpg, _by_alembic, _by_printed_sql], ids=["migrate", "alembic", "psql"]
)
async def test_migrate_drops_functions_and_views_the_files_do_not_define(
    new_db: NewDatabase, path: Callable[[str], None]
) -> None:
    dsn = await new_db()
    await migrate(dsn)
    conn = await _connect(dsn)
    try:
        await conn.execute(ORPHANS)
        assert await _present(conn, ORPHAN_ROUTINES, ORPHAN_VIEWS) == ORPHAN_ROUTINES + ORPHAN_VIEWS
        with pytest.raises(SchemaVersionMismatch, match="changed by hand"):
            await check_version(conn, "lane")
        await _run_in_thread(path, dsn)
        assert await _present(conn, ORPHAN_ROUTINES, ORPHAN_VIEWS) == []
        # The current overload stays, and so does everything else the files define.
        assert await conn.fetchval(
            "SELECT to_regprocedure("
            "'lane.update_job_progress(text, text, jsonb, timestamptz, uuid)')"
        )
        assert await check_version(conn, "lane") == SCHEMA_VERSION
    finally:
        await conn.close()
    assert await _snapshot(dsn) == await reference_snapshot()


@pytest.mark.parametrize(
    ("objects", "orphan", "dependent", "still_there"),
    [
        (
            "CREATE FUNCTION lane.some_removed_fn() RETURNS trigger LANGUAGE plpgsql"
            " AS $$ BEGIN RETURN NEW; END $$;"
            " CREATE TABLE public.audit (x integer);"
            " CREATE TRIGGER audit_x BEFORE INSERT ON public.audit"
            " FOR EACH ROW EXECUTE FUNCTION lane.some_removed_fn();",
            "some_removed_fn",
            "trigger audit_x",
            "SELECT count(*) = 1 FROM pg_trigger WHERE tgname = 'audit_x'",
        ),
        (
            "CREATE VIEW lane.some_removed_view AS SELECT 1 AS one;"
            " CREATE VIEW public.user_report AS SELECT one FROM lane.some_removed_view;",
            "some_removed_view",
            "view user_report",
            "SELECT to_regclass('public.user_report') IS NOT NULL",
        ),
    ],
    ids=["function-used-by-a-trigger", "view-used-by-a-user-view"],
)
async def test_migrate_never_drops_what_other_objects_depend_on(
    new_db: NewDatabase, objects: str, orphan: str, dependent: str, still_there: str
) -> None:
    """No CASCADE onto user objects: the migration stops, naming the orphan and what
    depends on it, and changes nothing."""
    dsn = await new_db()
    await migrate(dsn)
    conn = await _connect(dsn)
    try:
        await conn.execute(objects)
        before, rows = await _snapshot(dsn), await _installed_rows(conn)
        with pytest.raises(asyncpg.DependentObjectsStillExistError) as info:
            await migrate(dsn)
        assert orphan in str(info.value)
        assert "depend" in str(info.value)
        assert dependent in (info.value.detail or "")
        assert "CASCADE" in (info.value.hint or "")
        assert await _snapshot(dsn) == before
        assert await _installed_rows(conn) == rows
        assert await conn.fetchval(still_there)
    finally:
        await conn.close()


async def test_orphans_are_found_when_migrate_runs_inside_a_savepoint(new_db: NewDatabase) -> None:
    """Objects written in a subtransaction carry its xid: the orphan test compares each
    row's xmin with its own value before, never with the transaction's id."""
    dsn = await new_db()
    await migrate(dsn)
    conn = await _connect(dsn)
    try:
        await conn.execute(ORPHANS)
        async with conn.transaction(), conn.transaction():  # BEGIN, then SAVEPOINT
            await conn.execute(repeatable_install_sql("lane"))
        assert await _present(conn, ORPHAN_ROUTINES, ORPHAN_VIEWS) == []
        assert await check_version(conn, "lane") == SCHEMA_VERSION
    finally:
        await conn.close()
    assert await _snapshot(dsn) == await reference_snapshot()


async def test_functions_of_an_extension_in_the_schema_are_left_alone(
    new_db: NewDatabase,
) -> None:
    dsn = await new_db()
    await migrate(dsn)
    conn = await _connect(dsn)
    try:
        await conn.execute("CREATE EXTENSION citext SCHEMA lane")
        members = (
            "SELECT count(*) FROM pg_depend d JOIN pg_extension e ON e.oid = d.refobjid"
            " WHERE e.extname = 'citext' AND d.classid = 'pg_proc'::regclass"
            " AND d.deptype = 'e'"
        )
        functions = await conn.fetchval(members)
        assert functions > 0
        assert await check_version(conn, "lane") == SCHEMA_VERSION
        await migrate(dsn)
        assert await conn.fetchval(members) == functions
        assert await conn.fetchval("SELECT 'A'::lane.citext OPERATOR(lane.=) 'a'::lane.citext")
        assert await check_version(conn, "lane") == SCHEMA_VERSION
    finally:
        await conn.close()


_DEFINED_FUNCTION = re.compile(r"CREATE\s+OR\s+REPLACE\s+FUNCTION\s+lane\.(\w+)\s*\(", re.I)
_DEFINED_VIEW = re.compile(r"CREATE\s+OR\s+REPLACE\s+VIEW\s+lane\.(\w+)\b", re.I)
_ANY_ROUTINE_OR_VIEW = re.compile(
    r"CREATE\s+(OR\s+REPLACE\s+)?(FUNCTION|PROCEDURE|AGGREGATE|VIEW)\b", re.I
)


async def test_every_function_and_view_is_defined_by_the_files(new_db: NewDatabase) -> None:
    """Both directions: each CREATE OR REPLACE FUNCTION / VIEW of the repeatable files is
    in a freshly migrated catalog (overloads counted), and each function and view of the
    catalog is one of them. Migrations create neither (migrate would drop them as
    orphans on the next run)."""
    text = repeatable_sql("lane")
    functions = Counter(_DEFINED_FUNCTION.findall(text))
    views = Counter(_DEFINED_VIEW.findall(text))
    assert functions and views
    assert len(_ANY_ROUTINE_OR_VIEW.findall(text)) == sum(functions.values()) + sum(views.values())
    for migration in migration_files():
        assert not _ANY_ROUTINE_OR_VIEW.search(migration.text), migration.path.name
    dsn = await new_db()
    await migrate(dsn)
    conn = await _connect(dsn)
    try:
        in_catalog = Counter(
            r["proname"]
            for r in await conn.fetch(
                "SELECT proname FROM pg_proc WHERE pronamespace = 'lane'::regnamespace"
            )
        )
        views_in_catalog = Counter(
            r["relname"]
            for r in await conn.fetch(
                "SELECT relname FROM pg_class WHERE relnamespace = 'lane'::regnamespace"
                " AND relkind = 'v'"
            )
        )
    finally:
        await conn.close()
    assert in_catalog == functions
    assert views_in_catalog == views


# --------------------------------------------------------------------------- down and up again
@pytest.mark.parametrize("target", ["-1", "base"])
async def test_down_then_up_gives_the_same_schema(new_db: NewDatabase, target: str) -> None:
    """Alembic ``downgrade -1`` (or ``base``) then ``upgrade head``: the same tables,
    columns, types, defaults, constraints, indexes, functions with their definitions and
    views as before, and the start-up check accepts the result."""
    dsn = await new_db()
    await _run_in_thread(_alembic_upgrade, dsn)
    before, rows = await _snapshot(dsn), await _version_rows(dsn)
    await _run_in_thread(_alembic, dsn, "lane", "downgrade", target)
    await _run_in_thread(_alembic_upgrade, dsn)
    # A column that a down step drops comes back at a new attnum, in the same order.
    assert _without_attnums(await _snapshot(dsn)) == _without_attnums(before)
    assert [r[:3] for r in await _version_rows(dsn)] == [r[:3] for r in rows]
    conn = await _connect(dsn)
    try:
        assert [r["version"] for r in await _installed_rows(conn)] == [SCHEMA_VERSION]
        assert await check_version(conn, "lane") == SCHEMA_VERSION
    finally:
        await conn.close()


# The functions and views of an older release, as that release's migrate installed them.
OLDER_RELEASE_SQL = (
    Path(__file__).parent / "fixtures" / "release_bfd9794_repeatable.sql"
).read_text(encoding="utf-8")
RELEASE_MARKER = """
CREATE OR REPLACE FUNCTION lane.release_marker() RETURNS text LANGUAGE sql IMMUTABLE AS $$
    SELECT 'the older release'::text
$$;
"""


async def test_downgrade_re_creates_the_functions_of_the_release_upgraded_from(
    new_db: NewDatabase, caplog: pytest.LogCaptureFixture
) -> None:
    """A database at version FINGERPRINT_VERSION - 1 running that release's functions
    (simulated: a frozen copy of an older release's files, plus a function of its own),
    upgraded to head and taken back down, runs exactly those functions and views again:
    the migration that creates installed_sql recorded them first."""
    below = FINGERPRINT_VERSION - 1
    dsn = await new_db()
    await _run_in_thread(_alembic, dsn, "lane", "upgrade", f"{below:04d}")
    conn = await _connect(dsn)
    try:
        # That release's migrate re-applied its functions after its migrations.
        await conn.execute(OLDER_RELEASE_SQL + RELEASE_MARKER)
    finally:
        await conn.close()
    released = await _snapshot(dsn)
    await _run_in_thread(_alembic_upgrade, dsn)
    conn = await _connect(dsn)
    try:
        assert [r["version"] for r in await _installed_rows(conn)] == [below, SCHEMA_VERSION]
        assert await _present(conn, ["lane.release_marker()"], []) == []  # not this release's
        assert await check_version(conn, "lane") == SCHEMA_VERSION
    finally:
        await conn.close()
    with caplog.at_level(logging.WARNING):
        await _run_in_thread(_alembic, dsn, "lane", "downgrade", f"{below:04d}")
    assert not [r for r in caplog.records if "went down" in r.getMessage()]
    assert await _snapshot(dsn) == released
    conn = await _connect(dsn)
    try:
        assert await conn.fetchval("SELECT lane.release_marker()") == "the older release"
        assert await check_version(conn, "lane", required=below) == below
        await jobs_run_with_events(conn)
    finally:
        await conn.close()
    # And up again: this release's functions, as on a fresh install.
    await _run_in_thread(_alembic_upgrade, dsn)
    assert _without_attnums(await _snapshot(dsn)) == _without_attnums(await reference_snapshot())


async def test_offline_downgrade_script_does_what_the_online_downgrade_does(
    new_db: NewDatabase,
) -> None:
    """``alembic downgrade head:<below> --sql`` carries the same SQL: run through psql on a
    database upgraded from the older release, it re-creates that release's functions."""
    below = FINGERPRINT_VERSION - 1
    online, offline = await new_db(), await new_db()
    for dsn in (online, offline):
        await _run_in_thread(_alembic, dsn, "lane", "upgrade", f"{below:04d}")
        conn = await _connect(dsn)
        try:
            await conn.execute(OLDER_RELEASE_SQL + RELEASE_MARKER)
        finally:
            await conn.close()
        await _run_in_thread(_alembic_upgrade, dsn)
    script = await _run_in_thread(
        _alembic, offline, "lane", "downgrade", f"{SCHEMA_VERSION:04d}:{below:04d}", True
    )
    assert "DROP TABLE lane.installed_sql" in script
    await _run_in_thread(_psql, offline, script)
    await _run_in_thread(_alembic, online, "lane", "downgrade", f"{below:04d}")
    assert await _snapshot(offline) == await _snapshot(online)
    conn = await _connect(offline)
    try:
        assert await conn.fetchval("SELECT lane.release_marker()") == "the older release"
    finally:
        await conn.close()


async def test_downgrade_without_recorded_functions_warns_and_leaves_none(
    new_db: NewDatabase, caplog: pytest.LogCaptureFixture
) -> None:
    """Installed at head, the database never ran the older version's functions: the
    downgrade leaves none (rather than functions of another version) and says so."""
    dsn = await new_db()
    await _run_in_thread(_alembic_upgrade, dsn)
    with caplog.at_level(logging.WARNING):
        await _run_in_thread(_alembic, dsn, "lane", "downgrade", "-1")
    [warning] = [r.getMessage() for r in caplog.records if "went down" in r.getMessage()]
    assert "python -m lane_pg migrate" in warning
    snap = await _snapshot(dsn)
    assert snap["functions"] == [] and snap["views"] == []


def _synthetic_migration(tmp_path: Path, version: int) -> Migration:
    """A migration above this library's newest, with its tables-only down file."""
    path = tmp_path / f"{version:04d}_synthetic.sql"
    path.write_text(f"CREATE TABLE lane.synthetic_{version} (id integer);\n", encoding="utf-8")
    down = tmp_path / f"{version:04d}_synthetic.down.sql"
    down.write_text(f"DROP TABLE lane.synthetic_{version};\n", encoding="utf-8")
    return Migration(version, "synthetic", path)


async def test_downgrade_to_a_recorded_version_is_accepted_as_that_release(
    new_db: NewDatabase,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    fresh_fingerprint: None,
) -> None:
    """Release A (this library's files plus one function of its own) installs version V;
    release B (this library's files) adds migration V+1 and migrates. B's downgrade_sql of
    V+1 re-creates A's functions and views exactly, and the start-up check accepts the
    schema as A's (version V, A's fingerprint), not as B's."""
    version = SCHEMA_VERSION
    dsn = await new_db()
    release_a = _copy_sql(tmp_path)
    (release_a / "functions" / "99_release_a.sql").write_text(RELEASE_MARKER, encoding="utf-8")
    with monkeypatch.context() as patch:
        patch.setattr(lane_schema.files, "sql_dir", lambda: release_a)
        library_fingerprint.cache_clear()
        fingerprint_a = library_fingerprint()
        await migrate(dsn)
    library_fingerprint.cache_clear()
    fingerprint_b = library_fingerprint()
    assert fingerprint_a != fingerprint_b
    as_a = await _snapshot(dsn)
    newer = _synthetic_migration(tmp_path, version + 1)
    conn = await _connect(dsn)
    try:
        assert await check_version(conn, "lane", fingerprint=fingerprint_a) == version
        async with conn.transaction():  # B's migrate
            await conn.execute(migration_sql(newer, "lane"))
            await conn.execute(repeatable_install_sql("lane"))
        assert [r["version"] for r in await _installed_rows(conn)] == [version, version + 1]
        assert await _present(conn, ["lane.release_marker()"], []) == []
        assert await check_version(conn, "lane", required=version + 1) == version + 1
        async with conn.transaction():  # B's downgrade of V+1
            await conn.execute(downgrade_sql(newer, "lane"))
        assert await conn.fetchval("SELECT lane.release_marker()") == "the older release"
        assert await check_version(conn, "lane", fingerprint=fingerprint_a) == version
        with pytest.raises(SchemaVersionMismatch, match="another lane_pg release"):
            await check_version(conn, "lane")
    finally:
        await conn.close()
    assert await _snapshot(dsn) == as_a


async def test_a_restore_that_does_not_re_create_its_catalog_stops_the_downgrade(
    new_db: NewDatabase, tmp_path: Path
) -> None:
    """Recorded definitions that do not give back their fingerprint (edited in the table)
    abort the downgrade: nothing changes."""
    dsn = await new_db()
    await migrate(dsn)
    newer = _synthetic_migration(tmp_path, SCHEMA_VERSION + 1)
    conn = await _connect(dsn)
    try:
        async with conn.transaction():
            await conn.execute(migration_sql(newer, "lane"))
            await conn.execute(repeatable_install_sql("lane"))
        await conn.execute(
            "UPDATE lane.installed_sql SET definitions = definitions[2:] WHERE version = $1",
            SCHEMA_VERSION,
        )
        before = await _snapshot(dsn)
        with pytest.raises(asyncpg.RaiseError, match="did not re-create"):
            async with conn.transaction():
                await conn.execute(downgrade_sql(newer, "lane"))
        assert await _snapshot(dsn) == before
    finally:
        await conn.close()


async def test_a_migrate_committing_between_the_checks_two_reads_is_read_whole(
    new_db: NewDatabase, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The start-up check's first statement finds no schema; a migrate beside the worker
    commits before its second (the fallback read of the versions): the check reads the
    new schema again rather than calling it an install without functions."""
    from lane_pg.postgres.schema import versions as versions_module

    dsn = await new_db()
    real = versions_module._installed_versions
    migrated: list[int] = []

    async def migrate_in_between(conn: asyncpg.Connection, schema: str) -> Any:
        if not migrated:
            migrated.append(0)  # migrate reads the versions through this too
            migrated[0] = await lane_schema.migrate(dsn, schema)
        return await real(conn, schema)

    monkeypatch.setattr(versions_module, "_installed_versions", migrate_in_between)
    conn = await asyncpg.connect(dsn)
    try:
        assert await lane_schema.check_version(conn, "lane") == migrated[0]
    finally:
        await conn.close()
