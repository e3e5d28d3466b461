"""A user's own Alembic project that carries lane_pg's revisions, as the user guide says:
``alembic init``, ``version_locations`` naming lane_pg's revisions as a package resource
(no absolute path), ``reconcile_alembic_version`` in its env.py, a revision of its own.
Every step runs the real ``alembic`` and ``python -m lane_pg`` commands in subprocesses,
and the two paths take over from each other in both directions."""

from __future__ import annotations

import asyncio
import re
import subprocess
import sys
from pathlib import Path

import asyncpg

from lane_pg.postgres.schema import SCHEMA_VERSION, check_version, migration_files
from tests.conftest import NewDatabase
from tests.test_cli import REPO, python

PREVIOUS = max(m.version for m in migration_files() if m.version < SCHEMA_VERSION)

APP_REVISION = '''"""app table

Revision ID: app0001
Revises:
Create Date: 2026-12-03
"""
from alembic import op

revision = "app0001"
down_revision = None
branch_labels = ("app",)
depends_on = None


def upgrade() -> None:
    op.execute("CREATE TABLE public.app_things (id integer PRIMARY KEY)")


def downgrade() -> None:
    op.execute("DROP TABLE public.app_things")
'''


def _alembic(project: Path, *args: str) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [sys.executable, "-m", "alembic", "-c", str(project / "alembic.ini"), *args],
        capture_output=True,
        text=True,
        cwd=project,
        stdin=subprocess.DEVNULL,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, f"alembic {' '.join(args)}:\n{done.stdout}\n{done.stderr}"
    return done


def _make_project(root: Path, dsn: str) -> Path:
    """``alembic init`` and the three changes the user guide lists."""
    subprocess.run(
        [sys.executable, "-m", "alembic", "init", "alembic"],
        cwd=root,
        check=True,
        capture_output=True,
        timeout=60,
    )
    ini = root / "alembic.ini"
    text = ini.read_text()
    url = "postgresql+psycopg://" + dsn.split("://", 1)[1]
    text = re.sub(r"(?m)^sqlalchemy\.url = .*$", f"sqlalchemy.url = {url}", text)
    text = re.sub(r"(?m)^path_separator = .*$", "path_separator = newline", text)
    text = text.replace(
        "[alembic]\n",
        "[alembic]\nversion_locations =\n    %(here)s/alembic/versions\n"
        "    lane_pg:migrations/versions\n",
        1,
    )
    ini.write_text(text)
    env = root / "alembic" / "env.py"
    source = env.read_text()
    source = source.replace(
        "from alembic import context\n",
        "from alembic import context\n"
        "from lane_pg.postgres.schema import reconcile_alembic_version\n",
        1,
    )
    online = "        with context.begin_transaction():\n            context.run_migrations()"
    assert source.count(online) == 1, "alembic's env.py template changed"
    source = source.replace(
        online,
        "        with context.begin_transaction():\n"
        "            reconcile_alembic_version(connection)\n"
        "            context.run_migrations()",
    )
    env.write_text(source)
    (root / "alembic" / "versions" / "app0001_app_table.py").write_text(APP_REVISION)
    return root


async def _state(dsn: str) -> tuple[int | None, bool, list[str]]:
    """(schema version, whether the app's table exists, the project's alembic_version)."""
    conn = await asyncpg.connect(dsn)
    try:
        version = None
        if await conn.fetchval("SELECT to_regclass('lane.schema_version') IS NOT NULL"):
            version = await conn.fetchval("SELECT max(version) FROM lane.schema_version")
        app = await conn.fetchval("SELECT to_regclass('public.app_things') IS NOT NULL")
        rows = await conn.fetch("SELECT version_num FROM public.alembic_version ORDER BY 1")
        return version, bool(app), [r["version_num"] for r in rows]
    finally:
        await conn.close()


async def _accepted(dsn: str) -> int:
    conn = await asyncpg.connect(dsn)
    try:
        return await check_version(conn, "lane")
    finally:
        await conn.close()


async def _lane_migrate(dsn: str, project: Path) -> str:
    done = await asyncio.to_thread(python, "-m", "lane_pg", "migrate", "--dsn", dsn, cwd=project)
    assert done.returncode == 0, done.stderr
    return done.stdout


async def test_a_users_alembic_project_and_lane_migrate_take_over_from_each_other(
    new_db: NewDatabase, tmp_path: Path
) -> None:
    dsn = await new_db()
    project = _make_project(tmp_path, dsn)
    assert str(REPO) not in (project / "alembic.ini").read_text()  # no absolute lane path

    heads = await asyncio.to_thread(_alembic, project, "heads")
    assert "app0001" in heads.stdout
    assert f"{SCHEMA_VERSION:04d}" in heads.stdout

    await asyncio.to_thread(_alembic, project, "upgrade", "heads")
    assert await _state(dsn) == (SCHEMA_VERSION, True, [f"{SCHEMA_VERSION:04d}", "app0001"])
    assert await _accepted(dsn) == SCHEMA_VERSION
    assert "already at version" in await _lane_migrate(dsn, project)

    # Down one of lane_pg's revisions through the user's project: lane's own CLI brings it
    # back (its alembic_version, in schema lane, still says the newest revision).
    await asyncio.to_thread(_alembic, project, "downgrade", "lane_pg@-1")
    assert (await _state(dsn))[0] == PREVIOUS
    moved = await _lane_migrate(dsn, project)
    assert f"migrated from version {PREVIOUS} to version {SCHEMA_VERSION}" in moved
    assert await _accepted(dsn) == SCHEMA_VERSION

    # The project's own record is now behind the schema: its env.py reconciles it, so
    # upgrading changes nothing and going down one goes from the real version.
    await asyncio.to_thread(_alembic, project, "upgrade", "heads")
    assert await _state(dsn) == (SCHEMA_VERSION, True, [f"{SCHEMA_VERSION:04d}", "app0001"])
    await asyncio.to_thread(_alembic, project, "downgrade", "lane_pg@-1")
    assert await _state(dsn) == (PREVIOUS, True, [f"{PREVIOUS:04d}", "app0001"])
    await _lane_migrate(dsn, project)
    assert await _accepted(dsn) == SCHEMA_VERSION

    # lane_pg's branch to base: its schema goes, the app's table stays; lane migrate
    # installs it again, and the project's next upgrade records it without changing it;
    # then everything to base.
    await asyncio.to_thread(_alembic, project, "downgrade", "lane_pg@base")
    assert await _state(dsn) == (None, True, ["app0001"])
    assert "from not installed" in await _lane_migrate(dsn, project)
    assert await _accepted(dsn) == SCHEMA_VERSION
    await asyncio.to_thread(_alembic, project, "upgrade", "heads")
    assert await _state(dsn) == (SCHEMA_VERSION, True, [f"{SCHEMA_VERSION:04d}", "app0001"])
    assert await _accepted(dsn) == SCHEMA_VERSION
    await asyncio.to_thread(_alembic, project, "downgrade", "base")
    assert await _state(dsn) == (None, False, [])


async def test_lane_migrate_refuses_a_schema_newer_than_the_library(new_db: NewDatabase) -> None:
    dsn = await new_db()
    await _lane_migrate(dsn, REPO)
    conn = await asyncpg.connect(dsn)
    try:
        await conn.execute(
            "INSERT INTO lane.schema_version (version, breaking, description, applied_at)"
            " VALUES ($1, false, 'from a newer release', now())",
            SCHEMA_VERSION + 1,
        )
    finally:
        await conn.close()
    done = await asyncio.to_thread(python, "-m", "lane_pg", "migrate", "--dsn", dsn)
    assert done.returncode == 1
    assert done.stderr.count("\n") == 1
    assert f"is version {SCHEMA_VERSION + 1}, newer than the {SCHEMA_VERSION}" in done.stderr
